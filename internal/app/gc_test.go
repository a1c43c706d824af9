package app

import (
	"errors"
	"io/fs"
	"testing"
)

// The GC defaults a server sets: GOGC and GOMEMLIMIT win when set; the
// smallest memory limit of the process's cgroup and its ancestors (v2 or v1)
// gives a soft limit of 90% of it.
func TestGCSettings(t *testing.T) {
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(name string) ([]byte, error) {
			if s, ok := m[name]; ok {
				return []byte(s), nil
			}
			return nil, fs.ErrNotExist
		}
	}
	none := files(nil)
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	v2 := "0::/\n"
	for _, c := range []struct {
		name    string
		env     map[string]string
		files   func(string) ([]byte, error)
		percent int
		limit   int64
	}{
		{"no cgroup", nil, none, DefaultGCPercent, 0},
		{"GOGC set", map[string]string{"GOGC": "100"}, none, 0, 0},
		{"container, cgroup v2", nil, files(map[string]string{"/proc/self/cgroup": v2, "/sys/fs/cgroup/memory.max": "1073741824\n"}), DefaultGCPercent, 966367641},
		{"cgroup v2 unlimited", nil, files(map[string]string{"/proc/self/cgroup": v2, "/sys/fs/cgroup/memory.max": "max\n"}), DefaultGCPercent, 0},
		{"systemd unit's MemoryMax, under an unlimited slice", nil, files(map[string]string{
			"/proc/self/cgroup": "0::/system.slice/stackbone.service\n",
			"/sys/fs/cgroup/system.slice/stackbone.service/memory.max": "536870912\n",
			"/sys/fs/cgroup/system.slice/memory.max":                   "max\n",
		}), DefaultGCPercent, 483183820},
		{"a parent's smaller limit", nil, files(map[string]string{
			"/proc/self/cgroup":                          "0::/kubepods/pod1/c1\n",
			"/sys/fs/cgroup/kubepods/pod1/c1/memory.max": "max\n",
			"/sys/fs/cgroup/kubepods/pod1/memory.max":    "268435456\n",
			"/sys/fs/cgroup/kubepods/memory.max":         "1073741824\n",
		}), DefaultGCPercent, 241591910},
		{"cgroup v1", nil, files(map[string]string{
			"/proc/self/cgroup": "12:pids:/docker/abc\n4:cpu,cpuacct:/docker/abc\n3:memory:/docker/abc\n0::/\n",
			"/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "536870912\n",
		}), DefaultGCPercent, 483183820},
		{"cgroup v1 unlimited", nil, files(map[string]string{
			"/proc/self/cgroup":                           "3:memory:/\n",
			"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}), DefaultGCPercent, 0},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "200MiB"}, files(map[string]string{"/proc/self/cgroup": v2, "/sys/fs/cgroup/memory.max": "1073741824"}), DefaultGCPercent, 0},
		{"unreadable", nil, func(string) ([]byte, error) { return nil, errors.New("permission denied") }, DefaultGCPercent, 0},
	} {
		p, l := GCSettings(env(c.env), c.files)
		if p != c.percent || l != c.limit {
			t.Errorf("%s: percent %d, limit %d; want %d, %d", c.name, p, l, c.percent, c.limit)
		}
	}
}

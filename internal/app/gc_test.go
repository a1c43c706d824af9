package app

import (
	"errors"
	"io/fs"
	"testing"
)

// The GC defaults a server sets: GOGC and GOMEMLIMIT win when set; a
// container's memory limit (cgroup v2 or v1) gives a soft limit of 90% of it.
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
	for _, c := range []struct {
		name    string
		env     map[string]string
		files   func(string) ([]byte, error)
		percent int
		limit   int64
	}{
		{"no container", nil, none, DefaultGCPercent, 0},
		{"GOGC set", map[string]string{"GOGC": "100"}, none, 0, 0},
		{"cgroup v2 limit", nil, files(map[string]string{"/sys/fs/cgroup/memory.max": "1073741824\n"}), DefaultGCPercent, 966367641},
		{"cgroup v2 unlimited", nil, files(map[string]string{"/sys/fs/cgroup/memory.max": "max\n"}), DefaultGCPercent, 0},
		{"cgroup v1 limit", nil, files(map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "536870912\n"}), DefaultGCPercent, 483183820},
		{"cgroup v1 unlimited", nil, files(map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}), DefaultGCPercent, 0},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "200MiB"}, files(map[string]string{"/sys/fs/cgroup/memory.max": "1073741824"}), DefaultGCPercent, 0},
		{"unreadable", nil, func(string) ([]byte, error) { return nil, errors.New("permission denied") }, DefaultGCPercent, 0},
	} {
		p, l := GCSettings(env(c.env), c.files)
		if p != c.percent || l != c.limit {
			t.Errorf("%s: percent %d, limit %d; want %d, %d", c.name, p, l, c.percent, c.limit)
		}
	}
}

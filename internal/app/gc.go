package app

import (
	"bytes"
	"log/slog"
	"os"
	"path"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

// DefaultGCPercent is the garbage collector's target a server runs with
// when GOGC is not set: a collection when the heap has grown to five times
// what was live after the last one (Go's default, 100, is twice). A turn
// allocates ~90 KB; at Go's default a small server's heap is collected
// every few hundred turns, and those collections were most of the p99 a
// stateless turn adds and ~5% of a durable turn's CPU. Measured in
// BENCHMARKS.md (#11, third round): the p99 a stateless turn adds 0.95 →
// 0.28 ms, a durable tool turn's CPU at 16 clients 0.711 → 0.670 ms, for
// 35.9 → 37.1 MiB idle and 51 → 68 MiB after load.
const DefaultGCPercent = 400

// memoryShare is the part of a container's memory limit given to Go as its
// soft memory limit when GOMEMLIMIT is not set.
const memoryShare = 0.9

// GCSettings returns what a server process sets for its garbage collector:
// the GC percent (0: leave it, GOGC is set) and a soft memory limit in bytes
// (0: none). Without GOGC the percent is DefaultGCPercent. Without
// GOMEMLIMIT, in a cgroup with a memory limit (a container's, a systemd
// unit's; readFile reads /proc/self/cgroup and the cgroup files), the soft
// limit is 90% of it, so a heap that grows towards the limit makes the
// collector work harder instead of getting the process killed.
func GCSettings(getenv func(string) string, readFile func(string) ([]byte, error)) (percent int, limit int64) {
	if getenv("GOGC") == "" {
		percent = DefaultGCPercent
	}
	if getenv("GOMEMLIMIT") != "" {
		return percent, 0
	}
	if n := cgroupMemoryLimit(readFile); n > 0 {
		limit = int64(float64(n) * memoryShare)
	}
	return percent, limit
}

// cgroupRoot is where the cgroup file systems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupMemoryLimit returns the memory limit of the process's cgroup: the
// smallest limit set on it or an ancestor (a container's, or a systemd
// unit's MemoryMax), cgroup v2 or v1 as /proc/self/cgroup names it; 0 when
// there is none or it cannot be read.
func cgroupMemoryLimit(readFile func(string) ([]byte, error)) int64 {
	b, err := readFile("/proc/self/cgroup")
	if err != nil {
		return 0
	}
	var dir, file string
	for _, line := range strings.Split(string(b), "\n") {
		// hierarchy-ID:controller-list:path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" { // v2
			dir, file = path.Join(cgroupRoot, parts[2]), "memory.max"
			continue
		}
		if slices.Contains(strings.Split(parts[1], ","), "memory") { // v1
			dir, file = path.Join(cgroupRoot, "memory", parts[2]), "memory.limit_in_bytes"
			break
		}
	}
	if dir == "" {
		return 0
	}
	var least int64
	for {
		if b, err := readFile(path.Join(dir, file)); err == nil {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
			// "max", or v1's "no limit" (a huge number), set no limit.
			if err == nil && n > 0 && n < 1<<60 && (least == 0 || n < least) {
				least = n
			}
		}
		if dir == cgroupRoot || dir == path.Join(cgroupRoot, "memory") || dir == "/" {
			return least
		}
		dir = path.Dir(dir)
	}
}

// TuneGC applies GCSettings from the process's environment and cgroup, and
// logs what it set.
func TuneGC(logger *slog.Logger) {
	percent, limit := GCSettings(os.Getenv, os.ReadFile)
	var attrs []any
	if percent > 0 {
		debug.SetGCPercent(percent)
		attrs = append(attrs, "gogc", percent)
	}
	if limit > 0 {
		debug.SetMemoryLimit(limit)
		attrs = append(attrs, "memlimit_bytes", limit)
	}
	if len(attrs) > 0 {
		logger.Info("garbage collector (GOGC and GOMEMLIMIT override)", attrs...)
	}
}

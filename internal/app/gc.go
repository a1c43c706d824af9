package app

import (
	"bytes"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
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

// cgroupLimitFiles hold the memory limit of the process's container:
// cgroup v2, then v1.
var cgroupLimitFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// GCSettings returns what a server process sets for its garbage collector:
// the GC percent (0: leave it, GOGC is set) and a soft memory limit in bytes
// (0: none). Without GOGC the percent is DefaultGCPercent. Without
// GOMEMLIMIT, in a container with a memory limit (readFile reads its cgroup
// files), the soft limit is 90% of it, so a heap that grows towards the
// container's limit makes the collector work harder instead of getting the
// process killed.
func GCSettings(getenv func(string) string, readFile func(string) ([]byte, error)) (percent int, limit int64) {
	if getenv("GOGC") == "" {
		percent = DefaultGCPercent
	}
	if getenv("GOMEMLIMIT") != "" {
		return percent, 0
	}
	for _, f := range cgroupLimitFiles {
		b, err := readFile(f)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
		if err != nil || n <= 0 || n >= 1<<60 {
			return percent, 0 // "max", or v1's "no limit" (a huge number)
		}
		return percent, int64(float64(n) * memoryShare)
	}
	return percent, 0
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

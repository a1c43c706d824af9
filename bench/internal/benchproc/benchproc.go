// Package benchproc builds and runs the stackbone binary for the commands in
// bench/: a server process whose log is drained, whose address is read from
// its startup line, and which can be stopped, killed hard and measured.
package benchproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Build compiles ./cmd/stackbone of the enclosing module into dir and
// returns the binary's path.
func Build(ctx context.Context, dir string, logger *slog.Logger) (string, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" || strings.TrimSpace(string(gomod)) == os.DevNull {
		return "", fmt.Errorf("find the module root (run from the stackbone module): %v", err)
	}
	bin := filepath.Join(dir, "stackbone")
	logger.Info("building", "bin", bin)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/stackbone")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
}

// ErrNoAddr is returned when the server exits before it logs its address.
var ErrNoAddr = errors.New("stackbone exited before listening")

// Server is a stackbone process.
type Server struct {
	// URL is the server's base URL (http://host:port, no /v1).
	URL string

	cmd  *exec.Cmd
	mu   sync.Mutex
	tail []string // the last log lines, for error reports
	done chan struct{}
}

// addrRe finds the bound address in the server's startup log line.
var addrRe = regexp.MustCompile(`msg="stackbone listening" addr=(\S+)`)

// tailLines is how many log lines a Server keeps.
const tailLines = 40

// Start runs `bin args…` with this process's environment minus every
// STACKBONE_* and OPENAI_* variable, plus env, and waits until it logs its
// address. Its log is drained for as long as it runs (a full pipe would
// stall it).
func Start(ctx context.Context, bin string, args, env []string, logger *slog.Logger) (*Server, error) {
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STACKBONE_") && !strings.HasPrefix(kv, "OPENAI_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout = io.Discard
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{cmd: cmd, done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.tail = append(s.tail[max(len(s.tail)-tailLines+1, 0):], line)
			s.mu.Unlock()
			if m := addrRe.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case addr := <-found:
		s.URL = "http://" + addr
		logger.Debug("stackbone started", "pid", cmd.Process.Pid, "url", s.URL)
		return s, nil
	case <-s.done:
		err = ErrNoAddr
	case <-time.After(60 * time.Second):
		err = fmt.Errorf("stackbone did not log its address within 60s")
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.Kill()
	return nil, fmt.Errorf("%w\n%s", err, s.LogTail())
}

// PID is the server's process id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// LogTail returns the server's last log lines.
func (s *Server) LogTail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.tail, "\n")
}

// Stop asks the server to shut down and kills it after 5 s.
func (s *Server) Stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
	}
	_ = s.cmd.Wait()
}

// Kill stops the server with SIGKILL, as a crash would, and waits for it.
func (s *Server) Kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	_ = s.cmd.Wait()
}

// clockTick is USER_HZ, the unit of the times in /proc/PID/stat (100 on
// every Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// CPUTime returns the user+system CPU time process pid has used.
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces): state is
	// field 3, utime 14, stime 15.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat: %q %q", pid, f[11], f[12])
	}
	return time.Duration(u+s) * clockTick, nil
}

// RSS returns the resident set size (VmRSS) of process pid in bytes.
func RSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

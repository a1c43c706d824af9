package stacktest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is a stackbone server running as its own process (the real
// binary), for tests that kill it, restart it or drive it as a user would.
type Process struct {
	// Cmd is the running command.
	Cmd *exec.Cmd
	// Addr is the address it listens on, read from its log.
	Addr string
	// Logs holds what it wrote to stderr so far.
	Logs *SyncBuf
}

// SyncBuf is a strings.Builder safe for one writer and many readers.
type SyncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p.
func (s *SyncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written.
func (s *SyncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var listeningRe = regexp.MustCompile(`msg="stackbone listening" addr=(\S+)`)

// StartProcess runs `bin args…` with env added to the test's environment
// and waits up to wait for its listening address. The process is killed
// (-9) when the test ends, and its log shown if the test failed.
func StartProcess(t testing.TB, bin string, env []string, wait time.Duration, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{Cmd: cmd, Logs: &SyncBuf{}}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(p.Logs, line)
			if m := listeningRe.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("stackbone %s log (%s):\n%s", strings.Join(args[:min(1, len(args))], ""), p.Addr, p.Logs.String())
		}
	})
	select {
	case p.Addr = <-found:
	case <-time.After(wait):
		t.Fatalf("stackbone %s did not start:\n%s", strings.Join(args, " "), p.Logs.String())
	}
	return p
}

// URL is the process's base URL.
func (p *Process) URL() string { return "http://" + p.Addr }

// Kill kills the process (-9) and waits for it to end.
func (p *Process) Kill(t testing.TB) {
	t.Helper()
	_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	_ = p.Cmd.Wait()
}

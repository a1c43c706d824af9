package tsload

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/tool"
)

// writeProject writes files (path relative to the project folder -> content)
// into a fresh temp folder and returns it.
func writeProject(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// logRecorder is a slog.Handler that keeps every record as one line.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%s", a.Key, a.Value.String())
		return true
	})
	l.mu.Lock()
	l.lines = append(l.lines, b.String())
	l.mu.Unlock()
	return nil
}

// find returns the recorded lines containing every part.
func (l *logRecorder) find(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, line := range l.lines {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}

func (l *logRecorder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func newRecorder() (*slog.Logger, *logRecorder) {
	rec := &logRecorder{}
	return slog.New(rec), rec
}

// mustLoad loads dir and closes the specs when the test ends.
func mustLoad(t testing.TB, dir string, opts Options) []*agent.Spec {
	t.Helper()
	specs, err := LoadDir(context.Background(), dir, opts)
	if err != nil {
		t.Fatalf("LoadDir: %v", err)
	}
	t.Cleanup(func() {
		for _, s := range specs {
			s.Close()
		}
	})
	return specs
}

// loadOne loads a project with one agent file.
func loadOne(t testing.TB, files map[string]string, opts Options) *agent.Spec {
	t.Helper()
	specs := mustLoad(t, writeProject(t, files), opts)
	if len(specs) != 1 {
		t.Fatalf("got %d specs, want 1", len(specs))
	}
	return specs[0]
}

func mustTool(t testing.TB, s *agent.Spec, name string) *tool.Tool {
	t.Helper()
	tl := s.Tool(name)
	if tl == nil {
		t.Fatalf("agent %s has no tool %q", s.Name, name)
	}
	return tl
}

func run(t testing.TB, s *agent.Spec, name, args string) (tool.Result, error) {
	t.Helper()
	return mustTool(t, s, name).Execute(context.Background(), tool.Call{
		ThreadID: "th_1", ToolCallID: "call_1", IdempotencyKey: "sbk_1", Agent: s.Name, Args: json.RawMessage(args),
	})
}

// jsonEqual compares two JSON texts semantically.
func jsonEqual(t testing.TB, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("got is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want is not JSON: %v\n%s", err, want)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Fatalf("JSON differs\n got: %s\nwant: %s", gb, wb)
	}
}

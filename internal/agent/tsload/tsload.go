// Package tsload loads TypeScript agent files (DIR/agents/*.ts) into
// agent.Spec values. Each file is bundled with esbuild's Go API (relative
// imports and packages from a local node_modules are bundled; the 'stackbone'
// module is served from the binary), compiled once for goja, and evaluated in
// a per-agent pool of goja runtimes that run the agent's tools.
//
// Rules agent code lives by (see also types/README.md):
//   - no Node built-ins (fs, node:crypto, ...): use ctx.fetch and the Web
//     globals the host provides (console, setTimeout, URL, TextEncoder, atob,
//     crypto.randomUUID, structuredClone, fetch);
//   - pooled runtimes keep module-level state between calls, like a worker;
//   - regexps with Unicode property escapes (\p{...}) never match in goja; the
//     loader logs a warning when a bundle contains one;
//   - a tool call is bounded in time (tool.Tool.TimeLimit), not in memory.
package tsload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
)

// DefaultEvalTimeout bounds the evaluation of an agent module in one runtime.
const DefaultEvalTimeout = 10 * time.Second

// Options configures the loader.
type Options struct {
	// Logger receives console output, tool failures with their TS stacks and
	// load warnings. Nil discards.
	Logger *slog.Logger
	// HTTPClient serves ctx.fetch and the global fetch. Nil means
	// http.DefaultClient. The host owns network policy through it.
	HTTPClient *http.Client
	// PoolSize caps the goja runtimes per agent; runtimes are created on
	// demand up to it. Zero means 2*GOMAXPROCS.
	PoolSize int
	// EvalTimeout bounds the evaluation of an agent module in a new runtime.
	// Zero means DefaultEvalTimeout.
	EvalTimeout time.Duration
	// LookupEnv expands '${VAR}' references in mcpServers headers and env.
	// Nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.HTTPClient == nil {
		o.HTTPClient = http.DefaultClient
	}
	if o.PoolSize <= 0 {
		o.PoolSize = 2 * runtime.GOMAXPROCS(0)
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.EvalTimeout <= 0 {
		o.EvalTimeout = DefaultEvalTimeout
	}
	return o
}

// LoadError is a problem in an agent file: a syntax error, an unresolvable
// import, or a bad config found while evaluating it.
type LoadError struct {
	// File is the path relative to the project folder, with forward slashes
	// (e.g. "agents/refunds.ts").
	File string
	// Line and Col are 1-based; zero when unknown.
	Line int
	Col  int
	// Message says what is wrong.
	Message string
}

// Error formats the error as "file:line:col: message".
func (e *LoadError) Error() string {
	switch {
	case e.Line > 0 && e.Col > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Message)
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Message)
	default:
		return fmt.Sprintf("%s: %s", e.File, e.Message)
	}
}

// ErrInvalidArguments matches (errors.Is) a tool error raised because the
// arguments failed the tool's Standard Schema.
var ErrInvalidArguments = errors.New("invalid tool arguments")

// ToolError is an error thrown (or a promise rejected) by agent code during a
// tool call or an approval hook. Error() is the JS message only; the stack is
// logged, not returned, so the model never sees host paths.
type ToolError struct {
	Agent string
	Tool  string
	// Name is the JS error's name ("Error", "TypeError", "ToolArgumentsError").
	Name    string
	Message string
	// Stack is the JS stack with positions mapped back to the .ts sources.
	Stack string
}

// Error returns the message, prefixed with the error name for JS built-in
// error types other than Error.
func (e *ToolError) Error() string {
	switch e.Name {
	case "", "Error", "ToolArgumentsError":
		return e.Message
	}
	if e.Message == "" {
		return e.Name
	}
	return e.Name + ": " + e.Message
}

// Is reports ErrInvalidArguments for argument validation failures.
func (e *ToolError) Is(target error) bool {
	return target == ErrInvalidArguments && e.Name == "ToolArgumentsError"
}

// TimeoutError reports a tool call (or approval hook) cut off at its time
// limit. It unwraps to context.DeadlineExceeded.
type TimeoutError struct {
	Tool  string
	Limit time.Duration
}

// Error returns e.g. `tool "x" timed out after 200ms`.
func (e *TimeoutError) Error() string {
	return fmt.Sprintf("tool %q timed out after %s", e.Tool, e.Limit)
}

// Unwrap returns context.DeadlineExceeded.
func (e *TimeoutError) Unwrap() error { return context.DeadlineExceeded }

// LoadDir loads every DIR/agents/*.ts file (top level only; files in
// subfolders are imports, *.d.ts files are skipped). It returns the specs in
// file name order, or an error joining one *LoadError per broken file. A
// missing agents folder yields no specs and no error. Each returned Spec's
// Close releases its runtime pool.
func LoadDir(ctx context.Context, dir string, opts Options) ([]*agent.Spec, error) {
	opts = opts.withDefaults()
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("tsload: %w", err)
	}
	if _, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("tsload: %w", err)
	}
	entries, err := os.ReadDir(filepath.Join(root, "agents"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tsload: %w", err)
	}
	var files []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".ts") || strings.HasSuffix(n, ".d.ts") {
			continue
		}
		files = append(files, filepath.Join(root, "agents", n))
	}
	sort.Strings(files)
	return loadFiles(ctx, root, files, opts)
}

// LoadFile loads one agent file. file is absolute or relative to dir; dir is
// the project folder that error positions and Spec.Dir refer to.
func LoadFile(ctx context.Context, dir, file string, opts Options) (*agent.Spec, error) {
	opts = opts.withDefaults()
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("tsload: %w", err)
	}
	if !filepath.IsAbs(file) {
		file = filepath.Join(root, file)
	}
	if _, err := os.Stat(file); err != nil {
		return nil, fmt.Errorf("tsload: %w", err)
	}
	specs, err := loadFiles(ctx, root, []string{file}, opts)
	if err != nil {
		return nil, err
	}
	return specs[0], nil
}

func loadFiles(ctx context.Context, root string, files []string, opts Options) ([]*agent.Spec, error) {
	if len(files) == 0 {
		return nil, nil
	}
	bundles, err := build(root, files, opts.Logger)
	if err != nil {
		return nil, err
	}
	var (
		specs []*agent.Spec
		errs  []error
		seen  = map[string]string{} // agent name -> file
	)
	for _, b := range bundles {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		spec, desc, err := newAgent(ctx, root, b, opts)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if other, ok := seen[spec.Name]; ok {
			errs = append(errs, desc.locErr(b.rel, fmt.Sprintf("duplicate agent name %q (also defined in %s)", spec.Name, other)))
			spec.Close()
			continue
		}
		seen[spec.Name] = b.rel
		specs = append(specs, spec)
	}
	if len(errs) > 0 {
		for _, s := range specs {
			s.Close()
		}
		return nil, errors.Join(errs...)
	}
	return specs, nil
}

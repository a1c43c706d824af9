// Package stacktest starts a whole Stackbone server for tests: a real
// listener, a real SQLite store, agents built in Go, and a scripted mock
// model upstream speaking the provider's real wire over HTTP. Every wire's
// tests (OpenAI, Anthropic, AG-UI, Studio) use it.
package stacktest

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/app"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/providers"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/notify"
	"github.com/stackbone/stackbone/internal/server"
	"github.com/stackbone/stackbone/internal/ssrf"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/store/sqlite"
	"github.com/stackbone/stackbone/internal/testwait"
	"github.com/stackbone/stackbone/internal/tool"
	"github.com/stackbone/stackbone/internal/tool/mcp"
)

// Options shape the stack.
type Options struct {
	// Script is the model script (JSON). Default: DefaultScript.
	Script string
	// Upstream is modeltest.OpenAI (default) or modeltest.Anthropic; the
	// agents' model refs follow it.
	Upstream modeltest.Kind
	// Mode is config.Dev (default) or config.Start.
	Mode config.Mode
	// Keys are API keys (Start mode).
	Keys []config.Key
	// Agents replace the default agents when set.
	Agents func(env *Env) []*agent.Spec
	// MaxBodyBytes overrides the body limit.
	MaxBodyBytes int64
	// Store, when set, is used instead of a fresh SQLite store.
	Store store.Store
	// Configure, when set, adjusts the configuration before it is checked
	// (e.g. short slow-client timeouts).
	Configure func(cfg *config.Config)
	// Deliver runs the outbox's dispatcher with the stack, as the server
	// does: webhook notices and A2A push notifications are sent (retried
	// after 50 ms, then 200 ms, in tests).
	Deliver bool
	// KeepAliveInterval, when set, is how often idle streams get a
	// keepalive (server.DefaultKeepAliveInterval otherwise).
	KeepAliveInterval time.Duration
}

// Env is a running stack.
type Env struct {
	// URL is the server's base URL (no /v1).
	URL      string
	Config   *config.Config
	Store    store.Store
	Runner   *engine.Runner
	Upstream *modeltest.Mock
	// UpstreamURL is the mock's base URL.
	UpstreamURL string
	// Calls counts executions per tool name.
	Calls *Counter
	// Logs holds what the server logged.
	Logs *LogBuffer
	// Server is the HTTP handler under test.
	Server *server.Server
}

// Counter counts tool executions by name.
type Counter struct {
	mu sync.Mutex
	m  map[string]int
	// Args keeps the arguments of every execution by tool name.
	args map[string][]json.RawMessage
}

// Add records one execution.
func (c *Counter) Add(name string, args json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[name]++
	c.args[name] = append(c.args[name], args)
}

// Get returns how often name ran.
func (c *Counter) Get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[name]
}

// Args returns the arguments name ran with.
func (c *Counter) Args(name string) []json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]json.RawMessage(nil), c.args[name]...)
}

// DefaultScript drives the default agents:
//   - "weather …" → get_weather (a server tool), then "Tool said: …"
//   - "refund …"  → refund (needs approval, edit allowed), then "Refund result: …"
//   - "delete …"  → delete_file (needs approval, no description)
//   - "open …"    → open_modal (a client tool the test declares)
//   - "draft …"   → set_draft (changes shared state)
//   - anything else → "echo: <text>"
const DefaultScript = `[
 {"when": {"lastTool": "get_weather"}, "reply": {"text": "Tool said: {{lastTool}}"}},
 {"when": {"lastTool": "refund"}, "reply": {"text": "Refund result: {{lastTool}}"}},
 {"when": {"lastTool": "delete_file"}, "reply": {"text": "Delete result: {{lastTool}}"}},
 {"when": {"lastTool": "open_modal"}, "reply": {"text": "Modal said: {{lastTool}}"}},
 {"when": {"lastTool": "set_draft"}, "reply": {"text": "Draft saved."}},
 {"when": {"lastUser": "weather"}, "reply": {"text": "Checking.", "toolCalls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}},
 {"when": {"lastUser": "refund"}, "reply": {"toolCalls": [{"name": "refund", "arguments": {"orderId": "ord_42", "amount": 19.99}}]}},
 {"when": {"lastUser": "delete"}, "reply": {"toolCalls": [{"name": "delete_file", "arguments": {"path": "/tmp/x"}}]}},
 {"when": {"lastUser": "open"}, "reply": {"toolCalls": [{"name": "open_modal", "arguments": {"title": "Hello"}}]}},
 {"when": {"lastUser": "draft"}, "reply": {"toolCalls": [{"name": "set_draft", "arguments": {"text": "v1"}}]}},
 {"reply": {"text": "echo: {{lastUser}}"}}
]`

// DefaultAgents returns the agents the default script drives. modelRef is
// the agent model ("openai/test-model" or "anthropic/test-model").
func DefaultAgents(env *Env, modelRef string) []*agent.Spec {
	weather := &tool.Tool{
		Name: "get_weather", Description: "Current weather for a city",
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
			env.Calls.Add("get_weather", c.Args)
			var a struct{ City string }
			_ = json.Unmarshal(c.Args, &a)
			return tool.Result{Content: fmt.Sprintf(`{"city":%q,"temp_c":21}`, a.City)}, nil
		},
	}
	refund := &tool.Tool{
		Name: "refund", Description: "Refund an order",
		Parameters: json.RawMessage(`{"type":"object","properties":{"orderId":{"type":"string"},"amount":{"type":"number"}},"required":["orderId","amount"]}`),
		Approval: &tool.Approval{
			Description: func(ctx context.Context, args json.RawMessage) (string, error) {
				var a struct {
					OrderID string  `json:"orderId"`
					Amount  float64 `json:"amount"`
				}
				_ = json.Unmarshal(args, &a)
				return fmt.Sprintf("Refund order %s for %v", a.OrderID, a.Amount), nil
			},
			AllowedDecisions: []tool.Decision{tool.Approve, tool.Reject, tool.Edit},
		},
		Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
			env.Calls.Add("refund", c.Args)
			var a struct {
				Amount float64 `json:"amount"`
			}
			_ = json.Unmarshal(c.Args, &a)
			return tool.Result{Content: fmt.Sprintf(`{"refunded":%v,"toolCallId":%q}`, a.Amount, c.ToolCallID)}, nil
		},
	}
	del := &tool.Tool{
		Name: "delete_file", Description: "Delete a file",
		Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
		Approval:   &tool.Approval{},
		Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
			env.Calls.Add("delete_file", c.Args)
			return tool.Result{Content: `{"deleted":true}`}, nil
		},
	}
	draft := &tool.Tool{
		Name: "set_draft", Description: "Save the draft in shared state",
		Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
			env.Calls.Add("set_draft", c.Args)
			var a struct{ Text string }
			_ = json.Unmarshal(c.Args, &a)
			st := map[string]any{}
			_ = json.Unmarshal(c.State, &st)
			st["draft"] = a.Text
			b, _ := json.Marshal(st)
			return tool.Result{Content: `{"ok":true}`, State: b}, nil
		},
	}
	return []*agent.Spec{
		{Name: "assistant", Model: modelRef, Instructions: "You are a test assistant.",
			Tools:         []*tool.Tool{weather, refund, del, draft},
			EditableState: map[string]json.RawMessage{"draft": json.RawMessage(`{"type":"string"}`)}},
		{Name: "other", Model: modelRef, Instructions: "Another agent."},
	}
}

// New starts a stack; it is torn down when the test ends.
func New(t testing.TB, opts Options) *Env {
	t.Helper()
	if opts.Script == "" {
		opts.Script = DefaultScript
	}
	if opts.Upstream == "" {
		opts.Upstream = modeltest.OpenAI
	}
	if opts.Mode == "" {
		opts.Mode = config.Dev
	}
	sc, err := script.Parse([]byte(opts.Script))
	if err != nil {
		t.Fatalf("script: %v", err)
	}
	env := &Env{Calls: &Counter{m: map[string]int{}, args: map[string][]json.RawMessage{}}, Logs: &LogBuffer{}}
	env.Upstream = modeltest.Handler(opts.Upstream, sc)
	up := httptest.NewServer(env.Upstream)
	t.Cleanup(up.Close)
	env.UpstreamURL = up.URL

	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults(opts.Mode)
	cfg.Dir = dir
	cfg.Addr = "127.0.0.1:0"
	cfg.Keys = opts.Keys
	cfg.LogLevel = "debug"
	cfg.OpenAIKey, cfg.AnthropicKey = "sk-test", "sk-ant-test"
	if opts.MaxBodyBytes > 0 {
		cfg.MaxBodyBytes = opts.MaxBodyBytes
	}
	if opts.Configure != nil {
		opts.Configure(&cfg)
	}
	if err := cfg.Finish(); err != nil {
		t.Fatalf("config: %v", err)
	}
	env.Config = &cfg
	logger, specs := env.open(t, &cfg, opts, string(opts.Upstream)+"/test-model")
	models := providers.New(providers.Config{
		OpenAIBaseURL: up.URL + "/v1", OpenAIKey: cfg.OpenAIKey,
		AnthropicBaseURL: up.URL, AnthropicKey: cfg.AnthropicKey,
		Retry: model.RetryPolicy{Attempts: 3, Base: time.Millisecond, Max: 5 * time.Millisecond},
	})
	used := env.Store
	stopDeliver := func() {}
	if opts.Deliver {
		d, err := notify.New(notify.Config{Store: env.Store, Endpoints: cfg.WebhookURLs, Secret: cfg.WebhookSecret,
			Format: cfg.WebhookFormat, Logger: logger, Version: app.Version, Push: env.Store, Poll: 100 * time.Millisecond,
			Schedule:   []time.Duration{50 * time.Millisecond, 200 * time.Millisecond},
			PushClient: ssrf.Client(notify.DefaultTimeout, cfg.A2APushAllowPrivate)})
		if err != nil {
			t.Fatalf("webhook dispatcher: %v", err)
		}
		used = d.Waking(env.Store)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); d.Run(ctx) }()
		stopDeliver = func() { cancel(); <-done }
	}
	runner, srv, err := app.NewStack(&cfg, used, agent.NewRegistry(specs...), models, logger)
	if err != nil {
		t.Fatalf("build the stack: %v", err)
	}
	env.Runner = runner
	env.Server = srv
	srv.KeepAliveInterval = opts.KeepAliveInterval
	// The production server settings and connection cap, on a test
	// listener.
	hs := httptest.NewUnstartedServer(srv)
	hs.Config = server.HTTPServer(&cfg, srv, logger)
	hs.Listener = server.LimitConns(hs.Listener, cfg.MaxConnsPerIP, logger)
	hs.Start()
	env.URL = hs.URL
	srv.SetPublicURL(hs.URL)
	t.Cleanup(func() {
		srv.CloseStreams()
		hs.Close()
		env.Runner.Wait()
		stopDeliver()
		_ = env.Store.Close()
		if t.Failed() {
			t.Logf("server log:\n%s", env.Logs.String())
		}
	})
	return env
}

// WaitFor polls cond until it holds, failing t after testwait.Deadline.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !testwait.Poll(testwait.Context(t), cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// Thread returns a thread's stored state, failing the test on error.
func (env *Env) Thread(t testing.TB, tenant, id string) *store.Thread {
	t.Helper()
	th, err := env.Store.GetThread(context.Background(), tenant, id)
	if err != nil {
		t.Fatalf("get thread %s: %v", id, err)
	}
	return th
}

// LogBuffer collects log output safely.
type LogBuffer struct {
	mu  sync.Mutex
	buf []byte
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	return len(p), nil
}

// String returns everything logged.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}

// SetParallel, called by a TestMain before m.Run, lets up to n parallel
// tests run at once instead of GOMAXPROCS, unless -test.parallel is given:
// for packages whose tests mostly wait (on timeouts, streams, child
// processes) rather than compute.
func SetParallel(n int) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}

// open finishes building env on cfg: the process logger (redaction
// included) writing to env.Logs, the store (opts.Store, or SQLite in
// cfg.Dir) and the agents (opts.Agents, or the default agents on modelRef).
func (env *Env) open(t testing.TB, cfg *config.Config, opts Options, modelRef string) (*slog.Logger, []*agent.Spec) {
	t.Helper()
	env.Config = cfg
	logger := app.Logger(cfg, env.Logs)
	st := opts.Store
	if st == nil {
		s, err := sqlite.Open(context.Background(), cfg.SQLitePath(), logger)
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		s.SetClock(cfg.Clock) // as app.OpenStore does
		st = s
	}
	env.Store = st
	if len(cfg.WebhookURLs) > 0 {
		st.SetWebhooks(store.WebhookRefs(cfg.WebhookURLs))
	}
	st.SetPushEncoder(app.PushEncoder) // as app.OpenStore does
	specs := DefaultAgents(env, modelRef)
	if opts.Agents != nil {
		specs = opts.Agents(env)
	}
	// Agents' MCP servers, reconnecting within a second in tests; closed
	// (child processes stopped) when the test ends.
	if err := mcp.Start(context.Background(), specs, mcp.Options{Logger: logger, MaxBackoff: time.Second, PingInterval: 300 * time.Millisecond}); err != nil {
		t.Fatalf("start MCP servers: %v", err)
	}
	t.Cleanup(func() {
		for _, s := range specs {
			if s.Close != nil {
				s.Close()
			}
		}
	})
	return logger, specs
}

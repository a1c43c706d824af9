// Package mcp gives agents the tools of the MCP servers their files declare
// (defineDeepAgent({ mcpServers })). Start connects every server with the
// official Go SDK, over streamable HTTP or stdio (a child process it starts,
// restarts with backoff when it dies, and stops when the agent is closed),
// lists its tools at start and on notifications/tools/list_changed, and sets
// each spec's Dynamic tool source. A server that does not answer at start
// does not stop the agent from loading: it is retried in the background and
// its tools appear when it answers.
//
// Each MCP tool becomes a tool.Tool named "{server}_{tool}" (sanitised to
// ^[a-zA-Z0-9_-]{1,64}$) with the server's description and input schema;
// Idempotent follows idempotentHint and the approval policy follows the
// annotations unless the server's approval setting overrides it.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/redact"
	"github.com/stackbone/stackbone/internal/tool"
	"github.com/stackbone/stackbone/internal/tool/builtin"
)

// Connection states reported in agent.MCPServerStatus.Status.
const (
	StatusConnected  = "connected"
	StatusConnecting = "connecting"
	StatusDown       = "down"
)

// Defaults for Options.
const (
	DefaultStartWait  = 5 * time.Second
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 10 * time.Second
	// DefaultPingInterval is how often a connected server is pinged.
	DefaultPingInterval = 15 * time.Second
)

// Options configures Start.
type Options struct {
	// Logger receives connection events and refresh warnings. Nil discards.
	Logger *slog.Logger
	// StartWait bounds how long Start waits for the servers' first answer
	// (collisions among the tools listed by then fail the load). Zero means
	// DefaultStartWait.
	StartWait time.Duration
	// MinBackoff and MaxBackoff bound the delay between connection attempts
	// (doubling from min to max). Zero means the defaults.
	MinBackoff, MaxBackoff time.Duration
	// PingInterval is how often a connected server is pinged; one that
	// does not answer within the interval (at most 10 s) is marked down
	// and reconnected (a hung server keeps its connection open). Zero
	// means DefaultPingInterval.
	PingInterval time.Duration
	// HTTPClient carries streamable HTTP connections; nil means a client
	// on http.DefaultTransport.
	HTTPClient *http.Client
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.StartWait <= 0 {
		o.StartWait = DefaultStartWait
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.PingInterval <= 0 {
		o.PingInterval = DefaultPingInterval
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = o.MinBackoff
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{}
	}
	return o
}

// CollisionError reports MCP tools whose names clash with another tool of
// the agent (its own, a built-in, or an earlier MCP tool).
type CollisionError struct {
	Agent string
	// Clashes describe each collision, e.g. `github_search (tool "search" of
	// MCP server "github") clashes with the agent's own tool`.
	Clashes []string
}

// Error lists the collisions.
func (e *CollisionError) Error() string {
	msg := fmt.Sprintf("agent %s: MCP tool name collision", e.Agent)
	for i, c := range e.Clashes {
		if i == 0 {
			msg += ": "
		} else {
			msg += "; "
		}
		msg += c
	}
	return msg + " (rename the MCP server, or give it tools: { rename: { tool: 'new_name' } } or tools: { exclude: ['tool'] })"
}

// Start connects the MCP servers of every spec that declares some, waits up
// to opts.StartWait for their first answer, and gives each such spec a
// Dynamic tool source; the spec's Close then also stops its connections and
// child processes. A tool name collision among the tools known by then is an
// error (every connection started here is stopped). The connections live
// until the spec is closed, not until ctx ends; ctx only bounds the wait.
func Start(ctx context.Context, specs []*agent.Spec, opts Options) error {
	opts = opts.withDefaults()
	var bad []error
	for _, spec := range specs {
		seen := map[string]bool{}
		for _, m := range spec.MCPServers {
			switch {
			case !serverNameRE.MatchString(m.Name):
				bad = append(bad, fmt.Errorf("agent %s: MCP server name %q must be 1-64 letters, digits, \"_\" or \"-\"", spec.Name, m.Name))
			case seen[m.Name]:
				bad = append(bad, fmt.Errorf("agent %s: duplicate MCP server %q", spec.Name, m.Name))
			case (m.URL == "") == (m.Command == ""):
				bad = append(bad, fmt.Errorf("agent %s: MCP server %q needs either a URL or a command", spec.Name, m.Name))
			}
			seen[m.Name] = true
			for remote, n := range m.Tools.Rename {
				if !serverNameRE.MatchString(n) {
					bad = append(bad, fmt.Errorf("agent %s: MCP server %q: tools.rename.%s: %q must be 1-64 letters, digits, \"_\" or \"-\"", spec.Name, m.Name, remote, n))
				}
			}
		}
	}
	if len(bad) > 0 {
		return errors.Join(bad...)
	}
	var started []*source
	for _, spec := range specs {
		if len(spec.MCPServers) == 0 {
			continue
		}
		src := newSource(spec, opts)
		started = append(started, src)
	}
	wait, cancel := context.WithTimeout(ctx, opts.StartWait)
	defer cancel()
	for _, src := range started {
		src.waitFirst(wait)
	}
	var errs []error
	for _, src := range started {
		if err := src.rebuild(true); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		for _, src := range started {
			src.close()
		}
		return errors.Join(errs...)
	}
	for _, src := range started {
		spec, prev := src.spec, src.spec.Close
		var once sync.Once
		spec.Dynamic = src
		spec.Close = func() {
			once.Do(func() {
				src.close()
				if prev != nil {
					prev()
				}
			})
		}
	}
	return nil
}

// source is one agent's MCP tools; it implements agent.ToolSource.
type source struct {
	spec     *agent.Spec
	red      *redact.Redactor // the agent's secrets (agent.Spec.Secrets)
	log      *slog.Logger
	reserved map[string]string // name -> what holds it
	servers  []*server
	cancel   context.CancelFunc
	done     sync.WaitGroup

	mu      sync.Mutex // serialises rebuild
	version uint64
	snap    atomic.Pointer[snapshot]
}

type snapshot struct {
	tools   []*tool.Tool
	version uint64
}

var _ agent.ToolSource = (*source)(nil)

func newSource(spec *agent.Spec, opts Options) *source {
	ctx, cancel := context.WithCancel(context.Background())
	// Everything the servers say goes through the agent's secrets: their
	// log lines (stderr included), results, errors and status.
	red := redact.New(spec.Secrets...)
	for _, cfg := range spec.MCPServers { // a URL's token shows in its connect errors
		red.Add(redact.URLSecrets(cfg.URL)...)
	}
	src := &source{spec: spec, red: red, log: slog.New(redact.NewHandler(opts.Logger.Handler(), red)).With("agent", spec.Name),
		reserved: map[string]string{}, cancel: cancel}
	for _, n := range []string{builtin.WriteTodos, builtin.Ls, builtin.ReadFile, builtin.WriteFile, builtin.EditFile, builtin.Task} {
		src.reserved[n] = "a built-in tool"
	}
	for _, t := range spec.Tools {
		src.reserved[t.Name] = "the agent's own tool"
	}
	src.snap.Store(&snapshot{})
	for _, cfg := range spec.MCPServers {
		s := &server{cfg: cfg, src: src, opts: opts, log: src.log.With("mcp_server", cfg.Name),
			state: StatusConnecting, first: make(chan struct{})}
		src.servers = append(src.servers, s)
		src.done.Add(1)
		go func() {
			defer src.done.Done()
			s.run(ctx)
		}()
	}
	return src
}

// Tools returns the MCP tools currently available and their version.
func (s *source) Tools() ([]*tool.Tool, uint64) {
	sn := s.snap.Load()
	return sn.tools, sn.version
}

// Servers reports each server's state, in declaration order.
func (s *source) Servers() []agent.MCPServerStatus {
	out := make([]agent.MCPServerStatus, 0, len(s.servers))
	for _, srv := range s.servers {
		out = append(out, srv.status())
	}
	return out
}

func (s *source) waitFirst(ctx context.Context) {
	for _, srv := range s.servers {
		select {
		case <-srv.first:
		case <-ctx.Done():
			return
		}
	}
}

func (s *source) close() {
	s.cancel()
	s.done.Wait()
}

// rebuild recomputes the visible tool list from every server's tools. At
// load, a collision is an error; later, the colliding tool is left out and
// a warning logged.
func (s *source) rebuild(atLoad bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	taken := map[string]string{}
	for k, v := range s.reserved {
		taken[k] = v
	}
	var (
		tools   []*tool.Tool
		clashes []string
	)
	for _, srv := range s.servers {
		listed := srv.listed()
		var visible []string
		for _, t := range listed {
			if holder, ok := taken[t.tool.Name]; ok {
				c := fmt.Sprintf("%s (tool %q of MCP server %q) clashes with %s", t.tool.Name, t.remote, srv.cfg.Name, holder)
				clashes = append(clashes, c)
				if !atLoad {
					s.log.Warn("MCP tool left out: its name is taken", "tool", t.tool.Name, "clash", c)
				}
				continue
			}
			taken[t.tool.Name] = fmt.Sprintf("tool %q of MCP server %q", t.remote, srv.cfg.Name)
			tools = append(tools, t.tool)
			visible = append(visible, t.tool.Name)
		}
		srv.setVisible(visible)
	}
	if atLoad && len(clashes) > 0 {
		return &CollisionError{Agent: s.spec.Name, Clashes: clashes}
	}
	s.version++
	s.snap.Store(&snapshot{tools: tools, version: s.version})
	return nil
}

// serverNameRE is the rule for mcpServers keys.
var serverNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// nameRE matches what the model wires' tool name rule does not allow.
var nameRE = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// ToolName returns the agent-side name of an MCP server's tool:
// "{server}_{tool}" with every character outside [A-Za-z0-9_-] replaced by
// "_", cut to 64 characters.
func ToolName(server, name string) string {
	n := nameRE.ReplaceAllString(server+"_"+name, "_")
	if len(n) > 64 {
		n = n[:64]
	}
	return n
}

// needsApproval decides a tool's approval from the server's policy and the
// tool's annotations.
func needsApproval(policy agent.MCPApproval, t *sdk.Tool) *tool.Approval {
	switch policy.Mode {
	case agent.MCPApprovalNever:
		return nil
	case agent.MCPApprovalAlways:
		return &tool.Approval{}
	}
	if ap, ok := policy.Tools[t.Name]; ok {
		return ap
	}
	if a := t.Annotations; a != nil && (a.ReadOnlyHint || (a.DestructiveHint != nil && !*a.DestructiveHint)) {
		return nil
	}
	return &tool.Approval{}
}

// emptyParams is the schema of a tool that declares none.
var emptyParams = json.RawMessage(`{"type":"object","properties":{}}`)

func params(schema any) json.RawMessage {
	if schema == nil {
		return emptyParams
	}
	b, err := json.Marshal(schema)
	if err != nil || string(b) == "null" || string(b) == "{}" {
		return emptyParams
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return emptyParams
	}
	delete(m, "$schema") // the model wires want a bare schema
	if _, ok := m["type"]; !ok {
		m["type"] = "object"
	}
	b, _ = json.Marshal(m)
	return b
}

package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/telemetry"
	"github.com/stackbone/stackbone/internal/tool"
)

// listedTool is one tool a server listed, converted.
type listedTool struct {
	remote string
	tool   *tool.Tool
}

// server is one MCP server of one agent: its connection loop and state.
type server struct {
	cfg  agent.MCPServer
	src  *source
	opts Options
	log  *slog.Logger

	firstOnce sync.Once
	first     chan struct{} // closed after the first connection attempt

	mu      sync.Mutex
	state   string
	lastErr string
	session *sdk.ClientSession
	tools   []listedTool
	visible []string

	// asking holds the Ask of each call in flight on this server, so an
	// elicitation request can be put to the human behind its call.
	askMu  sync.Mutex
	asking map[*tool.Call]context.Context
	// abandoned is when calls ended without their result (their time
	// limit or run ended): the server may still be working on them and
	// ask for them, so a request linked to no call is not taken for the
	// call in flight (another tenant's, maybe) while one is recent.
	abandoned []time.Time
}

// abandonedFor is how long a call that ended without its result makes
// unlinked elicitation requests ambiguous.
const abandonedFor = 10 * time.Minute

func (s *server) status() agent.MCPServerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := agent.MCPServerStatus{Name: s.cfg.Name, Transport: s.cfg.Transport(), Status: s.state,
		Tools: append([]string{}, s.visible...)}
	if s.state != StatusConnected {
		st.Error = s.src.red.String(s.lastErr)
	}
	return st
}

func (s *server) listed() []listedTool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools
}

func (s *server) setVisible(v []string) {
	s.mu.Lock()
	s.visible = v
	s.mu.Unlock()
}

func (s *server) current() *sdk.ClientSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.session
}

func (s *server) markFirst() { s.firstOnce.Do(func() { close(s.first) }) }

// healthyAfter is how long a connection must last for the next reconnect to
// start again from the shortest delay.
const healthyAfter = 10 * time.Second

// run connects, lists tools and waits for the connection to end, again and
// again with backoff, until ctx ends.
func (s *server) run(ctx context.Context) {
	defer s.markFirst()
	backoff := s.opts.MinBackoff
	for ctx.Err() == nil {
		began := time.Now()
		cs, err := s.connect(ctx)
		if err == nil {
			var tools []listedTool
			if tools, err = s.list(ctx, cs); err == nil {
				s.mu.Lock()
				wasDown := s.state == StatusDown
				s.session, s.tools, s.state, s.lastErr = cs, tools, StatusConnected, ""
				s.mu.Unlock()
				_ = s.src.rebuild(false)
				s.markFirst()
				s.log.Info("MCP server connected", "transport", s.cfg.Transport(), "tools", len(tools), "was_down", wasDown)
				why := s.waitEnd(ctx, cs)
				s.mu.Lock()
				s.session, s.tools = nil, nil
				if ctx.Err() == nil {
					s.state, s.lastErr = StatusDown, why
				}
				s.mu.Unlock()
				_ = s.src.rebuild(false)
				if ctx.Err() != nil {
					return
				}
				s.log.Warn("MCP server connection lost; reconnecting", "transport", s.cfg.Transport())
				if time.Since(began) > healthyAfter {
					backoff = s.opts.MinBackoff
				}
			} else {
				_ = cs.Close()
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.mu.Lock()
			first := s.state == StatusConnecting
			s.state, s.lastErr = StatusDown, err.Error()
			s.mu.Unlock()
			s.markFirst()
			if first {
				s.log.Warn("MCP server not available; its tools are missing until it answers", "transport", s.cfg.Transport(), "err", err)
			} else {
				s.log.Debug("MCP server still not available", "err", err, "retry_in", backoff)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, s.opts.MaxBackoff)
	}
}

// waitEnd returns when the session ends (the server closed it or the child
// exited), the server stops answering pings (a hung server, or an HTTP one
// whose connection stays open while it is gone), or ctx ends, closing the
// session in the latter cases. It returns why the connection ended.
func (s *server) waitEnd(ctx context.Context, cs *sdk.ClientSession) string {
	ended := make(chan struct{})
	go func() {
		_ = cs.Wait()
		close(ended)
	}()
	ping := time.NewTicker(s.opts.PingInterval)
	defer ping.Stop()
	for {
		select {
		case <-ended:
			_ = cs.Close()
			return "connection closed"
		case <-ctx.Done():
			_ = cs.Close()
			<-ended
			return "stopped"
		case <-ping.C:
			pctx, cancel := context.WithTimeout(ctx, min(s.opts.PingInterval, 10*time.Second))
			err := cs.Ping(pctx, nil)
			cancel()
			if err != nil && ctx.Err() == nil {
				s.log.Warn("MCP server did not answer a ping; reconnecting", "transport", s.cfg.Transport(), "err", err)
				go func() { _ = cs.Close() }() // a hung server may not answer the close either
				return "no answer to ping: " + err.Error()
			}
		}
	}
}

// connectTimeout bounds one connection attempt (process start or HTTP
// request plus the initialize handshake).
const connectTimeout = 30 * time.Second

func (s *server) connect(ctx context.Context) (*sdk.ClientSession, error) {
	client := sdk.NewClient(&sdk.Implementation{Name: "stackbone", Version: "1"}, &sdk.ClientOptions{
		Logger:             s.opts.Logger,
		Capabilities:       &sdk.ClientCapabilities{},
		ElicitationHandler: s.elicit,
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			go s.refresh()
		},
	})
	var transport sdk.Transport
	if s.cfg.URL != "" {
		hc := *s.opts.HTTPClient
		// Every request carries the trace context of its call (the
		// engine's execute_tool span) as traceparent.
		hc.Transport = telemetry.Transport(&headerTransport{base: hc.Transport, headers: s.cfg.Headers})
		// Few SSE reconnects: a server that went away is marked down within
		// seconds, and run reconnects it with a new session.
		transport = &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: &hc, MaxRetries: 2}
	} else {
		cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
		cmd.Dir = s.src.spec.Dir // the project folder; relative args resolve there
		if cmd.Dir == "" {
			cmd.Dir = s.src.spec.ModelDir()
		}
		cmd.Env = childEnv(s.cfg.Env)
		cmd.Stderr = &lineLogger{log: s.log}
		dieWithParent(cmd)
		transport = &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	cs, err := client.Connect(cctx, transport, nil)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return cs, nil
}

// refresh lists the tools again after notifications/tools/list_changed.
func (s *server) refresh() {
	cs := s.current()
	if cs == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	tools, err := s.list(ctx, cs)
	if err != nil {
		s.log.Warn("MCP server tools/list after list_changed failed", "err", err)
		return
	}
	s.mu.Lock()
	if s.session != cs {
		s.mu.Unlock()
		return
	}
	s.tools = tools
	s.mu.Unlock()
	_ = s.src.rebuild(false)
	s.log.Info("MCP server tools changed", "tools", len(tools))
}

func (s *server) list(ctx context.Context, cs *sdk.ClientSession) ([]listedTool, error) {
	var out []listedTool
	params := &sdk.ListToolsParams{}
	for {
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		for _, t := range res.Tools {
			if !s.cfg.Tools.Takes(t.Name) {
				continue
			}
			out = append(out, listedTool{remote: t.Name, tool: s.convert(t)})
		}
		if res.NextCursor == "" {
			return out, nil
		}
		params = &sdk.ListToolsParams{Cursor: res.NextCursor}
	}
}

func (s *server) convert(t *sdk.Tool) *tool.Tool {
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	remote := t.Name
	name := ToolName(s.cfg.Name, t.Name)
	if n, ok := s.cfg.Tools.Rename[t.Name]; ok {
		name = n
	}
	out := &tool.Tool{
		Name:           name,
		Description:    desc,
		Parameters:     params(t.InputSchema),
		Approval:       needsApproval(s.cfg.Approval, t),
		Idempotent:     t.Annotations != nil && t.Annotations.IdempotentHint,
		MaxResultBytes: s.cfg.MaxResultBytes,
	}
	out.Execute = func(ctx context.Context, call tool.Call) (tool.Result, error) {
		return s.call(ctx, remote, call)
	}
	return out
}

// ToolError is an MCP tool's result with isError set; its message is the
// result's text, which the model sees.
type ToolError struct {
	Server, Tool string
	Message      string
}

// Error returns the tool's error text.
func (e *ToolError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("MCP tool %q of server %q failed", e.Tool, e.Server)
	}
	return e.Message
}

// ErrNotConnected is returned by a call on a server that is down.
var ErrNotConnected = errors.New("MCP server is not connected")

func (s *server) call(ctx context.Context, name string, call tool.Call) (tool.Result, error) {
	cs := s.current()
	if cs == nil {
		return tool.Result{}, fmt.Errorf("%w: %s (tool %s)", ErrNotConnected, s.cfg.Name, name)
	}
	var args map[string]any
	if len(call.Args) > 0 {
		if err := json.Unmarshal(call.Args, &args); err != nil {
			return tool.Result{}, fmt.Errorf("arguments of MCP tool %q: %w", name, err)
		}
	}
	done := s.inFlight(ctx, &call)
	// The trace context travels in _meta too (MCP 2026-07-28), for a
	// server on stdio or behind a proxy that drops the headers.
	params := &sdk.CallToolParams{Name: name, Arguments: args, Meta: telemetry.InjectMeta(ctx, nil)}
	res, err := cs.CallTool(context.WithValue(ctx, callKey{}, &call), params)
	done(err != nil && ctx.Err() != nil)
	if err != nil {
		if msg := err.Error(); s.src.red.String(msg) != msg {
			err = errors.New(s.src.red.String(msg))
		}
		return tool.Result{}, fmt.Errorf("MCP server %s: tools/call %s: %w", s.cfg.Name, name, err)
	}
	text := s.src.red.String(render(res))
	if res.IsError {
		return tool.Result{}, &ToolError{Server: s.cfg.Name, Tool: name, Message: text}
	}
	return tool.Result{Content: text, Parts: images(res)}, nil
}

// images are a result's image content as parts, for the model wires that
// take images in a tool result (the text still describes them for the
// others).
func images(res *sdk.CallToolResult) []message.Part {
	var out []message.Part
	for _, c := range res.Content {
		if im, ok := c.(*sdk.ImageContent); ok && len(im.Data) > 0 {
			out = append(out, message.Part{Type: "image", MediaType: im.MIMEType, Data: base64.StdEncoding.EncodeToString(im.Data)})
		}
	}
	return out
}

// render turns a tool result into the text the model sees: the structured
// content as JSON when the server returned some (the text content is then
// by the spec its serialisation), otherwise the content blocks joined by
// newlines. tool.Result has no parts yet, so images, audio and binary
// resources are described in text.
func render(res *sdk.CallToolResult) string {
	if res.StructuredContent != nil && !res.IsError {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			return string(b)
		}
	}
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s %s]", c.Name, c.URI))
		case *sdk.EmbeddedResource:
			if r := c.Resource; r != nil && r.Text != "" {
				parts = append(parts, r.Text)
			} else if r != nil {
				parts = append(parts, fmt.Sprintf("[resource %s %s, %d bytes]", r.URI, r.MIMEType, len(r.Blob)))
			}
		}
	}
	return strings.Join(parts, "\n")
}

// callKey carries the tool call an MCP request is made for.
type callKey struct{}

// inFlight records a call in flight on this server, with its context (its
// time limit and its run), until done; done(true) says the call ended
// without its result (the server may go on with it).
func (s *server) inFlight(ctx context.Context, c *tool.Call) (done func(abandoned bool)) {
	s.askMu.Lock()
	if s.asking == nil {
		s.asking = map[*tool.Call]context.Context{}
	}
	s.asking[c] = ctx
	s.askMu.Unlock()
	return func(abandoned bool) {
		s.askMu.Lock()
		delete(s.asking, c)
		if abandoned {
			s.abandoned = append(s.abandoned, time.Now())
		}
		s.askMu.Unlock()
	}
}

// callOf finds the call an elicitation request belongs to, with the
// call's context: the one the request's context carries (the 2026-07-28
// revision's multi-round-trip requests), else the one call in flight on
// this server (older revisions send the request on the connection, which
// every tenant's turns share). An unlinked request is ambiguous, and nil,
// with several calls in flight, and while a call that ended without its
// result is recent (abandonedFor): its server may still be asking for it,
// and the question must not reach the human behind another call.
func (s *server) callOf(ctx context.Context) (*tool.Call, context.Context) {
	s.askMu.Lock()
	defer s.askMu.Unlock()
	if c, ok := ctx.Value(callKey{}).(*tool.Call); ok {
		if cctx, ok := s.asking[c]; ok {
			return c, cctx
		}
		return c, ctx
	}
	s.abandoned = slices.DeleteFunc(s.abandoned, func(t time.Time) bool { return time.Since(t) > abandonedFor })
	if len(s.asking) != 1 || len(s.abandoned) > 0 {
		return nil, nil
	}
	for c, cctx := range s.asking {
		return c, cctx
	}
	return nil, nil
}

// elicit answers a server's elicitation request: the question is put to a
// human as a pending decision of the call that asked (tool.Call.Ask) and
// the answer goes back (the engine puts it to the MCP client that started
// the turn first, when there is one). A call no human can be asked for (a
// turn without a session or such a client), a URL-mode request, or a
// request whose call is ambiguous is declined.
func (s *server) elicit(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	c, callCtx := s.callOf(ctx)
	p := req.Params
	if c == nil || c.Ask == nil || p == nil || (p.Mode != "" && p.Mode != "form") {
		s.log.Info("MCP server asked for elicitation; declined (no one to ask for this call)")
		return &sdk.ElicitResult{Action: "decline"}, nil
	}
	// The question reaches decision rows, Studio and the relayed client:
	// the agent's secrets are masked in it like in everything else the
	// server says (a schema that no longer parses asks for any object).
	schema, err := json.Marshal(p.RequestedSchema)
	if err == nil {
		schema = []byte(s.src.red.String(string(schema)))
	}
	if err != nil || string(schema) == "null" || !json.Valid(schema) {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	// The wait belongs to the call: its time limit and its run's end.
	a, err := c.Ask(callCtx, tool.Question{Message: s.src.red.String(p.Message), Schema: schema})
	if err != nil {
		return &sdk.ElicitResult{Action: "cancel"}, nil
	}
	if !a.Accepted {
		return &sdk.ElicitResult{Action: "decline"}, nil
	}
	var content map[string]any
	if err := json.Unmarshal(a.Content, &content); err != nil {
		return &sdk.ElicitResult{Action: "decline"}, nil
	}
	return &sdk.ElicitResult{Action: "accept", Content: content}, nil
}

// headerTransport adds the server's configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (h *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	base := h.base
	if base == nil {
		base = http.DefaultTransport
	}
	if len(h.headers) == 0 {
		return base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return base.RoundTrip(r)
}

// inherited are the variables a stdio server gets from Stackbone's own
// environment; everything else (API keys, database URLs) stays out unless
// the agent file passes it in env.
var inherited = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "TEMP", "TMP", "LANG", "LC_ALL",
	"TZ", "SYSTEMROOT", "SystemRoot", "APPDATA", "LOCALAPPDATA", "USERPROFILE", "NODE_PATH"}

func childEnv(extra map[string]string) []string {
	var env []string
	for _, k := range inherited {
		if v, ok := os.LookupEnv(k); ok {
			if _, over := extra[k]; !over {
				env = append(env, k+"="+v)
			}
		}
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// lineLogger logs a child's stderr line by line.
type lineLogger struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		if line := strings.TrimSpace(string(l.buf[:i])); line != "" {
			l.log.Info("MCP server stderr", "line", line)
		}
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > 64<<10 {
		l.log.Info("MCP server stderr", "line", string(l.buf))
		l.buf = nil
	}
	return len(p), nil
}

var _ io.Writer = (*lineLogger)(nil)

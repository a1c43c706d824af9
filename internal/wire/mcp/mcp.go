// Package mcp serves every agent as a Model Context Protocol tool at /mcp,
// over streamable HTTP, with the official Go SDK's server: coding clients
// (Claude Code, Cursor, VS Code, Codex) list the agents with tools/list and
// run a turn with tools/call.
//
// One endpoint speaks both generations of the protocol. Requests of the
// stateless revision (2026-07-28 and later: no initialize, the version in
// the Mcp-Protocol-Version header) go to the SDK's stateless handler, where a
// pause for a human decision becomes a multi-round-trip elicitation (an
// input-required result the client answers by calling again). Older clients
// (initialize, Mcp-Session-Id) get a session of their own, where the server
// asks them with an elicitation/create request in the middle of the call.
// Either way the engine is the same: a tool call starts a turn, and a
// decision made through elicitation is recorded like any other (decidedVia
// "mcp").
package mcp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
	"github.com/stackbone/stackbone/internal/wire/httpjson"
)

// Route is the path the handler is served at.
const Route = "/mcp"

// Runner is the engine as the MCP tools use it.
type Runner interface {
	// Start starts a turn.
	Start(ctx context.Context, in engine.Input) (*engine.Run, error)
	// Follow streams a durable thread's events from a sequence number on,
	// until the first terminal event.
	Follow(ctx context.Context, tenant, threadID string, from int64) (*engine.Run, error)
	// Decide records a decision on a pending call; the last one of a pause
	// resumes the run.
	Decide(ctx context.Context, tenant, id string, d engine.Decision) (*store.Interrupt, error)
	// Cancel stops the thread's running run, wherever it runs.
	Cancel(ctx context.Context, tenant, threadID string) error
	// Paused is the pause a session of an agent waits in, when the call
	// did not follow it itself (an earlier call's).
	Paused(ctx context.Context, tenant, threadID, agentName string) (*engine.Pause, error)
}

// Store is what the tools read and write themselves: a session's pending
// decisions, when a client comes back with its answers, and the pause a
// call told its client waits on a human decision (store.RunControl's
// WaitingSeq, kept in the store so the next call on the session reports
// its outcome through any replica; the engine's own read of the thread
// tells it, engine.UnreportedPauseError). Everything else about a run the
// engine tells: Runner, engine.Run.Pause.
type Store interface {
	ListInterrupts(ctx context.Context, tenant string, f store.InterruptFilter) ([]store.Interrupt, error)
	SetWaiting(ctx context.Context, tenant, threadID string, seq int64) error
	ClearWaiting(ctx context.Context, tenant, threadID string, seq int64) (bool, error)
}

// Agents is the server's agent registry (reloads replace its agents).
type Agents interface {
	List() []*agent.Spec
}

// Caller is who calls, as the server authenticated the request.
type Caller struct {
	Tenant string
	// Name is how decisions record the caller (decidedBy).
	Name string
	// User is the end user an access token names (nil for a key), and
	// AnyOwner says the caller sees every thread of the tenant (an admin):
	// a session another user owns is not found (engine.Input).
	User     *tool.User
	AnyOwner bool
	// CannotTurn, when set, is why the caller's key may not call tools
	// (its role): every tools/call is refused with it.
	CannotTurn error
	// CannotDecide, when set, is why the caller's key may not decide: its
	// elicitation answers are not recorded and the decisions stay pending.
	CannotDecide error
}

// Config is what the handler needs from the server it is mounted on.
type Config struct {
	Runner Runner
	Store  Store
	Agents Agents
	// Caller returns the authenticated caller of a request (its context).
	Caller func(ctx context.Context) Caller
	Logger *slog.Logger
	// Version is the server's version, reported to clients.
	Version string
	// MaxBodyBytes bounds a request body (the server's limit).
	MaxBodyBytes int64
	// SessionTimeout closes a session-based client's session after that
	// long without a request (DefaultSessionTimeout when zero); the client
	// starts a new one.
	SessionTimeout time.Duration
	// KeepAlive calls ping at the server's keepalive interval until stop is
	// called: while a call's turn runs, a client that asked for progress
	// gets a progress notification each time (so a client that resets its
	// timeout on progress does not give up on a slow model). Nil sends
	// none.
	KeepAlive func(ping func()) (stop func())
}

// DefaultSessionTimeout is Config.SessionTimeout when zero.
const DefaultSessionTimeout = time.Hour

// Handler serves /mcp.
type Handler struct {
	c         Config
	server    *sdk.Server
	stateless *sdk.StreamableHTTPHandler
	sessions  *sdk.StreamableHTTPHandler

	mu     sync.Mutex
	listed map[string]string // tool name → description, as last registered
	synced []*agent.Spec     // the agents listed then (a reload makes new specs)
}

// New builds the handler.
func New(c Config) (*Handler, error) {
	if c.Runner == nil || c.Store == nil || c.Agents == nil || c.Caller == nil {
		return nil, errors.New("mcp: Runner, Store, Agents and Caller are required")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	h := &Handler{c: c, listed: map[string]string{}}
	// A client's protocol mistakes (an unknown session, a malformed
	// message) are the SDK's errors but not the server's: logged at info.
	sdkLog := slog.New(infoCap{c.Logger.Handler()})
	h.server = sdk.NewServer(&sdk.Implementation{Name: "stackbone", Title: "Stackbone", Version: c.Version}, &sdk.ServerOptions{
		Logger:   sdkLog,
		HasTools: true,
		Instructions: "Each tool is a Stackbone agent. Call it with a `message`; pass the same `session` to continue " +
			"a conversation (a session is required for calls that need a human's approval to pause and resume).",
	})
	h.server.AddReceivingMiddleware(undeclared)
	get := func(*http.Request) *sdk.Server { return h.server }
	opts := sdk.StreamableHTTPOptions{
		Logger: sdkLog,
		// The server checks the caller before this handler runs (API keys;
		// the keyless dev server accepts only loopback hosts and origins),
		// and a server behind a proxy on loopback is addressed by its
		// public name: the SDK's own localhost check would refuse it.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        c.MaxBodyBytes,
		// A client of the stateless revision cancels a call by closing
		// its request.
		PropagateRequestCancellation: true,
	}
	st := opts
	st.Stateless = true
	h.stateless = sdk.NewStreamableHTTPHandler(get, &st)
	ss := opts
	ss.SessionTimeout = c.SessionTimeout
	h.sessions = sdk.NewStreamableHTTPHandler(get, &ss)
	if r, ok := c.Agents.(interface{ OnReplace(func()) }); ok {
		// A reload changes the tools at once: connected session-based
		// clients get notifications/tools/list_changed without waiting
		// for the next request.
		r.OnReplace(h.sync)
	}
	h.sync()
	return h, nil
}

// newProtocol is the first revision of the protocol without sessions.
const newProtocol = "2026-07-28"

// Serve serves a request the server authenticated. The body is read first,
// within the server's size and time limits, so a body over the limit or
// too slow is the server's 413 or 408 in its error envelope like on every
// route.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request) error {
	if r.Body != nil && r.Method == http.MethodPost {
		body, err := httpjson.ReadBody(r)
		if err != nil {
			return err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	h.ServeHTTP(w, r)
	return nil
}

// ServeHTTP serves a request the server authenticated: the caller travels
// to the tool handlers as the SDK's token info (which also binds a
// session-based client's session to the key that opened it).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.sync()
	c := h.c.Caller(r.Context())
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	info := &auth.TokenInfo{UserID: c.Tenant + "\x00" + c.Name, Expiration: time.Now().Add(time.Hour),
		Extra: map[string]any{callerKey: c, baseKey: scheme + "://" + r.Host}}
	// The SDK reads token info only from what its bearer-token middleware
	// stored; the verifier hands it the caller the server authenticated.
	verified := auth.RequireBearerToken(func(context.Context, string, *http.Request) (*auth.TokenInfo, error) {
		return info, nil
	}, nil)
	r2 := r.Clone(r.Context())
	if f := strings.Fields(r.Header.Get("Authorization")); len(f) != 2 || !strings.EqualFold(f[0], "bearer") {
		r2.Header.Set("Authorization", "Bearer authenticated") // x-api-key, or the keyless dev server
	}
	next := http.Handler(h.sessions)
	if r.Header.Get("Mcp-Protocol-Version") >= newProtocol {
		next = h.stateless
	} else if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
		if id, ok := needsSession(r2); ok {
			writeRPCError(w, http.StatusBadRequest, id, jsonrpc.CodeInvalidRequest, "Bad Request: no Mcp-Session-Id header. "+
				"Send initialize first and then the session id it returns, or use the stateless protocol (Mcp-Protocol-Version: "+newProtocol+").")
			return
		}
	}
	jw := &rpcErrors{ResponseWriter: w}
	verified(next).ServeHTTP(jw, r2)
	jw.finish()
}

const (
	callerKey = "stackbone.caller"
	baseKey   = "stackbone.base"
)

// caller returns the caller of a tool call and the server's base URL.
func caller(req *sdk.CallToolRequest) (Caller, string) {
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return Caller{}, ""
	}
	c, _ := req.Extra.TokenInfo.Extra[callerKey].(Caller)
	base, _ := req.Extra.TokenInfo.Extra[baseKey].(string)
	return c, base
}

// sync makes the server's tools the registry's agents, one tool each
// (connected session-based clients are told the list changed).
func (h *Handler) sync() {
	specs := h.c.Agents.List()
	h.mu.Lock()
	same := slices.Equal(specs, h.synced)
	h.mu.Unlock()
	if same {
		return // the same agents as at the last request: nothing to redo
	}
	want := make(map[string]string, len(specs))
	for _, s := range specs {
		want[s.Name] = toolDescription(s)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.synced = specs
	var gone []string
	for name := range h.listed {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		sort.Strings(gone)
		h.server.RemoveTools(gone...)
		for _, n := range gone {
			delete(h.listed, n)
		}
	}
	for name, desc := range want {
		if d, ok := h.listed[name]; ok && d == desc {
			continue
		}
		h.server.AddTool(&sdk.Tool{Name: name, Title: name, Description: desc, InputSchema: inputSchema,
			Annotations: &sdk.ToolAnnotations{Title: name, OpenWorldHint: ptr(true)}}, h.call)
		h.listed[name] = desc
	}
}

func ptr[T any](v T) *T { return &v }

// inputSchema is every agent tool's input.
var inputSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"message": map[string]any{"type": "string", "description": "What to ask the agent (the user's message)."},
		"session": map[string]any{"type": "string", "description": "A conversation id of your choice. Calls with the same " +
			"session continue one stored conversation, and only they can pause for a human's approval and resume; " +
			"without one the turn is stateless and nothing is kept."},
	},
	"required":             []string{"message"},
	"additionalProperties": false,
}

// toolDescription describes an agent for the clients: its description, or
// the first line of its instructions.
func toolDescription(s *agent.Spec) string {
	d := strings.TrimSpace(s.Description)
	if d == "" {
		for _, line := range strings.Split(s.Instructions, "\n") {
			if line = strings.TrimSpace(line); line != "" {
				d = line
				break
			}
		}
	}
	if len(d) > 1000 {
		d = d[:1000] + "…"
	}
	tail := "Runs a turn of the Stackbone agent " + s.Name + " and returns its answer."
	if d == "" {
		return tail
	}
	return d + "\n\n" + tail
}

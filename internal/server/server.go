// Package server is Stackbone's HTTP surface: one listener, the one turn
// handler every wire plugs into (Mount), the control plane (decisions, threads), operations endpoints, and the
// middleware every route shares (request id, recover, auth, body limits,
// metrics, one error mapper per wire).
package server

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/auth"
	"github.com/stackbone/stackbone/internal/clock"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/decision"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/ids"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/telemetry"
	"github.com/stackbone/stackbone/internal/wire"
	"github.com/stackbone/stackbone/internal/wire/openai"
)

// Wire names the envelope a route's errors are written in.
type Wire int

// The wires.
const (
	WireOpenAI Wire = iota
	WireAnthropic
	WireAGUI
	WireResponses
	// WireA2A is the envelope of the A2A routes: a JSON-RPC error object.
	WireA2A
)

// ErrorWriter writes an error response in a wire's envelope.
type ErrorWriter func(w http.ResponseWriter, e *apierror.Error) error

// Server holds the HTTP handlers.
type Server struct {
	Config  *config.Config
	Runner  *engine.Runner
	Store   store.Store
	Agents  *agent.Registry
	Logger  *slog.Logger
	Metrics *Metrics
	// Clock is the server's clock, the clock for response timestamps.
	Clock clock.Clock
	// KeepAliveInterval is how often idle streams get a keepalive
	// (DefaultKeepAliveInterval when zero).
	KeepAliveInterval time.Duration

	// CookieAuth, when set, authenticates requests that carry no API key
	// (Studio's session cookie). ok is false when the request has no such
	// credential; a non-nil error rejects the request (e.g. a bad CSRF token).
	CookieAuth func(r *http.Request) (p Principal, ok bool, err error)

	// Version is the build's version, as A2A Agent Cards give it.
	Version string

	// Scheduler runs schedules at once (POST /v1/schedules/{id}/run); nil
	// refuses that route.
	Scheduler Scheduler

	// jwt checks end users' bearer tokens (nil: none are accepted).
	jwt *auth.Verifier
	// hook is the project's auth.ts (nil: none).
	hook auth.Hook
	// public is the base URL clients reach the server at, once known
	// (SetPublicURL; config.PublicURL wins).
	publicMu sync.Mutex
	public   string

	mux     *http.ServeMux
	tracing *telemetry.HTTPServer // nil when tracing is off
	writers map[Wire]ErrorWriter
	// formats are the streaming formats of the mounted wires, by name
	// (GET /v1/threads/{id}/runs/{run}/stream?format=).
	formats map[string]wire.RunStreamer
	streams streamSet // event streams taken off net/http (Stream)
	// probing is held by the /healthz call that writes a probe, so that
	// there is one at a time.
	probing chan struct{}
}

// Config is what New builds a Server from. Settings and Runner are
// required.
type Config struct {
	// Settings is the server's configuration.
	Settings *config.Config
	// Runner runs the turns; the server reads its store and agents.
	Runner *engine.Runner
	// Metrics are served at /metrics; build them with NewMetrics before
	// the runner so the runner reports to them (Metrics.RunHooks). When
	// nil, New registers metrics on a registry of its own.
	Metrics *Metrics
	Logger  *slog.Logger
	// Clock is the clock of response timestamps (the real one when nil).
	Clock clock.Clock
	// KeepAliveInterval is how often idle streams get a keepalive
	// (DefaultKeepAliveInterval when zero).
	KeepAliveInterval time.Duration
	// AuthHook, when set, authenticates the requests no configured key
	// and no end user's JWT did (the project's auth.ts).
	AuthHook auth.Hook
	// Tracer makes the SERVER span of every request, parented on the
	// caller's traceparent, in the request's context (so the turn's spans
	// are its children). Nil or the no-op provider: no span work at all.
	Tracer trace.TracerProvider
}

// New validates cfg and builds a server and its routes.
func New(cfg Config) (*Server, error) {
	if cfg.Settings == nil || cfg.Runner == nil {
		return nil, errors.New("server: Settings and Runner are required")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{Config: cfg.Settings, Runner: cfg.Runner, Store: cfg.Runner.Store, Agents: cfg.Runner.Agents, Logger: logger,
		Clock: clock.Or(cfg.Clock), Metrics: cfg.Metrics, KeepAliveInterval: cfg.KeepAliveInterval,
		mux: http.NewServeMux(), tracing: telemetry.NewHTTPServer(cfg.Tracer), writers: map[Wire]ErrorWriter{WireOpenAI: openai.WriteError, WireAGUI: openai.WriteError},
		probing: make(chan struct{}, 1)}
	if s.Metrics == nil {
		s.Metrics = NewMetrics(prometheus.NewRegistry(), cfg.Runner.Store)
	}
	if j := cfg.Settings.JWT; j.Issuer != "" {
		v, err := auth.NewVerifier(auth.Config{Issuer: j.Issuer, JWKSURL: j.JWKSURL, TenantClaim: j.TenantClaim,
			RoleClaim: j.RoleClaim, Now: s.Now, Logger: logger})
		if err != nil {
			return nil, err
		}
		s.jwt = v
	}
	s.hook = cfg.AuthHook
	s.routes(s.Metrics.reg)
	return s, nil
}

// JWT is the verifier of end users' tokens (nil when no issuer is set).
func (s *Server) JWT() *auth.Verifier { return s.jwt }

// Now is the time on the server's clock.
func (s *Server) Now() time.Time { return s.Clock.Now() }

// SetErrorWriter installs the error envelope of a wire.
func (s *Server) SetErrorWriter(w Wire, f ErrorWriter) { s.writers[w] = f }

// Handle registers an extra route (wires added by other packages).
func (s *Server) Handle(pattern string, wire Wire, auth bool, h HandlerFunc) {
	s.mux.Handle(pattern, s.wrap(pattern, wire, auth, h))
}

// ServeHTTP serves a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// HandlerFunc is a handler that returns its error for the wire's mapper.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

func (s *Server) routes(reg *prometheus.Registry) {
	s.Mount(WireOpenAI, openai.NewWire(s.Now))
	s.Handle("GET /v1/models", WireOpenAI, true, s.models)
	s.Handle("GET /v1/models/{id}", WireOpenAI, true, s.model)
	s.Handle("GET /v1/agents/{name}", WireOpenAI, true, s.agentInfo)
	s.Handle("GET /v1/hitl", WireOpenAI, true, s.listDecisions)
	s.Handle("GET /v1/hitl/{id}", WireOpenAI, true, s.getDecision)
	s.Handle("POST /v1/hitl/{id}/approve", WireOpenAI, true, s.deciding(s.approve))
	s.Handle("POST /v1/hitl/{id}/reject", WireOpenAI, true, s.deciding(s.reject))
	s.Handle("POST /v1/hitl/{id}/retry", WireOpenAI, true, s.deciding(s.retry))
	s.Handle("POST /v1/hitl/{id}/skip", WireOpenAI, true, s.deciding(s.skip))
	s.Handle("GET /v1/threads", WireOpenAI, true, s.listThreads)
	// Every route of one thread: another user's thread is not found.
	s.Handle("GET /v1/threads/{id}", WireOpenAI, true, s.owned(s.getThread))
	s.Handle("GET /v1/threads/{id}/branches", WireOpenAI, true, s.owned(s.listBranches))
	s.Handle("GET /v1/threads/{id}/state", WireOpenAI, true, s.owned(s.threadState))
	s.Handle("POST /v1/threads/{id}/head", WireOpenAI, true, turnAction(s.owned(s.setHead)))
	s.Handle("POST /v1/threads/{id}/fork", WireOpenAI, true, turnAction(s.owned(s.fork)))
	s.Handle("POST /v1/threads/{id}/cancel", WireOpenAI, true, turnAction(s.owned(s.cancelThread)))
	s.Handle("GET /v1/threads/{id}/queue", WireOpenAI, true, s.owned(s.listQueue))
	s.Handle("DELETE /v1/threads/{id}/queue/{run}", WireOpenAI, true, turnAction(s.owned(s.unqueue)))
	s.Handle("GET /v1/threads/{id}/events", WireOpenAI, true, s.owned(s.threadEvents))
	s.Handle("GET /v1/threads/{id}/runs", WireOpenAI, true, s.owned(s.listRuns))
	s.Handle("GET /v1/threads/{id}/runs/{run}/stream", WireOpenAI, true, s.owned(s.streamRun))
	s.Handle("GET /v1/runs/{id}", WireOpenAI, true, s.getRun)
	s.Handle("GET /v1/usage", WireOpenAI, true, TenantWide(s.usageReport))
	s.Handle("GET /v1/webhooks/deliveries", WireOpenAI, true, TenantWide(s.listDeliveries))
	s.scheduleRoutes()
	s.a2aRoutes()
	s.memoryRoutes()
	s.oauthRoutes()
	s.Handle("GET /healthz", WireOpenAI, false, s.healthz)
	s.mux.Handle("GET /metrics", s.tracing.Middleware("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	s.Handle("HEAD /{$}", WireOpenAI, false, func(w http.ResponseWriter, r *http.Request) error { return nil })
	s.Handle("/", WireOpenAI, false, func(w http.ResponseWriter, r *http.Request) error {
		return apierror.New(apierror.NotFound, "unknown_route", fmt.Sprintf("No route %s %s.", r.Method, r.URL.Path))
	})
}

type ctxKey int

const (
	principalKey ctxKey = iota
	requestIDKey
)

// Principal is who is calling.
type Principal struct {
	Tenant string
	// Name is how decisions record the caller.
	Name string
	// Via, when set, is the decidedVia the credential proves (Studio's
	// session cookie: "studio").
	Via string
	// Role is what the caller's key may do (admin when empty).
	Role config.Role
	// User is the end user an access token names (zero for a key): Name
	// is then the user's ID.
	User auth.User
	// ReadsAllThreads is set on an approver when the operator lets
	// approvers read every thread of the tenant
	// (STACKBONE_APPROVERS_READ_THREADS).
	ReadsAllThreads bool
}

// CodeForbiddenRole is the error code of a request the caller's key role
// does not allow (403).
const CodeForbiddenRole = apierror.CodeForbiddenRole

// Action is what a request does, as far as key roles care.
type Action int

const (
	// ActTurn starts a turn (chat, messages, responses, AG-UI, MCP tools/call).
	ActTurn Action = iota
	// ActDecide decides a pending decision (the /v1/hitl decision routes,
	// an AG-UI resume, an MCP elicitation answer).
	ActDecide
	// ActAdmin changes what the tenant's server does on its own (creating,
	// changing, deleting and running schedules): admin keys only.
	ActAdmin
	// ActMemory writes the memory store (PUT and DELETE /v1/store/items):
	// admin and caller keys, as turns, whose tools write it too; approver
	// keys only read it.
	ActMemory
)

// Allow is the one check of key roles: nil when p's role may take act,
// else a 403 with code forbidden_role. param names where the refused part
// of the request is (may be empty).
func (p Principal) Allow(act Action, param string) error {
	var msg string
	endUser := p.User.ID != ""
	switch {
	case act == ActTurn && !p.Role.CanTurn():
		msg = p.Role.Refusal(endUser, "start turns", "caller or admin")
	case act == ActMemory && !p.Role.CanTurn():
		msg = p.Role.Refusal(endUser, "write the memory store", "caller or admin")
	case act == ActAdmin && p.Role != "" && p.Role != config.RoleAdmin:
		msg = p.Role.Refusal(endUser, "change schedules", "admin")
	case act == ActDecide:
		// Who may decide is the decision package's rule.
		var re *decision.RoleError
		if !errors.As(decision.AllowRole(p.Role), &re) {
			return nil
		}
		re.EndUser = endUser
		msg = re.Error()
	default:
		return nil
	}
	e := apierror.New(apierror.Permission, CodeForbiddenRole, msg)
	e.Param = param
	return e
}

// PrincipalFrom returns the caller of an authenticated request.
func PrincipalFrom(ctx context.Context) Principal {
	p, _ := ctx.Value(principalKey).(Principal)
	return p
}

// KeyPrincipal is the caller an API key authenticates: its tenant, its
// label as the name decisions record, and its role.
func KeyPrincipal(k config.Key) Principal {
	name := k.Label
	if name == "" {
		name = k.Tenant
	}
	return Principal{Tenant: k.Tenant, Name: name, Role: k.Role}
}

// WithVia is p with the decidedVia its credential proves.
func (p Principal) WithVia(via string) Principal {
	p.Via = via
	return p
}

// DevTenant is the tenant of unauthenticated calls in dev mode.
const DevTenant = "dev"

// Authenticate resolves the caller from Authorization: Bearer or x-api-key
// (a configured key first, then an end user's JWT, then the project's
// auth.ts hook), else Studio's session cookie, else the open dev server.
func (s *Server) Authenticate(r *http.Request) (Principal, error) {
	p, err := s.authenticate(r)
	if err == nil && p.Role == config.RoleApprover && s.Config.JWT.ApproversReadThreads {
		p.ReadsAllThreads = true
	}
	return p, err
}

func (s *Server) authenticate(r *http.Request) (Principal, error) {
	key := r.Header.Get("x-api-key")
	if key == "" {
		// The scheme is case-insensitive (RFC 7235).
		if scheme, v, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
			key = strings.TrimSpace(v)
		}
	}
	if key == "" && s.CookieAuth != nil {
		if p, ok, err := s.CookieAuth(r); ok || err != nil {
			return p, err
		}
	}
	if key != "" {
		for _, k := range s.Config.Keys {
			if subtle.ConstantTimeCompare([]byte(k.Secret), []byte(key)) == 1 {
				return KeyPrincipal(k), nil
			}
		}
		if s.jwt != nil && auth.LooksLikeJWT(key) {
			// A token that fails is refused, whatever the mode: the
			// caller meant to be someone.
			return s.tokenPrincipal(r, key)
		}
	}
	if s.hook != nil {
		if p, ok, err := s.hookPrincipal(r); ok || err != nil {
			return p, err
		}
	}
	if s.Config.Open() {
		if err := localOnly(r); err != nil {
			return Principal{}, err
		}
		return Principal{Tenant: DevTenant, Name: "dev"}, nil
	}
	msg := "Missing API key: send it as `Authorization: Bearer <key>` or `x-api-key: <key>`."
	if key != "" {
		msg = "Invalid API key."
	}
	e := apierror.New(apierror.Authentication, "invalid_api_key", msg)
	return Principal{}, e
}

// Error codes of the auth.ts hook: a request it refused (401), an
// identity it returned that is not one (500).
const (
	CodeHookRefused = "unauthenticated"
	CodeHookInvalid = "auth_hook_invalid"
)

// hookPrincipal asks the project's auth.ts about r: ok is false when it
// returned nothing (no opinion).
func (s *Server) hookPrincipal(r *http.Request) (Principal, bool, error) {
	id, err := s.hook.Authenticate(r.Context(), auth.NewRequest(r))
	if err != nil {
		he, _ := auth.IsHookError(err)
		if he == nil {
			he = &auth.HookError{Kind: auth.HookUnavailable, Err: err}
		}
		var e *apierror.Error
		switch he.Kind {
		case auth.HookRefused:
			msg := "Not authenticated."
			if he.Public != "" {
				msg = "Not authenticated: " + he.Public
			}
			e = apierror.New(apierror.Authentication, CodeHookRefused, msg)
		case auth.HookInvalid:
			e = apierror.New(apierror.Internal, CodeHookInvalid, "The server's auth.ts hook is broken: "+he.Public+".")
		default:
			msg := "The request cannot be authenticated now: the auth.ts hook failed. Retry shortly."
			if he.Public != "" {
				msg = "The request cannot be authenticated now: " + he.Public + ". Retry shortly."
			}
			e = apierror.New(apierror.Unavailable, "auth_unavailable", msg)
			e.RetryAfter = 5 * time.Second
		}
		e.Err = err
		return Principal{}, true, e
	}
	if id == nil {
		return Principal{}, false, nil
	}
	if id.User.ID == "" {
		return Principal{Tenant: id.Tenant, Name: id.Tenant, Role: id.Role}, true, nil
	}
	return Principal{Tenant: id.Tenant, Name: id.User.ID, Role: id.Role, User: id.User}, true, nil
}

// CodeInvalidToken is the error code of a 401 to an access token that is
// not valid here (expired, for another audience or issuer, badly signed).
const CodeInvalidToken = "invalid_token"

// tokenPrincipal is the caller an end user's access token names.
func (s *Server) tokenPrincipal(r *http.Request, token string) (Principal, error) {
	id, err := s.jwt.Verify(r.Context(), token, s.audiences())
	if err != nil {
		reason := "it is not valid"
		if te := (*auth.TokenError)(nil); errors.As(err, &te) {
			reason = te.Reason
			if te.Unavailable {
				// The provider is down: not the token's fault.
				e := apierror.New(apierror.Unavailable, "auth_unavailable",
					"The access token cannot be checked now: the identity provider's keys could not be read. Retry shortly.")
				e.RetryAfter, e.Err = 5*time.Second, err
				return Principal{}, e
			}
		}
		e := apierror.New(apierror.Authentication, CodeInvalidToken, "Invalid access token: "+reason+".")
		e.Err = err
		return Principal{}, e
	}
	return Principal{Tenant: id.Tenant, Name: id.User.ID, Role: id.Role, User: id.User}, nil
}

// audiences are the aud values a token for this server may carry: the
// configured ones, the MCP route's resource and the server's own URL (the
// resource of the root metadata document).
func (s *Server) audiences() []string {
	out := append([]string{}, s.Config.JWT.Audiences...)
	if pub := s.PublicURL(); pub != "" {
		out = append(out, pub+MCPRoute, pub)
	}
	return out
}

// challenge is the WWW-Authenticate of a 401 on route: Bearer, with the
// error of a token refused (RFC 6750 §3.1) and, when end users' tokens are
// accepted, where the protected resource's metadata is (RFC 9728 §5.1):
// the MCP route's own document there, the server's elsewhere.
func (s *Server) challenge(route string, err error) string {
	c := `Bearer realm="stackbone"`
	if apierror.From(err).Code == CodeInvalidToken {
		c += `, error="invalid_token"`
	}
	if s.jwt != nil && s.PublicURL() != "" {
		doc := s.PublicURL() + ResourceMetadataPath
		if _, path, _ := strings.Cut(route, " "); path == MCPRoute {
			doc += MCPRoute
		}
		c += `, resource_metadata="` + doc + `"`
	}
	return c
}

// MCPRoute is the path of the MCP wire, the protected resource OAuth
// clients ask tokens for.
const MCPRoute = "/mcp"

// SetPublicURL sets the base URL clients reach the server at, once its
// address is known, unless the configuration names one (PublicURL).
func (s *Server) SetPublicURL(u string) {
	s.publicMu.Lock()
	defer s.publicMu.Unlock()
	s.public = strings.TrimRight(u, "/")
}

// PublicURL is the base URL clients reach the server at: the configured
// one, else what SetPublicURL was told ("" before).
func (s *Server) PublicURL() string {
	if s.Config.PublicURL != "" {
		return s.Config.PublicURL
	}
	s.publicMu.Lock()
	defer s.publicMu.Unlock()
	return s.public
}

// localOnly guards the keyless dev server against pages on other sites: a
// request must name a loopback host (no DNS rebinding), and a state-changing
// one from a browser must come from a loopback origin.
func localOnly(r *http.Request) error {
	forbidden := func(msg string) error { return apierror.New(apierror.Permission, "not_local", msg) }
	if !isLocalHost(r.Host) {
		return forbidden("The dev server answers only requests addressed to localhost or a loopback address.")
	}
	if o := r.Header.Get("Origin"); o != "" && r.Method != http.MethodGet && r.Method != http.MethodHead {
		u, err := url.Parse(o)
		if err != nil || !isLocalHost(u.Host) {
			return forbidden("The dev server refuses state-changing requests from other sites.")
		}
	}
	return nil
}

func isLocalHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// StatusClientClosed is the status /metrics counts for a request whose
// client hung up before its response was complete (nginx's 499).
const StatusClientClosed = 499

type statusWriter struct {
	http.ResponseWriter
	status int
	// failed is set when a write to the client failed (it hung up).
	failed bool
	// final is the status the request is counted with, once known.
	final int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	if err != nil {
		w.failed = true
	}
	return n, err
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// wrap adds the server span (when tracing is on), request id, recover,
// auth, body limit, metrics and error mapping.
func (s *Server) wrap(route string, wire Wire, auth bool, h HandlerFunc) http.Handler {
	traced := s.tracing.Route(route) // nil when tracing is off
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		if traced != nil {
			var span telemetry.ServerSpan
			r, span = traced.Start(r)
			// The span ends with the status the metrics count (499 for a
			// client gone), or the one written when a handler aborted
			// (http.ErrAbortHandler).
			defer func() { span.End(cmp.Or(sw.final, sw.status)) }()
		}
		rid := r.Header.Get("x-request-id")
		if rid == "" || len(rid) > 128 {
			rid = ids.New("req")
		}
		sw.Header().Set("x-request-id", rid)
		if wire == WireAnthropic {
			sw.Header().Set("request-id", rid)
		}
		ctx := context.WithValue(r.Context(), requestIDKey, rid)
		r = r.WithContext(ctx)
		if r.ContentLength != 0 && s.Config.BodyTimeout > 0 {
			// A body has BodyTimeout to arrive (a stalled one ends in 408).
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.Config.BodyTimeout))
		}
		r.Body = http.MaxBytesReader(sw, r.Body, s.Config.MaxBodyBytes)
		if overCap(r) {
			// One answer on a connection over its address's cap, then it
			// closes: the health check is served, anything else refused
			// in the wire's envelope.
			sw.Header().Set("Connection", "close")
		}
		err := func() (err error) {
			if overCap(r) && route != "GET /healthz" {
				e := apierror.New(apierror.Unavailable, "too_many_connections",
					"Too many open connections from your address: close some (event streams you no longer read) and retry.")
				e.RetryAfter = time.Second
				return e
			}
			defer func() {
				if p := recover(); p != nil {
					if p == http.ErrAbortHandler {
						panic(p)
					}
					err = fmt.Errorf("panic: %v", p)
				}
			}()
			if auth {
				p, err := s.Authenticate(r)
				if err != nil {
					// RFC 9110: a 401 names the scheme to use (MCP
					// clients look for it).
					if apierror.From(err).Kind != apierror.Unavailable { // not the credential's fault
						sw.Header().Set("WWW-Authenticate", s.challenge(route, err))
					}
					if r.ContentLength != 0 {
						// Answer without reading (or waiting for) the
						// body, and close the connection.
						sw.Header().Set("Connection", "close")
						_ = http.NewResponseController(w).SetReadDeadline(time.Now())
					}
					return err
				}
				r = r.WithContext(context.WithValue(r.Context(), principalKey, p))
			}
			return h(sw, r)
		}()
		// The request's context ends early when the client hangs up: a
		// server-side failure then (a cancelled run) or a failed write is
		// the client's doing, logged at info and counted as 499.
		gone := r.Context().Err() != nil
		closed := gone && sw.failed
		if err != nil {
			if gone && apierror.From(err).Status >= 500 {
				closed = true
			} else {
				s.writeError(sw, r, wire, err, rid)
			}
		}
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		if closed {
			status = StatusClientClosed
			s.Logger.Info("request ended: the client closed the connection", "request_id", rid, "method", r.Method, "path", r.URL.Path)
		}
		sw.final = status
		s.Metrics.observeRequest(route, status, time.Since(start))
	})
}

func (s *Server) writeError(w *statusWriter, r *http.Request, wire Wire, err error, rid string) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		err = apierror.New(apierror.TooLarge, "request_too_large", fmt.Sprintf("The request body is larger than the limit of %d bytes.", mbe.Limit))
	}
	ae := apierror.From(err)
	if wire == WireOpenAI && r.Header.Get("anthropic-version") != "" {
		wire = WireAnthropic // an Anthropic SDK on a shared route (models, unknown paths)
		w.Header().Set("request-id", rid)
	}
	level := slog.LevelInfo
	if ae.Status >= 500 {
		level = slog.LevelError
	}
	s.Logger.Log(r.Context(), level, "request failed", "request_id", rid, "method", r.Method, "path", r.URL.Path,
		"status", ae.Status, "code", ae.Code, "err", err)
	if w.status != 0 {
		return // the response already started; the wire reported in-stream
	}
	if werr := s.writers[wire](w, ae); werr != nil {
		s.Logger.Debug("write error response", "err", werr)
	}
}

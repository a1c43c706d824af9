// Package app wires a configured Stackbone server together: store, agents,
// model providers, engine, HTTP server, reloads and recovery.
package app

import (
	"context"
	"errors"
	"fmt"
	"github.com/stackbone/stackbone/internal/tool/a2aclient"
	"github.com/stackbone/stackbone/internal/usage"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/agent/tsload"
	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/auth"
	"github.com/stackbone/stackbone/internal/clock"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/memory"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/providers"
	"github.com/stackbone/stackbone/internal/notify"
	"github.com/stackbone/stackbone/internal/redact"
	"github.com/stackbone/stackbone/internal/schedule"
	"github.com/stackbone/stackbone/internal/server"
	"github.com/stackbone/stackbone/internal/ssrf"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/store/postgres"
	"github.com/stackbone/stackbone/internal/store/sqlite"
	"github.com/stackbone/stackbone/internal/studio"
	"github.com/stackbone/stackbone/internal/telemetry"
	"github.com/stackbone/stackbone/internal/tool"
	"github.com/stackbone/stackbone/internal/tool/mcp"
	"github.com/stackbone/stackbone/internal/wire/a2a"
	"github.com/stackbone/stackbone/internal/wire/agui"
	"github.com/stackbone/stackbone/internal/wire/anthropic"
	mcpwire "github.com/stackbone/stackbone/internal/wire/mcp"
	"github.com/stackbone/stackbone/internal/wire/responses"
)

// Version is the build's version, set with -ldflags.
var Version = "0.1.0-dev"

// Logger builds the process logger from the config. Everything it writes is
// redacted (internal/redact): the provider keys, the Stackbone API keys and
// every *_API_KEY of the environment and of DIR/.env never reach the log, nor do bearer
// tokens and "sk-…" keys in text such as an upstream's error.
func Logger(cfg *config.Config, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	environ := os.Environ()
	if dotenv, err := config.ReadDotEnv(cfg.Dir); err == nil {
		for k, v := range dotenv {
			environ = append(environ, k+"="+v)
		}
	}
	return slog.New(redact.NewHandler(h, redact.New(Secrets(cfg, environ)...)))
}

// Secrets lists what the log must never show: the configured provider and
// Stackbone API keys, and the value of every environment variable (environ
// is "NAME=value" entries) whose name ends in _API_KEY (tools' keys, the
// CLI's STACKBONE_API_KEY).
func Secrets(cfg *config.Config, environ []string) []string {
	out := []string{cfg.OpenAIKey, cfg.AnthropicKey, cfg.WebhookSecret}
	for _, k := range cfg.Keys {
		out = append(out, k.Secret)
	}
	for _, kv := range environ {
		if name, v, ok := strings.Cut(kv, "="); ok && strings.HasSuffix(name, "_API_KEY") {
			out = append(out, strings.TrimSpace(v))
		}
	}
	return out
}

// OpenStore opens the store the config names. The store reads the
// config's clock, and writes webhook notices when webhooks are configured.
func OpenStore(ctx context.Context, cfg *config.Config, logger *slog.Logger) (store.Store, error) {
	var s interface {
		store.Store
		SetClock(clock.Clock)
	}
	var err error
	if p := cfg.SQLitePath(); p != "" {
		s, err = sqlite.Open(ctx, p, logger)
	} else {
		s, err = postgres.Open(ctx, cfg.DB, logger)
	}
	if err != nil {
		return nil, err
	}
	s.SetClock(cfg.Clock)
	s.SetWebhooks(store.WebhookRefs(cfg.WebhookURLs)) // rows never hold a URL's token
	s.SetPushEncoder(PushEncoder)
	return s, nil
}

// PushEncoder encodes the A2A push notifications the store queues: a
// task's status updates (a2a.PushBody), the task id filled in per config.
func PushEncoder(contextID string, e event.Event) ([]byte, bool) {
	return a2a.PushBody(store.PushTaskID, contextID, e)
}

// NewDispatcher is the outbox's dispatcher over st: the configured
// webhooks' notices and the A2A push notifications, sent with the SSRF
// rules unless STACKBONE_A2A_PUSH_ALLOW_PRIVATE.
func NewDispatcher(cfg *config.Config, st store.Store, logger *slog.Logger) (*notify.Dispatcher, error) {
	return notify.New(notify.Config{Store: st, Endpoints: cfg.WebhookURLs, Secret: cfg.WebhookSecret,
		Format: cfg.WebhookFormat, Logger: logger, Clock: cfg.Clock, Version: Version, Tracer: cfg.Tracer,
		Push: st, PushClient: ssrf.Client(notify.DefaultTimeout, cfg.A2APushAllowPrivate)})
}

// LoadAgents loads DIR/agents/*.ts (agents' env and ${VAR} references read
// the process environment, then DIR/.env) and checks every agent's model
// reference resolves (a scripted model's script file exists and parses).
func LoadAgents(ctx context.Context, cfg *config.Config, models model.Resolver, logger *slog.Logger) ([]*agent.Spec, error) {
	specs, err := CheckAgents(ctx, cfg, models, logger)
	if err != nil {
		return nil, err
	}
	// MCP servers: a server that does not answer within the wait does not
	// fail the load; its tools appear when it does.
	if err := mcp.Start(ctx, specs, mcp.Options{Logger: logger}); err != nil {
		closeSpecs(specs)
		return nil, err
	}
	return specs, nil
}

// CheckAgents loads DIR/agents and resolves each agent's model, as
// LoadAgents does, without starting MCP servers (`stackbone agents check`).
func CheckAgents(ctx context.Context, cfg *config.Config, models model.Resolver, logger *slog.Logger) ([]*agent.Spec, error) {
	// DIR/.env is read at every load, so a reload sees its edits.
	dotenv, err := config.ReadDotEnv(cfg.Dir)
	if err != nil {
		return nil, err
	}
	specs, err := tsload.LoadDir(ctx, cfg.Dir, tsload.Options{Logger: logger, HTTPClient: fetchClient,
		LookupEnv: config.EnvLookup(dotenv)})
	if err != nil {
		return nil, err
	}
	// Agents' env values and MCP header and env values never reach the
	// log, whichever logger line carries them.
	for _, s := range specs {
		redact.AddSecrets(logger, s.Secrets...)
	}
	var errs []error
	for _, s := range specs {
		for _, ref := range append([]string{s.Model}, s.Fallbacks...) {
			if _, _, err := models.Resolve(ref, s.ModelDir()); err != nil {
				errs = append(errs, fmt.Errorf("%s: agent %s: %w", RelSource(cfg.Dir, s.Source), s.Name, err))
			}
		}
	}
	for _, s := range specs {
		if _, err := schedule.FileSchedules([]*agent.Spec{s}, time.Now()); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", RelSource(cfg.Dir, s.Source), err))
		}
	}
	errs = append(errs, checkQuorumKeys(cfg, specs)...)
	if len(errs) > 0 {
		closeSpecs(specs)
		return nil, errors.Join(errs...)
	}
	return specs, nil
}

// LoadAuthHook loads the project's auth.ts (DIR/auth.ts) when there is
// one, in goja runtimes like the agents' (nil when there is none). It is
// read once, at start.
func LoadAuthHook(cfg *config.Config, logger *slog.Logger) (auth.Hook, error) {
	dotenv, err := config.ReadDotEnv(cfg.Dir)
	if err != nil {
		return nil, err
	}
	h, err := tsload.LoadAuth(context.Background(), cfg.Dir, 0, tsload.Options{Logger: logger, HTTPClient: fetchClient,
		LookupEnv: config.EnvLookup(dotenv)})
	if err != nil || h == nil {
		return nil, err
	}
	logger.Info("auth.ts loaded: requests no key or token authenticates are asked to it")
	return h, nil
}

// fetchClient serves the tools' ctx.fetch: http.DefaultClient's transport,
// carrying the trace context of the tool's span.
var fetchClient = telemetry.Client(http.DefaultClient)

// checkQuorumKeys refuses a tool that needs approvals from several
// principals while keys that may decide share a label (unlabelled approver
// keys of one tenant): decisions count principals by label, so those keys
// would be one principal and the quorum could not be met as meant.
func checkQuorumKeys(cfg *config.Config, specs []*agent.Spec) []error {
	shared := cfg.SharedDeciderLabels()
	if len(shared) == 0 {
		return nil
	}
	var errs []error
	quorum := func(s *agent.Spec, name string, ap *tool.Approval) {
		if ap != nil && ap.Approvals > 1 {
			errs = append(errs, fmt.Errorf("%s: agent %s: tool %s needs %d approvals from distinct principals, but %s: a quorum counts keys by label, so give each approver key its own label (STACKBONE_API_KEYS=\"tenant:secret:approver:NAME,…\")",
				RelSource(cfg.Dir, s.Source), s.Name, name, ap.Approvals, strings.Join(shared, "; ")))
		}
	}
	for _, s := range specs {
		for _, t := range s.Tools {
			quorum(s, t.Name, t.Approval)
		}
		for _, m := range s.MCPServers {
			for name, ap := range m.Approval.Tools {
				quorum(s, m.Name+"_"+name, ap)
			}
		}
	}
	return errs
}

// RelSource is an agent file's path relative to the project folder, as the
// loader's file:line:col errors name it ("agents/a.ts").
func RelSource(dir, source string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return source
	}
	if rel, err := filepath.Rel(abs, source); err == nil && filepath.IsLocal(rel) {
		return filepath.ToSlash(rel)
	}
	return source
}

// Models builds the model resolver from the config and the providers of
// DIR/stackbone.json (their ${NAME} references read from the process
// environment, then DIR/.env). A bad stackbone.json is an error naming the
// file and the field. The providers' keys become secrets of logger.
func Models(cfg *config.Config, logger *slog.Logger) (*providers.Resolver, error) {
	dotenv, err := config.ReadDotEnv(cfg.Dir)
	if err != nil {
		return nil, err
	}
	custom, err := providers.LoadFile(cfg.Dir, config.EnvLookup(dotenv))
	if err != nil {
		return nil, err
	}
	// A provider's key, whatever its name or shape, never reaches the log
	// (an upstream error that echoes it).
	for _, c := range custom {
		redact.AddSecrets(logger, c.APIKey)
	}
	return providers.New(providers.Config{OpenAIBaseURL: cfg.OpenAIBaseURL, OpenAIKey: cfg.OpenAIKey,
		AnthropicBaseURL: cfg.AnthropicBaseURL, AnthropicKey: cfg.AnthropicKey, OllamaHost: cfg.OllamaHost, Logger: logger,
		Custom: custom}), nil
}

// Serve runs the server until ctx ends; the bound address is logged
// ("stackbone listening addr=…") once it accepts connections. Unless
// cfg.Tracer is set, tracing is set up from the OTEL_* variables of the
// environment, then of DIR/.env (Tracing), and its last spans are flushed
// when Serve returns.
func Serve(ctx context.Context, cfg *config.Config, logger *slog.Logger, out io.Writer) error {
	if cfg.Tracer == nil {
		tel, err := Tracing(ctx, cfg, logger)
		if err != nil {
			return err
		}
		defer func() {
			if err := tel.Shutdown(context.WithoutCancel(ctx)); err != nil {
				logger.Warn("tracing: flushing the last spans", "err", err)
			}
		}()
		if tel.Enabled() {
			otel.SetTracerProvider(tel.TracerProvider()) // for libraries' own spans
		}
		c := *cfg
		c.Tracer = tel.TracerProvider()
		cfg = &c
	}
	st, err := OpenStore(ctx, cfg, logger)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	// The engine and the server use the wrapped store; the bridge needs
	// the driver itself.
	used := st
	if cfg.WrapStore != nil {
		used = cfg.WrapStore(st)
	}
	// The outbox's dispatcher: the configured webhooks' notices, and the
	// A2A push notifications clients register for.
	hooks, err := NewDispatcher(cfg, st, logger)
	if err != nil {
		return err
	}
	used = hooks.Waking(used)
	models, err := Models(cfg, logger)
	if err != nil {
		return err
	}
	specs, err := LoadAgents(ctx, cfg, models, logger)
	if err != nil {
		return err
	}
	reg := agent.NewRegistry(specs...)
	runner, srv, err := NewStack(cfg, used, reg, models, logger)
	if err != nil {
		closeSpecs(specs)
		return err
	}
	stopBridge, err := startBridge(ctx, st, runner, logger)
	if err != nil {
		return fmt.Errorf("connect replicas: %w", err)
	}
	defer stopBridge()
	clk := clock.Or(cfg.Clock)

	if cfg.Watch {
		// Armed before the server announces itself: an edit made once it
		// listens is seen.
		watchAgents(ctx, cfg, reg, runner, models, logger)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	addr := ln.Addr().String()
	logger.Info("stackbone listening", "addr", addr, "mode", string(cfg.Mode))
	printBanner(out, cfg, addr, specs)

	// Finish runs a previous process left: queued resumes and runs whose
	// lease lapsed or was released. On SQLite this process is the only
	// runner, so every run marked running is its predecessor's. The runs
	// live on the runner's own context, not ctx: a signal lets them finish
	// (Shutdown below), it does not fail them.
	recoverAt := clk.Now()
	if cfg.SQLitePath() != "" {
		recoverAt = recoverAt.Add(24 * time.Hour)
	}
	if n, err := runner.Recover(ctx, recoverAt); err != nil {
		logger.Error("recover runs", "err", err)
	} else if n > 0 {
		logger.Info("recovering runs left by a previous process", "count", n)
	}
	go RecoverLoop(ctx, runner, cfg, logger)
	// Schedules: the agent files' are written for every tenant, then due
	// firings (one missed while no replica ran included) fire.
	syncSchedulesAfter(ctx, cfg, used, specs, logger)
	if sched, ok := srv.Scheduler.(*schedule.Scheduler); ok {
		go sched.Run(ctx)
	}
	public := cfg.PublicURL
	if public == "" {
		public = "http://" + addr
	}
	srv.SetPublicURL(public) // the resource OAuth clients ask tokens for
	{
		hooks.SetPublicURL(public)
		// Deliveries go on through the graceful shutdown (runs finishing
		// then report run.completed) and stop when Serve returns; what is
		// left is delivered at the next start.
		hctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() { defer close(done); hooks.Run(hctx) }()
		defer func() { stop(); <-done }()
	}

	hs := server.HTTPServer(cfg, srv, logger)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(server.LimitConns(ln, cfg.MaxConnsPerIP, logger)) }()
	var serveErr error
	select {
	case serveErr = <-errc:
	case <-ctx.Done():
	}
	shutdown(cfg, hs, srv, runner, logger)
	closeSpecs(reg.List())
	return serveErr
}

// Tracing sets up OpenTelemetry tracing (telemetry.Setup) from the OTEL_*
// variables of the process environment, then of DIR/.env, as the settings
// are read; spans carry service.version Version.
func Tracing(ctx context.Context, cfg *config.Config, logger *slog.Logger) (*telemetry.Telemetry, error) {
	dotenv, err := config.ReadDotEnv(cfg.Dir)
	if err != nil {
		return nil, err
	}
	getenv := func(name string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return dotenv[name]
	}
	return telemetry.Setup(ctx, logger, getenv, telemetry.WithServiceVersion(Version))
}

// shutdown stops the server gracefully: it stops accepting connections and
// new runs, lets runs in flight (and the responses streaming them) finish
// within cfg.ShutdownTimeout, then stops the rest, whose threads are
// released for the next start or another replica to resume.
func shutdown(cfg *config.Config, hs *http.Server, srv *server.Server, runner *engine.Runner, logger *slog.Logger) {
	logger.Info("shutting down", "grace", cfg.ShutdownTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	httpDone := make(chan struct{})
	go func() {
		defer close(httpDone)
		if err := hs.Shutdown(ctx); err != nil {
			_ = hs.Close() // the grace period ended: cut the rest off
		}
	}()
	if err := runner.Shutdown(ctx); err != nil {
		logger.Warn("shutdown grace period over: runs still going were released for the next start", "err", err)
	}
	// Every run has ended: the turns' responses finish writing at once,
	// while event streams (Studio's live feed, thread events) never end by
	// themselves and are cut off after a short drain; most of them were
	// taken off net/http (server.Stream), so hs does not see them.
	select {
	case <-httpDone:
	case <-time.After(drainAfterRuns):
		_ = hs.Close()
		<-httpDone
	}
	srv.CloseStreams()
}

// drainAfterRuns is how long a stopping server waits, once its runs ended,
// for responses still open before closing their connections.
const drainAfterRuns = 2 * time.Second

// RecoverLoop periodically, until ctx ends, expires pending approvals past
// their expiry, takes over runs whose lease expired (another replica died)
// and queued resumes nobody claimed, and deletes expired journal entries of
// stateless turns, expired retry keys of the Responses wire and expired
// items of the memory store. It ticks every half lease, or every half approval TTL
// when that is shorter (at least every 50ms).
func RecoverLoop(ctx context.Context, runner *engine.Runner, cfg *config.Config, logger *slog.Logger) {
	every := cfg.Lease / 2
	if half := cfg.ApprovalTTL / 2; half > 0 && half < every {
		every = max(half, 50*time.Millisecond)
	}
	clk := clock.Or(cfg.Clock)
	t := clk.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			now := clk.Now()
			if _, err := runner.Recover(ctx, now); err != nil {
				logger.Warn("recover runs", "err", err)
			}
			if _, err := runner.SweepJournal(ctx, now); err != nil {
				logger.Warn("sweep the stateless turn journal", "err", err)
			}
			if _, err := runner.Store.SweepResponseKeys(ctx, now); err != nil {
				logger.Warn("sweep the Responses wire's retry keys", "err", err)
			}
			if runner.Memory != nil {
				if _, err := runner.Memory.Sweep(ctx, now); err != nil {
					logger.Warn("sweep the memory store's expired items", "err", err)
				}
			}
		}
	}
}

func printBanner(out io.Writer, cfg *config.Config, addr string, specs []*agent.Spec) {
	if cfg.Mode != config.Dev || out == nil {
		return
	}
	base := "http://" + addr
	var names []string
	for _, s := range specs {
		names = append(names, fmt.Sprintf("%s (%s)", s.Name, s.Model))
	}
	fmt.Fprintf(out, `
  Stackbone dev server

  OpenAI wire      POST %[1]s/v1/chat/completions
  Anthropic wire   POST %[1]s/v1/messages
  AG-UI            POST %[1]s/v1/agents/{agent}/agui
  Responses wire   POST %[1]s/v1/responses
  MCP (agents)     POST %[1]s/mcp
  Decisions        GET  %[1]s/v1/hitl
  Threads          GET  %[1]s/v1/threads
  Studio           %[1]s/studio/
  Health, metrics  %[1]s/healthz  %[1]s/metrics
  Data             %[2]s
  Agents           %[3]s

`, base, cfg.DB, strings.Join(names, ", "))
}

// Embedder is the embedding model of stackbone.json's "embeddings" (nil
// when it names none), reached through models' provider settings.
func Embedder(cfg *config.Config, models model.Resolver) (memory.Embedder, error) {
	ref, err := memory.EmbeddingsRef(cfg.Dir)
	if err != nil || ref == "" {
		return nil, err
	}
	r, ok := models.(interface {
		EmbeddingsEndpoint(ref string) (providers.Endpoint, error)
	})
	if !ok {
		return nil, fmt.Errorf("stackbone.json: embeddings %q: the model resolver has no embeddings endpoints", ref)
	}
	e, err := r.EmbeddingsEndpoint(ref)
	if err != nil {
		return nil, fmt.Errorf("stackbone.json: %w", err)
	}
	return memory.NewOpenAI(memory.OpenAIConfig{BaseURL: e.BaseURL, APIKey: e.APIKey, Model: e.Model,
		AzureAPIVersion: e.AzureAPIVersion, HTTPClient: e.HTTPClient}), nil
}

// NewRunner builds the engine from the configuration, with the memory
// store (and its embedding model, Embedder); hooks observe its runs (the
// server's metrics).
func NewRunner(cfg *config.Config, st store.Store, reg *agent.Registry, models model.Resolver, logger *slog.Logger, hooks engine.Hooks) (*engine.Runner, error) {
	journalTTL := cfg.RetryWindow
	if journalTTL == 0 {
		journalTTL = -1 // no journal
	}
	uf, err := usage.LoadFile(cfg.Dir)
	if err != nil {
		return nil, err
	}
	emb, err := Embedder(cfg, models)
	if err != nil {
		return nil, err
	}
	mem := memory.New(memory.Config{Store: st, Embedder: emb, Logger: logger, Clock: cfg.Clock})
	return engine.New(engine.Config{Memory: mem, Store: st, Agents: reg, Models: models, Logger: logger, Clock: cfg.Clock,
		Lease: cfg.Lease, JournalTTL: journalTTL, Hooks: hooks, ModelTimeouts: model.Timeouts{Call: cfg.ModelTimeout, Idle: cfg.ModelIdleTimeout},
		RefuseStateless:    cfg.StatelessApproval == config.StatelessRefuse,
		CancelOnDisconnect: cfg.OnDisconnect == config.OnDisconnectCancel, ApprovalTTL: cfg.ApprovalTTL, Describe: apierror.Describe,
		TraceContent: cfg.TraceContent, KeepContent: cfg.KeepContent, PickModel: cfg.Mode == config.Dev,
		Prices: usage.NewPrices(uf.Prices), Budgets: uf.Budgets, Tracer: cfg.Tracer,
		Remote: a2aclient.New(a2aclient.Options{Logger: logger})})
}

// NewStack builds the engine and the HTTP server, with every wire mounted,
// on the config's clock; the runner reports to the server's metrics.
func NewStack(cfg *config.Config, st store.Store, reg *agent.Registry, models model.Resolver, logger *slog.Logger) (*engine.Runner, *server.Server, error) {
	metrics := server.NewMetrics(prometheus.NewRegistry(), st)
	runner, err := NewRunner(cfg, st, reg, models, logger, metrics.RunHooks())
	if err != nil {
		return nil, nil, err
	}
	hook, err := LoadAuthHook(cfg, logger)
	if err != nil {
		return nil, nil, err
	}
	s, err := server.New(server.Config{Settings: cfg, Runner: runner, Metrics: metrics, Logger: logger, Clock: cfg.Clock,
		Tracer: cfg.Tracer, AuthHook: hook})
	if err != nil {
		return nil, nil, err
	}
	s.Version = Version
	s.Mount(server.WireAnthropic, anthropic.NewWire(runner.Agents, runner.NewID))
	s.Mount(server.WireAGUI, agui.NewWire(runner.Agents, s.Now)) // the config's clock, as every timestamp
	rw, err := responses.New(responses.Config{Store: st, Runner: runner, Encode: s.EncodeRun, Now: s.Now, NewID: runner.NewID,
		RetryWindow: max(runner.JournalTTL, 0),
		Tenant:      func(ctx context.Context) string { return server.PrincipalFrom(ctx).Tenant },
		Sees:        func(ctx context.Context, owner string) bool { return server.PrincipalFrom(ctx).Sees(owner) },
		Owner:       func(ctx context.Context) string { return server.PrincipalFrom(ctx).User.ID }})
	if err != nil {
		return nil, nil, err
	}
	s.Mount(server.WireResponses, rw)
	mh, err := mcpwire.New(mcpwire.Config{Runner: runner, Store: st, Agents: reg, Logger: logger, Version: Version,
		MaxBodyBytes: cfg.MaxBodyBytes, KeepAlive: s.KeepAlive, Caller: func(ctx context.Context) mcpwire.Caller {
			p := server.PrincipalFrom(ctx)
			return mcpwire.Caller{Tenant: p.Tenant, Name: p.Name, User: p.ToolUser(), AnyOwner: p.AnyOwner(),
				CannotTurn: p.Allow(server.ActTurn, ""), CannotDecide: p.Allow(server.ActDecide, "")}
		}})
	if err != nil {
		return nil, nil, err
	}
	// Streamable HTTP: POST carries calls; a session-based client opens its
	// event stream with GET and ends its session with DELETE.
	for _, method := range []string{"POST", "GET", "DELETE"} {
		s.Handle(method+" "+mcpwire.Route, server.WireOpenAI, true, mh.Serve)
	}
	if s.Scheduler, err = NewScheduler(cfg, st, runner, logger); err != nil {
		return nil, nil, err
	}
	if err := studio.Mount(s); err != nil {
		return nil, nil, err
	}
	return runner, s, nil
}

// closeSpecs releases the loader's resources of agents no longer served.
func closeSpecs(specs []*agent.Spec) {
	for _, s := range specs {
		if s.Close != nil {
			s.Close()
		}
	}
}

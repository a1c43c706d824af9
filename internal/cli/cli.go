// Package cli holds the stackbone commands.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/app"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/model"
)

// exitError carries an exit code for a failure already reported.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// Execute runs the command line with opts and returns the process exit
// code.
func Execute(ctx context.Context, opts Options, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(opts, stdin)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		fmt.Fprintln(stderr, "stackbone:", err)
		return 1
	}
	return 0
}

func newRoot(opts Options, stdin io.Reader) *cobra.Command {
	root := &cobra.Command{
		Use:           "stackbone",
		Short:         "Host TypeScript agents over the OpenAI, Anthropic and AG-UI wires",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCmd(config.Dev, opts), serveCmd(config.Start, opts), versionCmd(), agentsCmd(), hitlCmd(stdin), threadsCmd(), schedulesCmd(), usageCmd(), runsCmd(), initCmd())
	return root
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), "stackbone", app.Version)
			return nil
		},
	}
}

// serverFlags binds the flags shared by dev, start and agents list.
type serverFlags struct {
	dir, addr, db string
	maxBody       int64
	logLevel      string
	// Slow clients (config.Config's HeaderTimeout, BodyTimeout,
	// IdleTimeout, MaxConnsPerIP).
	headerTimeout, bodyTimeout, idleTimeout time.Duration
	// shutdownTimeout is config.Config's ShutdownTimeout.
	shutdownTimeout time.Duration
	// modelTimeout and modelIdleTimeout are config.Config's ModelTimeout
	// and ModelIdleTimeout.
	modelTimeout, modelIdleTimeout time.Duration
	maxConnsPerIP                  int
	// statelessApproval is bound on dev and start only.
	statelessApproval string
	// approvalTTL is config.Config's ApprovalTTL, bound on dev and start only.
	approvalTTL time.Duration
	// webhookURLs, webhookSecret, webhookFormat and publicURL are the
	// webhook settings, bound on dev and start only.
	webhookURLs                             []string
	webhookSecret, webhookFormat, publicURL string
}

func (f *serverFlags) bind(cmd *cobra.Command, mode config.Mode) {
	cmd.Flags().StringVar(&f.dir, "dir", ".", "project folder holding agents/")
	cmd.Flags().StringVar(&f.addr, "addr", "", "HOST:PORT to listen on (port 0 picks a free port; default "+config.Defaults(mode).Addr+")")
	cmd.Flags().StringVar(&f.db, "db", "", "store: sqlite:PATH or postgres://… (env STACKBONE_DB; default sqlite:DIR/.stackbone/stackbone.db)")
	cmd.Flags().Int64Var(&f.maxBody, "max-body-bytes", 0, "largest accepted request body (env STACKBONE_MAX_BODY_BYTES; default 4 MiB)")
	cmd.Flags().StringVar(&f.logLevel, "log-level", "", "debug, info, warn or error (env STACKBONE_LOG_LEVEL)")
	cmd.Flags().DurationVar(&f.headerTimeout, "header-timeout", 0, "time to send a request's headers (env STACKBONE_HEADER_TIMEOUT; default 10s)")
	cmd.Flags().DurationVar(&f.bodyTimeout, "body-timeout", 0, "time to send a request's body, 408 after (env STACKBONE_BODY_TIMEOUT; default 30s)")
	cmd.Flags().DurationVar(&f.idleTimeout, "idle-timeout", 0, "idle keep-alive connections close after (env STACKBONE_IDLE_TIMEOUT; default 120s)")
	cmd.Flags().DurationVar(&f.shutdownTimeout, "shutdown-timeout", 0, "on SIGTERM, time runs in flight get to finish before they are released for the next start (env STACKBONE_SHUTDOWN_TIMEOUT; default 30s)")
	cmd.Flags().DurationVar(&f.modelTimeout, "model-timeout", 0, "bound on each attempt of a model call; agents' modelSettings.timeout overrides it (env STACKBONE_MODEL_TIMEOUT; default 10m)")
	cmd.Flags().DurationVar(&f.modelIdleTimeout, "model-idle-timeout", 0, "bound on the wait for a model answer's first chunk and between chunks; agents' modelSettings.idleTimeout overrides it (env STACKBONE_MODEL_IDLE_TIMEOUT; default 2m)")
	cmd.Flags().IntVar(&f.maxConnsPerIP, "max-conns-per-ip", 0, "open connections one client address may hold, 0 for no limit (env STACKBONE_MAX_CONNS_PER_IP; default 256)")
}

// load builds the config: defaults, then env, then flags, then validation.
func (f *serverFlags) load(cmd *cobra.Command, mode config.Mode) (*config.Config, error) {
	cfg := config.Defaults(mode)
	// Settings (provider keys, STACKBONE_*) come from the environment, then
	// from DIR/.env; as everywhere in FromEnv, an empty value is unset.
	dotenv, err := config.ReadDotEnv(f.dir)
	if err != nil {
		return nil, err
	}
	getenv := func(name string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return dotenv[name]
	}
	if err := cfg.FromEnv(getenv); err != nil {
		return nil, err
	}
	cfg.Dir = f.dir
	if cmd.Flags().Changed("addr") {
		cfg.Addr = f.addr
	}
	if cmd.Flags().Changed("db") {
		cfg.DB = f.db
	}
	if cmd.Flags().Changed("max-body-bytes") {
		cfg.MaxBodyBytes = f.maxBody
	}
	if cmd.Flags().Changed("log-level") {
		cfg.LogLevel = f.logLevel
	}
	for name, d := range map[string][2]*time.Duration{"header-timeout": {&cfg.HeaderTimeout, &f.headerTimeout},
		"body-timeout": {&cfg.BodyTimeout, &f.bodyTimeout}, "idle-timeout": {&cfg.IdleTimeout, &f.idleTimeout},
		"shutdown-timeout": {&cfg.ShutdownTimeout, &f.shutdownTimeout}, "model-timeout": {&cfg.ModelTimeout, &f.modelTimeout},
		"model-idle-timeout": {&cfg.ModelIdleTimeout, &f.modelIdleTimeout}, "approval-ttl": {&cfg.ApprovalTTL, &f.approvalTTL}} {
		if cmd.Flags().Changed(name) {
			*d[0] = *d[1]
		}
	}
	if cmd.Flags().Changed("max-conns-per-ip") {
		cfg.MaxConnsPerIP = f.maxConnsPerIP
	}
	// Flags bound on dev and start only: Changed is false where they are
	// not defined.
	if cmd.Flags().Changed("stateless-approval") {
		cfg.StatelessApproval = config.StatelessPolicy(f.statelessApproval)
	}
	if cmd.Flags().Changed("webhook-url") {
		cfg.WebhookURLs = config.SplitList(strings.Join(f.webhookURLs, ","))
	}
	for name, dst := range map[string][2]*string{"webhook-secret": {&cfg.WebhookSecret, &f.webhookSecret},
		"webhook-format": {&cfg.WebhookFormat, &f.webhookFormat}, "public-url": {&cfg.PublicURL, &f.publicURL}} {
		if cmd.Flags().Changed(name) {
			*dst[0] = *dst[1]
		}
	}
	if err := cfg.Finish(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

func serveCmd(mode config.Mode, opts Options) *cobra.Command {
	var f serverFlags
	short := "Run the development server: loopback, no key needed, reloads agents"
	if mode == config.Start {
		short = "Run the production server: API keys required"
	}
	cmd := &cobra.Command{
		Use:   string(mode),
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := f.load(cmd, mode)
			if err != nil {
				return err
			}
			cfg.WrapStore = opts.WrapStore
			logger := app.Logger(cfg, cmd.ErrOrStderr())
			app.TuneGC(logger)
			return app.Serve(cmd.Context(), cfg, logger, cmd.OutOrStdout())
		},
	}
	f.bind(cmd, mode)
	cmd.Flags().StringVar(&f.statelessApproval, "stateless-approval", "",
		"run or refuse: what a turn without a session does with a call that needs approval (env STACKBONE_STATELESS_APPROVAL; default run)")
	cmd.Flags().DurationVar(&f.approvalTTL, "approval-ttl", 0,
		"how long a pending approval waits before it expires as a rejection; a tool's needsApproval.expiresAfter overrides it (env STACKBONE_APPROVAL_TTL; default never)")
	cmd.Flags().StringSliceVar(&f.webhookURLs, "webhook-url", nil,
		"deliver decision.* and run.* webhooks to this URL; repeat or comma-separate for several (env STACKBONE_WEBHOOK_URL)")
	cmd.Flags().StringVar(&f.webhookSecret, "webhook-secret", "",
		"Standard Webhooks signing secret, whsec_… (env STACKBONE_WEBHOOK_SECRET)")
	cmd.Flags().StringVar(&f.webhookFormat, "webhook-format", "",
		"standard or slack (env STACKBONE_WEBHOOK_FORMAT; default standard)")
	cmd.Flags().StringVar(&f.publicURL, "public-url", "",
		"the URL people reach this server at, for Studio links in webhooks (env STACKBONE_PUBLIC_URL; default http:// and --addr)")
	return cmd
}

// projectAgents loads the project's agents for an `agents` subcommand with
// load: app.LoadAgents (MCP servers started) or app.CheckAgents (not).
func projectAgents(cmd *cobra.Command, f *serverFlags,
	load func(context.Context, *config.Config, model.Resolver, *slog.Logger) ([]*agent.Spec, error)) (*config.Config, []*agent.Spec, error) {
	cfg, err := f.load(cmd, config.Dev)
	if err != nil {
		return nil, nil, err
	}
	logger := app.Logger(cfg, cmd.ErrOrStderr())
	models, err := app.Models(cfg, logger)
	if err != nil {
		return cfg, nil, err
	}
	specs, err := load(cmd.Context(), cfg, models, logger)
	return cfg, specs, err
}

func agentsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "agents", Short: "Inspect agents"}
	var f serverFlags
	list := &cobra.Command{
		Use:   "list",
		Short: "Load DIR/agents and list them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, specs, err := projectAgents(cmd, &f, app.LoadAgents)
			if err != nil {
				return err
			}
			w := newTable(cmd.OutOrStdout())
			fmt.Fprintln(w, "NAME\tMODEL\tTOOLS\tSUBAGENTS\tFILE")
			for _, s := range specs {
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\n", s.Name, s.Model, len(s.Tools), len(s.Subagents), s.Source)
			}
			return w.Flush()
		},
	}
	f.bind(list, config.Dev)
	cmd.AddCommand(list, checkCmd())
	return cmd
}

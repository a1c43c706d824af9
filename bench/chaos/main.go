// Command chaos is Stackbone's bounded random-kill load test. It drives many
// concurrent durable turns whose tools have side effects, kills the server
// (or one of several PostgreSQL replicas) with SIGKILL at random moments,
// restarts it, and once recovery has settled checks, from a side-effect
// ledger, the mock model's request log and the HTTP API, the promises a
// user relies on:
//
//   - a tool call's side effect happens at most once, unless its tool is
//     declared idempotent, and then every repeat carries the same
//     idempotency key; a turn's side effect is not repeated under a new
//     call either (the model asked again for the same turn);
//   - no user message is stored twice for one turn;
//   - no turn is answered twice (at most one final answer per user turn);
//   - every acknowledged turn (200 with its answer) is stored, answered;
//   - no thread is stuck: none is left running or queued, and every thread
//     not waiting on a decision takes one more turn (no 409 forever).
//
// Pending in_doubt decisions are counted: they are the correct outcome for
// a call that is not idempotent and may already have run.
//
// It starts, in-process, the mock OpenAI upstream (modeltest) and the
// ledger, writes a project with one TypeScript agent, `chaos`, whose tools
// `refund` (not idempotent), `reserve` (idempotent: true when the build
// knows the option) and `payout` (needs approval, which the client gives
// through POST /v1/hitl/{id}/approve, then waits for the answer) POST their
// side effect to the ledger carrying ctx.toolCallId and
// ctx.idempotencyKey, and runs the built binary
// (`stackbone start`) on SQLite, or with -store postgres on -replicas
// processes sharing one fresh schema. Clients behave like the official
// SDKs: they retry connection errors, 408, 409, 429 and 5xx with
// exponential back-off, honour x-should-retry and retry-after(-ms), and
// (with -idempotency-key) send one Idempotency-Key per turn.
//
// Every loop is bounded (-turns, -duration, -kills) and -deadline stops
// everything. It prints a Markdown table and exits 1 when an invariant
// fails, 2 when the harness itself could not run.
//
//	go run ./bench/chaos
//	go run ./bench/chaos -turns 2000 -kills 20 -store postgres -replicas 3
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stackbone/stackbone/bench/internal/benchproc"
	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
)

// chaosScript: a turn "refund …" calls refund, "reserve …" calls reserve,
// each with the turn's text as argument; after the tool result the model
// answers "Done: <turn text>", so every answer names its turn.
const chaosScript = `[
 {"when": {"lastTool": "refund"}, "reply": {"text": "Done: {{lastUser}}"}},
 {"when": {"lastTool": "reserve"}, "reply": {"text": "Done: {{lastUser}}"}},
 {"when": {"lastTool": "payout"}, "reply": {"text": "Done: {{lastUser}}"}},
 {"when": {"lastTool": "charge"}, "reply": {"text": "Done: {{lastUser}}"}},
 {"when": {"lastUser": "refund"}, "reply": {"toolCalls": [{"name": "refund", "arguments": {"turn": "{{lastUser}}"}}]}},
 {"when": {"lastUser": "reserve"}, "reply": {"toolCalls": [{"name": "reserve", "arguments": {"turn": "{{lastUser}}"}}]}},
 {"when": {"lastUser": "payout"}, "reply": {"toolCalls": [{"name": "payout", "arguments": {"turn": "{{lastUser}}"}}]}},
 {"when": {"lastUser": "charge"}, "reply": {"toolCalls": [{"name": "charge", "arguments": {"turn": "{{lastUser}}"}}]}},
 {"reply": {"text": "Done: {{lastUser}}"}}
]`

// agentTS is the project's agent; %[1]s is the ledger URL, %[2]s the
// idempotent option of reserve (empty when the build does not know it).
const agentTS = `import { defineDeepAgent, tool } from 'stackbone';

const ledger = %[1]q;
async function effect(name: string, turn: string, ctx: any, slow = false) {
  const q = (slow ? 'slow=1&' : '') + 'tool=' + name + '&call=' + encodeURIComponent(ctx.toolCallId) +
    '&key=' + encodeURIComponent(ctx.idempotencyKey ?? '') + '&thread=' + encodeURIComponent(ctx.threadId) +
    '&turn=' + encodeURIComponent(turn);
  const res = await ctx.fetch(ledger + '/effect?' + q, { method: 'POST' });
  if (res.status !== 200) throw new Error('ledger answered ' + res.status);
  return { ok: true, turn };
}

export default defineDeepAgent({
  name: 'chaos',
  model: 'openai/chaos',
  instructions: 'You run refunds and reservations.',
  tools: {
    refund: tool({
      description: 'Refund an order (not idempotent)',
      parameters: { type: 'object', properties: { turn: { type: 'string' } }, required: ['turn'] },
      async execute({ turn }: { turn: string }, ctx: any) { return effect('refund', turn, ctx); },
    }),
    reserve: tool({
      description: 'Reserve a seat (idempotent with its key)',
      parameters: { type: 'object', properties: { turn: { type: 'string' } }, required: ['turn'] },%[2]s
      async execute({ turn }: { turn: string }, ctx: any) { return effect('reserve', turn, ctx); },
    }),
    payout: tool({
      description: 'Pay out money (needs approval, not idempotent)',
      parameters: { type: 'object', properties: { turn: { type: 'string' } }, required: ['turn'] },
      needsApproval: true,
      async execute({ turn }: { turn: string }, ctx: any) { return effect('payout', turn, ctx); },
    }),
    charge: tool({
      description: 'Charge a card (slow, not idempotent, no approval)',
      parameters: { type: 'object', properties: { turn: { type: 'string' } }, required: ['turn'] },
      async execute({ turn }: { turn: string }, ctx: any) { return effect('charge', turn, ctx, true); },
    }),
  },
});
`

// apiKey is the one tenant's key of the servers under test.
const apiKey = "chaos-secret-key-0123456789"

// options are the command-line settings.
type options struct {
	turns, concurrency, perThread int
	kills                         int
	killEvery                     time.Duration
	duration, deadline, settle    time.Duration
	lease                         time.Duration
	store                         string
	replicas                      int
	postgresURL                   string
	maxRetries                    int
	idempotencyKey                bool
	approvalShare                 float64
	// slowShare is the share of charge turns (a slow tool, not
	// idempotent, no approval); nextShare the share of turns whose client,
	// after a connection error or a 5xx, sends the thread's next message
	// instead of retrying the turn (a user who reloads and types again).
	slowShare, nextShare float64
	// slowFor is how long the ledger holds a charge's answer after its
	// side effect.
	slowFor        time.Duration
	requestTimeout time.Duration
	seed           uint64
	bin            string
	verbose        bool
}

func main() {
	var o options
	flag.IntVar(&o.turns, "turns", 1000, "turns to send (the run also stops after -duration)")
	flag.IntVar(&o.concurrency, "concurrency", 8, "clients sending turns at once")
	flag.IntVar(&o.perThread, "turns-per-thread", 3, "turns each durable thread gets before a client starts a new one")
	flag.IntVar(&o.kills, "kills", 10, "SIGKILLs of a server (at most)")
	flag.DurationVar(&o.killEvery, "kill-every", 500*time.Millisecond, "mean time between kills")
	flag.DurationVar(&o.duration, "duration", 90*time.Second, "longest time turns are sent")
	flag.DurationVar(&o.deadline, "deadline", 5*time.Minute, "hard limit of the whole run, checks included")
	flag.DurationVar(&o.settle, "settle", 30*time.Second, "how long recovery may take to settle every thread after the last turn")
	flag.DurationVar(&o.lease, "lease", 2*time.Second, "STACKBONE_LEASE of the servers")
	flag.StringVar(&o.store, "store", "sqlite", "sqlite (one server) or postgres (-replicas servers on one schema)")
	flag.IntVar(&o.replicas, "replicas", 3, "servers sharing the PostgreSQL schema (-store postgres)")
	flag.StringVar(&o.postgresURL, "postgres", cmp.Or(os.Getenv("STACKBONE_TEST_POSTGRES"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL URL (a fresh schema is made and dropped)")
	flag.IntVar(&o.maxRetries, "max-retries", 5, "client retries per turn (the official SDKs default to 2)")
	flag.Float64Var(&o.approvalShare, "approvals", 0.2, "share of turns whose tool (payout) needs an approval, which the client gives through the API")
	flag.Float64Var(&o.slowShare, "slow", 0.2, "share of turns whose tool (charge) is slow and not idempotent, with no approval")
	flag.DurationVar(&o.slowFor, "slow-for", 400*time.Millisecond, "how long a charge's call goes on after its side effect")
	flag.Float64Var(&o.nextShare, "next-after-error", 0.3, "share of turns whose client, on a connection error or a 5xx, sends the thread's next message instead of retrying (it obeys x-should-retry and retry-after for that one)")
	flag.BoolVar(&o.idempotencyKey, "idempotency-key", false, "send one Idempotency-Key per turn (stable across its retries)")
	flag.DurationVar(&o.requestTimeout, "request-timeout", 60*time.Second, "client timeout of one request")
	flag.Uint64Var(&o.seed, "seed", 0, "random seed (0: from the clock)")
	flag.StringVar(&o.bin, "bin", "", "a built stackbone binary (default: go build ./cmd/stackbone into a temp dir)")
	flag.BoolVar(&o.verbose, "v", false, "log every kill and restart")
	flag.Parse()
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if o.store != "sqlite" && o.store != "postgres" {
		logger.Error("-store must be sqlite or postgres", "store", o.store)
		os.Exit(2)
	}
	if o.store == "sqlite" {
		o.replicas = 1
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, o.deadline)
	rep, err := run(ctx, o, logger)
	cancel()
	stop()
	if err != nil {
		logger.Error("chaos", "err", err)
		os.Exit(2)
	}
	rep.write(os.Stdout)
	if !rep.ok() {
		os.Exit(1)
	}
}

// run sets everything up, drives the turns under kills, lets recovery
// settle and checks the invariants.
func run(ctx context.Context, o options, logger *slog.Logger) (*report, error) {
	start := time.Now()
	tmp, err := os.MkdirTemp("", "stackbone-chaos-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	rng := rand.New(rand.NewPCG(o.seed, o.seed^0x9e3779b97f4a7c15))

	led := newLedger(o.slowFor)
	ledSrv, ledURL, err := serve(led)
	if err != nil {
		return nil, err
	}
	defer ledSrv.Close()
	mock := modeltest.Handler(modeltest.OpenAI, script.MustParse(chaosScript))
	upSrv, upURL, err := serve(mock)
	if err != nil {
		return nil, err
	}
	defer upSrv.Close()

	bin := o.bin
	if bin == "" {
		if bin, err = benchproc.Build(ctx, tmp, logger); err != nil {
			return nil, err
		}
	}
	db := "sqlite:" + filepath.Join(tmp, "chaos.db")
	if o.store == "postgres" {
		schema, drop, err := freshSchema(ctx, o.postgresURL)
		if err != nil {
			return nil, err
		}
		defer drop()
		u, _ := url.Parse(o.postgresURL)
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		db = u.String()
	}
	c := &cluster{bin: bin, dir: tmp, logger: logger, env: []string{
		"OPENAI_BASE_URL=" + upURL + "/v1", "OPENAI_API_KEY=sk-chaos", "STACKBONE_API_KEYS=chaos:" + apiKey,
		"STACKBONE_DB=" + db, "STACKBONE_LEASE=" + o.lease.String(),
	}}
	rep := &report{opts: o}
	// The idempotent option is new: a build that refuses it runs the
	// harness with reserve as a plain tool, and the report says so.
	rep.idempotent = true
	if err := writeAgent(tmp, ledURL, true); err != nil {
		return nil, err
	}
	if err := c.startAll(ctx, o.replicas); err != nil {
		if !strings.Contains(err.Error(), "idempotent") {
			return nil, err
		}
		logger.Warn("this build does not know tool({ idempotent }); reserve runs as a plain tool")
		rep.idempotent = false
		if err := writeAgent(tmp, ledURL, false); err != nil {
			return nil, err
		}
		if err := c.startAll(ctx, o.replicas); err != nil {
			return nil, err
		}
	}
	defer c.stopAll()

	d := &driver{o: o, c: c, http: &http.Client{Timeout: o.requestTimeout,
		Transport: &http.Transport{MaxIdleConnsPerHost: 2 * o.concurrency}}}
	driveCtx, stopDrive := context.WithTimeout(ctx, o.duration)
	killerDone := make(chan struct{})
	go func() {
		defer close(killerDone)
		rep.kills = c.killer(driveCtx, o, rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())), led, d)
	}()
	d.drive(driveCtx, rng.Uint64())
	stopDrive()
	<-killerDone
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("the run was cut short (-deadline or a signal) before the checks: %w", err)
	}
	if err := c.ensureUp(ctx); err != nil {
		return nil, err
	}
	logger.Info("turns sent; waiting for recovery to settle", "turns", len(d.turns), "kills", rep.kills)
	threads, err := d.settle(ctx, o.settle)
	if err != nil {
		return nil, err
	}
	rep.check(d, threads, led.entries(), mock.Requests())
	rep.refused = d.probe(ctx, threads, rng.Uint64())
	for _, t := range rep.refused {
		if len(rep.examples) < 10 {
			rep.examples = append(rep.examples, fmt.Sprintf("thread %s refuses a new turn: %s", t.thread, t.last))
		}
	}
	rep.wall = time.Since(start)
	return rep, nil
}

// serve starts h on a loopback port.
func serve(h http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, "http://" + ln.Addr().String(), nil
}

// freshSchema makes a migrated schema for the replicas and returns a
// function that drops it.
func freshSchema(ctx context.Context, dbURL string) (string, func(), error) {
	schema := fmt.Sprintf("chaos_%d", time.Now().UnixNano())
	// Only the schema: the binary under test migrates it, so the harness
	// also runs a build older than itself (-bin).
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return "", nil, fmt.Errorf("PostgreSQL: %w", err)
	}
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	_ = conn.Close(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("PostgreSQL: %w", err)
	}
	return schema, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, dbURL); err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			_ = conn.Close(ctx)
		}
	}, nil
}

func writeAgent(dir, ledgerURL string, idempotent bool) error {
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		return err
	}
	opt := ""
	if idempotent {
		opt = "\n      idempotent: true,"
	}
	return os.WriteFile(filepath.Join(dir, "agents", "chaos.ts"), fmt.Appendf(nil, agentTS, ledgerURL, opt), 0o644)
}

// cluster is the servers under test, each on a fixed loopback port so
// clients find a restarted server where the killed one was.
type cluster struct {
	bin, dir string
	env      []string
	logger   *slog.Logger

	mu    sync.Mutex
	nodes []*node
}

type node struct {
	addr string
	srv  *benchproc.Server // nil while down
}

func (c *cluster) url(i int) string { return "http://" + c.nodes[i].addr }

func (c *cluster) startAll(ctx context.Context, n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodes = nil
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		c.nodes = append(c.nodes, &node{addr: addr})
	}
	for i := range c.nodes {
		if err := c.startLocked(ctx, i); err != nil {
			for _, nd := range c.nodes {
				if nd.srv != nil {
					nd.srv.Kill()
					nd.srv = nil
				}
			}
			return err
		}
	}
	return nil
}

func (c *cluster) startLocked(ctx context.Context, i int) error {
	nd := c.nodes[i]
	var err error
	// The port of a killed process can linger a moment: try a few times.
	for attempt := range 5 {
		nd.srv, err = benchproc.Start(ctx, c.bin, []string{"start", "--dir", c.dir, "--addr", nd.addr}, c.env, c.logger)
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			return err
		}
		time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
	}
	return err
}

// kill SIGKILLs server i and starts it again after pause.
func (c *cluster) kill(ctx context.Context, i int, pause time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	nd := c.nodes[i]
	if nd.srv == nil {
		return nil
	}
	nd.srv.Kill()
	nd.srv = nil
	c.logger.Debug("killed", "server", i)
	select {
	case <-time.After(pause):
	case <-ctx.Done():
	}
	return c.startLocked(context.WithoutCancel(ctx), i)
}

// ensureUp starts every server that is down.
func (c *cluster) ensureUp(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, nd := range c.nodes {
		if nd.srv == nil {
			if err := c.startLocked(ctx, i); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *cluster) stopAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nd := range c.nodes {
		if nd.srv != nil {
			nd.srv.Stop()
			nd.srv = nil
		}
	}
}

// killer kills a server every kill-every on average until ctx ends or it
// has killed o.kills times, and returns how many kills it made. Half of the
// kills are aimed: they wait for the next side effect and kill the server
// that runs its turn, which lands between the effect and its checkpoint.
func (c *cluster) killer(ctx context.Context, o options, rng *rand.Rand, led *ledger, d *driver) int {
	kills := 0
	for kills < o.kills {
		wait := time.Duration(rng.Float64() * 2 * float64(o.killEvery))
		select {
		case <-ctx.Done():
			return kills
		case <-time.After(wait):
		}
		victim := rng.IntN(len(c.nodes))
		if rng.IntN(2) == 0 {
			select {
			case thread := <-led.wake:
				if i, ok := d.serving.Load(thread); ok {
					victim = i.(int)
				}
			case <-time.After(2 * time.Second):
			case <-ctx.Done():
				return kills
			}
		}
		pause := time.Duration(rng.IntN(300)) * time.Millisecond
		if err := c.kill(ctx, victim, pause); err != nil {
			c.logger.Error("restart after a kill", "server", victim, "err", err)
			return kills + 1
		}
		kills++
	}
	return kills
}

// ledger records every side effect the tools report.
type ledger struct {
	mu   sync.Mutex
	all  []effect
	wake chan string // the thread of the next effect, to an aimed kill
	// slow is how long a slow effect's answer is held after it is
	// recorded: the call goes on after its side effect.
	slow time.Duration
}

// effect is one side effect as the tool reported it.
type effect struct {
	Tool, Call, Key, Thread, Turn string
}

func newLedger(slow time.Duration) *ledger { return &ledger{wake: make(chan string), slow: slow} }

func (l *ledger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	e := effect{Tool: q.Get("tool"), Call: q.Get("call"), Key: q.Get("key"), Thread: q.Get("thread"), Turn: q.Get("turn")}
	l.mu.Lock()
	l.all = append(l.all, e)
	l.mu.Unlock()
	select {
	case l.wake <- e.Thread:
	default:
	}
	if q.Get("slow") != "" {
		select {
		case <-time.After(l.slow):
		case <-r.Context().Done():
		}
	}
	_, _ = io.WriteString(w, `{"ok":true}`)
}

func (l *ledger) entries() []effect {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]effect(nil), l.all...)
}

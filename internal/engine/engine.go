// Package engine is the agent loop: model → tools → model … until a final
// answer, a pause for a human, a client tool, or the step limit. One loop
// serves fresh turns, client-tool continuations, resumes after a decision and
// recovery after a crash, because it works only from the stored conversation:
// an assistant message whose calls lack results means "run those calls".
package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/stackbone/stackbone/internal/redact"
	"github.com/stackbone/stackbone/internal/usage"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/bus"
	"github.com/stackbone/stackbone/internal/clock"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/ids"
	"github.com/stackbone/stackbone/internal/memory"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/store"
)

// Hooks observe runs (metrics). Every field is optional.
type Hooks struct {
	RunStarted func(agent string)
	RunEnded   func(agent string, outcome string, d time.Duration)
	// ModelCall and ToolCall hear of each model and tool call as it ends.
	ModelCall func(ModelCallInfo)
	ToolCall  func(ToolCallInfo)
}

// Config is what New builds a Runner from. Store, Agents and Models are
// required; every other field has a default.
type Config struct {
	// Remote talks to the agents' remote A2A agents (app gives it an
	// a2aclient.Client); nil: a delegation to one is a tool error.
	Remote RemoteAgents
	Store  store.Store
	Agents *agent.Registry
	Models model.Resolver
	// Bus carries live events to subscribers (a private bus when nil).
	Bus    *bus.Bus
	Logger *slog.Logger
	// Clock and NewID are the determinism seams (the real clock and
	// ids.New when nil).
	Clock clock.Clock
	NewID ids.Generator
	// Owner names this process in leases (a generated id when empty).
	Owner string
	// Lease is how long a run holds its thread without a checkpoint
	// (DefaultLease when zero).
	Lease time.Duration
	// JournalTTL is the retry window: how long a stateless turn's completed
	// tool steps are kept for a client retrying the turn, and how long after
	// a durable turn a request repeating its input (without an
	// Idempotency-Key) is taken as a retry of it (DefaultJournalTTL when
	// zero; a negative value keeps no journal and recognises no retry by
	// its content).
	JournalTTL time.Duration
	// ModelTimeouts bound each model call attempt of agents whose
	// modelSettings set none (zero fields: model.DefaultCallTimeout and
	// model.DefaultIdleTimeout).
	ModelTimeouts model.Timeouts
	Hooks         Hooks
	// RefuseStateless refuses calls that need approval in a turn without a
	// session (the stateless-approval policy "refuse"); by default they run.
	// Either way each such call is recorded in the decisions audit.
	RefuseStateless bool
	// CancelOnDisconnect cancels a durable turn when its client goes away
	// before its end (STACKBONE_ON_DISCONNECT=cancel); by default the turn
	// goes on, a retry attaches to it, and a new message stops it.
	CancelOnDisconnect bool
	// ApprovalTTL is how long a pending approval waits before it expires,
	// for tools whose needsApproval sets no expiresAfter; zero: never.
	ApprovalTTL time.Duration
	// Describe gives an error's public code and message for the RunError
	// a failed run stores and publishes (the HTTP edge's mapping, so the
	// stored error reads as the live one); nil describes only the engine's
	// own error types.
	Describe func(err error) (code, message string)
	// Tracer makes the runs' spans (invoke_agent, chat, execute_tool);
	// nil: the global provider (otel.GetTracerProvider), a no-op unless
	// the process set one up.
	Tracer trace.TracerProvider
	// TraceContent puts prompts, completions and tool arguments and
	// results on spans (STACKBONE_TRACE_CONTENT), redacted.
	TraceContent bool
	// KeepContent keeps what each model call sent and got back with its
	// step, redacted, for Studio's run inspector (dev mode, or
	// TraceContent).
	KeepContent bool
	// Redact cleans text bound for spans and steps (nil: the logger's
	// redactor when it has one).
	Redact func(string) string
	// Prices price model calls (nil: the built-in table).
	Prices *usage.Prices
	// Budgets limit what turns may spend (checked before each turn and
	// between a run's steps).
	Budgets []usage.Budget
	// Memory is the long-term memory store tools get (tool.Call.Store)
	// and the built-in memory tools use; nil: none.
	Memory *memory.Service
	// PickModel lets a run pick one of its agent's models (Input.Model):
	// `stackbone dev` only, for Studio's playground; otherwise a run that
	// names a model is refused.
	PickModel bool
}

// Runner runs turns. Build it with New; its exported fields are read-only
// afterwards.
//
// Every run that goes on in the background (durable turns, resumes after a
// decision, recovered runs, and stateless turns, which also end with their
// request) is started by one spawn point on one base context, so Wait and
// Shutdown see them all.
type Runner struct {
	// Remote is Config.Remote.
	Remote RemoteAgents
	Store  store.Store
	Agents *agent.Registry
	Models model.Resolver
	Bus    *bus.Bus
	Logger *slog.Logger
	// Now and NewID are the determinism seams (Now is Config.Clock's,
	// whose timers pace the lease renewal and the polls).
	Now   func() time.Time
	NewID ids.Generator
	// Owner names this process in leases.
	Owner string
	// Lease is how long a run holds its thread without a checkpoint.
	Lease time.Duration
	// JournalTTL is Config.JournalTTL.
	JournalTTL time.Duration
	// ModelTimeouts is Config.ModelTimeouts with the defaults filled in.
	ModelTimeouts model.Timeouts
	Hooks         Hooks
	// RefuseStateless is Config.RefuseStateless.
	RefuseStateless bool
	// CancelOnDisconnect is Config.CancelOnDisconnect.
	CancelOnDisconnect bool
	// ApprovalTTL is Config.ApprovalTTL.
	ApprovalTTL time.Duration
	// Describe gives an error's public code and message for the RunError
	// a failed run stores and publishes (the HTTP edge's mapper, so stored
	// and live errors read alike). Without it the engine describes its own
	// typed errors and calls anything else an internal error.
	Describe func(err error) (code, message string)
	// Tracer, TraceContent, KeepContent, Redact, Prices and Budgets are
	// the Config's, defaults filled in.
	Tracer       trace.TracerProvider
	TraceContent bool
	KeepContent  bool
	Redact       func(string) string
	Prices       *usage.Prices
	Budgets      []usage.Budget
	// Memory is Config.Memory.
	Memory *memory.Service
	// PickModel is Config.PickModel.
	PickModel bool

	// clock is Config.Clock or the real one.
	clock clock.Clock

	// base is the context of every background run; stop cancels it
	// (cause ErrShuttingDown) when Shutdown's grace period ends.
	base    context.Context
	stop    context.CancelCauseFunc
	mu      sync.Mutex
	closing bool
	// draining is closed when Shutdown begins: requests waiting in-band
	// for a decision (AwaitDecisions) stop waiting.
	draining chan struct{}
	wg       sync.WaitGroup
	// inflight counts the users of each agent spec; retired marks specs
	// a reload replaced, closed when their count drops to zero.
	inflight map[*agent.Spec]int
	retired  map[*agent.Spec]bool

	// cancels holds each durable run this runner drives, by tenant and
	// thread: Cancel stops one at once, without the round trip through
	// the bus.
	cancels map[[2]string]localRun

	builtins sync.Map // *agent.Spec → []*tool.Tool
	toolsets sync.Map // *agent.Spec → *toolset
	models   sync.Map // *agent.Spec → specModel
}

// DefaultLease is Config.Lease when zero: a run renews its lease every
// third of it while a step runs.
const DefaultLease = 15 * time.Second

// New validates cfg and builds a Runner.
func New(cfg Config) (*Runner, error) {
	var missing []string
	if cfg.Store == nil {
		missing = append(missing, "Store")
	}
	if cfg.Agents == nil {
		missing = append(missing, "Agents")
	}
	if cfg.Models == nil {
		missing = append(missing, "Models")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("engine: missing %s", strings.Join(missing, ", "))
	}
	if cfg.Lease < 0 {
		return nil, fmt.Errorf("engine: negative Lease %s", cfg.Lease)
	}
	clk := clock.Or(cfg.Clock)
	r := &Runner{Store: cfg.Store, Agents: cfg.Agents, Models: cfg.Models, Bus: cfg.Bus, Logger: cfg.Logger, clock: clk,
		Now: clk.Now, NewID: cfg.NewID, Owner: cfg.Owner, Lease: cfg.Lease, JournalTTL: cfg.JournalTTL,
		ModelTimeouts: cfg.ModelTimeouts.Or(model.Timeouts{Call: model.DefaultCallTimeout, Idle: model.DefaultIdleTimeout}), Hooks: cfg.Hooks, RefuseStateless: cfg.RefuseStateless, CancelOnDisconnect: cfg.CancelOnDisconnect, ApprovalTTL: cfg.ApprovalTTL, Describe: cfg.Describe}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	r.Tracer, r.TraceContent, r.KeepContent, r.Redact, r.Prices, r.Budgets = cfg.Tracer, cfg.TraceContent, cfg.KeepContent, cfg.Redact, cfg.Prices, cfg.Budgets
	r.Memory, r.PickModel = cfg.Memory, cfg.PickModel
	r.Remote = cfg.Remote
	if r.Tracer == nil {
		r.Tracer = otel.GetTracerProvider()
	}
	if r.Redact == nil {
		if h, ok := r.Logger.Handler().(*redact.Handler); ok {
			r.Redact = h.Redactor().String
		}
	}
	if r.Prices == nil {
		r.Prices = usage.NewPrices(nil)
	}
	if r.NewID == nil {
		r.NewID = ids.New
	}
	if r.Owner == "" {
		r.Owner = ids.New("node")
	}
	if r.Lease == 0 {
		r.Lease = DefaultLease
	}
	if r.Bus == nil {
		r.Bus = bus.New()
	}
	if r.JournalTTL == 0 {
		r.JournalTTL = DefaultJournalTTL
	}
	r.inflight, r.retired = map[*agent.Spec]int{}, map[*agent.Spec]bool{}
	r.base, r.stop = context.WithCancelCause(context.Background())
	r.draining = make(chan struct{})
	return r, nil
}

// admit takes a ticket for work that may spawn runs; false once Shutdown
// began. The holder gives it back with r.wg.Done().
func (r *Runner) admit() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing {
		return false
	}
	r.wg.Add(1)
	return true
}

// spawn is the one place a run goes to the background (spawnUnder the
// other door to it). It holds spec (when not nil) while fn runs, and runs fn
// on the runner's base context; Wait and Shutdown track it. The caller holds
// a ticket from admit, so the wait group's count is positive.
func (r *Runner) spawn(spec *agent.Spec, fn func(ctx context.Context)) {
	r.launch(r.base, func() {}, spec, fn)
}

// spawnUnder is spawn for a stateless turn: fn runs on req, cancelled also
// when the base context is.
func (r *Runner) spawnUnder(req context.Context, spec *agent.Spec, fn func(ctx context.Context)) {
	c, cancelCause := context.WithCancelCause(req)
	unhook := context.AfterFunc(r.base, func() { cancelCause(context.Cause(r.base)) })
	r.launch(c, func() { unhook(); cancelCause(nil) }, spec, fn)
}

func (r *Runner) launch(ctx context.Context, cancel func(), spec *agent.Spec, fn func(ctx context.Context)) {
	r.wg.Add(1)
	if spec != nil {
		r.hold(spec)
	}
	go func() {
		defer r.wg.Done()
		defer cancel()
		if spec != nil {
			defer r.release(spec)
		}
		fn(ctx)
	}()
}

// background admits and spawns fn in one step (a resume or a recovery); it
// reports false when Shutdown began and nothing was started.
func (r *Runner) background(fn func(ctx context.Context)) bool {
	if !r.admit() {
		return false
	}
	defer r.wg.Done()
	r.spawn(nil, fn)
	return true
}

// Cancel stops the thread's running durable run, wherever it runs: the
// cancel is stored (store.RequestCancel, naming the run that holds the
// thread) and reaches the replica that drives the run on the thread's
// control topic of the bus (across replicas by the PostgreSQL bridge), or,
// should that notification be lost, at the run's next lease renewal. The
// run then ends as a cancelled run does (ErrCancelled; calls it had
// started wait in doubt). A thread that runs nothing (idle, waiting, or
// unknown) is left as it is (CancelWaiting cancels a waiting turn). Cancel returns once the cancel is asked, not
// when the run has stopped (CancelWait).
func (r *Runner) Cancel(ctx context.Context, tenant, threadID string) error {
	_, err := r.requestCancel(ctx, tenant, threadID)
	return err
}

// CancelWait is Cancel, then waits until the cancelled run has stopped:
// its end is stored and the thread no longer runs it. It reports false
// when ctx ended first (the run may still be stopping) and true when the
// run stopped or there was none to stop.
func (r *Runner) CancelWait(ctx context.Context, tenant, threadID string) (bool, error) {
	// Listen before asking, so the run's end cannot be missed.
	sub := r.Bus.Subscribe(tenant, threadID)
	defer sub.Close()
	runID, err := r.requestCancel(ctx, tenant, threadID)
	if err != nil || runID == "" {
		return err == nil, err
	}
	poll := r.clock.NewTicker(cancelPoll)
	defer poll.Stop()
	for {
		th, err := r.Store.GetThread(ctx, tenant, threadID)
		switch {
		case err != nil && ctx.Err() != nil:
			return false, nil
		case err != nil:
			return false, err
		case th.RunID != runID || th.Status != store.Running:
			return true, nil
		}
		for wait := true; wait; {
			select {
			case <-ctx.Done():
				return false, nil
			case e := <-sub.C:
				wait = e.RunID != runID || (e.Type != event.RunError && e.Type != event.RunFinished)
			case <-sub.Dropped:
				sub.Drain()
				wait = false
			case <-poll.C():
				wait = false
			}
		}
	}
}

// StopWait bounds how long Stop waits for the cancelled run to stop: a run
// stops within moments wherever it runs; one that does not stops later all
// the same.
const StopWait = 10 * time.Second

// Stop is CancelWait bounded by StopWait: what a cancel route, a Responses
// cancel and a follow-up that stops the running turn wait for.
func (r *Runner) Stop(ctx context.Context, tenant, threadID string) (bool, error) {
	ctx, done := context.WithTimeout(ctx, StopWait)
	defer done()
	return r.CancelWait(ctx, tenant, threadID)
}

// cancelPoll is how often CancelWait reads the thread again, should the
// run's end not reach it on the bus.
const cancelPoll = 250 * time.Millisecond

// requestCancel stores a cancel of the thread's running run and sends it
// to the run: to its context at once when this runner drives it, else on
// the thread's control topic. It returns the run's id ("" when the thread
// runs nothing).
func (r *Runner) requestCancel(ctx context.Context, tenant, threadID string) (string, error) {
	runID, err := r.Store.RequestCancel(ctx, tenant, threadID, r.Now())
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		// The store is unreachable: a run driven here still stops.
		if id := r.cancelLocal(tenant, threadID, ""); id != "" {
			return id, nil
		}
		return "", err
	}
	if runID == "" || r.cancelLocal(tenant, threadID, runID) != "" {
		return runID, nil
	}
	r.Bus.PublishControl(tenant, threadID, event.Event{Type: event.ControlChanged, ThreadID: threadID, RunID: runID})
	return runID, nil
}

// cancelLocal cancels the durable run of the thread this runner drives,
// when it is runID (any run when runID is ""), and returns its id ("" when
// this runner drives no such run).
func (r *Runner) cancelLocal(tenant, threadID, runID string) string {
	r.mu.Lock()
	lr, ok := r.cancels[[2]string{tenant, threadID}]
	r.mu.Unlock()
	if !ok || (runID != "" && lr.runID != runID) {
		return ""
	}
	lr.cancel(ErrCancelled)
	return lr.runID
}

// localRun is a durable run this runner drives, as Cancel finds it.
type localRun struct {
	runID  string
	cancel context.CancelCauseFunc
}

// cancellable makes ctx cancellable by Cancel for a durable run of a
// thread; cancel is what stops it, done forgets it.
func (r *Runner) cancellable(ctx context.Context, tenant, threadID, runID string) (_ context.Context, cancel context.CancelCauseFunc, done func()) {
	ctx, cancel = context.WithCancelCause(ctx)
	key := [2]string{tenant, threadID}
	r.mu.Lock()
	if r.cancels == nil {
		r.cancels = map[[2]string]localRun{}
	}
	r.cancels[key] = localRun{runID: runID, cancel: cancel}
	r.mu.Unlock()
	return ctx, cancel, func() {
		r.mu.Lock()
		if r.cancels[key].runID == runID {
			delete(r.cancels, key)
		}
		r.mu.Unlock()
		cancel(nil)
	}
}

// Wait blocks until every background run ends.
func (r *Runner) Wait() { r.wg.Wait() }

// releaseWait bounds how long Shutdown waits, after its grace period, for
// stopped runs to release their leases.
const releaseWait = 5 * time.Second

// Shutdown stops admitting runs (Start returns ErrShuttingDown; decisions
// and recovery leave their runs queued for the next start) and waits for the
// runs in flight to end until ctx is done. Then it stops the rest: each
// durable one releases its thread's lease without being marked failed, so
// another replica, or this server's next start, resumes it at once; a
// stateless one ends with ErrShuttingDown. It returns ctx's error when runs
// had to be stopped.
func (r *Runner) Shutdown(ctx context.Context) error {
	r.mu.Lock()
	if !r.closing {
		close(r.draining)
	}
	r.closing = true
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	r.stop(ErrShuttingDown)
	t := time.NewTimer(releaseWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		r.Logger.Warn("runs did not stop after the shutdown grace period; their leases lapse instead")
	}
	return ctx.Err()
}

// acquire returns the agent of that name, held until release so a reload
// does not close it under a turn that uses it; nil for an unknown agent.
func (r *Runner) acquire(name string) *agent.Spec {
	r.mu.Lock()
	defer r.mu.Unlock()
	spec := r.Agents.Get(name)
	if spec != nil {
		r.inflight[spec]++
	}
	return spec
}

// hold keeps a spec open for one more user; release gives it back, closing
// a retired spec when its last user ends.
func (r *Runner) hold(spec *agent.Spec) {
	r.mu.Lock()
	r.inflight[spec]++
	r.mu.Unlock()
}

func (r *Runner) release(spec *agent.Spec) {
	if spec == nil {
		return
	}
	r.mu.Lock()
	r.inflight[spec]--
	last := r.inflight[spec] <= 0
	if last {
		delete(r.inflight, spec)
	}
	retired := last && r.retired[spec]
	if retired {
		delete(r.retired, spec)
	}
	r.mu.Unlock()
	if retired {
		r.closeSpec(spec)
	}
}

// Retire takes agent specs a reload replaced (Registry.Replace's result):
// each is closed, and the runner's per-spec caches dropped, as soon as the
// turns and runs that use it end (at once when none does).
func (r *Runner) Retire(specs []*agent.Spec) {
	var now []*agent.Spec
	r.mu.Lock()
	for _, s := range specs {
		if r.inflight[s] > 0 {
			r.retired[s] = true
		} else {
			now = append(now, s)
		}
	}
	r.mu.Unlock()
	for _, s := range now {
		r.closeSpec(s)
	}
}

func (r *Runner) closeSpec(s *agent.Spec) {
	r.toolsets.Delete(s)
	r.builtins.Delete(s)
	r.models.Delete(s)
	if s.Close != nil {
		s.Close()
	}
}

// Run is a started turn. Read its events with Events.
type Run struct {
	ID       string
	ThreadID string
	// Existed is true when the durable thread existed before this turn.
	Existed bool
	events  chan event.Event
	gone    chan struct{}
	once    sync.Once
	// tenant and store read a pause the run did not make itself (Pause).
	tenant string
	store  store.Store
	mu     sync.Mutex
	// end is the terminal event the consumer read; known the decisions
	// the run wrote or read as pending (Pause).
	end   *event.Event
	known map[string]store.Interrupt
	// abandoned is what Abandon tells the runner (a durable run's: its
	// client went away); nil for none.
	abandoned func()
}

// Abandon tells the run that its client went away before its end (the
// request's context ended: a Stop button, a closed tab, a dropped
// connection): the consumer is detached at once and, for a durable turn,
// the runner is told (Config.CancelOnDisconnect: the run is cancelled;
// else it goes on and a new message on the thread stops it, while a retry
// attaches to it). Calling it after the run's end, or twice, does nothing
// more.
func (run *Run) Abandon() {
	run.mu.Lock()
	ended, tell := run.end != nil, run.abandoned
	run.abandoned = nil
	run.mu.Unlock()
	run.detach()
	if !ended && tell != nil {
		tell()
	}
}

// Events yields the run's events until its terminal event: RunFinished, or
// RunError carrying its typed cause in Err. Stopping early detaches the
// consumer: a durable run goes on and is stored; a stateless run is
// cancelled through its request context.
func (run *Run) Events() iter.Seq[event.Event] {
	return func(yield func(event.Event) bool) {
		defer run.detach()
		for {
			var e event.Event
			select {
			case <-run.gone:
				return // abandoned: no more events for this consumer
			case ev, ok := <-run.events:
				if !ok {
					return
				}
				e = ev
			}
			if e.Type == event.RunFinished || e.Type == event.RunError {
				run.ended(e)
			}
			if !yield(e) {
				return
			}
		}
	}
}

// runBuffer is how many events a run's producer gets ahead of its
// consumer: enough for a burst of deltas, small enough that a turn does not
// allocate a large buffer (an event is about 340 bytes).
const runBuffer = 16

func newRun(id, threadID string) *Run {
	return &Run{ID: id, ThreadID: threadID, events: make(chan event.Event, runBuffer), gone: make(chan struct{})}
}

// Buffered returns how many events are ready to read without waiting: a
// streaming consumer flushes its output when none is.
func (run *Run) Buffered() int { return len(run.events) }

func (run *Run) detach() { run.once.Do(func() { close(run.gone) }) }

// deliver sends e to the run's consumer; false once the consumer is gone.
func (run *Run) deliver(e event.Event) bool {
	select {
	case run.events <- e:
		return true
	case <-run.gone:
		return false
	}
}

// Start validates a turn and, for a durable one, takes the thread's lease and
// stores the new input. Errors are returned before any event: unknown agent,
// 409s, bad input. The run then proceeds in the background.
func (r *Runner) Start(ctx context.Context, in Input) (*Run, error) {
	run, err := r.start(ctx, in, 2)
	r.adviseWait(err)
	return run, err
}

// adviseWait shortens the wait a refusal because a run holds the thread
// (store.RunInProgressError.Wait, the response's retry-after) when that
// run is alive: more than half its lease is left, so it renewed the lease
// within the last renewal period (every third of the lease). A live run
// may end at any moment, and the lease left says nothing of when, so the
// client is told to try again in a second rather than in up to a lease.
// A run that stopped renewing (its process died) frees the thread when
// its lease runs out, which is what Wait says.
func (r *Runner) adviseWait(err error) {
	if rip := (*store.RunInProgressError)(nil); errors.As(err, &rip) && rip.Wait > r.Lease/2 {
		rip.Wait = time.Second
	}
}

// start is Start; a durable turn whose thread moved on between the read and
// BeginRun (store.RunInProgressError.Changed) is started again from the
// read, at most tries more times.
func (r *Runner) start(ctx context.Context, in Input, tries int) (*Run, error) {
	x, run, done, err := r.enter(&in)
	if err != nil {
		return nil, err
	}
	defer done()
	x.parent = trace.SpanContextFromContext(ctx)
	// A spent budget refuses the turn before anything is stored.
	if err := x.overBudget(ctx); err != nil {
		return nil, err
	}
	x.budgetChecked = len(r.Budgets) > 0
	spec := x.spec
	if !x.durable {
		// A turn of an agent with tools is journaled for client retries;
		// its digest covers the request as sent (newInput gives ids).
		var digest string
		journaled := r.JournalTTL > 0 && len(x.tools) > 0
		if journaled {
			var err error
			if digest, err = turnDigest(in); err != nil {
				return nil, err
			}
		}
		msgs, err := x.newInput(nil, in.Messages)
		if err != nil {
			return nil, err
		}
		if len(msgs) == 0 {
			return nil, inputError(FieldMessages, "messages must hold at least one non-system message")
		}
		x.msgs = msgs
		if journaled {
			if err := x.openJournal(ctx, digest); err != nil {
				return nil, err
			}
		}
		x.run = run
		r.spawnUnder(ctx, spec, func(ctx context.Context) { x.drive(ctx, nil) })
		return run, nil
	}

	turn, err := sessionTurn(in)
	if err != nil {
		return nil, err
	}
	if in.queued != nil {
		turn = in.queued.Turn // as the request that queued it sent it
	}
	th, stored, err := r.load(ctx, in.Tenant, in.ThreadID, spec.Name)
	if th != nil && !in.sees(th) {
		// Another user's thread is not found, whatever it holds.
		return nil, notTheirs(th)
	}
	if in.Reports && th != nil && th.WaitingSeq > 0 && th.Agent == spec.Name {
		// Before anything else (a resume the decision queued may still
		// run): the caller asks for the decisions still pending, or
		// follows the turn to its end, and reports it.
		return nil, &UnreportedPauseError{ThreadID: th.ID, Seq: th.WaitingSeq, Pending: errors.Is(err, store.ErrApprovalPending)}
	}
	if errors.Is(err, store.ErrApprovalPending) && in.Resync {
		ok, rerr := r.reattach(ctx, spec, in, run)
		if rerr != nil {
			return nil, rerr
		}
		if ok {
			return run, nil
		}
	}
	// A client sending its whole conversation may leave the stored one at
	// an earlier message (an edit, a regenerate): the turn then goes on from
	// there, on a new branch (diverge).
	d := divergence{sent: in.Messages}
	if in.History && th != nil && err == nil {
		seen := stored
		if in.interrupted > 0 {
			seen = upTo(stored, in.interrupted)
		}
		d = diverge(seen, in.Messages)
	}
	// A regenerate that also changes the state is still a regenerate: the
	// same messages as the last turn's with other state are not its retry.
	known := bringsNothing(stored, in.Messages)
	// A client that rebuilds its view from the stream (AG-UI) and sends no
	// message at all reconnects, as a reloaded page does: nothing new.
	reconnects := in.Resync && !hasTurnMessage(in.Messages)
	nothingNew := (known || reconnects) && !changesState(th, in.State)
	kind, rerr := r.retries(th, spec.Name, turn, nothingNew, in.Continues, d.regen && known)
	if in.queued != nil {
		// A queued turn starts as itself: it was queued, not retried,
		// whatever the thread's last turn sent.
		kind, rerr = newTurn, nil
	}
	queues := false
	if rerr == nil && kind == newTurn && !nothingNew && hasTurnMessage(in.Messages) {
		queues, rerr = r.queues(ctx, in, th, err, multitask(in, spec))
	}
	switch {
	case rerr != nil:
		return nil, rerr
	case queues:
		if in.History && th != nil {
			// A follow-up sent with the whole conversation is read against
			// the thread as its client saw it, not as it will be when the
			// follow-up runs: the turn it waits for (unanswered then, its
			// steps so far held) is not new, and the answer it gets later
			// is not left out (diverge would branch before it). It is
			// queued as its new messages only.
			if q := diverge(turnQuestion(stored, th), in.Messages); q.from == 0 && !q.regen {
				in.Messages, in.History = unknownMessages(stored, q.sent), false
			}
		}
		return r.enqueue(ctx, in, turn, run)
	case in.queued != nil && err != nil:
		return nil, err // the thread is busy again: its turn's end drains
	case kind == attachRetry:
		r.attach(in, th, run)
		return run, nil
	case err != nil && errors.Is(err, store.ErrRunInProgress) && th != nil && th.Status == store.Running && tries > 0 &&
		!nothingNew && hasTurnMessage(in.Messages):
		// A new message on a running thread. When the running turn lost
		// its client (a Stop, a closed tab), the message stops it, as its
		// client would have, and goes on at once; when the client is going
		// away just now (a Stop and the next message sent at once), it
		// waits a moment for that.
		// A double-text goes by the request's strategy, else the agent's.
		if strategy := multitask(in, spec); th.Abandoned || strategy != agent.MultitaskReject {
			if strategy == agent.MultitaskRollback && !th.Abandoned {
				// Its messages are left behind: the follow-up goes on from
				// the message before them, on a new branch.
				in.rollback = rollbackPoint(stored, th.Turn.FirstMessage)
			}
			if strategy == agent.MultitaskInterrupt && !th.Abandoned {
				in.interrupted = th.Turn.FirstMessage
			}
			if err := r.stopTurn(ctx, th, strategy); err != nil {
				return nil, err
			}
			return r.start(ctx, in, tries-1)
		}
		if r.waitBusy(ctx, th) {
			return r.start(ctx, in, tries-1)
		}
		return nil, err
	case err != nil:
		return nil, err
	case kind == continueRetry:
		if err := r.continueTurn(ctx, x, th, stored, run); err != nil {
			if rip := (*store.RunInProgressError)(nil); errors.As(err, &rip) && rip.Changed && tries > 0 {
				return r.start(ctx, in, tries-1) // another retry went first: read it again
			}
			return nil, err
		}
		return run, nil
	}
	if th != nil {
		// A call the thread's last run started and left without a result
		// may have run: the thread is recovered (the call made in doubt)
		// before any new turn, whoever takes it.
		doubt, err := r.startedUnanswered(ctx, th, stored)
		if err != nil {
			return nil, err
		}
		if doubt {
			if tries == 0 {
				return nil, &store.RunInProgressError{ThreadID: th.ID, Why: "its last run is being recovered: "}
			}
			if err := r.recoverFirst(ctx, spec, th, stored); err != nil {
				return nil, err
			}
			// Recovered: the turn is read again as any other, so each
			// wire answers the decision its own way (a 409, or an AG-UI
			// run that shows the interrupt).
			return r.start(ctx, in, tries-1)
		}
	}
	// A request continuing an earlier turn goes on from that turn's end:
	// its conversation is the path to it, and the turn starts a branch
	// there (BeginRun.From).
	head, sent := stored, d.sent
	from := branchPoint(in, th, stored)
	if from == 0 {
		from = d.from
	}
	if from == 0 {
		from = in.rollback
	}
	switch {
	case from > 0:
		if stored, err = r.Store.MessagesTo(ctx, in.Tenant, in.ThreadID, from); err != nil {
			return nil, err
		}
	case from == store.FromStart:
		stored = nil
	}
	existed, failed := th != nil, th != nil && th.Status == store.Failed && from == 0
	run.Existed = existed
	newMsgs, err := x.newInput(stored, sent)
	if err != nil {
		return nil, err
	}
	if failed && repeatsTail(stored, newMsgs) {
		// A retry of a turn that failed: its input is stored already.
		newMsgs = nil
	}
	// A branch from a message that asks for an answer (a regenerate) brings
	// no new message and needs none.
	answers := from != 0 && len(stored) > 0 && stored[len(stored)-1].Role != message.Assistant
	if len(newMsgs) == 0 && len(message.PendingCalls(stored)) == 0 && !(failed && endsWithUser(stored)) && !answers {
		return nil, inputError(FieldMessages, "The request holds no new message to answer.")
	}
	now := r.Now()
	// The store writes the event's sequence number back into this slice.
	startedEvs := []event.Event{{Type: event.RunStarted, ThreadID: in.ThreadID, RunID: x.runID, Time: now.UnixMilli()}}
	begun, err := r.Store.BeginRun(ctx, store.BeginRun{
		Tenant: in.Tenant, ThreadID: in.ThreadID, Agent: spec.Name, RunID: x.runID, Owner: r.Owner,
		User: in.userID(), AnyOwner: in.AnyOwner, Now: now, LeaseUntil: now.Add(r.Lease), Input: newMsgs, Events: startedEvs, Options: optionsOf(in),
		Known: len(head), From: from, Turn: turn, New: th == nil, Expect: expect(th), Head: headOf(th),
		Dequeue: queuedID(in),
	})
	if rip := (*store.RunInProgressError)(nil); errors.As(err, &rip) && rip.Changed && tries > 0 {
		return r.start(ctx, in, tries-1)
	}
	if errors.Is(err, store.ErrRunInProgress) && in.queued == nil {
		// Another attempt of this turn may have begun it since the read.
		if th, gerr := r.Store.GetThread(ctx, in.Tenant, in.ThreadID); gerr == nil {
			if kind, rerr := r.retries(th, spec.Name, turn, false, in.Continues, false); rerr != nil {
				return nil, rerr
			} else if kind == attachRetry {
				r.attach(in, th, run)
				return run, nil
			}
			// As above (a running thread): a follow-up that queues reads
			// the thread again and queues; another waits a moment for the
			// turn to end or be left, then goes on.
			if multitask(in, spec) == agent.MultitaskEnqueue && tries > 0 {
				return r.start(ctx, in, tries-1)
			}
			if th.Status == store.Running && tries > 0 && r.waitBusy(ctx, th) {
				return r.start(ctx, in, tries-1)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	started := startedEvs[0]
	// The conversation as of the lease: what was read, then what BeginRun
	// read after it (a turn that ended between the first read and BeginRun
	// is part of it) and the new input.
	x.msgs = append(head[:len(head):len(head)], begun.Messages...)
	if from != 0 {
		x.msgs = begun.Messages // the path the turn goes on, whole
	}
	x.state = begun.State
	seeded := in.State
	if from != 0 && th != nil {
		// A branch starts from the state at its branch point: the keys the
		// client sends as the thread's head had them are what it was last
		// shown, not its edits.
		seeded = changedKeys(th.State, seeded)
	}
	if len(seeded) > 0 {
		// Seeded keys merge into the state read under the run's lease, so
		// no other run's change is lost.
		merged, err := mergeState(begun.State, seeded)
		if err == nil {
			err = x.checkpoint(ctx, store.Checkpoint{State: merged})
		}
		if err != nil {
			x.failAsync(run, err)
			return run, nil
		}
		x.state = merged
	}
	r.Bus.Publish(in.Tenant, in.ThreadID, started)
	x.run = run
	r.watchAbandon(run, in.Tenant, in.ThreadID, x.runID)
	r.spawn(spec, func(ctx context.Context) { x.drive(ctx, &started) })
	return run, nil
}

// queuedID is the id of the queued turn in starts, "" for a turn that was
// not queued.
func queuedID(in Input) string {
	if in.queued == nil {
		return ""
	}
	return in.queued.ID
}

// hasTurnMessage reports whether msgs hold a message of the conversation
// (not only system messages).
func hasTurnMessage(msgs []message.Message) bool {
	for _, m := range msgs {
		if m.Role != message.System {
			return true
		}
	}
	return false
}

// busyWait bounds how long a new message on a running thread waits for
// its turn to end or lose its client (waitBusy) before it is refused.
const busyWait = time.Second

// waitBusy waits, at most busyWait, until the thread no longer runs th's
// run or that run's client went away (Thread.Abandoned), and reports
// whether it did.
func (r *Runner) waitBusy(ctx context.Context, th *store.Thread) bool {
	sub := r.Bus.Subscribe(th.Tenant, th.ID)
	defer sub.Close()
	deadline := r.clock.NewTimer(busyWait)
	defer deadline.Stop()
	poll := r.clock.NewTicker(busyPoll)
	defer poll.Stop()
	for {
		now, err := r.Store.GetThread(ctx, th.Tenant, th.ID)
		if err != nil {
			return false
		}
		if now.Status != store.Running || now.RunID != th.RunID || now.Abandoned {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C():
			return false
		case <-sub.C:
		case <-sub.Dropped:
			sub.Drain()
		case <-poll.C():
		}
	}
}

// busyPoll is how often waitBusy reads the thread again (an abandoned run
// is recorded in the store, not announced).
const busyPoll = 25 * time.Millisecond

// multitask is the double-texting strategy of a turn: the request's, else
// its agent's, else reject.
func multitask(in Input, spec *agent.Spec) string {
	switch {
	case in.Multitask != "":
		return in.Multitask
	case spec.Multitask != "":
		return spec.Multitask
	}
	return agent.MultitaskReject
}

// rollbackPoint is the message before a turn's first (first, a message
// seq) on the conversation head: what a rolled-back turn's follow-up goes
// on from (store.FromStart before the first message; the conversation's
// last message when the turn appended none on it).
func rollbackPoint(head []message.Message, first int64) int64 {
	for i, m := range head {
		if m.Seq == first {
			if i == 0 {
				return store.FromStart
			}
			return head[i-1].Seq
		}
	}
	if n := len(head); n > 0 {
		return head[n-1].Seq
	}
	return 0
}

// stopTurn cancels the thread's running turn for a new message (its
// client went away, or the message interrupts or rolls it back), wherever
// it runs, and waits (Stop) until it has stopped.
func (r *Runner) stopTurn(ctx context.Context, th *store.Thread, strategy string) error {
	why := "a new message stops the turn its client left"
	if !th.Abandoned {
		why = "a new message stops the running turn (" + strategy + ")"
	}
	r.Logger.Info(why, "thread", th.ID, "run", th.RunID)
	_, err := r.Stop(ctx, th.Tenant, th.ID)
	return err
}

// watchAbandon makes run's Abandon tell the runner that the client of the
// durable run runID went away: the run is cancelled
// (CancelOnDisconnect), or recorded as abandoned so that a new message
// stops it (Store.AbandonRun), through any replica.
func (r *Runner) watchAbandon(run *Run, tenant, threadID, runID string) {
	r.onAbandon(run, threadID, runID, func(ctx context.Context) error {
		if r.CancelOnDisconnect {
			r.Logger.Info("the client went away: the run is cancelled", "thread", threadID, "run", runID)
			return r.Cancel(ctx, tenant, threadID)
		}
		return r.Store.AbandonRun(ctx, tenant, threadID, runID)
	})
}

// onAbandon makes run's Abandon run tell in the background (its failure
// logged): what the runner does when the client of run runID goes away.
func (r *Runner) onAbandon(run *Run, threadID, runID string, tell func(ctx context.Context) error) {
	run.mu.Lock()
	defer run.mu.Unlock()
	run.abandoned = func() {
		r.background(func(ctx context.Context) {
			if err := tell(ctx); err != nil {
				r.Logger.Warn("record a run its client left", "thread", threadID, "run", runID, "err", err)
			}
		})
	}
}

// branchPoint is the message a durable turn goes on from when it continues
// an earlier turn of the thread (in.Continues with a known end) that is not
// the end of the conversation (head): 0 when it goes on from the end.
func branchPoint(in Input, th *store.Thread, head []message.Message) int64 {
	c := in.Continues
	if c == nil || c.Next == 0 || c.From == 0 || th == nil {
		return 0
	}
	if n := len(head); n > 0 && head[n-1].Seq == c.From {
		return 0
	}
	return c.From
}

// enter admits a turn (ErrShuttingDown once Shutdown began) and prepares
// it; done ends the admission and releases the agent's spec, once the turn
// has started its run or failed to.
func (r *Runner) enter(in *Input) (x *execution, run *Run, done func(), err error) {
	if !r.admit() {
		return nil, nil, nil, ErrShuttingDown
	}
	if x, run, err = r.prepare(in); err != nil {
		r.wg.Done()
		return nil, nil, nil, err
	}
	return x, run, func() { r.release(x.spec); r.wg.Done() }, nil
}

// prepare checks what every turn checks (the agent, client tools, response
// format, seeded state) and makes its execution and Run; in.State keeps the
// agent's editable keys only. It holds the agent's spec (acquire): the
// caller releases x.spec when the turn has started or failed.
func (r *Runner) prepare(in *Input) (x *execution, run *Run, err error) {
	spec := r.acquire(in.Agent)
	if spec == nil {
		return nil, nil, &UnknownAgentError{Name: in.Agent}
	}
	defer func() {
		if err != nil {
			r.release(spec)
		}
	}()
	x, err = r.newExecution(spec, in.Tenant, in.ThreadID)
	if err != nil {
		return nil, nil, err
	}
	switch in.Multitask {
	case "", agent.MultitaskReject, agent.MultitaskEnqueue, agent.MultitaskInterrupt, agent.MultitaskRollback:
	default:
		return nil, nil, inputError(FieldMultitask, "Unknown multitask strategy %q: use reject, enqueue, interrupt or rollback.", in.Multitask)
	}
	if err := checkClientTools(in.ClientTools, r.toolsetOf(spec).own); err != nil {
		return nil, nil, err
	}
	if in.ResponseFormat, err = outputFormat(spec, in.ResponseFormat); err != nil {
		return nil, nil, err
	}
	if in.Model != "" {
		if err := r.checkModel(spec, in.Model); err != nil {
			return nil, nil, err
		}
		if err := x.pickModel(in.Model); err != nil {
			return nil, nil, err
		}
	}
	if err := honours(x.provider, cmp.Or(x.modelRef, spec.Model), in.ResponseFormat); err != nil {
		return nil, nil, err
	}
	x.system = systemPrompt(spec.Instructions, clientSystem(in.Messages))
	runID := in.RunID
	if runID == "" {
		runID = r.NewID("run")
	}
	x.runID = runID
	run = newRun(runID, in.ThreadID)
	run.tenant, run.store = in.Tenant, r.Store
	if len(in.State) > 0 {
		if !x.durable {
			return nil, nil, contractError(CodeNeedsThread, "Seeding state needs a threadId: a stateless run has no state to write to.")
		}
		kept, dropped, err := FilterState(spec, in.State)
		if err != nil {
			return nil, nil, err
		}
		if len(dropped) > 0 {
			r.Logger.Debug("dropped state keys the agent does not list as editable", "agent", spec.Name, "keys", dropped)
		}
		in.State = kept
	}
	x.in = *in
	return x, run, nil
}

// describe gives an error's public code and message (Describe).
func (r *Runner) describe(err error) (code, message string) {
	if r.Describe != nil {
		return r.Describe(err)
	}
	var ie *InputError
	var fe *FormatMismatchError
	var ins *InstructionsError
	switch {
	case errors.As(err, &ie):
		return ie.Code, ie.Reason
	case errors.As(err, &ins):
		return CodeInstructionsFailed, ins.Error()
	case errors.As(err, &fe):
		return CodeFormatMismatch, fe.Error()
	case errors.Is(err, ErrShuttingDown):
		return CodeShuttingDown, MessageShuttingDown
	case errors.Is(err, ErrCancelled):
		return CodeCancelled, MessageCancelled
	}
	return "internal_error", "Internal server error."
}

// outputFormat is the response format of a turn: the client's, unless the
// agent declares its output (Spec.Output). Then the agent's json_schema
// applies; a client asking for json_object or for the same schema gets it
// (the answer is both), a client asking for another schema is refused (400)
// rather than answered in a shape it did not ask for.
func outputFormat(spec *agent.Spec, client *model.ResponseFormat) (*model.ResponseFormat, error) {
	own := spec.OutputFormat()
	if own == nil || client == nil || client.Type == model.FormatJSONObject {
		if own == nil {
			return client, nil
		}
		return own, nil
	}
	if client.Type == model.FormatJSONSchema && jsonEqual(client.Schema, own.Schema) {
		return own, nil
	}
	return nil, inputError(FieldResponseFormat, "Agent `%s` declares its output schema, and this response_format asks for another one: "+
		"leave response_format out (or send the agent's schema) to get the agent's output.", spec.Name)
}

// honours refuses a response format the agent's provider cannot honour,
// before anything is stored: a format is never dropped silently.
func honours(p model.Provider, ref string, f *model.ResponseFormat) error {
	if f == nil {
		return nil
	}
	if h, ok := p.(model.FormatHonourer); ok && h.HonoursFormat(*f) {
		return nil
	}
	return inputError(FieldResponseFormat, "The agent's model `%s` cannot answer in response_format `%s`.", ref, f.Type)
}

// load returns a thread (nil for a new one) and its stored messages,
// checking it belongs to agentName and accepts input. A thread of the agent
// that does not is returned with the admission error (and its messages), so
// a retry of its turn in flight can still attach to it.
func (r *Runner) load(ctx context.Context, tenant, threadID, agentName string) (*store.Thread, []message.Message, error) {
	th, err := r.Store.GetThread(ctx, tenant, threadID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	admitErr := store.Admit(th, agentName, r.Now())
	if errors.Is(admitErr, store.ErrAgentMismatch) {
		return th, nil, admitErr
	}
	msgs, err := r.Store.Messages(ctx, tenant, threadID)
	if err != nil {
		return nil, nil, err
	}
	return th, msgs, admitErr
}

// turnQuestion is the conversation up to the first message of th's turn
// in progress (running, or waiting on a decision): what a client that sends
// a follow-up while it goes on holds for sure. The client may hold some of
// the turn's steps too, or none yet, and is not branching away from the
// ones it lacks. On an idle thread it is head.
func turnQuestion(head []message.Message, th *store.Thread) []message.Message {
	if th.Status != store.Running && th.Status != store.Waiting {
		return head
	}
	return upTo(head, th.Turn.FirstMessage)
}

// upTo is head up to its message seq (all of head without it).
func upTo(head []message.Message, seq int64) []message.Message {
	for i, m := range head {
		if m.Seq == seq {
			return head[:i+1]
		}
	}
	return head
}

// unknownMessages are the messages of sent that stored does not hold by
// id (all of them for a client that does not name its messages).
func unknownMessages(stored, sent []message.Message) []message.Message {
	known := make(map[string]bool, len(stored))
	for _, m := range stored {
		known[m.ID] = true
	}
	var out []message.Message
	for _, m := range sent {
		if m.ID == "" || !known[m.ID] {
			out = append(out, m)
		}
	}
	return out
}

// repeatsTail reports whether msgs repeat the user messages that end stored
// (a client retrying a failed turn).
func repeatsTail(stored, msgs []message.Message) bool {
	if len(msgs) == 0 || len(msgs) > len(stored) {
		return false
	}
	tail := stored[len(stored)-len(msgs):]
	for i := range msgs {
		if msgs[i].Role != message.User || tail[i].Role != message.User || msgs[i].Content != tail[i].Content {
			return false
		}
	}
	return true
}

func endsWithUser(msgs []message.Message) bool {
	return len(msgs) > 0 && msgs[len(msgs)-1].Role == message.User
}

func (r *Runner) withID(m message.Message) message.Message {
	if m.ID == "" {
		m.ID = r.NewID("msg")
	}
	return m
}

// systemPrompt joins the agent's instructions with the client's system
// text of the turn.
func systemPrompt(instructions, client string) string {
	switch {
	case client == "":
		return instructions
	case instructions == "":
		return client
	}
	return instructions + "\n\n" + client
}

// clientSystem joins the system messages a client sent.
func clientSystem(msgs []message.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		if m.Role == message.System && m.Content != "" {
			if b.Len() > 0 {
				b.WriteString("\n\n")
			}
			b.WriteString(m.Content)
		}
	}
	return b.String()
}

// newInput picks what a client's messages add to a stored conversation (an
// empty one for a stateless turn). A client may send only its new messages or
// the whole history: for a stored conversation the new input is what follows
// the client's last assistant message.
//
// Client messages are history, never instructions to run something: a tool
// call inside a client-sent assistant message is not run by the server (it
// gets a result saying so), only calls of the client's own tools stay open
// for the client to answer. A tool message for a call that already has a
// result is dropped; one for a call nobody made is a 400. Calls left open
// when a new user or assistant message arrives get a result first, so the
// conversation stays well formed for the model.
func (x *execution) newInput(stored, sent []message.Message) ([]message.Message, error) {
	type indexed struct {
		i int
		m message.Message
	}
	var convo []indexed
	for i, m := range sent {
		if m.Role != message.System {
			convo = append(convo, indexed{i, m})
		}
	}
	if len(stored) > 0 {
		for j := len(convo) - 1; j >= 0; j-- {
			if convo[j].m.Role == message.Assistant {
				convo = convo[j+1:]
				break
			}
		}
	}
	known := map[string]bool{}
	made := map[string]bool{} // every call id of the conversation
	answered := map[string]bool{}
	for _, m := range stored {
		known[m.ID] = true
		for _, c := range m.ToolCalls {
			made[c.ID] = true
		}
		if m.Role == message.Tool {
			answered[m.ToolCallID] = true
		}
	}
	// open holds calls without a result, in order; fromClient marks those
	// that came in this request's history.
	type openCall struct {
		c          message.ToolCall
		fromClient bool
	}
	var open []openCall
	for _, c := range message.PendingCalls(stored) {
		open = append(open, openCall{c: c})
	}
	var out []message.Message
	result := func(oc openCall) {
		answered[oc.c.ID] = true
		text := "The call was interrupted before it completed."
		switch {
		case oc.c.Client:
			text = "The client did not return a result for this call."
		case oc.fromClient:
			text = "This call came from the client's history, not from the agent; the server did not run it."
		}
		out = append(out, message.Message{ID: x.r.NewID("msg"), Role: message.Tool, ToolCallID: oc.c.ID, ToolName: oc.c.Name,
			Content: text, IsError: true})
	}
	closeOpen := func() {
		for _, oc := range open {
			if !answered[oc.c.ID] {
				result(oc)
			}
		}
		open = nil
	}
	for _, im := range convo {
		m := im.m
		if m.ID != "" && known[m.ID] {
			continue
		}
		switch m.Role {
		case message.Tool:
			if answered[m.ToolCallID] {
				continue // already executed or answered
			}
			found := false
			for _, oc := range open {
				if oc.c.ID == m.ToolCallID {
					found = true
					if m.ToolName == "" {
						m.ToolName = oc.c.Name
					}
				}
			}
			if !found {
				if made[m.ToolCallID] {
					continue
				}
				e := inputError(FieldToolCallID, "No tool call with the id %q is waiting for a result.", m.ToolCallID)
				e.Index = im.i
				return nil, e
			}
			answered[m.ToolCallID] = true
		case message.Assistant:
			closeOpen()
			for j := range m.ToolCalls {
				c := &m.ToolCalls[j]
				if c.ID == "" {
					c.ID = x.r.NewID("call")
				}
				if x.tools[c.Name] == nil && x.isClientTool(c.Name) {
					c.Client = true
				}
				made[c.ID] = true
				open = append(open, openCall{c: *c, fromClient: true})
			}
		default:
			closeOpen()
		}
		out = append(out, x.r.withID(m))
	}
	// Calls of server tools from the client's history never run.
	for _, oc := range open {
		if oc.fromClient && !oc.c.Client && !answered[oc.c.ID] {
			result(oc)
		}
	}
	return out, nil
}

// changedKeys are the keys whose values differ from base's (a state
// object): all of keys when base is not an object.
func changedKeys(base json.RawMessage, keys map[string]json.RawMessage) map[string]json.RawMessage {
	var b map[string]json.RawMessage
	if len(keys) == 0 || json.Unmarshal(base, &b) != nil {
		return keys
	}
	out := make(map[string]json.RawMessage, len(keys))
	for k, v := range keys {
		if old, ok := b[k]; !ok || !jsonEqual(old, v) {
			out[k] = v
		}
	}
	return out
}

// mergeState sets the given keys of a state object.
func mergeState(base json.RawMessage, keys map[string]json.RawMessage) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(base) > 0 {
		if err := json.Unmarshal(base, &m); err != nil {
			return nil, fmt.Errorf("stored state is not an object: %w", err)
		}
	}
	for k, v := range keys {
		m[k] = v
	}
	return json.Marshal(m)
}

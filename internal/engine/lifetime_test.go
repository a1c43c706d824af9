package engine_test

import (
	"context"
	"errors"
	"iter"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/clock"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/store/sqlite"
	"github.com/stackbone/stackbone/internal/testwait"
)

// t0 is where the fake clocks of these tests start.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// gated is a model that answers text once released, and reports each call
// on entered. It ignores cancellation when deaf (a process that hangs);
// with fail set it fails once released instead of answering.
type gated struct {
	text    string
	entered chan struct{}
	release chan struct{}
	deaf    bool
	fail    error
}

func newGated(text string) *gated {
	return &gated{text: text, entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (g *gated) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		g.entered <- struct{}{}
		if g.deaf {
			<-g.release
		} else {
			select {
			case <-g.release:
			case <-ctx.Done():
				yield(model.Chunk{}, ctx.Err())
				return
			}
		}
		if g.fail != nil {
			yield(model.Chunk{}, g.fail)
			return
		}
		if yield(model.Chunk{Type: model.Text, Text: g.text}, nil) {
			yield(model.Chunk{Type: model.Finish, Stop: event.StopEnd}, nil)
		}
	}
}

// fixed resolves every agent's model to one provider.
type fixed struct{ p model.Provider }

func (f fixed) Resolve(ref, agentDir string) (model.Provider, string, error) {
	return f.p, "test-model", nil
}

// lifetimeBundle is one database on a fake clock, with a store for each of
// two runners ("replicas").
type lifetimeBundle struct {
	clk   *clock.Fake
	store store.Store // runner a's, and the one assertions read
	other store.Store // runner b's
	spec  *agent.Spec
}

// drivers run a lifetime test on SQLite (one file, two runners) and on
// PostgreSQL (one schema, a store per replica).
var drivers = []struct {
	name string
	open func(t *testing.T, clk clock.Clock) (a, b store.Store)
}{
	{"sqlite", func(t *testing.T, clk clock.Clock) (store.Store, store.Store) {
		s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "stackbone.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		s.SetClock(clk)
		t.Cleanup(func() { _ = s.Close() })
		return s, s
	}},
	{"postgres", func(t *testing.T, clk clock.Clock) (store.Store, store.Store) {
		a := stacktest.Postgres(t, "lifetime")
		b := stacktest.PostgresReplica(t, a)
		a.SetClock(clk)
		b.SetClock(clk)
		return a, b
	}},
}

// eachDriver runs fn once per driver, in parallel.
func eachDriver(t *testing.T, fn func(t *testing.T, b *lifetimeBundle)) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(t0)
			a, other := d.open(t, clk)
			fn(t, &lifetimeBundle{clk: clk, store: a, other: other,
				spec: &agent.Spec{Name: "helper", Model: "scripted/helper", Instructions: "Help."}})
		})
	}
}

// timersApart is a fake clock's time with timers on a fake clock of their
// own, which nothing advances: a runner on it never renews its lease by
// itself, so a run hung in a tool call is a process that died there, and
// advancing the bundle's clock lets its lease lapse.
type timersApart struct {
	*clock.Fake
	timers *clock.Fake
}

func (c timersApart) NewTimer(d time.Duration) clock.Timer   { return c.timers.NewTimer(d) }
func (c timersApart) NewTicker(d time.Duration) clock.Ticker { return c.timers.NewTicker(d) }

// runner is one process's runner over the bundle's database (runner "b"
// uses the second store), leases of an hour, on the fake clock; its timers
// (lease renewal, the follow poll) never fire (timersApart).
func (b *lifetimeBundle) runner(t *testing.T, owner string, p model.Provider) *engine.Runner {
	t.Helper()
	return b.runnerOn(t, owner, p, timersApart{b.clk, clock.NewFake(t0)})
}

// runnerOn is runner with the clock of its timers.
func (b *lifetimeBundle) runnerOn(t *testing.T, owner string, p model.Provider, clk clock.Clock) *engine.Runner {
	t.Helper()
	st := b.store
	if owner == "node-b" {
		st = b.other
	}
	r, err := engine.New(engine.Config{Store: st, Agents: agent.NewRegistry(b.spec), Models: fixed{p},
		Clock: clk, Owner: owner, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { waitRuns(t, r) }) // before the store closes
	return r
}

func (b *lifetimeBundle) thread(t *testing.T, id string) (*store.Thread, []message.Message) {
	t.Helper()
	th, err := b.store.GetThread(context.Background(), "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := b.store.Messages(context.Background(), "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	return th, msgs
}

func startTurn(t *testing.T, r *engine.Runner, thread string) *engine.Run {
	t.Helper()
	run, err := r.Start(context.Background(), engine.Input{Tenant: "acme", Agent: "helper", ThreadID: thread,
		Messages: []message.Message{{Role: message.User, Content: "hello"}}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	go func() {
		for range run.Events() {
			// drain: the consumer stays attached to the end
		}
	}()
	return run
}

// TestLiveRunRenewsItsLeaseOnFakeClock: a run whose model call outlasts the
// lease is not taken over while its process lives: its heartbeat renews the
// lease every third of it, on the runner's clock (here the fake one the
// test advances, three hours in twenty-minute steps).
func TestLiveRunRenewsItsLeaseOnFakeClock(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, b *lifetimeBundle) {
		slow := newGated("at last")
		a := b.runnerOn(t, "node-a", slow, b.clk)
		done := startTurnWithEvents(t, a, "t1", new(atomic.Value))
		testwait.Recv(t, slow.entered, "the model call to start")
		other := b.runner(t, "node-b", slow)
		for range 9 {
			b.clk.Advance(20 * time.Minute)
			want := b.clk.Now().Add(time.Hour)
			stacktest.WaitFor(t, "the heartbeat to renew the lease to "+want.String(), func() bool {
				th, _ := b.thread(t, "t1")
				return th.LeaseUntil.Equal(want)
			})
			if n, err := other.Recover(t.Context(), b.clk.Now()); err != nil || n != 0 {
				t.Fatalf("Recover at %s under A's renewed lease: %d, %v", b.clk.Now().Sub(t0), n, err)
			}
		}
		close(slow.release)
		testwait.Recv(t, done, "the turn to end")
		waitRuns(t, a)
		if th, _ := b.thread(t, "t1"); th.Status != store.Idle {
			t.Fatalf("thread after the slow turn: %s", th.Status)
		}
	})
}

// TestRecoverTakesOverLapsedLeaseOnFakeClock: a runner that hangs mid-run
// keeps its thread until its lease lapses (an hour, on a fake clock), then
// another runner's recovery takes the run over and finishes it; the hung
// runner's late write is refused.
func TestRecoverTakesOverLapsedLeaseOnFakeClock(t *testing.T) {
	t.Parallel()
	eachDriver(t, testRecoverTakesOver)
}

func testRecoverTakesOver(t *testing.T, b *lifetimeBundle) {
	hung := newGated("from A")
	hung.deaf = true
	a := b.runner(t, "node-a", hung)
	startTurn(t, a, "t1")
	testwait.Recv(t, hung.entered, "a call to start (hung.entered)")

	fresh := newGated("from B")
	close(fresh.release)
	other := b.runner(t, "node-b", fresh)
	b.clk.Advance(59 * time.Minute)
	if n, err := other.Recover(t.Context(), b.clk.Now()); err != nil || n != 0 {
		t.Fatalf("Recover under A's lease: %d, %v", n, err)
	}
	b.clk.Advance(2 * time.Minute)
	if n, err := other.Recover(t.Context(), b.clk.Now()); err != nil || n != 1 {
		t.Fatalf("Recover after A's lease lapsed: %d, %v", n, err)
	}
	waitRuns(t, other)
	close(hung.release) // A wakes up too late
	waitRuns(t, a)

	th, msgs := b.thread(t, "t1")
	if th.Status != store.Idle {
		t.Fatalf("thread after the takeover: %+v", th)
	}
	if last := msgs[len(msgs)-1]; last.Role != message.Assistant || last.Content != "from B" {
		t.Fatalf("last message %+v", last)
	}
	for _, m := range msgs {
		if m.Content == "from A" {
			t.Fatalf("the hung runner's answer was stored after it lost the lease: %+v", msgs)
		}
	}
}

// TestShutdownReleasesRunForTheNextRunner: a run still going when the grace
// period ends is stopped without failing; its thread is released, so another
// runner recovers it at once (no lease to wait for) and finishes it.
func TestShutdownReleasesRunForTheNextRunner(t *testing.T) {
	t.Parallel()
	eachDriver(t, testShutdownReleases)
}

func testShutdownReleases(t *testing.T, b *lifetimeBundle) {
	slow := newGated("from A")
	a := b.runner(t, "node-a", slow)
	var outcome atomic.Value
	run := startTurnWithEvents(t, a, "t1", &outcome)
	testwait.Recv(t, slow.entered, "a call to start (slow.entered)")

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := a.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with a run that outlasts the grace period: %v", err)
	}
	testwait.Recv(t, run, "the attached consumer to end")
	if got, _ := outcome.Load().(event.Event); got.Type != event.RunError || got.Code != "shutting_down" {
		t.Fatalf("the attached consumer's last event: %+v", got)
	}
	if _, err := a.Start(context.Background(), engine.Input{Tenant: "acme", Agent: "helper", ThreadID: "t2",
		Messages: []message.Message{{Role: message.User, Content: "hello"}}}); !errors.Is(err, engine.ErrShuttingDown) {
		t.Fatalf("Start after Shutdown: %v", err)
	}
	th, _ := b.thread(t, "t1")
	if th.Status != store.Running || !th.LeaseUntil.IsZero() || th.LastError != "" {
		t.Fatalf("thread after shutdown: %+v", th)
	}
	evs, err := b.store.Events(t.Context(), "acme", "t1", 0, store.MaxLimit)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type == event.RunError {
			t.Fatalf("a RunError was stored: %+v", e)
		}
	}

	fresh := newGated("from B")
	close(fresh.release)
	next := b.runner(t, "node-b", fresh)
	if n, err := next.Recover(t.Context(), b.clk.Now()); err != nil || n != 1 {
		t.Fatalf("Recover right after the release: %d, %v", n, err)
	}
	waitRuns(t, next)
	th, msgs := b.thread(t, "t1")
	if th.Status != store.Idle || msgs[len(msgs)-1].Content != "from B" {
		t.Fatalf("thread after recovery: %+v, %+v", th, msgs)
	}
}

// startTurnWithEvents starts a turn and keeps its last event; the returned
// channel closes when the events end.
func startTurnWithEvents(t *testing.T, r *engine.Runner, thread string, last *atomic.Value) <-chan struct{} {
	t.Helper()
	run, err := r.Start(context.Background(), engine.Input{Tenant: "acme", Agent: "helper", ThreadID: thread,
		Messages: []message.Message{{Role: message.User, Content: "hello"}}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range run.Events() {
			last.Store(e)
		}
	}()
	return done
}

// TestRetireClosesSpecWhenItsRunsEnd: a reload's replaced agent is closed
// once the run using it ends, not before; one no run uses is closed at once,
// and the runner forgets what it kept for both.
func TestRetireClosesSpecWhenItsRunsEnd(t *testing.T) {
	t.Parallel()
	eachDriver(t, testRetire)
}

func testRetire(t *testing.T, b *lifetimeBundle) {
	var closed atomic.Int32
	b.spec.Close = func() { closed.Add(1) }
	slow := newGated("done")
	r := b.runner(t, "node-a", slow)
	before := r.Builtins(b.spec)
	startTurn(t, r, "t1")
	testwait.Recv(t, slow.entered, "a call to start (slow.entered)")

	replaced := b.spec
	idle := &agent.Spec{Name: "idle", Model: "scripted/idle", Close: func() { closed.Add(10) }}
	r.Retire([]*agent.Spec{replaced, idle})
	if n := closed.Load(); n != 10 {
		t.Fatalf("after Retire with a run in flight: closed %d, want only the idle agent (10)", n)
	}
	close(slow.release)
	waitRuns(t, r)
	if n := closed.Load(); n != 11 {
		t.Fatalf("after the run ended: closed %d, want 11", n)
	}
	if after := r.Builtins(replaced); len(before) == 0 || len(after) == 0 || after[0] == before[0] {
		t.Fatalf("the runner kept the retired agent's built-ins")
	}
}

// TestNewValidates: a runner without its store, agents or models is refused
// at construction, naming what is missing.
func TestNewValidates(t *testing.T) {
	t.Parallel()
	_, err := engine.New(engine.Config{})
	if err == nil || !strings.Contains(err.Error(), "Store, Agents, Models") {
		t.Fatalf("engine.New with nothing: %v", err)
	}
	_, err = engine.New(engine.Config{Store: nilStore{}, Agents: agent.NewRegistry(), Models: fixed{}, Lease: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "Lease") {
		t.Fatalf("engine.New with a negative lease: %v", err)
	}
}

// nilStore is a store.Store that is never called.
type nilStore struct{ store.Store }

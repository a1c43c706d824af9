package postgres

import (
	"context"
	"encoding/json"
	"iter"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/bus"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/model/scripted"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
)

// stalling is a model whose calls on a turn that says "stall" wait until
// their caller gives up (an upstream that never answers); other calls go to
// the script. It counts the stalled calls (the upstream attempts).
type stalling struct {
	next     model.Provider
	attempts atomic.Int32
	started  chan struct{}
}

func (s *stalling) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Chunk, error] {
	if n := len(req.Messages); n == 0 || req.Messages[n-1].Role != message.User || !strings.Contains(req.Messages[n-1].Content, "stall") {
		return s.next.Stream(ctx, req)
	}
	return func(yield func(model.Chunk, error) bool) {
		s.attempts.Add(1)
		s.started <- struct{}{}
		<-ctx.Done()
		yield(model.Chunk{}, context.Cause(ctx))
	}
}

const controlScript = `[
 {"when": {"lastTool": "charge"}, "reply": {"text": "charged"}},
 {"when": {"lastUser": "charge"}, "reply": {"toolCalls": [{"name": "charge", "arguments": {"amount": 5}}]}},
 {"reply": {"text": "echo: {{lastUser}}"}}
]`

// controlReplica is one replica's runner over the shared schema. bridged
// false leaves its bus unbridged: the notifications of the other replicas
// never reach it (a lost NOTIFY). The charge tool (not idempotent) waits
// until its run stops.
type controlReplica struct {
	*engine.Runner
	model   *stalling
	charges chan struct{}
}

func newControlReplica(t *testing.T, schema, name string, bridged bool, lease time.Duration) *controlReplica {
	t.Helper()
	var (
		st *Store
		b  *bus.Bus
	)
	if bridged {
		rep := newReplica(t, schema)
		st, b = rep.store, rep.bus
	} else {
		st, b = openSchema(t, schema), bus.New()
	}
	cr := &controlReplica{model: &stalling{next: scripted.New(script.MustParse(controlScript)), started: make(chan struct{}, 8)},
		charges: make(chan struct{}, 8)}
	charge := &tool.Tool{Name: "charge", Description: "Charge the card",
		Parameters: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"}}}`),
		Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
			cr.charges <- struct{}{}
			<-ctx.Done()
			return tool.Result{}, context.Cause(ctx)
		}}
	spec := &agent.Spec{Name: "billing", Model: "scripted/billing", Instructions: "Bill.", Tools: []*tool.Tool{charge}}
	r, err := engine.New(engine.Config{Store: st, Agents: agent.NewRegistry(spec), Bus: b, Owner: "node-" + name,
		Models: fixedModel{cr.model}, Logger: testLogger(t), Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	cr.Runner = r
	// Before the bridge and the store close; a run that did not stop (the
	// test failed) is stopped, not waited for.
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = r.Shutdown(sctx)
	})
	return cr
}

// started waits for a signal of c, failing after a few seconds.
func started(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// ended reads a run's events to its terminal one, failing after a
// deadline: the run did not stop.
func ended(t *testing.T, run *engine.Run, within time.Duration) event.Event {
	t.Helper()
	done := make(chan event.Event, 1)
	go func() {
		var last event.Event
		for e := range run.Events() {
			last = e
		}
		done <- last
	}()
	select {
	case e := <-done:
		return e
	case <-time.After(within):
		t.Fatalf("the run did not stop within %s", within)
		return event.Event{}
	}
}

// threadOf reads a thread on a replica.
func threadOf(t *testing.T, r *engine.Runner, id string) *store.Thread {
	t.Helper()
	th, err := r.Store.GetThread(context.Background(), "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	return th
}

// TestCancelOnAnotherReplicaStopsTheRun: a durable turn waits on its model
// on replica A; a cancel through replica B stops it there within moments
// (the lease is a minute: no renewal comes first), with no further model
// attempt. B's CancelWait returns once the run's end is stored; the thread
// is no longer running and B admits the next turn.
func TestCancelOnAnotherReplicaStopsTheRun(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	a, b := newControlReplica(t, schema, "a", true, time.Minute), newControlReplica(t, schema, "b", true, time.Minute)
	run, err := a.Start(ctx, engine.Input{Tenant: "acme", Agent: "billing", ThreadID: "t1",
		Messages: []message.Message{{Role: message.User, Content: "stall, please"}}})
	if err != nil {
		t.Fatalf("Start on A: %v", err)
	}
	started(t, a.model.started, "the model call on A")

	begun := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stopped, err := b.CancelWait(wctx, "acme", "t1")
	if err != nil || !stopped {
		t.Fatalf("CancelWait on B: stopped %v, %v", stopped, err)
	}
	t.Logf("the run on A stopped %s after the cancel through B", time.Since(begun))
	if th := threadOf(t, b.Runner, "t1"); th.Status == store.Running || th.RunID != run.ID {
		t.Fatalf("thread once CancelWait returned: %s (run %s, want %s)", th.Status, th.RunID, run.ID)
	}
	last := ended(t, run, 5*time.Second)
	if last.Type != event.RunError || last.Code != engine.CodeCancelled {
		t.Fatalf("the run on A ended with %+v, want a cancelled RunError", last)
	}
	if th := threadOf(t, a.Runner, "t1"); th.Status != store.Failed {
		t.Fatalf("thread after the cancel: %s, want failed", th.Status)
	}
	if n := a.model.attempts.Load(); n != 1 {
		t.Fatalf("the model was called %d times on A, want 1", n)
	}
	// The next turn, through B, is admitted and answered.
	next, err := b.Start(ctx, engine.Input{Tenant: "acme", Agent: "billing", ThreadID: "t1",
		Messages: []message.Message{{Role: message.User, Content: "hello again"}}})
	if err != nil {
		t.Fatalf("the next turn on B: %v", err)
	}
	if last := ended(t, next, 10*time.Second); last.Type != event.RunFinished {
		t.Fatalf("the next turn ended with %+v", last)
	}
	// A cancel of a thread that runs nothing changes nothing.
	if stopped, err := a.CancelWait(ctx, "acme", "t1"); err != nil || !stopped {
		t.Fatalf("CancelWait of an idle thread: %v, %v", stopped, err)
	}
	if th := threadOf(t, a.Runner, "t1"); th.Status != store.Idle {
		t.Fatalf("thread after cancelling nothing: %s", th.Status)
	}
}

// TestCancelWithoutNotificationStopsAtTheRenewal: replica A hears no
// notification (its bus is not bridged); the cancel stored through B still
// stops A's run, at its next lease renewal.
func TestCancelWithoutNotificationStopsAtTheRenewal(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	a := newControlReplica(t, schema, "a", false, 900*time.Millisecond)
	b := newControlReplica(t, schema, "b", true, time.Minute)
	run, err := a.Start(ctx, engine.Input{Tenant: "acme", Agent: "billing", ThreadID: "t1",
		Messages: []message.Message{{Role: message.User, Content: "stall, please"}}})
	if err != nil {
		t.Fatalf("Start on A: %v", err)
	}
	started(t, a.model.started, "the model call on A")
	if err := b.Cancel(ctx, "acme", "t1"); err != nil {
		t.Fatalf("Cancel on B: %v", err)
	}
	if last := ended(t, run, 10*time.Second); last.Type != event.RunError || last.Code != engine.CodeCancelled {
		t.Fatalf("the run on A ended with %+v, want a cancelled RunError", last)
	}
	if th := threadOf(t, b.Runner, "t1"); th.Status != store.Failed {
		t.Fatalf("thread after the cancel: %s, want failed", th.Status)
	}
}

// TestCancelOnAnotherReplicaMidToolLeavesTheCallInDoubt: a cancel through
// B stops A's run while its (not idempotent) tool runs: as a cancel on A
// does, the call waits in doubt and the thread waits on that decision.
func TestCancelOnAnotherReplicaMidToolLeavesTheCallInDoubt(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	a, b := newControlReplica(t, schema, "a", true, time.Minute), newControlReplica(t, schema, "b", true, time.Minute)
	run, err := a.Start(ctx, engine.Input{Tenant: "acme", Agent: "billing", ThreadID: "t1",
		Messages: []message.Message{{Role: message.User, Content: "charge my card"}}})
	if err != nil {
		t.Fatalf("Start on A: %v", err)
	}
	started(t, a.charges, "the charge on A")
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if stopped, err := b.CancelWait(wctx, "acme", "t1"); err != nil || !stopped {
		t.Fatalf("CancelWait on B: stopped %v, %v", stopped, err)
	}
	if last := ended(t, run, 5*time.Second); last.Type != event.RunError || last.Code != engine.CodeCancelled {
		t.Fatalf("the run on A ended with %+v, want a cancelled RunError", last)
	}
	th := threadOf(t, b.Runner, "t1")
	its, err := b.Store.ListInterrupts(ctx, "acme", store.InterruptFilter{ThreadID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if th.Status != store.Waiting || len(its) != 1 || its[0].Reason != store.ReasonInDoubt || its[0].Tool != "charge" {
		t.Fatalf("after the cancel: thread %s, decisions %+v; want the charge in doubt", th.Status, its)
	}
}

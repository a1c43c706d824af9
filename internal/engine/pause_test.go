package engine_test

import (
	"context"
	"testing"

	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// TestPauseIsWhatTheStoreHolds: the pause a run ends on (Run.Pause, from
// what the run wrote) and the one read back for a wire that did not follow
// it (Runner.Paused) are the stored terminal event and the pending
// decisions; a run that finished has none.
func TestPauseIsWhatTheStoreHolds(t *testing.T) {
	e := stacktest.NewEngine(t, stacktest.Options{})
	ctx := context.Background()
	run, err := e.Runner.Start(ctx, engine.Input{Tenant: "dev", Agent: "assistant", ThreadID: "th-pause", Messages: user("refund my order")})
	if err != nil {
		t.Fatal(err)
	}
	var last event.Event
	for ev := range run.Events() {
		last = ev
	}
	p, err := run.Pause(ctx)
	if err != nil || p == nil {
		t.Fatalf("Pause = %+v, %v after %+v", p, err, last)
	}
	pending, err := e.Store.ListInterrupts(ctx, "dev", store.InterruptFilter{ThreadID: "th-pause", Status: store.Pending, Limit: 10})
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending %+v %v", pending, err)
	}
	if p.Seq != last.Seq || len(p.Decisions) != 1 || p.Decisions[0].ID != pending[0].ID || string(p.Decisions[0].Args) != string(pending[0].Args) ||
		p.Decisions[0].Tool != "refund" || len(p.Decisions[0].AllowedDecisions) != 3 {
		t.Fatalf("Pause = %+v, want seq %d and %+v", p, last.Seq, pending)
	}
	again, err := e.Runner.Paused(ctx, "dev", "th-pause", "assistant")
	if err != nil || again == nil || again.Seq != p.Seq || len(again.Decisions) != 1 || again.Decisions[0].ID != pending[0].ID {
		t.Fatalf("Paused = %+v, %v; want %+v", again, err, p)
	}
	if p, err := e.Runner.Paused(ctx, "dev", "th-pause", "other"); p != nil || err != nil {
		t.Fatalf("another agent's thread: Paused = %+v, %v", p, err)
	}
	if p, err := e.Runner.Paused(ctx, "dev", "th-none", "assistant"); p != nil || err != nil {
		t.Fatalf("unknown thread: Paused = %+v, %v", p, err)
	}

	// Decided: the followed run finishes, with no pause; the thread waits
	// on nothing.
	if _, err := e.Runner.Decide(ctx, "dev", pending[0].ID, engine.Decision{Approved: true}); err != nil {
		t.Fatal(err)
	}
	follow, err := e.Runner.Follow(ctx, "dev", "th-pause", p.Seq+1)
	if err != nil {
		t.Fatal(err)
	}
	var evs []event.Event
	for ev := range follow.Events() {
		evs = append(evs, ev)
	}
	success(t, "resumed", evs)
	if p, err := follow.Pause(ctx); p != nil || err != nil {
		t.Fatalf("finished run: Pause = %+v, %v", p, err)
	}
	e.Runner.Wait()
	if p, err := e.Runner.Paused(ctx, "dev", "th-pause", "assistant"); err != nil || p == nil || len(p.Decisions) != 0 {
		t.Fatalf("idle thread: Paused = %+v, %v", p, err)
	}
	// Replay gives the stored turn again, in its live form, up to a bound.
	var replayed []event.Event
	for ev, err := range e.Runner.Replay(ctx, "dev", "th-pause", 1, p.Seq+1) {
		if err != nil {
			t.Fatal(err)
		}
		replayed = append(replayed, ev)
	}
	if end := stacktest.Last(replayed); end.Seq != p.Seq || end.Outcome == nil || end.Outcome.Type != event.Interrupt {
		t.Fatalf("replay to the pause ends with %+v (%v)", end, stacktest.Types(replayed))
	}
}

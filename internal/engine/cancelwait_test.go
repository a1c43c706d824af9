package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/testwait"
)

// twoRefundsScript pauses a turn on two refund calls (each needs approval).
const twoRefundsScript = `[
 {"when": {"lastTool": "refund"}, "reply": {"text": "Refund result: {{lastTool}}"}},
 {"when": {"lastUser": "two refunds"}, "reply": {"toolCalls": [
   {"name": "refund", "arguments": {"orderId": "ord_1", "amount": 1}},
   {"name": "refund", "arguments": {"orderId": "ord_2", "amount": 2}}]}},
 {"when": {"lastUser": "refund"}, "reply": {"toolCalls": [{"name": "refund", "arguments": {"orderId": "ord_1", "amount": 1}}]}},
 {"reply": {"text": "echo: {{lastUser}}"}}
]`

// cancelStores runs fn on a stack over SQLite and over PostgreSQL.
func cancelStores(t *testing.T, fn func(t *testing.T, env *stacktest.Env)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, stacktest.New(t, stacktest.Options{Script: twoRefundsScript}))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, stacktest.New(t, stacktest.Options{Script: twoRefundsScript, Store: stacktest.Postgres(t, "cancelwait")}))
	})
}

// threadTurn runs one turn on a thread to its terminal event.
func threadTurn(t *testing.T, env *stacktest.Env, thread, text string) []event.Event {
	t.Helper()
	run, err := env.Runner.Start(t.Context(), engine.Input{Tenant: "dev", Agent: "assistant", ThreadID: thread, Messages: user(text)})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	var evs []event.Event
	for e := range run.Events() {
		evs = append(evs, e)
		if e.Type == event.RunFinished || e.Type == event.RunError {
			break
		}
	}
	return evs
}

func TestCancelWaitingTurn(t *testing.T) {
	t.Parallel()
	cancelStores(t, func(t *testing.T, env *stacktest.Env) {
		ctx := context.Background()
		evs := threadTurn(t, env, "w", "two refunds please")
		if last := stacktest.Last(evs); last.Outcome == nil || last.Outcome.Type != event.Interrupt || len(last.Outcome.Interrupts) != 2 {
			t.Fatalf("want a pause on two decisions, got %v", stacktest.Types(evs))
		}
		its, err := env.Store.ListInterrupts(ctx, "dev", store.InterruptFilter{ThreadID: "w"})
		if err != nil || len(its) != 2 {
			t.Fatalf("pending: %v %v", its, err)
		}
		calls := env.Upstream.Count()

		follow := env.Runner.Bus.Subscribe("dev", "w")
		defer follow.Close()
		ok, err := env.Runner.CancelWaiting(ctx, "dev", "w", "dev/alice")
		if err != nil || !ok {
			t.Fatalf("CancelWaiting: %v %v", ok, err)
		}
		var end *event.Event
		for end == nil {
			select {
			case e := <-follow.C:
				if e.Type == event.RunError || e.Type == event.RunFinished {
					end = e
				}
			case <-t.Context().Done():
				t.Fatal("no terminal event on the bus")
			}
		}
		if end.Type != event.RunError || end.Code != engine.CodeCancelled || end.Seq == 0 {
			t.Fatalf("the published end: %+v", end)
		}
		if th := env.Thread(t, "dev", "w"); th.Status != store.Idle {
			t.Fatalf("thread status %s, want idle", th.Status)
		}
		for _, it := range its {
			got, err := env.Store.GetInterrupt(ctx, "dev", it.ID)
			if err != nil || got.Status != store.Rejected || got.Decision == nil || got.Decision.Via != store.ViaCancel || got.Decision.By != "dev/alice" {
				t.Fatalf("decision %s after the cancel: %+v %v", it.ID, got, err)
			}
			_, err = env.Runner.Decide(ctx, "dev", it.ID, engine.Decision{Approved: true, Via: "api", By: "dev/bob"})
			if !errors.Is(err, store.ErrAlreadyDecided) {
				t.Fatalf("a decision after the cancel: %v, want already decided", err)
			}
		}
		if n := env.Calls.Get("refund"); n != 0 {
			t.Fatalf("refund ran %d times", n)
		}
		if n := env.Upstream.Count(); n != calls {
			t.Fatalf("the cancel called the model (%d requests, had %d)", n, calls)
		}
		msgs, err := env.Store.Messages(ctx, "dev", "w")
		if err != nil {
			t.Fatal(err)
		}
		results := map[string]string{}
		for _, m := range msgs {
			if m.Role == message.Tool {
				results[m.ToolCallID] = m.Content
			}
		}
		for _, it := range its {
			if results[it.ToolCallID] != engine.CancelledCallResult {
				t.Fatalf("call %s's result: %q", it.ToolCallID, results[it.ToolCallID])
			}
		}
		if ok, err := env.Runner.CancelWaiting(ctx, "dev", "w", "dev/alice"); ok || err != nil {
			t.Fatalf("a second cancel: %v %v, want nothing to cancel", ok, err)
		}

		// The next turn starts; the model sees both calls answered.
		evs = threadTurn(t, env, "w", "hello again")
		success(t, "the next turn", evs)
		last, _ := env.Upstream.Last()
		seen := 0
		for _, m := range last.Request.Messages {
			for _, it := range its {
				if m.Role == message.Tool && m.ToolCallID == it.ToolCallID && m.Content == engine.CancelledCallResult {
					seen++
				}
			}
		}
		if seen != 2 {
			t.Fatalf("the next turn's model input has %d cancelled results, want 2: %+v", seen, last.Request.Messages)
		}
		if n := env.Calls.Get("refund"); n != 0 {
			t.Fatalf("refund ran %d times", n)
		}
	})
}

// TestCancelWaitingRacesDecision decides a thread's last pending decision
// and cancels its turn at once, many times: exactly one wins each time.
// Either the cancel ends the turn and the call never runs, or the decision
// resumes it, the call runs once and the cancel finds nothing to cancel.
func TestCancelWaitingRacesDecision(t *testing.T) {
	t.Parallel()
	cancelStores(t, func(t *testing.T, env *stacktest.Env) {
		ctx := context.Background()
		outcomes := map[string]int{}
		for i := range 12 {
			thread := fmt.Sprintf("race%d", i)
			threadTurn(t, env, thread, "refund it")
			its, err := env.Store.ListInterrupts(ctx, "dev", store.InterruptFilter{ThreadID: thread})
			if err != nil || len(its) != 1 {
				t.Fatalf("pending: %v %v", its, err)
			}
			ran := env.Calls.Get("refund")
			var (
				wg        sync.WaitGroup
				cancelled bool
				cerr      error
				derr      error
			)
			wg.Add(2)
			go func() {
				defer wg.Done()
				_, derr = env.Runner.Decide(ctx, "dev", its[0].ID, engine.Decision{Approved: true, Via: "api", By: "dev/bob"})
			}()
			go func() {
				defer wg.Done()
				cancelled, cerr = env.Runner.CancelWaiting(ctx, "dev", thread, "dev/alice")
			}()
			wg.Wait()
			if cerr != nil || (derr != nil && !errors.Is(derr, store.ErrAlreadyDecided)) {
				t.Fatalf("%s: cancel %v, decide %v", thread, cerr, derr)
			}
			if !cancelled && derr != nil {
				t.Fatalf("%s: neither the cancel nor the decision won", thread)
			}
			stacktest.WaitFor(t, thread+" to end its turn", func() bool { return env.Thread(t, "dev", thread).Status == store.Idle })
			msgs, err := env.Store.Messages(ctx, "dev", thread)
			if err != nil {
				t.Fatal(err)
			}
			var results []string
			for _, m := range msgs {
				if m.Role == message.Tool {
					results = append(results, m.Content)
				}
			}
			delta := env.Calls.Get("refund") - ran
			switch {
			case cancelled && delta == 0 && len(results) == 1 && results[0] == engine.CancelledCallResult:
				outcomes["cancelled"]++
			case !cancelled && derr == nil && delta == 1 && len(results) == 1 && strings.Contains(results[0], `"refunded":1`):
				outcomes["resumed"]++
			default:
				t.Fatalf("%s: cancelled %v (decide err %v), refund ran %d times, results %q", thread, cancelled, derr, delta, results)
			}
		}
		t.Logf("outcomes: %v", outcomes)
	})
}

// TestCancelWaitingStartsQueuedTurn: a follow-up queued (multitask
// enqueue) while a turn runs, which then pauses on a decision, starts once
// the waiting turn is cancelled, and is answered; the paused call never
// runs.
func TestCancelWaitingStartsQueuedTurn(t *testing.T) {
	t.Parallel()
	cancelStores(t, func(t *testing.T, env *stacktest.Env) {
		ctx := context.Background()
		release := env.Upstream.HoldOnce(script.When{LastUser: "refund it"})
		t.Cleanup(release)
		paused := make(chan []event.Event, 1)
		go func() { paused <- threadTurn(t, env, "q", "refund it") }()
		stacktest.WaitFor(t, "the model call to be held", func() bool { return env.Upstream.Count() == 1 })
		run, err := env.Runner.Start(t.Context(), engine.Input{Tenant: "dev", Agent: "assistant", ThreadID: "q",
			Multitask: agent.MultitaskEnqueue, Messages: user("queued after the pause")})
		if err != nil {
			t.Fatalf("enqueue: %v", err)
		}
		done := make(chan []event.Event, 1)
		go func() {
			var evs []event.Event
			for e := range run.Events() {
				evs = append(evs, e)
				if e.Type == event.RunFinished || e.Type == event.RunError {
					break
				}
			}
			done <- evs
		}()
		release()
		testwait.Recv(t, paused, "the first turn to pause")
		if th := env.Thread(t, "dev", "q"); th.Status != store.Waiting {
			t.Fatalf("thread %s, want waiting", th.Status)
		}
		if qs, err := env.Store.Queue(ctx, "dev", "q"); err != nil || len(qs) != 1 {
			t.Fatalf("the queue while the turn waits: %v %v", qs, err)
		}
		if ok, err := env.Runner.CancelWaiting(ctx, "dev", "q", "dev/alice"); err != nil || !ok {
			t.Fatalf("CancelWaiting: %v %v", ok, err)
		}
		evs := testwait.Recv(t, done, "the queued turn to end")
		if got := text(evs); got != "echo: queued after the pause" {
			t.Fatalf("the queued turn's answer %q (%v)", got, stacktest.Types(evs))
		}
		if n := env.Calls.Get("refund"); n != 0 {
			t.Fatalf("refund ran %d times", n)
		}
	})
}

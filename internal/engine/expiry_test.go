package engine_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
)

// TestApprovalExpiresOnFakeClock: a paused call whose approval carries
// expiresAfter stays pending until its expiry, then the recovery sweep
// records it as a rejection (decidedVia expiry) and the run resumes with
// the expired message as the tool's result; the tool never runs, and a
// decision afterwards is ErrDecisionExpired.
func TestApprovalExpiresOnFakeClock(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, b *lifetimeBundle) {
		fx := newSideEffect(t)
		fx.hangs = 0
		b.spec.Tools = []*tool.Tool{fx.tool("refund", false, &tool.Approval{ExpiresAfter: 30 * time.Minute})}
		m := &caller{name: "refund", id: "call_1", args: `{"orderId":"A1"}`}
		a := b.runner(t, "node-a", m)
		startTurn(t, a, "t1")
		waitRuns(t, a)
		pending := pendingOf(t, b)
		if len(pending) != 1 || pending[0].ExpiresAt == nil || !pending[0].ExpiresAt.Equal(t0.Add(30*time.Minute)) {
			t.Fatalf("pending after the pause: %+v", pending)
		}
		b.clk.Advance(29 * time.Minute)
		if _, err := a.Recover(t.Context(), b.clk.Now()); err != nil {
			t.Fatal(err)
		}
		waitRuns(t, a)
		if p := pendingOf(t, b); len(p) != 1 {
			t.Fatalf("the approval expired early: %+v", p)
		}
		b.clk.Advance(time.Minute)
		if _, err := a.Recover(t.Context(), b.clk.Now()); err != nil {
			t.Fatal(err)
		}
		waitRuns(t, a)

		it, err := b.store.GetInterrupt(t.Context(), "acme", pending[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if it.Status != store.Rejected || it.Decision == nil || it.Decision.Via != store.ViaExpiry {
			t.Fatalf("expired interrupt: %+v decision %+v", it, it.Decision)
		}
		th, msgs := b.thread(t, "t1")
		if th.Status != store.Idle {
			t.Fatalf("thread after the expiry: %+v", th)
		}
		if got := m.lastSeen(); got != engine.ExpiredResult {
			t.Fatalf("the model saw the tool result %q, want %q", got, engine.ExpiredResult)
		}
		var toolMsg *message.Message
		for i := range msgs {
			if msgs[i].Role == message.Tool {
				toolMsg = &msgs[i]
			}
		}
		if toolMsg == nil || toolMsg.Content != "The approval request expired." {
			t.Fatalf("tool message after the expiry: %+v", toolMsg)
		}
		if calls := fx.calls(); len(calls) != 0 {
			t.Fatalf("the expired call ran: %v", calls)
		}
		_, err = a.Decide(t.Context(), "acme", it.ID, engine.Decision{Approved: true, Via: "api", By: "acme/ops"})
		if !errors.Is(err, store.ErrDecisionExpired) {
			t.Fatalf("deciding the expired approval: %v, want ErrDecisionExpired", err)
		}
	})
}

// TestApprovalExpiryDecideAfterDeadlineBeforeSweep: a decision that comes
// after the expiry but before any sweep is refused as expired, and the
// expiry is recorded then (the run resumes).
func TestApprovalExpiryDecideAfterDeadlineBeforeSweep(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, b *lifetimeBundle) {
		fx := newSideEffect(t)
		fx.hangs = 0
		b.spec.Tools = []*tool.Tool{fx.tool("refund", false, &tool.Approval{})}
		m := &caller{name: "refund", id: "call_1", args: `{"orderId":"A1"}`}
		a, err := engine.New(engine.Config{Store: b.store, Agents: agent.NewRegistry(b.spec), Models: fixed{m}, Clock: b.clk,
			Owner: "node-a", Lease: time.Hour, ApprovalTTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { waitRuns(t, a) })
		startTurn(t, a, "t1")
		waitRuns(t, a)
		pending := pendingOf(t, b)
		if len(pending) != 1 || pending[0].ExpiresAt == nil || !pending[0].ExpiresAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("pending under the project TTL: %+v", pending)
		}
		b.clk.Advance(time.Minute)
		_, err = a.Decide(t.Context(), "acme", pending[0].ID, engine.Decision{Approved: true, Via: "api", By: "acme/ops"})
		if !errors.Is(err, store.ErrDecisionExpired) {
			t.Fatalf("deciding at the expiry: %v, want ErrDecisionExpired", err)
		}
		waitRuns(t, a)
		if th, _ := b.thread(t, "t1"); th.Status != store.Idle || m.lastSeen() != engine.ExpiredResult {
			t.Fatalf("thread %+v, model saw %q", th, m.lastSeen())
		}
		if calls := fx.calls(); len(calls) != 0 {
			t.Fatalf("the expired call ran: %v", calls)
		}
	})
}

// TestApprovalExpiryExactlyOnceAcrossRunners: two runners sharing one
// store sweep the same expired approval at once; exactly one records the
// expiry and the run resumes once.
func TestApprovalExpiryExactlyOnceAcrossRunners(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, b *lifetimeBundle) {
		fx := newSideEffect(t)
		fx.hangs = 0
		b.spec.Tools = []*tool.Tool{fx.tool("refund", false, &tool.Approval{ExpiresAfter: time.Minute})}
		m := &caller{name: "refund", id: "call_1", args: `{"orderId":"A1"}`}
		a := b.runner(t, "node-a", m)
		other := b.runner(t, "node-b", m)
		startTurn(t, a, "t1")
		waitRuns(t, a)
		b.clk.Advance(2 * time.Minute)
		var wg sync.WaitGroup
		counts := make([]int, 2)
		errs := make([]error, 2)
		for i, r := range []*engine.Runner{a, other} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				counts[i], errs[i] = r.ExpireDecisions(t.Context(), b.clk.Now())
			}()
		}
		wg.Wait()
		waitRuns(t, a)
		waitRuns(t, other)
		if errs[0] != nil || errs[1] != nil || counts[0]+counts[1] != 1 {
			t.Fatalf("expiries recorded: %v (errors %v), want exactly 1", counts, errs)
		}
		th, msgs := b.thread(t, "t1")
		if th.Status != store.Idle {
			t.Fatalf("thread after the expiry: %+v", th)
		}
		answers := 0
		for _, msg := range msgs {
			if msg.Role == message.Assistant && msg.Content == "done: "+engine.ExpiredResult {
				answers++
			}
		}
		if answers != 1 {
			t.Fatalf("the run resumed %d times after the expiry: %+v", answers, msgs)
		}
	})
}

package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/store/sqlite"
	"github.com/stackbone/stackbone/internal/testwait"
	"github.com/stackbone/stackbone/internal/tool"
)

// caller is a model that calls one tool (name, call id, arguments) when the
// conversation ends with the user, and otherwise answers with the content
// of the last tool result, recording what it saw.
type caller struct {
	name, id, args string

	mu   sync.Mutex
	seen []string // the last tool result of each answering call
}

func (c *caller) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == message.User {
			if yield(model.Chunk{Type: model.ToolCallStart, ID: c.id, Name: c.name}, nil) &&
				yield(model.Chunk{Type: model.ToolCallArgs, Text: c.args}, nil) {
				yield(model.Chunk{Type: model.Finish, Stop: event.StopToolCalls}, nil)
			}
			return
		}
		c.mu.Lock()
		c.seen = append(c.seen, last.Content)
		c.mu.Unlock()
		if yield(model.Chunk{Type: model.Text, Text: "done: " + last.Content}, nil) {
			yield(model.Chunk{Type: model.Finish, Stop: event.StopEnd}, nil)
		}
	}
}

func (c *caller) lastSeen() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.seen) == 0 {
		return ""
	}
	return c.seen[len(c.seen)-1]
}

// sideEffect is a tool's side effect, counted with the idempotency keys it
// was given. Its first hangs calls hang, deaf to cancellation, until the
// test ends: the process "crashed" after the effect and before the
// checkpoint.
type sideEffect struct {
	mu      sync.Mutex
	keys    []string
	hangs   int
	entered chan struct{}
	hang    chan struct{}
	once    sync.Once
}

func newSideEffect(t *testing.T) *sideEffect {
	return &sideEffect{hangs: 1, entered: make(chan struct{}, 8), hang: make(chan struct{})}
}

// free lets the hung calls return; register it (t.Cleanup) after each
// runner whose Wait it must precede.
func (s *sideEffect) free() { s.once.Do(func() { close(s.hang) }) }

func (s *sideEffect) tool(name string, idempotent bool, approval *tool.Approval) *tool.Tool {
	return &tool.Tool{Name: name, Idempotent: idempotent, Approval: approval,
		Parameters: json.RawMessage(`{"type":"object","properties":{"orderId":{"type":"string"}}}`),
		Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
			s.mu.Lock()
			s.keys = append(s.keys, c.IdempotencyKey)
			hang := len(s.keys) <= s.hangs
			s.mu.Unlock()
			s.entered <- struct{}{}
			if hang {
				<-s.hang
			}
			return tool.Result{Content: "refunded"}, nil
		}}
}

func (s *sideEffect) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...)
}

// crashMidTool runs a turn on runner A whose tool call hangs after its side
// effect (A "crashed"), lets A's lease lapse and has runner B recover the
// thread. It returns B; A stays hung until the test ends.
func crashMidTool(t *testing.T, b *lifetimeBundle, m *caller, fx *sideEffect, decide func(a *engine.Runner)) *engine.Runner {
	t.Helper()
	a := b.runner(t, "node-a", m)
	t.Cleanup(fx.free) // before A is waited for
	if decide == nil {
		startTurn(t, a, "t1")
	} else {
		decide(a)
	}
	testwait.Recv(t, fx.entered, "a call to start (fx.entered)")
	b.clk.Advance(2 * time.Hour)
	other := b.runner(t, "node-b", m)
	if n, err := other.Recover(t.Context(), b.clk.Now()); err != nil || n != 1 {
		t.Fatalf("Recover after A's lease lapsed: %d, %v", n, err)
	}
	waitRuns(t, other)
	return other
}

func pendingOf(t *testing.T, b *lifetimeBundle) []store.Interrupt {
	t.Helper()
	its, err := b.store.ListInterrupts(t.Context(), "acme", store.InterruptFilter{ThreadID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	return its
}

// decideAndWait decides an interrupt on r and waits for the resumed run.
func decideAndWait(t *testing.T, r *engine.Runner, id string, d engine.Decision) {
	t.Helper()
	if _, err := r.Decide(t.Context(), "acme", id, d); err != nil {
		t.Fatalf("Decide %s: %v", id, err)
	}
	waitRuns(t, r)
}

// TestInDoubtCallWaitsForHuman: a non-idempotent call whose run died after
// it started (the side effect happened, the result was never stored) is
// not run again by recovery: it becomes a pending in_doubt decision and
// the thread waits as for an approval. skip runs nothing and the model is
// told the outcome is unknown; retry runs it once more with the same key.
func TestInDoubtCallWaitsForHuman(t *testing.T) {
	t.Parallel()
	for _, choice := range []tool.Decision{tool.Skip, tool.Retry} {
		t.Run(string(choice), func(t *testing.T) {
			t.Parallel()
			eachDriver(t, func(t *testing.T, b *lifetimeBundle) {
				fx := newSideEffect(t)
				b.spec.Tools = []*tool.Tool{fx.tool("refund", false, nil)}
				m := &caller{name: "refund", id: "call_0", args: `{"orderId":"A1"}`}
				other := crashMidTool(t, b, m, fx, nil)

				if n := len(fx.calls()); n != 1 {
					t.Fatalf("recovery ran the in-doubt call again: %d calls", n)
				}
				th, _ := b.thread(t, "t1")
				if th.Status != store.Waiting {
					t.Fatalf("thread with an in-doubt call: %s, want waiting", th.Status)
				}
				_, err := other.Start(t.Context(), engine.Input{Tenant: "acme", Agent: "helper", ThreadID: "t1",
					Messages: []message.Message{{Role: message.User, Content: "again"}}})
				if !errors.Is(err, store.ErrApprovalPending) {
					t.Fatalf("a new turn while the call is in doubt: %v, want approval pending", err)
				}
				pend := pendingOf(t, b)
				if len(pend) != 1 {
					t.Fatalf("pending: %+v", pend)
				}
				it := pend[0]
				if it.Reason != store.ReasonInDoubt || it.ToolCallID != "call_0" || it.Tool != "refund" ||
					strings.Join(it.AllowedDecisions, ",") != "retry,skip" ||
					!strings.HasPrefix(it.Description, `This call may already have run: refund({"orderId":"A1"})`) {
					t.Fatalf("in-doubt decision: %+v", it)
				}
				// approve and reject do not answer it, and change nothing.
				var ie *engine.InputError
				if _, err := other.Decide(t.Context(), "acme", it.ID, engine.Decision{Approved: true}); !errors.As(err, &ie) || ie.Field != engine.FieldDecision {
					t.Fatalf("approving an in-doubt call: %v", err)
				}
				if got := pendingOf(t, b); len(got) != 1 {
					t.Fatalf("a refused decision changed the call: %+v", got)
				}

				decideAndWait(t, other, it.ID, engine.Decision{Kind: choice, Via: "api", By: "acme/key"})
				th, msgs := b.thread(t, "t1")
				if th.Status != store.Idle || msgs[len(msgs)-1].Role != message.Assistant {
					t.Fatalf("after %s: %+v, last %+v", choice, th, msgs[len(msgs)-1])
				}
				calls := fx.calls()
				key := engine.IdempotencyKey("acme", "t1", "call_0")
				switch choice {
				case tool.Skip:
					if len(calls) != 1 {
						t.Fatalf("skip ran the call: %d calls", len(calls))
					}
					if got := m.lastSeen(); got != engine.SkippedResult {
						t.Fatalf("the model saw %q after skip, want the unknown-outcome result", got)
					}
				case tool.Retry:
					if len(calls) != 2 || calls[0] != key || calls[1] != key {
						t.Fatalf("retry: calls with keys %v, want two with %s", calls, key)
					}
					if got := m.lastSeen(); got != "refunded" {
						t.Fatalf("the model saw %q after retry", got)
					}
				}
				dec, err := b.store.GetInterrupt(t.Context(), "acme", it.ID)
				if err != nil || dec.Decision == nil || dec.Decision.Kind != string(choice) {
					t.Fatalf("the audit of the decision: %+v, %v", dec, err)
				}
			})
		})
	}
}

// TestIdempotentCallRunsAgainAfterCrash: an idempotent tool's call left
// without a result is run again by recovery, at once, with the same
// idempotency key; nobody is asked.
func TestIdempotentCallRunsAgainAfterCrash(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, b *lifetimeBundle) {
		fx := newSideEffect(t)
		b.spec.Tools = []*tool.Tool{fx.tool("lookup", true, nil)}
		m := &caller{name: "lookup", id: "call_0", args: `{"orderId":"A1"}`}
		crashMidTool(t, b, m, fx, nil)
		th, _ := b.thread(t, "t1")
		if th.Status != store.Idle || len(pendingOf(t, b)) != 0 {
			t.Fatalf("thread after recovering an idempotent call: %+v, pending %+v", th, pendingOf(t, b))
		}
		key := engine.IdempotencyKey("acme", "t1", "call_0")
		if calls := fx.calls(); len(calls) != 2 || calls[0] != key || calls[1] != key {
			t.Fatalf("calls with keys %v, want two with %s", calls, key)
		}
		if got := m.lastSeen(); got != "refunded" {
			t.Fatalf("the model saw %q", got)
		}
	})
}

// TestApprovedCallInDoubtAfterCrash: a call approved by a human and cut off
// by a crash after it started is not run a second time: it gets a second,
// in_doubt decision for the same tool call, which is the one that counts.
func TestApprovedCallInDoubtAfterCrash(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, b *lifetimeBundle) {
		fx := newSideEffect(t)
		b.spec.Tools = []*tool.Tool{fx.tool("refund", false, &tool.Approval{})}
		m := &caller{name: "refund", id: "call_0", args: `{"orderId":"A1"}`}
		other := crashMidTool(t, b, m, fx, func(a *engine.Runner) {
			startTurn(t, a, "t1")
			waitRuns(t, a)
			pend := pendingOf(t, b)
			if len(pend) != 1 || pend[0].Reason != store.ReasonApproval {
				t.Fatalf("approval: %+v", pend)
			}
			if _, err := a.Decide(t.Context(), "acme", pend[0].ID, engine.Decision{Approved: true, Via: "api"}); err != nil {
				t.Fatal(err)
			}
		})
		pend := pendingOf(t, b)
		if len(pend) != 1 || pend[0].Reason != store.ReasonInDoubt || pend[0].ToolCallID != "call_0" {
			t.Fatalf("after the crash of the approved call: %+v", pend)
		}
		if n := len(fx.calls()); n != 1 {
			t.Fatalf("the approved call ran %d times", n)
		}
		decideAndWait(t, other, pend[0].ID, engine.Decision{Kind: tool.Skip, Message: "Checked the ledger: it went out.", Via: "api"})
		if n := len(fx.calls()); n != 1 {
			t.Fatalf("skip ran the call: %d", n)
		}
		if got := m.lastSeen(); got != "Checked the ledger: it went out." {
			t.Fatalf("the model saw %q, want the reviewer's message", got)
		}
	})
}

// TestRetriedCallInDoubtAgain: a retried in-doubt call that is cut off by
// another crash is in doubt again (a new decision for the same call, with
// the arguments it ran with), not run a third time.
func TestRetriedCallInDoubtAgain(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, b *lifetimeBundle) {
		fx := newSideEffect(t)
		fx.hangs = 2
		b.spec.Tools = []*tool.Tool{fx.tool("refund", false, nil)}
		m := &caller{name: "refund", id: "call_0", args: `{"orderId":"A1"}`}
		other := crashMidTool(t, b, m, fx, nil)
		t.Cleanup(fx.free) // before B is waited for
		first := pendingOf(t, b)
		if len(first) != 1 {
			t.Fatalf("pending: %+v", first)
		}
		if _, err := other.Decide(t.Context(), "acme", first[0].ID, engine.Decision{Kind: tool.Retry, Via: "api"}); err != nil {
			t.Fatal(err)
		}
		testwait.Recv(t, fx.entered, "a call to start (fx.entered)") // the retry hangs: B "crashes" too
		b.clk.Advance(2 * time.Hour)
		third := b.runner(t, "node-c", m)
		t.Cleanup(fx.free)
		if n, err := third.Recover(t.Context(), b.clk.Now()); err != nil || n != 1 {
			t.Fatalf("Recover after B's lease lapsed: %d, %v", n, err)
		}
		waitRuns(t, third)
		again := pendingOf(t, b)
		if len(again) != 1 || again[0].ID == first[0].ID || again[0].Reason != store.ReasonInDoubt ||
			again[0].ToolCallID != "call_0" || string(again[0].Args) != `{"orderId":"A1"}` {
			t.Fatalf("after the retry crashed: %+v", again)
		}
		if n := len(fx.calls()); n != 2 {
			t.Fatalf("refund ran %d times, want 2 (the first attempt and the retry)", n)
		}
		decideAndWait(t, third, again[0].ID, engine.Decision{Kind: tool.Skip, Via: "api"})
		if n := len(fx.calls()); n != 2 {
			t.Fatalf("skip ran the refund: %d", n)
		}
		if th, _ := b.thread(t, "t1"); th.Status != store.Idle {
			t.Fatalf("thread: %+v", th)
		}
	})
}

// TestIdempotencyKeyPerThread: a model that repeats a call id in another
// thread gets another key; the same call gets the same key.
func TestIdempotencyKeyPerThread(t *testing.T) {
	t.Parallel()
	k := engine.IdempotencyKey("acme", "t1", "call_0")
	if k != engine.IdempotencyKey("acme", "t1", "call_0") || k == engine.IdempotencyKey("acme", "t2", "call_0") ||
		k == engine.IdempotencyKey("other", "t1", "call_0") || k == engine.IdempotencyKey("acme", "t1", "call_1") {
		t.Fatal("the idempotency key must be stable per call and differ between calls, threads and tenants")
	}
}

// BenchmarkDurableToolTurn measures a durable turn with one tool call on
// SQLite, with and without the started marker (a non-idempotent tool
// writes one before it runs; an idempotent one does not).
func BenchmarkDurableToolTurn(b *testing.B) {
	for _, idem := range []bool{false, true} {
		b.Run(map[bool]string{false: "marker", true: "idempotent"}[idem], func(b *testing.B) {
			s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "stackbone.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			spec := &agent.Spec{Name: "helper", Model: "scripted/helper", Instructions: "Help.", Tools: []*tool.Tool{{
				Name: "refund", Idempotent: idem, Execute: func(context.Context, tool.Call) (tool.Result, error) {
					return tool.Result{Content: "ok"}, nil
				}}}}
			r, err := engine.New(engine.Config{Store: s, Agents: agent.NewRegistry(spec),
				Models: fixed{&caller{name: "refund", id: "call_0", args: `{}`}}, Lease: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Wait()
			b.ResetTimer()
			for i := range b.N {
				run, err := r.Start(context.Background(), engine.Input{Tenant: "acme", Agent: "helper", ThreadID: fmt.Sprintf("t%d", i),
					Messages: []message.Message{{Role: message.User, Content: "go"}}})
				if err != nil {
					b.Fatal(err)
				}
				for range run.Events() {
				}
			}
		})
	}
}

// writeCounter counts a store's write transactions.
type writeCounter struct {
	store.Store
	n atomic.Int32
}

func (w *writeCounter) BeginRun(ctx context.Context, b store.BeginRun) (*store.Begun, error) {
	w.n.Add(1)
	return w.Store.BeginRun(ctx, b)
}

func (w *writeCounter) Checkpoint(ctx context.Context, c store.Checkpoint) error {
	if c.LeaseUntil.IsZero() || len(c.Messages)+len(c.Started)+len(c.Events)+len(c.Interrupts) > 0 {
		w.n.Add(1)
	}
	return w.Store.Checkpoint(ctx, c)
}

func (w *writeCounter) FinishRun(ctx context.Context, f store.FinishRun) error {
	w.n.Add(1)
	return w.Store.FinishRun(ctx, f)
}

// TestToolTurnMarksWithItsCall: a durable turn whose step calls a tool
// that is not idempotent stores the call's started marker with the
// message that makes the call, before the tool runs: five writes in all
// (begin, call and marker, result, answer, end), and after a crash
// between the tool's start and its result the call is still found in
// doubt (TestCrashMidToolIsInDoubt and the engine's in-doubt tests).
func TestToolTurnMarksWithItsCall(t *testing.T) {
	t.Parallel()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "stackbone.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wc := &writeCounter{Store: s}
	var markedBeforeRun atomic.Bool
	spec := &agent.Spec{Name: "helper", Model: "scripted/helper", Instructions: "Help.", Tools: []*tool.Tool{{
		Name: "refund", Execute: func(ctx context.Context, _ tool.Call) (tool.Result, error) {
			ids, err := s.StartedCalls(ctx, "acme", "t1", []string{"call_0"})
			markedBeforeRun.Store(err == nil && len(ids) == 1)
			return tool.Result{Content: "ok"}, nil
		}}}}
	r, err := engine.New(engine.Config{Store: wc, Agents: agent.NewRegistry(spec),
		Models: fixed{&caller{name: "refund", id: "call_0", args: `{}`}}, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer waitRuns(t, r)
	run, err := r.Start(t.Context(), engine.Input{Tenant: "acme", Agent: "helper", ThreadID: "t1",
		Messages: []message.Message{{Role: message.User, Content: "go"}}})
	if err != nil {
		t.Fatal(err)
	}
	drainRun(t, run)
	waitRuns(t, r)
	if !markedBeforeRun.Load() {
		t.Fatal("the call was not marked started before the tool ran")
	}
	if n := wc.n.Load(); n != 5 {
		t.Fatalf("%d writes for a durable tool turn, want 5", n)
	}
	if ids, _ := s.StartedCalls(t.Context(), "acme", "t1", []string{"call_0"}); len(ids) != 0 {
		t.Fatalf("the marker outlived the call's result: %v", ids)
	}
}

// journalCounter counts a store's journal writes.
type journalCounter struct {
	store.Store
	n atomic.Int32
}

func (j *journalCounter) PutJournal(ctx context.Context, e store.JournalEntry) error {
	j.n.Add(1)
	return j.Store.PutJournal(ctx, e)
}

// TestStatelessTextTurnWritesNoJournal: a stateless turn of an agent with
// tools is journaled for client retries, but one that ran no tool step has
// nothing a retry could repeat: it writes no entry, not even the closing
// one (a turn with a step of a tool that is not idempotent writes the step
// before its call runs, as its started marker, then its result, then the
// close).
func TestStatelessTextTurnWritesNoJournal(t *testing.T) {
	t.Parallel()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "stackbone.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	jc := &journalCounter{Store: s}
	spec := &agent.Spec{Name: "helper", Model: "scripted/helper", Instructions: "Help.", Tools: []*tool.Tool{{
		Name: "refund", Execute: func(context.Context, tool.Call) (tool.Result, error) { return tool.Result{Content: "ok"}, nil }}}}
	for _, tc := range []struct {
		name   string
		model  model.Provider
		writes int32
	}{
		{"text", &counting{text: "hello"}, 0},
		{"tool", &caller{name: "refund", id: "call_0", args: `{}`}, 3},
	} {
		jc.n.Store(0)
		r, err := engine.New(engine.Config{Store: jc, Agents: agent.NewRegistry(spec), Models: fixed{tc.model}, Lease: time.Hour, JournalTTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		run, err := r.Start(t.Context(), engine.Input{Tenant: "acme", Agent: "helper",
			Messages: []message.Message{{Role: message.User, Content: "go " + tc.name}}})
		if err != nil {
			t.Fatal(err)
		}
		drainRun(t, run)
		waitRuns(t, r)
		if n := jc.n.Load(); n != tc.writes {
			t.Fatalf("%s turn: %d journal writes, want %d", tc.name, n, tc.writes)
		}
	}
}

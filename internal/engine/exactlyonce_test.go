package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/url"
	"strings"
	"sync"
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
	"github.com/stackbone/stackbone/internal/testwait"
	"github.com/stackbone/stackbone/internal/tool"
)

// assertInDoubtNotClosed checks that the thread's call call_0 was not
// closed by a later turn: it has no tool result, it waits as a pending
// in-doubt decision, and only the first user message is stored.
func assertInDoubtNotClosed(t *testing.T, b *lifetimeBundle, fx *sideEffect) {
	t.Helper()
	if n := len(fx.calls()); n != 1 {
		t.Fatalf("the call ran %d times", n)
	}
	th, msgs := b.thread(t, "t1")
	for _, m := range msgs {
		if m.Role == message.Tool {
			t.Fatalf("the started call was closed with a result: %+v", m)
		}
	}
	if users, _ := b.counts(t); users != 1 {
		t.Fatalf("%d user messages stored, want the first turn's only", users)
	}
	pend := pendingOf(t, b)
	if th.Status != store.Waiting || len(pend) != 1 || pend[0].Reason != store.ReasonInDoubt || pend[0].ToolCallID != "call_0" {
		t.Fatalf("thread %s, pending %+v: want waiting on the in-doubt call", th.Status, pend)
	}
}

// hangMidTool runs a turn of t1 on runner A whose refund call hangs after
// its side effect (A "died"), and lets A's lease lapse; no recovery runs.
// It returns the tool and the model, for the runners that come next.
func hangMidTool(t *testing.T, b *lifetimeBundle) (*sideEffect, *caller) {
	t.Helper()
	fx := newSideEffect(t)
	b.spec.Tools = []*tool.Tool{fx.tool("refund", false, nil)}
	m := &caller{name: "refund", id: "call_0", args: `{"orderId":"A1"}`}
	a := b.runner(t, "node-a", m)
	t.Cleanup(fx.free)
	startTurn(t, a, "t1")
	testwait.Recv(t, fx.entered, "a call to start (fx.entered)")
	b.clk.Advance(2 * time.Hour)
	return fx, m
}

// TestNewTurnAfterCrashMidToolRecoversFirst: the process running a
// non-idempotent tool dies (its lease lapses) and the client's next message
// reaches another replica before the recovery loop does. The new turn must
// not take the thread and close the call as interrupted: the thread is
// recovered first (the call in doubt, nobody's message lost), and the new
// turn is told a decision is pending.
func TestNewTurnAfterCrashMidToolRecoversFirst(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, b *lifetimeBundle) {
		fx, m := hangMidTool(t, b) // A's lease lapsed; no recovery ran yet

		other := b.runner(t, "node-b", m)
		wantApprovalPending(t, other, "did it work?")
		waitRuns(t, other)
		assertInDoubtNotClosed(t, b, fx)
	})
}

// wantApprovalPending sends a new turn of t1 on r and wants it refused
// because the thread waits on a decision.
func wantApprovalPending(t *testing.T, r *engine.Runner, text string) {
	t.Helper()
	_, err := r.Start(t.Context(), engine.Input{Tenant: "acme", Agent: "helper", ThreadID: "t1",
		Messages: []message.Message{{Role: message.User, Content: text}}})
	if !errors.Is(err, store.ErrApprovalPending) {
		t.Fatalf("a new turn %q: %v, want approval pending", text, err)
	}
}

// ctxTool is a non-idempotent tool that has its side effect, then waits
// until its context ends (a slow call the run is cancelled in).
type ctxTool struct {
	runs    atomic.Int32
	entered chan struct{}
}

func (c *ctxTool) tool() *tool.Tool {
	return &tool.Tool{Name: "refund", Parameters: json.RawMessage(`{"type":"object"}`),
		Execute: func(ctx context.Context, _ tool.Call) (tool.Result, error) {
			c.runs.Add(1)
			c.entered <- struct{}{}
			<-ctx.Done()
			return tool.Result{}, ctx.Err()
		}}
}

// flapping is a store whose checkpoints fail once armed (the database
// refuses the writes of a run for a moment) while the run's end is stored.
type flapping struct {
	store.Store
	armed atomic.Bool
}

func (f *flapping) Checkpoint(ctx context.Context, c store.Checkpoint) error {
	if f.armed.Load() {
		return fmt.Errorf("checkpoint: %w", store.ErrUnavailable)
	}
	return f.Store.Checkpoint(ctx, c)
}

// failMidTool runs a turn of t1 whose refund call has its side effect,
// then neither its result nor an in-doubt decision can be stored, while the
// run's end can: the thread ends failed with the call started and no
// result. It returns the tool and a runner on the working store.
func failMidTool(t *testing.T, b *lifetimeBundle) (*sideEffect, *engine.Runner) {
	t.Helper()
	fx := newSideEffect(t)
	b.spec.Tools = []*tool.Tool{fx.tool("refund", false, nil)}
	m := &caller{name: "refund", id: "call_0", args: `{"orderId":"A1"}`}
	flap := *b
	fs := &flapping{Store: b.store}
	flap.store = fs
	a := flap.runner(t, "node-a", m)
	t.Cleanup(fx.free)
	startTurn(t, a, "t1")
	testwait.Recv(t, fx.entered, "a call to start (fx.entered)")
	fs.armed.Store(true)
	fx.free()
	waitRuns(t, a)
	if th, _ := b.thread(t, "t1"); th.Status != store.Failed {
		t.Fatalf("the run whose writes failed: thread %s, want failed", th.Status)
	}
	return fx, b.runner(t, "node-a", m)
}

// TestCancelMidToolMakesCallInDoubt: a run cancelled while its
// non-idempotent tool runs (the effect may have happened; its result is not
// stored) makes the call in doubt at once: the thread waits on the decision
// (its decision.pending goes out now, not at the next turn), and the next
// turn is told so.
func TestCancelMidToolMakesCallInDoubt(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, b *lifetimeBundle) {
		ct := &ctxTool{entered: make(chan struct{}, 4)}
		b.spec.Tools = []*tool.Tool{ct.tool()}
		r := b.runner(t, "node-a", &caller{name: "refund", id: "call_0", args: `{"orderId":"A1"}`})
		startTurn(t, r, "t1")
		testwait.Recv(t, ct.entered, "a call to start (ct.entered)")
		if err := r.Cancel(t.Context(), "acme", "t1"); err != nil {
			t.Fatal(err)
		}
		waitRuns(t, r)
		pend := pendingOf(t, b)
		if th, _ := b.thread(t, "t1"); th.Status != store.Waiting || len(pend) != 1 || pend[0].Reason != store.ReasonInDoubt {
			t.Fatalf("cancelled mid-tool: thread %s, pending %+v; want waiting on the in-doubt call", th.Status, pend)
		}
		_, err := r.Start(t.Context(), engine.Input{Tenant: "acme", Agent: "helper", ThreadID: "t1",
			Messages: []message.Message{{Role: message.User, Content: "something else"}}})
		if !errors.Is(err, store.ErrApprovalPending) || ct.runs.Load() != 1 {
			t.Fatalf("a new turn after the cancel: %v (tool ran %d times)", err, ct.runs.Load())
		}
	})
}

// TestNewTurnAfterFailureMidToolRecoversFirst: a run whose writes fail
// while its tool runs ends failed with the call started and no result. The
// next turn recovers the thread first, as after a crash.
func TestNewTurnAfterFailureMidToolRecoversFirst(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, b *lifetimeBundle) {
		fx, r := failMidTool(t, b)
		wantApprovalPending(t, r, "something else")
		waitRuns(t, r)
		assertInDoubtNotClosed(t, b, fx)
	})
}

// flaky is a model that calls refund when the conversation ends with the
// user, and otherwise fails its first fails answers (an upstream 502 after
// the tool ran), then answers with the last tool result.
type flaky struct {
	mu    sync.Mutex
	fails int
	calls int
}

func (f *flaky) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		f.mu.Lock()
		f.calls++
		fail := false
		last := req.Messages[len(req.Messages)-1]
		if last.Role != message.User && f.fails > 0 {
			f.fails--
			fail = true
		}
		f.mu.Unlock()
		switch {
		case last.Role == message.User:
			if yield(model.Chunk{Type: model.Text, Text: "Refunding. "}, nil) &&
				yield(model.Chunk{Type: model.ToolCallStart, ID: "call_0", Name: "refund"}, nil) &&
				yield(model.Chunk{Type: model.ToolCallArgs, Text: `{"orderId":"A1"}`}, nil) {
				yield(model.Chunk{Type: model.Finish, Stop: event.StopToolCalls}, nil)
			}
		case fail:
			yield(model.Chunk{}, &model.Error{Status: 502, Message: "bad gateway"})
		default:
			if yield(model.Chunk{Type: model.Text, Text: "done: " + last.Content}, nil) {
				yield(model.Chunk{Type: model.Finish, Stop: event.StopEnd}, nil)
			}
		}
	}
}

// TestRetryOfFailedTurnContinuesIt: the model call after a tool fails, so
// the turn fails after its side effect. The client sends the same request
// again (an SDK's retry, the AI SDK's default retries; with the same
// Idempotency-Key too, even after the retry window): the retry goes on from
// the stored steps. The tool does not run again, the input is stored once,
// and the answer holds the whole turn: the text before the call, the call's
// result, and the model's answer.
func TestRetryOfFailedTurnContinuesIt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, key string
		later     time.Duration
	}{{"same request", "", time.Minute}, {"same key after the window", "k-1", 2 * time.Hour}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachDriver(t, func(t *testing.T, b *lifetimeBundle) {
				fx := newSideEffect(t)
				fx.hangs = 0
				b.spec.Tools = []*tool.Tool{fx.tool("refund", false, nil)}
				m := &flaky{fails: 1}
				r := b.runner(t, "node-a", m)
				evs, err := turn(t, r, "refund A1", tc.key)
				if _, end := answer(evs); err != nil || end != event.RunError {
					t.Fatalf("first attempt: %s, %v; want it to fail", end, err)
				}
				waitRuns(t, r)
				b.clk.Advance(tc.later)
				evs, err = turn(t, r, "refund A1", tc.key)
				text, end := answer(evs)
				if err != nil || end != event.RunFinished || text != "Refunding. done: refunded" {
					t.Fatalf("retry: %q, %s, %v", text, end, err)
				}
				var results int
				for _, e := range evs {
					if e.Type == event.ToolResult {
						results++
					}
				}
				waitRuns(t, r)
				users, answers := b.counts(t)
				if n := len(fx.calls()); n != 1 || users != 1 || answers != 2 || results != 1 {
					t.Fatalf("tool ran %d times; %d user messages, %d assistant messages stored; %d tool results shown",
						n, users, answers, results)
				}
				if th, _ := b.thread(t, "t1"); th.Status != store.Idle {
					t.Fatalf("thread %s after the retry", th.Status)
				}
			})
		})
	}
}

// TestRetryOfFailedTurnAfterCrashMidToolIsInDoubt: the first attempt's
// writes failed while its tool ran (the database went away under it) and
// the run ended failed with the call started; the client's retry continues
// the turn, which makes the call in doubt instead of running it again.
func TestRetryOfFailedTurnAfterCrashMidToolIsInDoubt(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, b *lifetimeBundle) {
		fx, r := failMidTool(t, b)
		evs, err := turn(t, r, "hello", "")
		if err != nil {
			t.Fatalf("retry: %v", err)
		}
		last := evs[len(evs)-1]
		if last.Type != event.RunFinished || last.Outcome == nil || last.Outcome.Type != event.Interrupt {
			t.Fatalf("retry's end: %+v", last)
		}
		waitRuns(t, r)
		assertInDoubtNotClosed(t, b, fx)
		if pend := pendingOf(t, b); !strings.Contains(pend[0].Description, "may already have run") {
			t.Fatalf("pending: %+v", pend)
		}
	})
}

// TestStatelessRetryAfterCrashMidToolIsRefused: a stateless turn with an
// Idempotency-Key whose process dies while its non-idempotent tool runs
// (after the side effect, before any result): the client's retry, on
// another replica, must not run the tool again. It is refused with a
// CallInDoubtError naming the call; a retry of the refusal is refused
// alike.
func TestStatelessRetryAfterCrashMidToolIsRefused(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, b *lifetimeBundle) {
		fx := newSideEffect(t)
		b.spec.Tools = []*tool.Tool{fx.tool("refund", false, nil)}
		m := &caller{name: "refund", id: "call_0", args: `{"orderId":"A1"}`}
		a := b.runner(t, "node-a", m)
		t.Cleanup(fx.free)
		in := engine.Input{Tenant: "acme", Agent: "helper", IdempotencyKey: "k-1",
			Messages: []message.Message{{Role: message.User, Content: "refund A1"}}}
		run, err := a.Start(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for range run.Events() {
			}
		}()
		testwait.Recv(t, fx.entered, "a call to start (fx.entered)") // A "died" here: the call hangs after its effect

		other := b.runner(t, "node-b", m)
		for i := range 2 {
			_, err := other.Start(t.Context(), in)
			var cd *engine.CallInDoubtError
			if !errors.As(err, &cd) || len(cd.Calls) != 1 || cd.Calls[0] != `refund({"orderId":"A1"})` {
				t.Fatalf("retry %d after the crash: %v, want the call in doubt", i, err)
			}
		}
		if n := len(fx.calls()); n != 1 {
			t.Fatalf("the call ran %d times", n)
		}
	})
}

// blindOnce is a store whose first GetThread finds no thread: a request
// that read the store before another attempt of it created the thread.
type blindOnce struct {
	store.Store
	done atomic.Bool
}

func (b *blindOnce) GetThread(ctx context.Context, tenant, id string) (*store.Thread, error) {
	if b.done.CompareAndSwap(false, true) {
		return nil, store.ErrNotFound
	}
	return b.Store.GetThread(ctx, tenant, id)
}

// TestRetryThatFoundNoThreadAttaches: two attempts of a turn on a new
// thread; the second read the store before the first created the thread,
// and reaches BeginRun after the first ended its whole turn. It must not
// be admitted as a new turn on the now idle thread (storing the message
// twice): the thread moved on since the read, so the attempt reads it
// again and is a retry of that turn.
func TestRetryThatFoundNoThreadAttaches(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, b *lifetimeBundle) {
		m := &counting{text: "the answer"}
		r := b.runner(t, "node-a", m)
		if _, err := turn(t, r, "hello", ""); err != nil {
			t.Fatal(err)
		}
		waitRuns(t, r)
		blind := *b
		blind.store = &blindOnce{Store: b.store}
		late := blind.runner(t, "node-a", m)
		evs, err := turn(t, late, "hello", "")
		if text, end := answer(evs); err != nil || text != "the answer" || end != event.RunFinished {
			t.Fatalf("the late attempt: %q, %s, %v", text, end, err)
		}
		waitRuns(t, late)
		if users, answers := b.counts(t); users != 1 || answers != 1 || m.calls.Load() != 1 {
			t.Fatalf("%d user messages, %d answers, %d model calls; want one of each", users, answers, m.calls.Load())
		}
	})
}

// TestNewTurnAfterDatabaseCutMidToolRecoversFirst: the database goes away
// (a loopback proxy drops and refuses its connections) while replica A's
// non-idempotent tool runs, so neither the result nor the run's end can be
// stored; A's lease lapses. The user's next message, through replica B on a
// database that answers again, recovers the thread first: the call waits in
// doubt and the message gets approval pending.
func TestNewTurnAfterDatabaseCutMidToolRecoversFirst(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(stacktest.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := stacktest.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	stA := stacktest.PostgresAt(t, u.String(), "cut")
	stB := stacktest.PostgresReplica(t, stA)
	clk := clock.NewFake(t0)
	stA.SetClock(clk)
	stB.SetClock(clk)
	b := &lifetimeBundle{clk: clk, store: stA, other: stB,
		spec: &agent.Spec{Name: "helper", Model: "scripted/helper", Instructions: "Help."}}
	fx := newSideEffect(t)
	b.spec.Tools = []*tool.Tool{fx.tool("refund", false, nil)}
	m := &caller{name: "refund", id: "call_0", args: `{"orderId":"A1"}`}
	a := b.runner(t, "node-a", m)
	t.Cleanup(fx.free)
	startTurn(t, a, "t1")
	testwait.Recv(t, fx.entered, "a call to start (fx.entered)")
	proxy.Drop()
	proxy.Refuse()
	fx.free() // the charge went through; its result cannot be stored
	waitRuns(t, a)
	clk.Advance(2 * time.Hour)

	other := b.runner(t, "node-b", m)
	wantApprovalPending(t, other, "did it work?")
	waitRuns(t, other)
	view := *b
	view.store = stB
	assertInDoubtNotClosed(t, &view, fx)
}

// TestStartedCallOfAToolGoneSinceIsInDoubt: the process dies while a
// charge runs; by the time the thread is recovered the tool is gone (an
// agent reload dropped it, or its MCP server is down). The call may have
// run: it waits in doubt, it is not closed as "unknown tool".
func TestStartedCallOfAToolGoneSinceIsInDoubt(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, b *lifetimeBundle) {
		fx, m := hangMidTool(t, b)
		reloaded := *b
		spec := *b.spec
		spec.Tools = nil
		reloaded.spec = &spec
		other := reloaded.runner(t, "node-b", m)
		if n, err := other.Recover(t.Context(), b.clk.Now()); err != nil || n != 1 {
			t.Fatalf("Recover: %d, %v", n, err)
		}
		waitRuns(t, other)
		assertInDoubtNotClosed(t, b, fx)
	})
}

// TestResyncRetryOfFailedTurnShowsItsStepsOnce: an AG-UI client (which
// rebuilds its view from the stream's snapshots) retrying a failed turn
// gets the failed attempt's steps in the messages snapshot, not also as
// live events again.
func TestResyncRetryOfFailedTurnShowsItsStepsOnce(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, b *lifetimeBundle) {
		fx := newSideEffect(t)
		fx.hangs = 0
		b.spec.Tools = []*tool.Tool{fx.tool("refund", false, nil)}
		r := b.runner(t, "node-a", &flaky{fails: 1})
		in := engine.Input{Tenant: "acme", Agent: "helper", ThreadID: "t1", Resync: true,
			Messages: []message.Message{{ID: "m1", Role: message.User, Content: "refund A1"}}}
		for attempt := range 2 {
			run, err := r.Start(context.Background(), in)
			if err != nil {
				t.Fatalf("attempt %d: %v", attempt, err)
			}
			var results, snapshots int
			for _, e := range drainRun(t, run) {
				switch e.Type {
				case event.ToolResult:
					results++
				case event.MessagesSnapshot:
					snapshots++
				}
			}
			waitRuns(t, r)
			if attempt == 1 && (results != 0 || snapshots == 0) {
				t.Fatalf("the retry showed %d tool results live and %d messages snapshots; want the steps in the snapshot only",
					results, snapshots)
			}
		}
		if n := len(fx.calls()); n != 1 {
			t.Fatalf("the tool ran %d times", n)
		}
	})
}

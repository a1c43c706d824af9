package engine_test

import (
	"context"
	"errors"
	"iter"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/testwait"
)

// counting answers every call with its text and counts the calls.
type counting struct {
	text  string
	calls atomic.Int32
}

func (c *counting) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		c.calls.Add(1)
		if yield(model.Chunk{Type: model.Text, Text: c.text}, nil) {
			yield(model.Chunk{Type: model.Finish, Stop: event.StopEnd}, nil)
		}
	}
}

// diskFull is a store whose FinishRun always fails (a full disk, or a
// process killed between storing the answer and ending the run).
type diskFull struct{ store.Store }

func (diskFull) FinishRun(context.Context, store.FinishRun) error {
	return errors.New("disk full")
}

// turn runs one durable turn of "helper" in thread t1 and returns its
// events (up to the terminal one) or Start's error.
func turn(t *testing.T, r *engine.Runner, text, key string) ([]event.Event, error) {
	t.Helper()
	return turnOf(t, r, key, message.Message{Role: message.User, Content: text})
}

// turnOf is turn with the messages a client sends (its whole history, say).
func turnOf(t *testing.T, r *engine.Runner, key string, msgs ...message.Message) ([]event.Event, error) {
	t.Helper()
	run, err := r.Start(context.Background(), engine.Input{Tenant: "acme", Agent: "helper", ThreadID: "t1",
		IdempotencyKey: key, Messages: msgs})
	if err != nil {
		return nil, err
	}
	return untilEnd(t, run), nil
}

// answer is the text of a turn's events and its terminal event's type.
func answer(evs []event.Event) (text string, end event.Type) {
	for _, e := range evs {
		switch e.Type {
		case event.TextDelta:
			text += e.Delta
		case event.RunFinished, event.RunError:
			end = e.Type
		}
	}
	return text, end
}

// userMessages counts the stored user messages and assistant answers.
func (b *lifetimeBundle) counts(t *testing.T) (users, answers int) {
	t.Helper()
	_, msgs := b.thread(t, "t1")
	for _, m := range msgs {
		switch m.Role {
		case message.User:
			users++
		case message.Assistant:
			answers++
		}
	}
	return users, answers
}

// TestRecoveryOnlyEndsAnsweredRun: a run whose answer was stored but whose
// end could not be (FinishRun fails: a full disk, or the process killed
// between the two) is recovered by ending it: no second model call, one
// answer stored, the thread idle with the run's RunFinished in its log.
func TestRecoveryOnlyEndsAnsweredRun(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, b *lifetimeBundle) {
		first := &counting{text: "the answer"}
		full := *b
		full.store = diskFull{b.store}
		a := full.runner(t, "node-a", first)
		if _, err := turn(t, a, "hello", ""); err != nil {
			t.Fatal(err)
		}
		waitRuns(t, a)
		if th, _ := b.thread(t, "t1"); th.Status != store.Running {
			t.Fatalf("thread after a FinishRun that failed: %+v", th)
		}

		next := &counting{text: "a second answer"}
		other := b.runner(t, "node-b", next)
		b.clk.Advance(61 * time.Minute)
		if n, err := other.Recover(t.Context(), b.clk.Now()); err != nil || n != 1 {
			t.Fatalf("Recover: %d, %v", n, err)
		}
		waitRuns(t, other)
		if n := next.calls.Load(); n != 0 {
			t.Fatalf("recovery called the model %d times for a run whose answer was stored", n)
		}
		th, msgs := b.thread(t, "t1")
		if th.Status != store.Idle || len(msgs) != 2 || msgs[1].Content != "the answer" {
			t.Fatalf("after recovery: %+v, %+v", th, msgs)
		}
		evs, err := b.store.Events(t.Context(), "acme", "t1", 0, store.MaxLimit)
		if err != nil {
			t.Fatal(err)
		}
		if last := evs[len(evs)-1]; last.Type != event.RunFinished || last.Outcome.Type != event.Success {
			t.Fatalf("last stored event %+v", last)
		}
	})
}

// TestRetryAttachesToFinishedTurn: a client resending a durable turn that
// already finished (its answer lost on the way) gets the stored answer, with
// no second model call and no second user message; after the retry window
// the same text is a new turn. An Idempotency-Key decides instead of the
// text: the key of the last turn attaches at any time, a new key is a new
// turn, and the key with another request is refused.
func TestRetryAttachesToFinishedTurn(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, b *lifetimeBundle) {
		m := &counting{text: "hi there"}
		r := b.runner(t, "node-a", m)
		for i := range 2 {
			evs, err := turn(t, r, "hello", "")
			if err != nil {
				t.Fatalf("attempt %d: %v", i, err)
			}
			if text, end := answer(evs); text != "hi there" || end != event.RunFinished {
				t.Fatalf("attempt %d answered %q, %s: %v", i, text, end, evs)
			}
		}
		if users, answers := b.counts(t); m.calls.Load() != 1 || users != 1 || answers != 1 {
			t.Fatalf("after a retry: %d model calls, %d user messages, %d answers", m.calls.Load(), users, answers)
		}

		b.clk.Advance(engine.DefaultJournalTTL + time.Second)
		if _, err := turn(t, r, "hello", ""); err != nil {
			t.Fatal(err)
		}
		if users, answers := b.counts(t); m.calls.Load() != 2 || users != 2 || answers != 2 {
			t.Fatalf("the same text after the window: %d model calls, %d user messages, %d answers", m.calls.Load(), users, answers)
		}

		if _, err := turn(t, r, "yes", "key-1"); err != nil {
			t.Fatal(err)
		}
		b.clk.Advance(time.Hour)
		evs, err := turn(t, r, "yes", "key-1")
		if text, _ := answer(evs); err != nil || text != "hi there" {
			t.Fatalf("retry with the last turn's key: %q, %v", text, err)
		}
		if _, err := turn(t, r, "yes", "key-2"); err != nil {
			t.Fatal(err)
		}
		if users, _ := b.counts(t); m.calls.Load() != 4 || users != 4 {
			t.Fatalf("a new key is a new turn: %d model calls, %d user messages", m.calls.Load(), users)
		}
		_, err = turn(t, r, "no", "key-2")
		var ie *engine.InputError
		if !errors.As(err, &ie) || ie.Code != engine.CodeIdempotencyKeyReused {
			t.Fatalf("the last turn's key with another request: %v", err)
		}
	})
}

// TestSameReplyWithHistoryIsANewTurn: a client that sends its whole history
// and gives the same short reply twice in a row ("ok", then "ok" to the
// answer) sends a longer request the second time: a new turn, stored and
// answered, not a retry of the first.
func TestSameReplyWithHistoryIsANewTurn(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, b *lifetimeBundle) {
		m := &counting{text: "Shall I go on?"}
		r := b.runner(t, "node-a", m)
		ok := message.Message{Role: message.User, Content: "ok"}
		if _, err := turnOf(t, r, "", ok); err != nil {
			t.Fatal(err)
		}
		evs, err := turnOf(t, r, "", ok, message.Message{Role: message.Assistant, Content: "Shall I go on?"}, ok)
		if err != nil {
			t.Fatal(err)
		}
		if _, end := answer(evs); end != event.RunFinished {
			t.Fatalf("second ok: %v", evs)
		}
		if users, answers := b.counts(t); m.calls.Load() != 2 || users != 2 || answers != 2 {
			t.Fatalf("the second ok: %d model calls, %d user messages, %d answers; want 2 of each", m.calls.Load(), users, answers)
		}
	})
}

// TestRetryOfFailedAttemptCarriesItsCause: a retry attached to an attempt
// that then fails gets the failure as the attempt stored it (its code),
// typed, with whether the turn had done work, so the HTTP edge can tell
// the client whether retrying again is safe.
func TestRetryOfFailedAttemptCarriesItsCause(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, b *lifetimeBundle) {
		g := newGated("")
		g.fail = &model.Error{Status: 500, Message: "upstream broke"}
		r := b.runner(t, "node-a", g)
		startTurn(t, r, "t1")
		testwait.Recv(t, g.entered, "a call to start (g.entered)")
		// Start returns once the retry is attached: the attempt fails after.
		retry, err := r.Start(context.Background(), engine.Input{Tenant: "acme", Agent: "helper", ThreadID: "t1",
			Messages: []message.Message{{Role: message.User, Content: "hello"}}})
		if err != nil {
			t.Fatalf("retry while the attempt runs: %v", err)
		}
		close(g.release)
		evs := drainRun(t, retry)
		last := evs[len(evs)-1]
		var rf *engine.RunFailedError
		var sf *engine.StoredFailure
		if last.Type != event.RunError || !errors.As(last.Err, &rf) || !errors.As(rf.Err, &sf) || sf.Code != last.Code || rf.WorkDone {
			t.Fatalf("the retry's end: %+v (cause %#v)", last, last.Err)
		}
	})
}

// TestRetryWaitsForRunningAttempt: a retry arriving while the first attempt
// still runs waits for it (no 409 run_in_progress) and gets its answer;
// the model is called once and the input stored once.
func TestRetryWaitsForRunningAttempt(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, b *lifetimeBundle) {
		g := newGated("slow answer")
		r := b.runner(t, "node-a", g)
		startTurn(t, r, "t1")
		testwait.Recv(t, g.entered, "a call to start (g.entered)")
		got := make(chan []event.Event, 1)
		go func() {
			evs, err := turn(t, r, "hello", "")
			if err != nil {
				t.Errorf("retry while the attempt runs: %v", err)
			}
			got <- evs
		}()
		// The retry is attached once it subscribed; releasing the model
		// before or after that gives the same answer (stored events first).
		close(g.release)
		evs := testwait.Recv(t, got, "the retry's events")
		if text, end := answer(evs); text != "slow answer" || end != event.RunFinished {
			t.Fatalf("retry answered %q, %s", text, end)
		}
		waitRuns(t, r)
		if users, answers := b.counts(t); len(g.entered) != 0 || users != 1 || answers != 1 {
			t.Fatalf("%d more model calls, %d user messages, %d answers", len(g.entered), users, answers)
		}
	})
}

// TestRetryAfterCrashGetsRecoveredAnswer: the first attempt's process died
// (its runner hangs; its lease lapses). A retry on another runner takes the
// turn over and answers it, without storing the input twice.
func TestRetryAfterCrashGetsRecoveredAnswer(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, b *lifetimeBundle) {
		hung := newGated("never")
		hung.deaf = true
		a := b.runner(t, "node-a", hung)
		startTurn(t, a, "t1")
		testwait.Recv(t, hung.entered, "a call to start (hung.entered)")

		m := &counting{text: "recovered"}
		other := b.runner(t, "node-b", m)
		b.clk.Advance(61 * time.Minute)
		evs, err := turn(t, other, "hello", "")
		if text, end := answer(evs); err != nil || text != "recovered" || end != event.RunFinished {
			t.Fatalf("retry after the crash: %q, %s, %v", text, end, err)
		}
		if users, answers := b.counts(t); m.calls.Load() != 1 || users != 1 || answers != 1 {
			t.Fatalf("%d model calls, %d user messages, %d answers", m.calls.Load(), users, answers)
		}
		close(hung.release)
	})
}

// TestRetryAfterCrashBeforeEndGetsStoredAnswer: when the dead attempt had
// stored its answer (but not its end), a retry on another runner gets that
// answer back with no model call.
func TestRetryAfterCrashBeforeEndGetsStoredAnswer(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, b *lifetimeBundle) {
		full := *b
		full.store = diskFull{b.store}
		a := full.runner(t, "node-a", &counting{text: "stored answer"})
		if _, err := turn(t, a, "hello", ""); err != nil {
			t.Fatal(err)
		}
		waitRuns(t, a)
		m := &counting{text: "a second answer"}
		other := b.runner(t, "node-b", m)
		b.clk.Advance(61 * time.Minute)
		evs, err := turn(t, other, "hello", "")
		if text, end := answer(evs); err != nil || text != "stored answer" || end != event.RunFinished {
			t.Fatalf("retry after a crash between answer and end: %q, %s, %v", text, end, err)
		}
		if users, answers := b.counts(t); m.calls.Load() != 0 || users != 1 || answers != 1 {
			t.Fatalf("%d model calls, %d user messages, %d answers", m.calls.Load(), users, answers)
		}
	})
}

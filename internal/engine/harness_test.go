package engine_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// These tests drive the engine without HTTP (stacktest.NewEngine): a real
// SQLite store, the scripted model in-process, assertions on the events the
// run's consumer and the bus receive and on what is stored.

func user(text string) []message.Message {
	return []message.Message{{Role: message.User, Content: text}}
}

// text joins the text deltas of evs.
func text(evs []event.Event) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Type == event.TextDelta {
			b.WriteString(e.Delta)
		}
	}
	return b.String()
}

func ofType(evs []event.Event, typ event.Type) []event.Event {
	var out []event.Event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// success checks evs ends with a successful RunFinished.
func success(t *testing.T, what string, evs []event.Event) {
	t.Helper()
	last := stacktest.Last(evs)
	if last.Type != event.RunFinished || last.Outcome == nil || last.Outcome.Type != event.Success {
		t.Fatalf("%s: want a successful run_finished, got %+v (events %v)", what, last, stacktest.Types(evs))
	}
}

// sameAsStored checks the thread's stored event log has contiguous
// sequence numbers from 1 and that the consumer saw each stored event, in
// the log's order (the consumer also gets live-only events such as deltas).
func sameAsStored(t *testing.T, e *stacktest.Engine, thread string, evs []event.Event) {
	t.Helper()
	stored, err := e.Store.Events(context.Background(), "dev", thread, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for _, ev := range evs {
		if i < len(stored) && ev.Type == stored[i].Type && ev.ToolCallID == stored[i].ToolCallID {
			i++
		}
	}
	if i != len(stored) {
		t.Fatalf("the consumer missed stored event %d: consumer %v, log %v", i, stacktest.Types(evs), stacktest.Types(stored))
	}
	for i, ev := range stored {
		if ev.Seq != int64(i+1) {
			t.Fatalf("stored event %d has seq %d", i, ev.Seq)
		}
	}
}

func TestEngineDurableToolTurn(t *testing.T) {
	t.Parallel()
	e := stacktest.NewEngine(t, stacktest.Options{})
	evs := e.Turn(t, engine.Input{Agent: "assistant", ThreadID: "t1", Messages: user("weather in Paris?")})
	success(t, "tool turn", evs)
	if evs[0].Type != event.RunStarted || evs[0].ThreadID != "t1" {
		t.Fatalf("first event %+v", evs[0])
	}
	calls := ofType(evs, event.ToolCallStart)
	results := ofType(evs, event.ToolResult)
	if len(calls) != 1 || calls[0].ToolName != "get_weather" || len(results) != 1 || results[0].ToolCallID != calls[0].ToolCallID {
		t.Fatalf("want one get_weather call and its result: %v", stacktest.Types(evs))
	}
	if results[0].Content != `{"city":"Paris","temp_c":21}` || results[0].IsError {
		t.Fatalf("tool result %+v", results[0])
	}
	if got := text(evs); got != `Checking.Tool said: {"city":"Paris","temp_c":21}` {
		t.Fatalf("text %q", got)
	}
	if n := e.Calls.Get("get_weather"); n != 1 {
		t.Fatalf("the tool ran %d times", n)
	}
	if th := e.Thread(t, "dev", "t1"); th.Status != store.Idle {
		t.Fatalf("thread %+v", th)
	}
	msgs, err := e.Store.Messages(context.Background(), "dev", "t1")
	if err != nil {
		t.Fatal(err)
	}
	roles := make([]message.Role, 0, len(msgs))
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	if !slices.Equal(roles, []message.Role{message.User, message.Assistant, message.Tool, message.Assistant}) {
		t.Fatalf("stored roles %v", roles)
	}
	sameAsStored(t, e, "t1", evs)
}

func TestEngineApprovalPauseAndResume(t *testing.T) {
	t.Parallel()
	e := stacktest.NewEngine(t, stacktest.Options{})
	evs := e.Turn(t, engine.Input{Agent: "assistant", ThreadID: "t2", Messages: user("please refund my order")})
	last := stacktest.Last(evs)
	if last.Type != event.RunFinished || last.Outcome == nil || last.Outcome.Type != event.Interrupt || len(last.Outcome.Interrupts) != 1 {
		t.Fatalf("want a pause, got %+v", last)
	}
	in := last.Outcome.Interrupts[0]
	if in.Tool != "refund" || in.Description != "Refund order ord_42 for 19.99" {
		t.Fatalf("interrupt %+v", in)
	}
	if e.Calls.Get("refund") != 0 || len(ofType(evs, event.ToolResult)) != 0 {
		t.Fatal("the tool ran before the decision")
	}
	if th := e.Thread(t, "dev", "t2"); th.Status != store.Waiting {
		t.Fatalf("thread %+v", th)
	}
	pending := e.Pending(t, "dev", "t2")
	if len(pending) != 1 || pending[0].ID != in.ID {
		t.Fatalf("pending %+v, interrupt %+v", pending, in)
	}

	wait := e.Follow(t, "dev", "t2")
	if _, err := e.Runner.Decide(context.Background(), "dev", in.ID, engine.Decision{Approved: true, Via: "api", By: "dev"}); err != nil {
		t.Fatal(err)
	}
	resumed := wait()
	success(t, "resumed run", resumed)
	// The bus carries a result live and again once stored (with its seq).
	results := ofType(resumed, event.ToolResult)
	for _, r := range results {
		if r.ToolCallID != in.ToolCallID || !strings.Contains(r.Content, `"refunded":19.99`) {
			t.Fatalf("resumed run's tool result: %+v", r)
		}
	}
	if len(results) == 0 {
		t.Fatalf("the resumed run has no tool result: %v", stacktest.Types(resumed))
	}
	if got := text(resumed); !strings.HasPrefix(got, "Refund result: ") {
		t.Fatalf("resumed answer %q", got)
	}
	if n := e.Calls.Get("refund"); n != 1 {
		t.Fatalf("the tool ran %d times", n)
	}
	stacktest.WaitFor(t, "the thread to be idle", func() bool { return e.Thread(t, "dev", "t2").Status == store.Idle })
	got, err := e.Store.GetInterrupt(context.Background(), "dev", in.ID)
	if err != nil || got.Status != store.Approved || got.Decision == nil || got.Decision.Via != "api" {
		t.Fatalf("decided interrupt %+v %v", got, err)
	}
	if _, err := e.Runner.Decide(context.Background(), "dev", in.ID, engine.Decision{Approved: false, Via: "api"}); err == nil {
		t.Fatal("deciding twice was accepted")
	}
}

func TestEngineClientToolContinuation(t *testing.T) {
	t.Parallel()
	e := stacktest.NewEngine(t, stacktest.Options{})
	modal := []model.ToolDef{{Name: "open_modal", Description: "Open a modal", Parameters: json.RawMessage(`{"type":"object"}`)}}
	evs := e.Turn(t, engine.Input{Agent: "assistant", ThreadID: "t3", ClientTools: modal, Messages: user("open the modal")})
	last := stacktest.Last(evs)
	if last.Type != event.RunFinished || last.Outcome == nil || last.Outcome.Type != event.Success ||
		last.Outcome.Stop != event.StopToolCalls || len(last.Outcome.PendingCalls) != 1 {
		t.Fatalf("want the turn to stop on the client's call, got %+v", last)
	}
	call := last.Outcome.PendingCalls[0]
	if call.Name != "open_modal" || !call.Client || len(ofType(evs, event.ToolResult)) != 0 {
		t.Fatalf("pending call %+v (events %v)", call, stacktest.Types(evs))
	}

	// The client answers with the tool result only; the run continues from
	// the stored conversation.
	first := evs
	evs = e.Turn(t, engine.Input{Agent: "assistant", ThreadID: "t3", ClientTools: modal,
		Messages: []message.Message{{Role: message.Tool, ToolCallID: call.ID, Content: `{"closed":true}`}}})
	success(t, "continuation", evs)
	if got := text(evs); got != `Modal said: {"closed":true}` {
		t.Fatalf("continuation answer %q", got)
	}
	msgs, err := e.Store.Messages(context.Background(), "dev", "t3")
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 4 || msgs[2].Role != message.Tool || msgs[2].ToolCallID != call.ID || msgs[3].Content != `Modal said: {"closed":true}` {
		t.Fatalf("stored conversation %+v", msgs)
	}
	sameAsStored(t, e, "t3", append(first, evs...))
}

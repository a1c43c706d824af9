package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/testwait"
	"github.com/stackbone/stackbone/internal/tool"
)

// confirmAgent has one tool that asks a human to confirm (as an MCP
// server's elicitation does) and reports the answer.
func confirmAgent(env *stacktest.Env) []*agent.Spec {
	confirm := &tool.Tool{Name: "confirm", Description: "Ask before acting",
		Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
			if c.Ask == nil {
				return tool.Result{Content: "no one to ask"}, nil
			}
			a, err := c.Ask(ctx, tool.Question{Message: "Really delete?", Schema: json.RawMessage(
				`{"type":"object","properties":{"reason":{"type":"string"}},"required":["reason"]}`)})
			if err != nil {
				return tool.Result{}, err
			}
			env.Calls.Add("confirm", a.Content)
			if !a.Accepted {
				return tool.Result{Content: "declined: " + a.Message}, nil
			}
			return tool.Result{Content: "accepted: " + string(a.Content)}, nil
		}}
	return []*agent.Spec{{Name: "asker", Model: "scripted/test-model", Instructions: "Help.", Tools: []*tool.Tool{confirm}}}
}

const confirmScript = `[
 {"when": {"lastTool": "confirm"}, "reply": {"text": "Result: {{lastTool}}"}},
 {"reply": {"toolCalls": [{"name": "confirm", "arguments": {}}]}}
]`

// askAndDecide runs a turn whose tool asks; decide answers the pending
// question once it shows; the turn's events are returned.
func askAndDecide(t *testing.T, e *stacktest.Engine, thread string, decide func(it store.Interrupt)) []event.Event {
	t.Helper()
	done := make(chan []event.Event)
	go func() { done <- e.Turn(t, engine.Input{Agent: "asker", ThreadID: thread, Messages: user("delete it")}) }()
	var it store.Interrupt
	stacktest.WaitFor(t, "the question to be pending", func() bool {
		p := e.Pending(t, "dev", thread)
		if len(p) == 1 {
			it = p[0]
		}
		return len(p) == 1
	})
	if it.Reason != store.ReasonElicitation || it.Description != "Really delete?" || !strings.Contains(string(it.ResponseSchema), `"reason"`) {
		t.Fatalf("pending question %+v", it)
	}
	if th := e.Thread(t, "dev", thread); th.Status != store.Running {
		t.Fatalf("the run must wait in the call, thread %+v", th)
	}
	decide(it)
	return testwait.Recv(t, done, "the asking turn's events")
}

// TestToolAsksAHuman: a tool's question is a pending decision (reason
// elicitation) while the call waits; an answer that does not match the
// question's schema is refused; approving with editedArgs answers it,
// rejecting declines it; either way the call goes on and the turn ends.
func TestToolAsksAHuman(t *testing.T) {
	t.Parallel()
	e := stacktest.NewEngine(t, stacktest.Options{Script: confirmScript, Agents: confirmAgent})
	ctx := context.Background()
	evs := askAndDecide(t, e, "q1", func(it store.Interrupt) {
		_, err := e.Runner.Decide(ctx, "dev", it.ID, engine.Decision{Approved: true, EditedArgs: json.RawMessage(`{"why":1}`), Via: "api", By: "dev"})
		var ie *engine.InputError
		if !errors.As(err, &ie) || ie.Field != engine.FieldEditedArgs || !strings.Contains(ie.Reason, "question's schema") {
			t.Errorf("an answer missing a required field: %v", err)
		}
		if _, err := e.Runner.Decide(ctx, "dev", it.ID, engine.Decision{Approved: true, EditedArgs: json.RawMessage(`{"reason":"cleanup"}`), Via: "api", By: "dev"}); err != nil {
			t.Errorf("answer: %v", err)
		}
	})
	success(t, "answered turn", evs)
	if got := text(evs); got != `Result: accepted: {"reason":"cleanup"}` {
		t.Fatalf("text %q", got)
	}
	if n := e.Calls.Get("confirm"); n != 1 {
		t.Fatalf("the tool finished %d times", n)
	}

	evs = askAndDecide(t, e, "q2", func(it store.Interrupt) {
		if _, err := e.Runner.Decide(ctx, "dev", it.ID, engine.Decision{Approved: false, Message: "not now", Via: "api", By: "dev"}); err != nil {
			t.Errorf("decline: %v", err)
		}
	})
	success(t, "declined turn", evs)
	if got := text(evs); got != "Result: declined: not now" {
		t.Fatalf("text %q", got)
	}
	if th := e.Thread(t, "dev", "q2"); th.Status != store.Idle || len(e.Pending(t, "dev", "q2")) != 0 {
		t.Fatalf("after the turn: %+v", th)
	}
}

// TestUnansweredQuestionIsClosed: a call that stops waiting (its time
// limit) closes its question, so no stale decision is left pending.
func TestUnansweredQuestionIsClosed(t *testing.T) {
	t.Parallel()
	e := stacktest.NewEngine(t, stacktest.Options{Script: confirmScript, Agents: func(env *stacktest.Env) []*agent.Spec {
		specs := confirmAgent(env)
		specs[0].Tools[0].Timeout = 300 * time.Millisecond
		return specs
	}})
	evs := e.Turn(t, engine.Input{Agent: "asker", ThreadID: "q3", Messages: user("delete it")})
	success(t, "timed-out question", evs)
	if got := text(evs); !strings.Contains(got, "timed out") {
		t.Fatalf("text %q", got)
	}
	if p := e.Pending(t, "dev", "q3"); len(p) != 0 {
		t.Fatalf("a question is still pending: %+v", p)
	}
	its, err := e.Store.ListInterrupts(context.Background(), "dev", store.InterruptFilter{ThreadID: "q3", Status: store.Rejected})
	if err != nil || len(its) != 1 || its[0].Decision == nil || its[0].Decision.Message != engine.MessageElicitationEnded {
		t.Fatalf("closed question %+v %v", its, err)
	}
}

// TestStatelessToolCannotAsk: without a session no one can be asked.
func TestStatelessToolCannotAsk(t *testing.T) {
	t.Parallel()
	e := stacktest.NewEngine(t, stacktest.Options{Script: confirmScript, Agents: confirmAgent})
	evs := e.Turn(t, engine.Input{Agent: "asker", Messages: user("delete it")})
	if got := text(evs); got != "Result: no one to ask" {
		t.Fatalf("text %q", got)
	}
}

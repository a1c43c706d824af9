package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/schema"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
)

// The reasons stored when a question a tool asked is closed unanswered:
// the call stopped waiting (its time limit), or its run died.
const (
	MessageElicitationEnded = "The call ended before anyone answered."
	MessageQuestionCutOff   = "The call was cut off (the server stopped) before anyone answered."
)

// asker gives a call its tool.Call.Ask. The client that started the turn
// is asked first when it can be (Input.Ask); on a durable run the question
// otherwise becomes a pending decision (reason elicitation) whose response
// schema carries the question's schema as editedArgs, and the call waits for
// it. A stateless run that cannot ask its client has no one to ask (nil).
func (x *execution) asker(t *tool.Tool, c message.ToolCall, args json.RawMessage) func(context.Context, tool.Question) (tool.Answer, error) {
	relay := x.in.Ask
	if !x.durable && relay == nil {
		return nil
	}
	return func(ctx context.Context, q tool.Question) (tool.Answer, error) {
		if relay != nil {
			a, err := relay(ctx, t.Name, q)
			if err == nil && a.Accepted && len(q.Schema) > 0 {
				err = schema.Validate(q.Schema, a.Content)
			}
			if err == nil {
				x.r.Logger.Info("tool question answered by the turn's client", "tool", t.Name, "thread", x.threadID, "accepted", a.Accepted)
				return a, nil
			}
			if ctx.Err() != nil || !x.durable {
				return tool.Answer{}, err
			}
			x.r.Logger.Info("the turn's client did not answer a tool's question; it waits as a pending decision", "tool", t.Name, "thread", x.threadID, "err", err)
		}
		return x.ask(ctx, t, c, args, q)
	}
}

func (x *execution) ask(ctx context.Context, t *tool.Tool, c message.ToolCall, args json.RawMessage, q tool.Question) (tool.Answer, error) {
	sch := q.Schema
	if len(sch) == 0 {
		sch = json.RawMessage(`{"type":"object"}`)
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(sch, &probe); err != nil {
		return tool.Answer{}, fmt.Errorf("the question's schema is not a JSON object: %w", err)
	}
	it := store.Interrupt{ID: x.r.NewID("int"), Tenant: x.tenant, ThreadID: x.threadID, RunID: x.runID, Agent: x.spec.Name,
		ToolCallID: c.ID, Tool: t.Name, Args: args, Reason: store.ReasonElicitation, Description: q.Message,
		AllowedDecisions: []string{string(tool.Approve), string(tool.Edit), string(tool.Reject)},
		ResponseSchema:   editResponseSchema(sch),
		Status:           store.Pending, CreatedAt: x.r.Now()}
	sub := x.r.Bus.Subscribe(x.tenant, x.threadID)
	defer sub.Close()
	info := interruptInfo(it)
	asked := []event.Event{{Type: event.QuestionAsked, ToolCallID: c.ID, ToolName: t.Name, Question: &info}}
	if err := x.checkpoint(ctx, store.Checkpoint{Interrupts: []store.Interrupt{it}, Events: asked}); err != nil {
		return tool.Answer{}, err
	}
	x.send(asked[0]) // stored, with its sequence number: the run's client sees the question too
	x.r.Logger.Info("tool asks a human", "tool", t.Name, "thread", x.threadID, "interrupt", it.ID)
	poll := x.r.clock.NewTicker(x.r.Lease / 3)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			// Nobody answered in time: the question is closed, not left
			// pending for a call that no longer waits.
			x.r.closeQuestion(context.WithoutCancel(ctx), it, MessageElicitationEnded)
			return tool.Answer{}, context.Cause(ctx)
		case e := <-sub.C:
			if e.Type != event.DecisionMade || e.ToolCallID != c.ID {
				continue
			}
		case <-sub.Dropped:
		case <-poll.C():
		}
		got, err := x.r.Store.GetInterrupt(ctx, x.tenant, it.ID)
		if err != nil || got.Status == store.Pending || got.Decision == nil {
			continue
		}
		if got.Status != store.Approved {
			return tool.Answer{Message: got.Decision.Message}, nil
		}
		content := got.Decision.EditedArgs
		if len(content) == 0 {
			content = json.RawMessage(`{}`)
		}
		return tool.Answer{Accepted: true, Content: content}, nil
	}
}

// closeQuestion records a question nobody will answer as rejected by the
// system, unless someone decided it meanwhile.
func (r *Runner) closeQuestion(ctx context.Context, it store.Interrupt, why string) {
	res, err := r.Store.Decide(ctx, it.Tenant, it.ID, store.Decision{Approved: false, Message: why, Via: store.ViaSystem, By: "stackbone", At: r.Now()})
	switch {
	case err == nil:
		r.decided(it.Tenant, res.Interrupt)
	case !errors.Is(err, store.ErrAlreadyDecided):
		r.Logger.Warn("close an unanswered question", "interrupt", it.ID, "err", err)
	}
}

// answerSchema is the schema of an elicitation's answer: the editedArgs of
// its decision's response schema.
func answerSchema(responseSchema json.RawMessage) json.RawMessage {
	var s struct {
		Properties struct {
			EditedArgs json.RawMessage `json:"editedArgs"`
		} `json:"properties"`
	}
	if json.Unmarshal(responseSchema, &s) != nil || len(s.Properties.EditedArgs) == 0 {
		return json.RawMessage(`{"type":"object"}`)
	}
	return s.Properties.EditedArgs
}

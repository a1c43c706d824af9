package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/decision"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/redact"
	"github.com/stackbone/stackbone/internal/remote"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
)

// RemoteAgents is how the engine talks to remote A2A agents (an agent's
// a2aAgents): *a2aclient.Client, which app wires in.
type RemoteAgents interface {
	// Describe is what the model is told of a remote agent (its card's
	// summary); an error means its card could not be read.
	Describe(ctx context.Context, a agent.A2AAgent) (string, error)
	// Send sends a message and yields the remote task's updates until it
	// ends or waits on input.
	Send(ctx context.Context, a agent.A2AAgent, m remote.Message) iter.Seq2[remote.Update, error]
	// Reattach follows a task Send started, without sending anything.
	Reattach(ctx context.Context, a agent.A2AAgent, taskID string, poll time.Duration) iter.Seq2[remote.Update, error]
	// Cancel asks the remote to cancel a task.
	Cancel(ctx context.Context, a agent.A2AAgent, taskID string) error
}

// remoteCancelTimeout bounds the CancelTask a cancelled run sends.
const remoteCancelTimeout = 5 * time.Second

// describeTimeout bounds reading a remote agent's card to describe it to
// the model (the card is cached; a slow remote gets a placeholder).
const describeTimeout = 3 * time.Second

// remoteDescription is the task tool's line for a remote agent.
func (r *Runner) remoteDescription(a agent.A2AAgent) string {
	if a.Description != "" {
		return a.Description
	}
	ctx, cancel := context.WithTimeout(context.Background(), describeTimeout)
	defer cancel()
	if r.Remote == nil {
		return "A remote A2A agent (this server has no A2A client)."
	}
	d, err := r.Remote.Describe(ctx, a)
	if err != nil {
		return "A remote A2A agent (its agent card could not be read just now)."
	}
	return d
}

// remoteContext is the remote contextId the thread's conversation with
// the remote agent name has: the latest one this run learnt, else the
// latest recorded in the thread.
func (x *execution) remoteContext(name string) string {
	if v, ok := x.top().remoteCtx.Load(name); ok {
		return v.(string)
	}
	msgs := x.top().msgs
	for i := len(msgs) - 1; i >= 0; i-- {
		if m := msgs[i].Remote; m != nil && m.Agent == name && m.ContextID != "" {
			return m.ContextID
		}
	}
	return ""
}

func (x *execution) learnContext(name, id string) {
	if id != "" {
		x.top().remoteCtx.Store(name, id)
	}
}

// remoteRun is one `task` call's delegation to a remote agent.
type remoteRun struct {
	x      *execution
	c      tool.Call
	a      agent.A2AAgent
	subRun string
	red    *redact.Redactor
	// recs are the call's recorded messages, oldest first.
	recs []message.Message
	// text is the streamed answer's message id (live events only).
	textID   string
	textOpen bool
}

// runRemote hands a `task` call to remote agent a: it sends the
// description (continuing the thread's conversation with a, by its
// contextId), streams the remote's answer into the task's step, and
// returns it as the call's result. A remote task that waits on input
// (INPUT_REQUIRED) pauses the call on pending decisions of this thread;
// once they are decided the run resumes, calls task again, and the
// answers go to the remote task. What the call sent and learnt is
// recorded (messages of the call's conversation, tagged Remote) before
// and as it happens, so a call run again after a crash re-attaches to the
// remote task it started instead of sending again, and a send that may or
// may not have arrived is in doubt (retry resends the same messageId).
func (x *execution) runRemote(ctx context.Context, c tool.Call, a agent.A2AAgent, text string) (tool.Result, error) {
	if x.r.Remote == nil {
		return tool.Result{}, fmt.Errorf("A2A agent %s: this server has no A2A client (engine.Config.Remote)", a.Name)
	}
	rr := &remoteRun{x: x, c: c, a: a, subRun: x.r.NewID("sub"), red: redact.New(x.spec.Secrets...)}
	for _, m := range x.msgs {
		if m.TaskCallID == c.ToolCallID && m.Remote != nil {
			rr.recs = append(rr.recs, m)
		}
	}
	x.emit(event.Event{Type: event.StepStarted, StepName: a.Name})
	x.emit(event.Event{Type: event.SubagentStarted, SubagentRunID: rr.subRun, Subagent: a.Name, ParentToolCallID: c.ToolCallID})
	res, err := rr.run(ctx, text)
	rr.closeText()
	status := "success"
	var paused *subagentPaused
	switch {
	case errors.As(err, &paused):
		status = "suspended"
	case err != nil:
		status = "error"
	}
	if err != nil && errors.Is(context.Cause(ctx), ErrCancelled) {
		rr.cancelRemote(ctx)
	}
	x.emit(event.Event{Type: event.SubagentFinished, SubagentRunID: rr.subRun, Subagent: a.Name, Message: status})
	x.emit(event.Event{Type: event.StepFinished, StepName: a.Name})
	if err != nil && paused == nil && ctx.Err() == nil {
		x.r.Logger.Warn("A2A delegation failed", "a2aAgent", a.Name, "thread", x.threadID, "toolCallId", c.ToolCallID, "err", rr.red.String(err.Error()))
		return tool.Result{}, errors.New(rr.red.String(err.Error()))
	}
	return res, err
}

// cancelRemote cancels the remote task of a delegation whose run a client
// cancelled (a Stop): the remote should not go on working for a call that
// no longer waits for it. Best effort, bounded; a task that already ended
// stays as it is.
func (rr *remoteRun) cancelRemote(ctx context.Context) {
	taskID, _ := rr.known()
	if taskID == "" {
		return
	}
	if last := rr.last(); last != nil && remote.Terminal(last.Remote.State) {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), remoteCancelTimeout)
	defer cancel()
	err := rr.x.r.Remote.Cancel(cctx, rr.a, taskID)
	rr.x.r.Logger.Info("cancelled run: its remote A2A task is cancelled too", "a2aAgent", rr.a.Name, "thread", rr.x.threadID, "task", taskID,
		"err", errString(rr.red, err))
}

func errString(red *redact.Redactor, err error) string {
	if err == nil {
		return ""
	}
	return red.String(err.Error())
}

func (rr *remoteRun) last() *message.Message {
	if len(rr.recs) == 0 {
		return nil
	}
	return &rr.recs[len(rr.recs)-1]
}

// known is the latest task and context the call recorded.
func (rr *remoteRun) known() (taskID, contextID string) {
	for _, m := range rr.recs {
		if m.Remote.TaskID != "" {
			taskID = m.Remote.TaskID
		}
		if m.Remote.ContextID != "" {
			contextID = m.Remote.ContextID
		}
	}
	return taskID, contextID
}

// record stores a message of the call's conversation (and the interrupts
// that go with it) before anything depends on it.
func (rr *remoteRun) record(ctx context.Context, m message.Message, its ...store.Interrupt) error {
	x := rr.x
	m.ID, m.TaskCallID, m.Subagent = x.r.NewID("msg"), rr.c.ToolCallID, rr.a.Name
	if err := x.checkpoint(ctx, store.Checkpoint{Messages: []message.Message{m}, Interrupts: its}); err != nil {
		return err
	}
	rr.recs = append(rr.recs, m)
	if m.Remote != nil {
		x.learnContext(rr.a.Name, m.Remote.ContextID)
	}
	return nil
}

func (rr *remoteRun) ref(m message.Remote) *message.Remote {
	m.Agent = rr.a.Name
	return &m
}

func (rr *remoteRun) messageID(n int) string {
	return fmt.Sprintf("%s-%d", rr.c.IdempotencyKey, n)
}

func (rr *remoteRun) sends() int {
	n := 0
	for _, m := range rr.recs {
		if m.Role == message.User && m.Remote.MessageID != "" {
			n++
		}
	}
	return n
}

func (rr *remoteRun) run(ctx context.Context, text string) (tool.Result, error) {
	x := rr.x
	taskID, contextID := rr.known()
	var updates iter.Seq2[remote.Update, error]
	var resend *remote.Message // an answer to send again if the remote did not take it
	var answered *remote.Message
	last := rr.last()
	switch {
	case last == nil:
		// A new delegation: recorded before it is sent.
		contextID = x.remoteContext(rr.a.Name)
		m := remote.Message{MessageID: rr.messageID(1), ContextID: contextID, Text: text}
		if err := rr.record(ctx, message.Message{Role: message.User, Content: text,
			Remote: rr.ref(message.Remote{ContextID: contextID, MessageID: m.MessageID})}); err != nil {
			return tool.Result{}, err
		}
		updates = x.r.Remote.Send(ctx, rr.a, m)
	case last.Remote.InDoubt != "":
		// The call runs again after an in-doubt send: a human chose retry.
		// The same messageId again (a Stackbone agent attaches to the task
		// it started for it, if it got it).
		first := rr.recs[0]
		m := remote.Message{MessageID: first.Remote.MessageID, ContextID: first.Remote.ContextID, Text: first.Content}
		if err := rr.record(ctx, message.Message{Role: message.User, Content: first.Content,
			Remote: rr.ref(message.Remote{ContextID: m.ContextID, MessageID: m.MessageID})}); err != nil {
			return tool.Result{}, err
		}
		updates = x.r.Remote.Send(ctx, rr.a, m)
	case taskID == "":
		// Sent (or about to be) by a run that stopped before the remote
		// named its task: it may or may not have arrived.
		return tool.Result{}, rr.inDoubt(ctx)
	case len(last.Remote.Asks) > 0:
		m, pending, err := rr.answers(ctx, last, taskID, contextID)
		if err != nil {
			return tool.Result{}, err
		}
		if len(pending) > 0 {
			return tool.Result{}, rr.pause(pending)
		}
		if err := rr.record(ctx, message.Message{Role: message.User, Content: answerText(m),
			Remote: rr.ref(message.Remote{ContextID: contextID, TaskID: taskID, MessageID: m.MessageID, Answers: true})}); err != nil {
			return tool.Result{}, err
		}
		updates = x.r.Remote.Send(ctx, rr.a, m)
		answered = &m
	default:
		// The remote task was known to run (or had our answer sent): follow
		// it without sending anything.
		if last.Remote.Answers {
			resend = rr.answerOf(last, taskID, contextID)
		}
		x.r.Logger.Info("A2A delegation re-attaches to its remote task", "a2aAgent", rr.a.Name, "thread", x.threadID, "task", taskID)
		updates = x.r.Remote.Reattach(ctx, rr.a, taskID, time.Second)
	}
	return rr.follow(ctx, updates, taskID, contextID, resend, answered)
}

// follow reads a remote task's updates to its end or its next input.
//
// answered is the answer just sent, if any: a stream answering it starts
// with the task as it was (still waiting on those decisions), which is
// not its next input.
func (rr *remoteRun) follow(ctx context.Context, updates iter.Seq2[remote.Update, error], taskID, contextID string, resend, answered *remote.Message) (tool.Result, error) {
	x := rr.x
	reattached := false
	for {
		var final *remote.Update
		var failure error
		first := true
		for u, err := range updates {
			stale := first && answered != nil && u.State == remote.StateInputRequired && (len(u.Asks) == 0 || sameAsks(answered, u.Asks))
			first = false
			if stale {
				continue
			}
			if err != nil {
				failure = err
				break
			}
			if u.TaskID != "" && u.TaskID != taskID || u.ContextID != "" && u.ContextID != contextID {
				taskID, contextID = u.TaskID, u.ContextID
				if err := rr.record(ctx, message.Message{Role: message.Assistant,
					Remote: rr.ref(message.Remote{ContextID: contextID, TaskID: taskID, State: u.State})}); err != nil {
					return tool.Result{}, err
				}
			}
			rr.delta(u.Delta)
			if remote.Terminal(u.State) || u.State == remote.StateInputRequired || u.State == remote.StateAuthRequired {
				final = &u
				break
			}
		}
		if failure != nil {
			var broken *remote.BrokenError
			if errors.As(failure, &broken) && taskID != "" && !reattached && ctx.Err() == nil {
				// The stream broke with the task going on: follow it.
				reattached = true
				x.r.Logger.Info("A2A stream broke; re-attaching to the remote task", "a2aAgent", rr.a.Name, "task", taskID, "err", rr.red.String(failure.Error()))
				updates = x.r.Remote.Reattach(ctx, rr.a, taskID, time.Second)
				continue
			}
			if taskID == "" && ctx.Err() == nil && !errors.As(failure, new(*remote.RPCError)) {
				return tool.Result{}, fmt.Errorf("%w (the message may or may not have reached the remote agent: it named no task)", failure)
			}
			return tool.Result{}, failure
		}
		if final == nil {
			return tool.Result{}, fmt.Errorf("A2A agent %s: the remote task ended without a final state", rr.a.Name)
		}
		u := *final
		if u.State == remote.StateInputRequired && resend != nil && sameAsks(resend, u.Asks) {
			// Re-attached after our answer: the remote still waits on the
			// same decisions, so it never took the answer. Send it (once).
			m := *resend
			resend, answered = nil, &m
			updates = x.r.Remote.Send(ctx, rr.a, m)
			continue
		}
		return rr.finish(ctx, u, taskID, contextID)
	}
}

func sameAsks(m *remote.Message, asks []remote.Ask) bool {
	if len(asks) == 0 || len(m.Decisions) != len(asks) {
		return false
	}
	for i, a := range asks {
		if m.Decisions[i].ID != a.ID {
			return false
		}
	}
	return true
}

func (rr *remoteRun) finish(ctx context.Context, u remote.Update, taskID, contextID string) (tool.Result, error) {
	x := rr.x
	switch u.State {
	case remote.StateCompleted:
		u.Answer = rr.red.String(u.Answer)
		if err := rr.record(ctx, message.Message{Role: message.Assistant, Content: u.Answer,
			Remote: rr.ref(message.Remote{ContextID: contextID, TaskID: taskID, State: u.State})}); err != nil {
			return tool.Result{}, err
		}
		return tool.Result{Content: u.Answer}, nil
	case remote.StateInputRequired:
		if !x.durable {
			return tool.Result{}, fmt.Errorf("A2A agent %s waits on a human decision (%s), but this conversation has no session, so no one can be asked",
				rr.a.Name, strings.TrimSpace(u.Note))
		}
		return tool.Result{}, rr.ask(ctx, u, taskID, contextID)
	case remote.StateAuthRequired:
		return tool.Result{}, fmt.Errorf("A2A agent %s needs authentication for this task (TASK_STATE_AUTH_REQUIRED), which Stackbone cannot give it: %s",
			rr.a.Name, strings.TrimSpace(u.Note))
	}
	_ = rr.record(ctx, message.Message{Role: message.Assistant, Content: u.Note,
		Remote: rr.ref(message.Remote{ContextID: contextID, TaskID: taskID, State: u.State})})
	why := strings.TrimSpace(u.Note)
	if why == "" {
		why = strings.TrimSpace(u.Answer)
	}
	if why != "" {
		why = ": " + why
	}
	return tool.Result{}, fmt.Errorf("A2A agent %s: the remote task ended %s%s", rr.a.Name, u.State, why)
}

// ask turns the remote's INPUT_REQUIRED into pending decisions of this
// thread (one per remote decision, or one for a plain question) and pauses
// the call on them.
func (rr *remoteRun) ask(ctx context.Context, u remote.Update, taskID, contextID string) error {
	x := rr.x
	asks := u.Asks
	if len(asks) == 0 {
		asks = []remote.Ask{{Description: strings.TrimSpace(u.Note), Allowed: []string{"approve", "reject"}}}
	}
	now := x.r.Now()
	var its []store.Interrupt
	var pairs []message.RemoteAsk
	var infos []event.InterruptInfo
	for i, ask := range asks {
		kind := decision.Approval
		choices := []string{}
		for _, d := range ask.Allowed {
			if d == string(tool.Approve) || d == string(tool.Reject) || d == string(tool.Edit) {
				choices = append(choices, d)
			}
		}
		if ask.Reason == store.ReasonInDoubt {
			kind, choices = decision.InDoubt, []string{string(tool.Retry), string(tool.Skip)}
		}
		if len(choices) == 0 {
			choices = []string{string(tool.Approve), string(tool.Reject)}
		}
		sch := ask.Schema
		if len(sch) == 0 {
			sch = decision.EditSchema(nil)
			if !slices.Contains(choices, string(tool.Edit)) {
				sch = json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"}},"required":["approved"]}`)
			}
			if kind == decision.InDoubt {
				sch = decision.InDoubtSchema()
			}
		}
		toolName, callID := rr.a.Name, fmt.Sprintf("%s.%d", rr.c.ToolCallID, len(rr.recs)*10+i)
		if ask.Tool != "" {
			toolName = rr.a.Name + "/" + ask.Tool
		}
		desc := ask.Description
		if desc == "" {
			desc = strings.TrimSpace(u.Note)
		}
		if desc == "" {
			desc = "The remote agent waits on a decision."
		}
		desc = rr.red.String(fmt.Sprintf("%s (remote A2A agent %s)", desc, rr.a.Name))
		it := store.Interrupt{ID: x.r.NewID("int"), Tenant: x.tenant, ThreadID: x.threadID, RunID: x.runID, Agent: x.spec.Name,
			ToolCallID: callID, Tool: toolName, Args: ask.Args, Description: desc, Status: store.Pending, CreatedAt: now, Subagent: rr.a.Name}
		offer := decision.Offer{Kind: kind, Allowed: choices, Schema: sch}
		if kind == decision.Approval && x.r.ApprovalTTL > 0 {
			e := now.Add(x.r.ApprovalTTL)
			offer.ExpiresAt = &e
		}
		offer.Apply(&it)
		its = append(its, it)
		pairs = append(pairs, message.RemoteAsk{ID: it.ID, RemoteID: ask.ID})
		infos = append(infos, interruptInfo(it))
	}
	if err := rr.record(ctx, message.Message{Role: message.Assistant, Content: rr.red.String(strings.TrimSpace(u.Note)),
		Remote: rr.ref(message.Remote{ContextID: contextID, TaskID: taskID, State: u.State, Asks: pairs})}, its...); err != nil {
		return err
	}
	x.r.Logger.Info("remote A2A task waits on a decision; the call pauses", "a2aAgent", rr.a.Name, "thread", x.threadID, "task", taskID, "decisions", len(its))
	return rr.pause(infos)
}

func (rr *remoteRun) pause(infos []event.InterruptInfo) error {
	call := message.ToolCall{ID: rr.c.ToolCallID, Name: "task", Arguments: string(rr.c.Args)}
	return &subagentPaused{outcome: &event.Outcome{Type: event.Interrupt, Stop: event.StopToolCalls, Interrupts: infos,
		PendingCalls: []message.ToolCall{call}}}
}

// inDoubt pauses the call on an in-doubt decision: its message may or may
// not have reached the remote.
func (rr *remoteRun) inDoubt(ctx context.Context) error {
	x := rr.x
	call := message.ToolCall{ID: rr.c.ToolCallID, Name: "task", Arguments: string(rr.c.Args)}
	it := x.inDoubt(call, rr.c.Args)
	it.Description = fmt.Sprintf("A message to the remote A2A agent %s was being sent when the server stopped; it may or may not have arrived. Retry sends it again (same messageId), skip does not.", rr.a.Name)
	if err := rr.record(ctx, message.Message{Role: message.Assistant, Remote: rr.ref(message.Remote{InDoubt: it.ID})}, it); err != nil {
		return err
	}
	x.r.Logger.Warn("A2A delegation in doubt: its message may or may not have reached the remote", "a2aAgent", rr.a.Name, "thread", x.threadID, "interrupt", it.ID)
	return rr.pause([]event.InterruptInfo{interruptInfo(it)})
}

// answers reads the decisions on the remote's asks: the message answering
// them when all are decided, else the pause again on those still pending.
func (rr *remoteRun) answers(ctx context.Context, rec *message.Message, taskID, contextID string) (remote.Message, []event.InterruptInfo, error) {
	x := rr.x
	m := remote.Message{MessageID: rr.messageID(rr.sends() + 1), TaskID: taskID, ContextID: contextID}
	var pending []event.InterruptInfo
	var replies []string
	for _, p := range rec.Remote.Asks {
		it, err := x.r.Store.GetInterrupt(ctx, x.tenant, p.ID)
		if err != nil {
			return m, nil, err
		}
		if it.Status == store.Pending {
			pending = append(pending, interruptInfo(*it))
			continue
		}
		d := remote.Decision{ID: p.RemoteID}
		approved := it.Status == store.Approved
		msg := ""
		if it.Decision != nil {
			msg = it.Decision.Message
		}
		switch {
		case it.Reason == store.ReasonInDoubt && approved:
			d.Decision = string(tool.Retry)
		case it.Reason == store.ReasonInDoubt:
			d.Decision, d.Message = string(tool.Skip), msg
		case approved:
			d.Decision = string(tool.Approve)
			if it.Decision != nil && len(it.Decision.EditedArgs) > 0 {
				d.Arguments = it.Decision.EditedArgs
			}
		default:
			d.Decision, d.Message = string(tool.Reject), msg
		}
		m.Decisions = append(m.Decisions, d)
		if p.RemoteID == "" {
			r := d.Decision
			if d.Message != "" {
				r += ": " + d.Message
			}
			if len(d.Arguments) > 0 {
				r += " " + string(d.Arguments)
			}
			replies = append(replies, r)
		}
	}
	if len(pending) > 0 {
		return m, pending, nil
	}
	m.Reply = strings.Join(replies, "\n")
	return m, nil, nil
}

// answerOf rebuilds the answer a recorded message sent (to send again when
// the remote never took it).
func (rr *remoteRun) answerOf(rec *message.Message, taskID, contextID string) *remote.Message {
	for i := len(rr.recs) - 1; i >= 0; i-- {
		if len(rr.recs[i].Remote.Asks) > 0 {
			m, pending, err := rr.answers(context.Background(), &rr.recs[i], taskID, contextID)
			if err != nil || len(pending) > 0 {
				return nil
			}
			m.MessageID = rec.Remote.MessageID
			return &m
		}
	}
	return nil
}

func answerText(m remote.Message) string {
	var out []string
	for _, d := range m.Decisions {
		s := d.Decision
		if d.Message != "" {
			s += ": " + d.Message
		}
		if len(d.Arguments) > 0 {
			s += " " + string(d.Arguments)
		}
		out = append(out, s)
	}
	return strings.Join(out, "\n")
}

// delta streams a piece of the remote's answer into the task's step.
func (rr *remoteRun) delta(s string) {
	if s == "" {
		return
	}
	x := rr.x
	if !rr.textOpen {
		rr.textID = x.r.NewID("msg")
		rr.textOpen = true
		x.emit(event.Event{Type: event.TextStart, MessageID: rr.textID, SubagentRunID: rr.subRun})
	}
	x.emit(event.Event{Type: event.TextDelta, MessageID: rr.textID, Delta: rr.red.String(s), SubagentRunID: rr.subRun})
}

func (rr *remoteRun) closeText() {
	if rr.textOpen {
		rr.x.emit(event.Event{Type: event.TextEnd, MessageID: rr.textID, SubagentRunID: rr.subRun})
		rr.textOpen = false
	}
}

package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/stackbone/stackbone/internal/decision"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/redact"
	"github.com/stackbone/stackbone/internal/remote"
	"github.com/stackbone/stackbone/internal/store"
)

// The tool results a cancelled waiting turn gives its paused calls, so the
// next turn's model sees every call it made answered.
const (
	// CancelledCallResult is the result of a call that waited on a
	// decision (or whose resume was due) when its turn was cancelled.
	CancelledCallResult = "The turn was cancelled before this call ran: it did not run."
	// CancelledInDoubtResult is the result of a call in doubt (it may have
	// run before the server stopped) when its turn was cancelled.
	CancelledInDoubtResult = "The outcome of this call is unknown: it may or may not have run before the server stopped, " +
		"and it was not run again (the turn was cancelled). Do not assume it succeeded or failed; tell the user if it matters."
	// MessageTurnCancelled is the message of a decision closed because its
	// turn was cancelled.
	MessageTurnCancelled = "The turn was cancelled."
)

// cancelWaitTries bounds how often CancelWaiting reads the pause again when
// a decision changed it between the read and the write.
const cancelWaitTries = 5

// CancelWaiting cancels the thread's turn that waits on decisions, or
// whose resume is due but has not started, wherever the thread was paused:
// in one store transaction (store.CancelWait) every pending decision closes
// as its kind's cancel (a rejection; skip for a call in doubt) recorded
// with Via store.ViaCancel and By by, each paused call gets a tool result
// saying it did not run (or that its outcome is unknown, for a call in
// doubt), the turn's terminal event (a RunError with code cancelled, as a
// cancelled running turn's) is stored and the thread becomes idle. Nothing
// runs: no model call, no tool call. The terminal event is then published
// (every wire's follower sees the end), a remote A2A task a paused
// delegation waits on is cancelled (best effort) and the thread's next
// queued turn starts. Of a cancel and a decision or resume racing, exactly
// one wins: a decision after the cancel is refused as already decided, a
// resume after it finds nothing to claim, and a cancel after a resume took
// the thread reports false (the thread runs: Stop cancels it). It reports
// whether a waiting turn was cancelled (false: the thread waits on nothing,
// and nothing changed).
func (r *Runner) CancelWaiting(ctx context.Context, tenant, threadID, by string) (bool, error) {
	for range cancelWaitTries {
		th, err := r.Store.GetThread(ctx, tenant, threadID)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if th.Status != store.Waiting && th.Status != store.Queued {
			return false, nil
		}
		c, closed, remotes, err := r.planCancelWait(ctx, th, by)
		if err != nil {
			return false, err
		}
		var backlog bool
		c.Backlog = &backlog
		err = r.Store.CancelWait(ctx, c)
		switch {
		case errors.Is(err, store.ErrWaitChanged):
			continue // a decision landed meanwhile: read the pause again
		case errors.Is(err, store.ErrNotWaiting), errors.Is(err, store.ErrNotFound):
			return false, nil
		case err != nil:
			return false, err
		}
		for i := range closed {
			r.decided(tenant, &closed[i])
		}
		r.Bus.Publish(tenant, threadID, c.Events[0])
		r.Logger.Info("waiting turn cancelled", "agent", th.Agent, "thread", threadID, "run", th.RunID,
			"decisions", len(closed), "calls", len(c.Messages), "by", by)
		r.cancelRemotes(ctx, th, remotes)
		if backlog {
			r.drainAsync(tenant, threadID)
		}
		return true, nil
	}
	return false, fmt.Errorf("engine: cancel thread %q: its decisions kept changing", threadID)
}

// remoteTask is a remote A2A task a paused delegation waits on.
type remoteTask struct {
	agent, taskID string
}

// planCancelWait reads the pause of a waiting thread and builds its
// cancel: the pending decisions closed, the paused calls' results, the
// terminal event; with the closed decisions as they will be stored and
// the remote tasks the pause waits on.
func (r *Runner) planCancelWait(ctx context.Context, th *store.Thread, by string) (store.CancelWait, []store.Interrupt, []remoteTask, error) {
	pending, err := r.Store.ListInterrupts(ctx, th.Tenant, store.InterruptFilter{ThreadID: th.ID, Status: store.Pending, Limit: store.MaxLimit})
	if err != nil {
		return store.CancelWait{}, nil, nil, err
	}
	msgs, err := r.Store.Messages(ctx, th.Tenant, th.ID)
	if err != nil {
		return store.CancelWait{}, nil, nil, err
	}
	now := r.Now()
	code, msg := r.describe(ErrCancelled)
	c := store.CancelWait{Tenant: th.Tenant, ThreadID: th.ID, RunID: th.RunID, Decisions: map[string]store.Decision{},
		Error: msg, Now: now,
		Events: []event.Event{{Type: event.RunError, ThreadID: th.ID, RunID: th.RunID, Code: code, Message: msg, Time: now.UnixMilli()}}}
	doubt := map[string]bool{}
	closed := make([]store.Interrupt, 0, len(pending))
	for _, it := range pending {
		a := decision.Cancel(&it)
		a.Message, a.Via, a.By = MessageTurnCancelled, store.ViaCancel, by
		d := a.Record(now)
		c.Decisions[it.ID] = d
		if it.Reason == store.ReasonInDoubt {
			doubt[it.ToolCallID] = true
		}
		it.Status, it.Decision = store.Rejected, &d
		closed = append(closed, it)
	}
	answered, cancelled := map[string]bool{}, map[string]bool{}
	for _, m := range msgs {
		if m.Role == message.Tool && m.ToolCallID != "" {
			answered[m.ToolCallID] = true
		}
	}
	for _, m := range msgs {
		if m.Role != message.Assistant {
			continue
		}
		for _, call := range m.ToolCalls {
			if answered[call.ID] {
				continue
			}
			answered[call.ID], cancelled[call.ID] = true, true
			content := CancelledCallResult
			if doubt[call.ID] {
				content = CancelledInDoubtResult
			}
			c.Messages = append(c.Messages, message.Message{ID: r.NewID("msg"), Role: message.Tool, ToolCallID: call.ID, ToolName: call.Name,
				Content: content, IsError: true, TaskCallID: m.TaskCallID, Subagent: m.Subagent})
		}
	}
	return c, closed, pausedRemotes(msgs, cancelled), nil
}

// pausedRemotes are the remote A2A tasks the delegations of msgs wait on:
// the last task each `task` call the cancel gives a result to (cancelled)
// recorded, unless it ended.
func pausedRemotes(msgs []message.Message, cancelled map[string]bool) []remoteTask {
	last := map[string]remoteTask{}
	var order []string
	ended := map[string]bool{}
	for _, m := range msgs {
		if m.Remote == nil || m.TaskCallID == "" {
			continue
		}
		if m.Remote.TaskID != "" {
			if _, seen := last[m.TaskCallID]; !seen {
				order = append(order, m.TaskCallID)
			}
			last[m.TaskCallID] = remoteTask{agent: m.Remote.Agent, taskID: m.Remote.TaskID}
		}
		if m.Remote.State != "" {
			ended[m.TaskCallID] = remote.Terminal(m.Remote.State)
		}
	}
	var out []remoteTask
	for _, id := range order {
		if !ended[id] && cancelled[id] {
			out = append(out, last[id])
		}
	}
	return out
}

// cancelRemotes sends CancelTask to the remote A2A tasks a cancelled pause
// waited on, as a cancelled running delegation does (cancelRemote): best
// effort, bounded, logged.
func (r *Runner) cancelRemotes(ctx context.Context, th *store.Thread, tasks []remoteTask) {
	if len(tasks) == 0 || r.Remote == nil {
		return
	}
	spec := r.acquire(th.Agent)
	if spec == nil {
		return
	}
	defer r.release(spec)
	red := redact.New(spec.Secrets...)
	for _, t := range tasks {
		a := spec.A2AAgent(t.agent)
		if a == nil {
			continue
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), remoteCancelTimeout)
		err := r.Remote.Cancel(cctx, *a, t.taskID)
		cancel()
		r.Logger.Info("cancelled waiting turn: its remote A2A task is cancelled too", "a2aAgent", t.agent, "thread", th.ID, "task", t.taskID,
			"err", errString(red, err))
	}
}

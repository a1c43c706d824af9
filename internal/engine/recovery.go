package engine

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
)

// A thread's last run can end without the results of calls it started: its
// process died (the lease lapsed), or the database went away under it (a
// run cancelled or failing while its tools run makes them in doubt itself,
// execution.settle, unless that write fails too). Such a call may have had
// its side effect. Nothing that comes next may close it silently: a new turn
// first recovers the thread (recoverFirst: the call becomes an in-doubt
// decision, as the recovery loop would make it), and a client retrying the
// failed turn continues it (continueTurn) from its stored steps. Both begin
// their run with BeginRun.Expect, so the check and the admission are one
// step: a run that began on the thread since it was read makes them read it
// again.

// expect is the BeginRun.Expect of a turn that read th (nil: no thread).
func expect(th *store.Thread) string {
	if th == nil {
		return store.ExpectNoThread
	}
	return th.RunID
}

// headOf is the BeginRun.Head of a turn that read th.
func headOf(th *store.Thread) int64 {
	if th == nil {
		return 0
	}
	return th.HeadBranch
}

// startedUnanswered reports whether the thread's last run left a call that
// started (it has a started marker) and has no result. Only a run that
// ended without its end (Running with its lease lapsed) or that failed can;
// an idle thread is not read.
func (r *Runner) startedUnanswered(ctx context.Context, th *store.Thread, stored []message.Message) (bool, error) {
	if th.Status != store.Failed && th.Status != store.Running {
		return false, nil
	}
	open := unansweredCalls(stored)
	if len(open) == 0 {
		return false, nil
	}
	ids, err := r.Store.StartedCalls(ctx, th.Tenant, th.ID, open)
	if err != nil {
		return false, err
	}
	return len(ids) > 0, nil
}

// unansweredCalls lists the calls a recovery of the conversation would go
// on with and that have no result: the last top-level step's server tool
// calls, and, for each of them that is a subagent's task, the calls of that
// subagent's own last step (a call of an earlier, closed step is not
// recovered, so it does not hold new turns back).
func unansweredCalls(msgs []message.Message) []string {
	var top []message.Message
	sub := map[string][]message.Message{}
	for _, m := range msgs {
		if m.TaskCallID == "" {
			top = append(top, m)
		} else {
			sub[m.TaskCallID] = append(sub[m.TaskCallID], m)
		}
	}
	var out []string
	for _, c := range message.PendingCalls(top) {
		if c.Client {
			continue
		}
		out = append(out, c.ID)
		for _, sc := range message.PendingCalls(sub[c.ID]) {
			if !sc.Client {
				out = append(out, sc.ID)
			}
		}
	}
	return out
}

// beginContinued begins a run that goes on with the thread's last turn from
// its stored conversation (BeginRun with Continue, no input, Expect th's
// run) with the given run options, fills x's conversation and state, and publishes the run's start.
func (r *Runner) beginContinued(ctx context.Context, x *execution, th *store.Thread, stored []message.Message, options json.RawMessage) (*event.Event, error) {
	now := r.Now()
	evs := []event.Event{{Type: event.RunStarted, ThreadID: th.ID, RunID: x.runID, Time: now.UnixMilli()}}
	begun, err := r.Store.BeginRun(ctx, store.BeginRun{Tenant: th.Tenant, ThreadID: th.ID, Agent: x.spec.Name, RunID: x.runID,
		Owner: r.Owner, Now: now, LeaseUntil: now.Add(r.Lease), Events: evs, Options: options,
		Known: len(stored), Expect: th.RunID, Head: th.HeadBranch, Continue: true, AnyOwner: true})
	if err != nil {
		return nil, err
	}
	x.msgs = append(stored[:len(stored):len(stored)], begun.Messages...)
	x.state = begun.State
	r.Bus.Publish(th.Tenant, th.ID, evs[0])
	return &evs[0], nil
}

// recoverFirst recovers a thread whose last run left a started call without
// a result, before a new turn: it runs the last run on from its stored
// conversation with its own options, which makes the call in doubt (a
// pending decision, announced like any other) without a model call, and
// waits for it. A run that began on the thread meanwhile (another process
// recovering it), or a thread already waiting on the decision, is not an
// error: the caller reads the thread again.
func (r *Runner) recoverFirst(ctx context.Context, spec *agent.Spec, th *store.Thread, stored []message.Message) error {
	x, err := r.newExecution(spec, th.Tenant, th.ID)
	if err != nil {
		return err
	}
	x.runID = r.NewID("run")
	x.restore(th.Options)
	started, err := r.beginContinued(ctx, x, th, stored, th.Options)
	if errors.Is(err, store.ErrRunInProgress) || errors.Is(err, store.ErrApprovalPending) {
		return nil // another process recovers it, or did: read it again
	}
	if err != nil {
		return err
	}
	r.Logger.Warn("a new turn found a call of the thread's last run without its result: recovering the thread first",
		"agent", spec.Name, "thread", th.ID, "lastRun", th.RunID, "run", x.runID)
	done := make(chan struct{})
	r.spawn(spec, func(ctx context.Context) {
		defer close(done)
		x.drive(ctx, started)
	})
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// continueTurn answers a client's retry of a turn that failed by going on
// from the failed attempt's stored steps: its input is not stored again,
// none of its tools runs again (a call it started and left without a
// result becomes an in-doubt decision), and the retry's answer shows the
// recorded steps first, then what the model says next.
func (r *Runner) continueTurn(ctx context.Context, x *execution, th *store.Thread, stored []message.Message, run *Run) error {
	evs, err := r.Store.Events(ctx, th.Tenant, th.ID, th.Turn.Seq-1, store.MaxLimit)
	if err != nil {
		return err
	}
	started, err := r.beginContinued(ctx, x, th, stored, optionsOf(x.in))
	if errors.Is(err, store.ErrRunInProgress) {
		// Another retry of the turn was first: follow it.
		if again, gerr := r.Store.GetThread(ctx, th.Tenant, th.ID); gerr == nil {
			if kind, _ := r.retries(again, x.spec.Name, again.Turn, false, nil, false); kind == attachRetry {
				r.attach(x.in, again, run)
				return nil
			}
		}
	}
	if err != nil {
		return err
	}
	steps := map[string]bool{}
	for _, e := range evs {
		if e.SubagentRunID != "" {
			continue
		}
		switch e.Type {
		case event.TextEnd, event.ToolCallEnd, event.ToolResult:
			if e.Type != event.ToolResult {
				steps[e.MessageID] = true
			} else {
				x.markWorked()
			}
			for _, le := range event.LiveForm(e) {
				le.Seq, le.RunID = 0, x.runID
				x.retried = append(x.retried, le)
			}
		}
	}
	x.priorSteps = len(steps)
	r.Logger.Info("retried turn continues from its failed attempt's steps", "agent", x.spec.Name, "thread", th.ID,
		"run", x.runID, "failedRun", th.RunID, "recordedSteps", len(steps))
	x.run = run
	run.Existed = true
	r.spawn(x.spec, func(ctx context.Context) { x.drive(ctx, started) })
	return nil
}

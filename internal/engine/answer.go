package engine

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/stackbone/stackbone/internal/bus"
	"sort"
	"strings"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/decision"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/schema"
	"github.com/stackbone/stackbone/internal/store"
)

// FilterState keeps the keys of a client's state the agent lists as
// editable, validating each against its schema. Dropped keys are returned
// for logging.
func FilterState(spec *agent.Spec, state map[string]json.RawMessage) (map[string]json.RawMessage, []string, error) {
	keep := map[string]json.RawMessage{}
	var dropped []string
	for k, v := range state {
		sch, ok := spec.EditableState[k]
		if !ok {
			dropped = append(dropped, k)
			continue
		}
		if err := schema.Validate(sch, v); err != nil {
			return nil, nil, contractError(CodeInvalidState, "State key %q does not match its schema: %v", k, err)
		}
		keep[k] = v
	}
	sort.Strings(dropped)
	return keep, dropped, nil
}

// Answer answers one pending decision in a turn (ResumeDecisions).
type Answer struct {
	InterruptID string
	// Cancelled always rejects.
	Cancelled bool
	// Payload is the decision, validated against the interrupt's
	// responseSchema: {"approved": bool, "editedArgs"?: {...}, "message"?}.
	Payload json.RawMessage
}

// ResumeDecisions is a turn that answers every pending decision of a
// durable thread and continues its run, streaming it. Nothing is decided
// unless every answer is valid; answers that repeat the decisions already
// made replay the end of the run instead. via names the channel the
// decisions are recorded under; in.DecidedBy the caller.
func (r *Runner) ResumeDecisions(ctx context.Context, in Input, via string, answers []Answer) (*Run, error) {
	if in.ThreadID == "" {
		return nil, contractError(CodeNeedsThread, "A resume needs a threadId.")
	}
	x, run, done, err := r.enter(&in)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := r.startResume(ctx, x.spec, in, via, answers, run); err != nil {
		return nil, err
	}
	return run, nil
}

// plannedDecision is a validated resume entry.
type plannedDecision struct {
	it       *store.Interrupt
	decision Decision
	replay   bool
}

// startResume answers every pending interrupt of a thread and continues the
// run, streaming to run. Nothing is decided unless the whole resume is
// valid.
func (r *Runner) startResume(ctx context.Context, spec *agent.Spec, in Input, via string, answers []Answer, run *Run) error {
	th, err := r.Store.GetThread(ctx, in.Tenant, in.ThreadID)
	if errors.Is(err, store.ErrNotFound) {
		return contractError(CodeUnknownInterrupt, "Thread %q has no interrupts to resume.", in.ThreadID)
	}
	if err != nil {
		return err
	}
	if !in.sees(th) {
		return notTheirs(th)
	}
	if th.Agent != spec.Name {
		return store.ErrAgentMismatch
	}
	pending, err := r.Store.ListInterrupts(ctx, in.Tenant, store.InterruptFilter{ThreadID: in.ThreadID, Status: store.Pending, Limit: store.MaxLimit})
	if err != nil {
		return err
	}
	var plan []plannedDecision
	covered := map[string]bool{}
	for _, e := range answers {
		if covered[e.InterruptID] {
			return contractError(CodeInvalidPayload, "Interrupt %q is answered twice.", e.InterruptID)
		}
		covered[e.InterruptID] = true
		it, err := r.Store.GetInterrupt(ctx, in.Tenant, e.InterruptID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && it.ThreadID != in.ThreadID) {
			return contractError(CodeUnknownInterrupt, "Interrupt %q is not an interrupt of this thread.", e.InterruptID)
		}
		if err != nil {
			return err
		}
		d, err := r.resumeDecision(it, e)
		if err != nil {
			return err
		}
		d.Via, d.By = via, in.DecidedBy
		err = r.authorize(ctx, it, decision.Who{Tenant: in.Tenant, By: in.DecidedBy}, d)
		switch {
		case errors.Is(err, store.ErrDecisionExpired):
			return contractError(CodeDecisionExpired, "Interrupt %q expired before it was decided; it was recorded as a rejection.", e.InterruptID)
		case errors.Is(err, store.ErrAlreadyDecided):
			if !decision.Same(it, d) {
				return contractError(CodeAlreadyDecided, "Interrupt %q was already decided differently.", e.InterruptID)
			}
			plan = append(plan, plannedDecision{it: it, decision: d, replay: true})
			continue
		case err != nil:
			return err
		}
		plan = append(plan, plannedDecision{it: it, decision: d})
	}
	var missing []string
	for _, it := range pending {
		if !covered[it.ID] {
			missing = append(missing, it.ID)
		}
	}
	if len(missing) > 0 {
		return contractError(CodePartialResume, "The resume must answer every pending interrupt of the thread; missing: %s.", strings.Join(missing, ", "))
	}
	// Answers to questions a still running tool asks (elicitation) let
	// that run go on; this resume follows it instead of starting one.
	var questions *bus.Subscription
	if th.Status == store.Running && onlyQuestions(plan) {
		questions = r.Bus.Subscribe(in.Tenant, in.ThreadID)
	}
	fresh, quorum := 0, false
	for _, p := range plan {
		if p.replay {
			continue
		}
		fresh++
		res, err := r.Store.Decide(ctx, in.Tenant, p.it.ID, p.decision.Record(r.Now()))
		if err != nil {
			return err
		}
		r.decided(in.Tenant, res.Interrupt)
		if res.Interrupt != nil && res.Interrupt.Status == store.Pending {
			quorum = true
		}
	}
	if quorum && questions == nil {
		// An approval toward a quorum that is not reached yet: the
		// thread still waits, so answer with its pending interrupts.
		x, err := r.newExecution(spec, in.Tenant, in.ThreadID)
		if err != nil {
			return err
		}
		if x.msgs, err = r.Store.Messages(ctx, in.Tenant, in.ThreadID); err != nil {
			return err
		}
		if ok, err := r.replayPending(ctx, x, in, run); err != nil || ok {
			return err
		}
	}
	if questions != nil {
		r.followAnswered(in, run, questions)
		return nil
	}
	if fresh == 0 {
		// A replayed resume decides nothing and runs nothing new; while
		// the resumed run is still going it cannot report its end.
		switch th.Status {
		case store.Running, store.Queued:
			return store.ErrRunInProgress
		}
		x, err := r.newExecution(spec, in.Tenant, in.ThreadID)
		if err != nil {
			return err
		}
		x.in, x.run, x.runID = in, run, run.ID
		if x.msgs, err = r.Store.Messages(ctx, in.Tenant, in.ThreadID); err != nil {
			return err
		}
		x.state = th.State
		r.spawn(nil, func(context.Context) { x.replay(&event.Outcome{Type: event.Success, Stop: event.StopEnd}) })
		return nil
	}
	x, err := r.claim(ctx, in.Tenant, in.ThreadID, in.RunID, r.Now())
	if err != nil {
		return err
	}
	if x == nil {
		return store.ErrRunInProgress
	}
	defer r.release(x.spec)
	if in.Model == "" {
		in.Model = x.in.Model // the model the turn picked goes on
	} else if err := x.pickModel(in.Model); err != nil {
		return err
	}
	x.in, x.run = in, run
	x.in.ClientTools = append(x.in.ClientTools[:0:0], in.ClientTools...)
	x.system = systemPrompt(spec.Instructions, clientSystem(in.Messages))
	run.ID, run.Existed = x.runID, true
	started := x.stamp(event.Event{Type: event.RunStarted})
	cp := store.Checkpoint{Events: []event.Event{started}}
	if len(in.State) > 0 {
		// State the client edited while paused merges in under the lease.
		if cp.State, err = mergeState(x.state, in.State); err != nil {
			return err
		}
	}
	if err := x.checkpoint(ctx, cp); err != nil {
		return err
	}
	if cp.State != nil {
		x.state = cp.State
	}
	r.spawn(x.spec, func(ctx context.Context) { x.drive(ctx, &started) })
	return nil
}

// onlyQuestions reports whether every entry of a resume answers a question
// a running tool asked (a kind that is no gate on running the call).
func onlyQuestions(plan []plannedDecision) bool {
	for _, p := range plan {
		if decision.For(p.it).Gate || p.replay {
			return false
		}
	}
	return len(plan) > 0
}

// followAnswered streams to run the live events of the thread's running
// run, which goes on now that its questions are answered, until its end.
func (r *Runner) followAnswered(in Input, run *Run, sub *bus.Subscription) {
	r.spawn(nil, func(ctx context.Context) {
		defer close(run.events)
		defer sub.Close()
		send := run.deliver
		if !send(event.Event{Type: event.RunStarted, ThreadID: in.ThreadID, RunID: run.ID, Time: r.Now().UnixMilli()}) {
			return
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-run.gone:
				return
			case e := <-sub.C:
				if e.Type == event.RunStarted || e.Type == event.DecisionMade {
					continue
				}
				if !send(*e) || e.Type == event.RunFinished || e.Type == event.RunError {
					return
				}
			}
		}
	})
}

// reattach answers a request that brings nothing new to a thread waiting on
// decisions (a reloaded page, a client that missed the pause): the
// snapshots and the pending interrupts again, so the client can resume.
func (r *Runner) reattach(ctx context.Context, spec *agent.Spec, in Input, run *Run) (bool, error) {
	x, err := r.newExecution(spec, in.Tenant, in.ThreadID)
	if err != nil {
		return false, err
	}
	if x.msgs, err = r.Store.Messages(ctx, in.Tenant, in.ThreadID); err != nil {
		return false, err
	}
	if fresh, err := x.newInput(x.msgs, in.Messages); err != nil || len(fresh) > 0 {
		return false, nil // fresh (or bad) input: the caller refuses it
	}
	return r.replayPending(ctx, x, in, run)
}

// replayPending answers with the snapshots and the thread's pending
// interrupts (false when none is pending), x holding its messages.
func (r *Runner) replayPending(ctx context.Context, x *execution, in Input, run *Run) (bool, error) {
	th, err := r.Store.GetThread(ctx, in.Tenant, in.ThreadID)
	if err != nil {
		return false, err
	}
	pending, err := r.Store.ListInterrupts(ctx, in.Tenant, store.InterruptFilter{ThreadID: in.ThreadID, Status: store.Pending, Limit: store.MaxLimit})
	if err != nil || len(pending) == 0 {
		return false, err
	}
	out := &event.Outcome{Type: event.Interrupt, Stop: event.StopToolCalls}
	for _, it := range pending {
		out.Interrupts = append(out.Interrupts, interruptInfo(it))
		for _, m := range x.msgs {
			for _, c := range m.ToolCalls {
				if c.ID == it.ToolCallID {
					out.PendingCalls = append(out.PendingCalls, c)
					out.PendingMessageID = m.ID
				}
			}
		}
	}
	x.in, x.run, x.runID, x.state = in, run, run.ID, th.State
	r.spawn(nil, func(context.Context) { x.replay(out) })
	return true, nil
}

// replay answers from what is stored, running nothing: the snapshots and
// the given outcome (an idempotent resume replay, or a client reattaching to
// a thread that waits on decisions).
func (x *execution) replay(out *event.Outcome) {
	// Sent to this client only: nothing ran, so nothing goes to the bus.
	for _, e := range []event.Event{
		{Type: event.RunStarted},
		{Type: event.StateSnapshot, Snapshot: x.state},
		{Type: event.MessagesSnapshot, Messages: x.msgs},
		{Type: event.RunFinished, Outcome: out, Usage: &x.usage},
	} {
		x.send(x.stamp(e))
	}
	close(x.run.events)
}

// resumeDecision turns a resume entry into a decision, validating its
// payload against the interrupt's responseSchema and what it allows
// (decision.FromPayload); a cancelled entry is the kind's cancel.
func (r *Runner) resumeDecision(it *store.Interrupt, e Answer) (Decision, error) {
	if e.Cancelled {
		return decision.Cancel(it), nil
	}
	d, err := decision.FromPayload(it, e.Payload, r.toolParams(it))
	var de *decision.Error
	if errors.As(err, &de) {
		return Decision{}, contractError(CodeInvalidPayload, "%s", de.Message)
	}
	return d, err
}

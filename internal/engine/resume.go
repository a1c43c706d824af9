package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/stackbone/stackbone/internal/decision"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
)

// Decision is a human's answer to a pending tool call (decision.Answer:
// the choice, approved, editedArgs, message, and who gave it how).
type Decision = decision.Answer

// Decide records a decision with one conditional update and, when it was the
// last pending one of its run, resumes the run in the background. Who may
// decide is decision.MayDecide's; edited arguments are validated against the
// tool's parameter schema first (decision.Validate).
func (r *Runner) Decide(ctx context.Context, tenant, id string, d Decision) (*store.Interrupt, error) {
	it, err := r.Store.GetInterrupt(ctx, tenant, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, &UnknownDecisionError{ID: id}
		}
		return nil, err
	}
	if err := r.authorize(ctx, it, decision.Who{Tenant: tenant, By: d.By}, d); err != nil {
		if errors.Is(err, store.ErrAlreadyDecided) {
			return nil, store.ErrAlreadyDecided
		}
		return nil, err
	}
	if err := r.checkDecision(it, &d); err != nil {
		return nil, err
	}
	res, err := r.Store.Decide(ctx, tenant, id, d.Record(r.Now()))
	if errors.Is(err, store.ErrAlreadyDecided) {
		// Another decider won; if that was the expiry sweep, say so.
		if again, gerr := r.Store.GetInterrupt(ctx, tenant, id); gerr == nil && decision.Expired(again) {
			return nil, fmt.Errorf("interrupt %q: %w", id, store.ErrDecisionExpired)
		}
	}
	if err != nil {
		return nil, err
	}
	r.decided(tenant, res.Interrupt)
	r.Logger.Info("decision recorded", "interrupt", id, "thread", it.ThreadID, "reason", it.Reason, "approved", d.Approved, "via", d.Via, "claimedVia", d.ClaimedVia, "by", d.By)
	if res.Queued {
		r.resumeAsync(tenant, it.ThreadID)
	}
	return res.Interrupt, nil
}

// authorize is decision.MayDecide as of the runner's clock; a pending
// interrupt it finds past its expiry is expired here first (the sweep may
// not have run yet).
func (r *Runner) authorize(ctx context.Context, it *store.Interrupt, who decision.Who, d Decision) error {
	err := decision.MayDecide(it, who, d, r.Now())
	var ee *decision.ExpiredError
	if errors.As(err, &ee) && ee.Unrecorded {
		if _, xerr := r.expire(ctx, it, r.Now()); xerr != nil {
			return xerr
		}
	}
	return err
}

// expire records a pending interrupt past its expiry as a rejection with
// Via store.ViaExpiry, with the same conditional update as any decision
// (so across replicas exactly one records it), and resumes the run when it
// was the last pending one. It reports whether this call recorded it.
func (r *Runner) expire(ctx context.Context, it *store.Interrupt, now time.Time) (bool, error) {
	res, err := r.Store.Decide(ctx, it.Tenant, it.ID, store.Decision{Approved: false, Message: ExpiredResult,
		Via: store.ViaExpiry, By: "stackbone", At: now})
	if errors.Is(err, store.ErrAlreadyDecided) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	r.decided(it.Tenant, res.Interrupt)
	r.Logger.Info("decision expired", "interrupt", it.ID, "thread", it.ThreadID, "tool", it.Tool, "expiresAt", it.ExpiresAt)
	if res.Queued {
		r.resumeAsync(it.Tenant, it.ThreadID)
	}
	return true, nil
}

// ExpireDecisions records every pending interrupt past its expiry as of
// now as a rejection (Via store.ViaExpiry) and resumes the runs that no
// longer wait on anything. It returns how many this runner expired.
func (r *Runner) ExpireDecisions(ctx context.Context, now time.Time) (int, error) {
	ins, err := r.Store.ExpiredInterrupts(ctx, now, store.MaxLimit)
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range ins {
		ok, err := r.expire(ctx, &ins[i], now)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// decided announces a decision to the bus (and so to other replicas and
// Studio): the one notification of a decision.
func (r *Runner) decided(tenant string, it *store.Interrupt) {
	if it == nil {
		return
	}
	r.Bus.Publish(tenant, it.ThreadID, event.Event{Type: event.DecisionMade, ThreadID: it.ThreadID, RunID: it.RunID,
		ToolCallID: it.ToolCallID, ToolName: it.Tool, Status: string(it.Status), Owner: it.Owner, Time: r.Now().UnixMilli()})
}

// checkDecision validates a decision against what the pause allows
// (decision.Validate, with the tool's parameter schema) and completes it;
// its errors are the engine's input errors.
func (r *Runner) checkDecision(it *store.Interrupt, d *Decision) error {
	return inputErrorOf(decision.Validate(it, d, r.toolParams(it)))
}

// toolParams is the parameter schema of the tool an interrupt is about
// (nil when the tool is gone or has none).
func (r *Runner) toolParams(it *store.Interrupt) json.RawMessage {
	if t := r.findTool(it.Agent, it.Tool); t != nil {
		return t.Parameters
	}
	return nil
}

// inputErrorOf maps a *decision.Error to the engine's input error for its
// field (400 invalid_input); any other error is returned as is.
func inputErrorOf(err error) error {
	var de *decision.Error
	if !errors.As(err, &de) {
		return err
	}
	e := inputError(de.Field, "%s", de.Message)
	if de.Problems != nil {
		e.Details = de.Problems
	}
	return e
}

func (r *Runner) findTool(agentName, name string) *tool.Tool {
	spec := r.Agents.Get(agentName)
	if spec == nil {
		return nil
	}
	if t := spec.Tool(name); t != nil {
		return t
	}
	for _, t := range r.Builtins(spec) {
		if t.Name == name {
			return t
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// resumeAsync resumes a thread in the background. Once Shutdown began the
// thread stays queued: the next runner to recover resumes it.
func (r *Runner) resumeAsync(tenant, threadID string) {
	ok := r.background(func(ctx context.Context) {
		if err := r.Resume(ctx, tenant, threadID); err != nil {
			r.Logger.Error("resume failed", "thread", threadID, "err", err)
		}
	})
	if !ok {
		r.Logger.Info("shutting down: the decided run stays queued for the next start", "thread", threadID)
	}
}

// Resume claims a thread whose run must continue (every decision made, or a
// run whose process died) and runs it to its end. Losing the claim to another
// runner is not an error.
func (r *Runner) Resume(ctx context.Context, tenant, threadID string) error {
	return r.claimAndContinue(ctx, tenant, threadID, r.Now())
}

// Recover first expires the pending decisions past their expiry
// (ExpireDecisions as of the runner's clock), then resumes, in the background, every run that must
// continue: queued
// resumes and runs whose lease expired before now. A single-node server
// passes a time past any lease it could have held to take over runs its
// previous process left. The runs go on until they end or Shutdown stops
// them, whatever becomes of ctx.
func (r *Runner) Recover(ctx context.Context, now time.Time) (int, error) {
	// Expiry reads the clock, not now: now may be set past any lease.
	if _, err := r.ExpireDecisions(ctx, r.Now()); err != nil {
		r.Logger.Error("expiring decisions failed", "err", err)
	}
	threads, err := r.Store.Stale(ctx, now, store.MaxLimit)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, th := range threads {
		if th.Status == store.Queued && th.UpdatedAt.After(now.Add(-r.Lease/2)) {
			// Just decided: the deciding process (or AG-UI request) is
			// claiming it right now; take it over only if that stalls.
			continue
		}
		ok := r.background(func(ctx context.Context) {
			if err := r.claimAndContinue(ctx, th.Tenant, th.ID, now); err != nil {
				r.Logger.Error("recover failed", "thread", th.ID, "err", err)
			}
		})
		if !ok {
			break
		}
		n++
	}
	// Queued follow-ups of threads a dead process left idle (it ended a
	// turn and died before it started the next one).
	backlogged, err := r.Store.Backlogged(ctx, store.MaxLimit)
	if err != nil {
		return n, err
	}
	for _, th := range backlogged {
		r.drainAsync(th.Tenant, th.ID)
	}
	return n + len(backlogged), nil
}

// claimAndContinue claims a thread as of now and runs it from its stored
// conversation to its end.
func (r *Runner) claimAndContinue(ctx context.Context, tenant, threadID string, now time.Time) error {
	x, err := r.claim(ctx, tenant, threadID, "", now)
	if x == nil || err != nil {
		return err
	}
	defer r.release(x.spec)
	started := x.stamp(event.Event{Type: event.RunStarted})
	if err := x.checkpoint(ctx, store.Checkpoint{Events: []event.Event{started}}); err != nil {
		if errors.Is(context.Cause(ctx), ErrShuttingDown) {
			x.release()
		}
		return err
	}
	// A run whose answer is stored but whose end is not (its process died
	// between the two, or the end could not be written) only ends: its
	// answer must not be asked for again.
	x.answered = answered(x.view())
	r.Logger.Info("continuing run", "thread", threadID, "run", x.runID, "agent", x.spec.Name, "answered", x.answered)
	x.drive(ctx, &started)
	return nil
}

// answered reports whether a conversation ends with a complete answer: an
// assistant message with no tool calls.
func answered(msgs []message.Message) bool {
	if len(msgs) == 0 {
		return false
	}
	last := msgs[len(msgs)-1]
	return last.Role == message.Assistant && len(last.ToolCalls) == 0
}

// claim takes a thread whose run must continue and prepares the execution
// from its stored conversation, under runID (generated when empty). It returns nil, nil when another runner won.
// The execution's spec is held (see acquire) until the caller releases it.
func (r *Runner) claim(ctx context.Context, tenant, threadID, runID string, now time.Time) (*execution, error) {
	if runID == "" {
		runID = r.NewID("run")
	}
	th, err := r.Store.Claim(ctx, store.Claim{Tenant: tenant, ThreadID: threadID, RunID: runID, Owner: r.Owner, Now: now, LeaseUntil: r.Now().Add(r.Lease)})
	if errors.Is(err, store.ErrNotClaimable) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	failed := func(cause error) (*execution, error) {
		return nil, errors.Join(cause, r.Store.FinishRun(ctx, store.FinishRun{Tenant: tenant, ThreadID: threadID, RunID: runID,
			Status: store.Failed, Error: cause.Error(), Now: r.Now()}))
	}
	spec := r.acquire(th.Agent)
	if spec == nil {
		return failed(fmt.Errorf("agent %q is not loaded", th.Agent))
	}
	x, err := r.newExecution(spec, tenant, threadID)
	if err == nil {
		x.runID, x.state = runID, th.State
		x.restore(th.Options)
		x.msgs, err = r.Store.Messages(ctx, tenant, threadID)
	}
	if err == nil {
		err = x.resumes(ctx)
	}
	if err != nil {
		r.release(spec)
		return failed(err)
	}
	return x, nil
}

package engine

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/store"
)

// Pause is the pause a durable run ended on, as a wire shows it: the stored
// terminal event a follower of the thread goes on after (Follow from Seq+1,
// once the decisions are made) and the decisions it waits on.
type Pause struct {
	// Seq is the sequence number of the pause's stored terminal event.
	Seq int64
	// Decisions are the pending decisions of the pause, in the order the
	// terminal event lists them.
	Decisions []store.Interrupt
}

// Pause returns the pause the run's events ended on, once Events has
// yielded the terminal event; nil when the run did not end on a pause for
// decisions (it finished, failed, or is stateless). The decisions are those
// the run wrote or read as it went; only a pause the run did not make
// itself (a followed thread's, Follow) is read from the store, once.
func (run *Run) Pause(ctx context.Context) (*Pause, error) {
	run.mu.Lock()
	end, known := run.end, run.known
	run.mu.Unlock()
	if end == nil || end.Type != event.RunFinished || end.Outcome == nil || end.Outcome.Type != event.Interrupt || end.Seq == 0 {
		return nil, nil
	}
	p := &Pause{Seq: end.Seq}
	for _, info := range end.Outcome.Interrupts {
		it, ok := known[info.ID]
		if !ok {
			return run.readPause(ctx, p, end.Outcome.Interrupts)
		}
		p.Decisions = append(p.Decisions, it)
	}
	return p, nil
}

// readPause fills p's decisions from the store: those of infos still
// pending.
func (run *Run) readPause(ctx context.Context, p *Pause, infos []event.InterruptInfo) (*Pause, error) {
	if run.store == nil {
		return p, nil
	}
	its, err := run.store.ListInterrupts(ctx, run.tenant, store.InterruptFilter{ThreadID: run.ThreadID,
		Status: store.Pending, Limit: store.MaxLimit})
	if err != nil {
		return nil, err
	}
	byID := make(map[string]store.Interrupt, len(its))
	for _, it := range its {
		byID[it.ID] = it
	}
	p.Decisions = p.Decisions[:0]
	for _, info := range infos {
		if it, ok := byID[info.ID]; ok {
			p.Decisions = append(p.Decisions, it)
		}
	}
	return p, nil
}

// know records decisions the run wrote or read as pending, for Pause.
func (run *Run) know(its []store.Interrupt) {
	if run == nil || len(its) == 0 {
		return
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	if run.known == nil {
		run.known = map[string]store.Interrupt{}
	}
	for _, it := range its {
		if it.Status == "" || it.Status == store.Pending {
			run.known[it.ID] = it
		}
	}
}

// ended records the run's terminal event as its consumer reads it.
func (run *Run) ended(e event.Event) {
	run.mu.Lock()
	run.end = &e
	run.mu.Unlock()
}

// Paused returns the pause a durable thread of agentName waits in (its last
// turn's stored terminal event and its pending decisions): what a wire
// shows of a pause it did not follow itself (an earlier request's). A
// thread of the agent that waits on nothing is an empty Pause; an unknown
// thread, or another agent's, is nil.
func (r *Runner) Paused(ctx context.Context, tenant, threadID, agentName string) (*Pause, error) {
	th, err := r.Store.GetThread(ctx, tenant, threadID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && th.Agent != agentName) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	pending, err := r.Store.ListInterrupts(ctx, tenant, store.InterruptFilter{ThreadID: threadID, Status: store.Pending, Limit: store.MaxLimit})
	if err != nil {
		return nil, err
	}
	if len(pending) == 0 {
		return &Pause{}, nil
	}
	p := &Pause{Decisions: pending}
	for e, err := range r.Replay(ctx, tenant, threadID, max(th.Turn.Seq, 1), 0) {
		if err != nil {
			return nil, err
		}
		if e.Type == event.RunFinished || e.Type == event.RunError {
			p.Seq = e.Seq
		}
	}
	if p.Seq == 0 {
		return nil, fmt.Errorf("engine: thread %q has no stored pause", threadID)
	}
	return p, nil
}

// Replay yields a durable thread's stored events from sequence number from
// on, before until (0: to the end of the log), in their live form (as a
// run's consumer got them: the deltas a stored end holds come before it,
// without a Seq; every stored event keeps its own).
func (r *Runner) Replay(ctx context.Context, tenant, threadID string, from, until int64) iter.Seq2[event.Event, error] {
	return func(yield func(event.Event, error) bool) {
		after := from - 1
		for {
			evs, err := r.Store.Events(ctx, tenant, threadID, after, store.MaxLimit)
			if err != nil {
				yield(event.Event{}, err)
				return
			}
			for _, e := range evs {
				if until > 0 && e.Seq >= until {
					return
				}
				after = e.Seq
				for _, le := range event.LiveForm(e) {
					if !yield(le, nil) {
						return
					}
				}
			}
			if len(evs) < store.MaxLimit {
				return
			}
		}
	}
}

// UnreportedPauseError is Start's refusal of a turn with Input.Reports on
// a thread whose earlier turn paused at Seq, a caller told its client so,
// and no caller reported the turn's outcome since (store.RunControl's
// WaitingSeq): unless the thread still waits on decisions (Pending), the
// turn's outcome is in its events after Seq.
type UnreportedPauseError struct {
	ThreadID string
	Seq      int64
	// Pending says the thread still waits on decisions (the error is then
	// also store.ErrApprovalPending).
	Pending bool
}

// Is makes a Pending UnreportedPauseError match store.ErrApprovalPending.
func (e *UnreportedPauseError) Is(target error) bool {
	return e.Pending && target == store.ErrApprovalPending
}

func (e *UnreportedPauseError) Error() string {
	return fmt.Sprintf("thread %q: the outcome of the turn that paused at %d is not reported yet", e.ThreadID, e.Seq)
}

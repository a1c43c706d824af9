package engine

import (
	"context"
	"time"

	"github.com/stackbone/stackbone/internal/store"
)

// AwaitDecisions waits, at most wait, until the pause a durable thread's
// turn ended on (its stored terminal event at seq, Pause.Seq) waits no
// more: every decision it waited on was made, wherever (Studio, the CLI,
// the API, an expiry, on any replica), so the thread is queued for its
// resume, runs it, or already ran on. A request that waits in-band for a
// decision then follows the resumed turn with Follow from seq+1.
//
// It reports false when wait or ctx ends first, or Shutdown begins: the
// pause stays pending as it is (it is durable; nothing is undone). It watches the thread's bus
// topic (decisions and the resume's events are announced there, across
// replicas) and reads the store again every third of the lease, as follow
// does, for a bus that does not reach this replica.
func (r *Runner) AwaitDecisions(ctx context.Context, tenant, threadID string, seq int64, wait time.Duration) (bool, error) {
	sub := r.Bus.Subscribe(tenant, threadID)
	defer sub.Close()
	deadline := r.clock.NewTimer(wait)
	defer deadline.Stop()
	poll := r.clock.NewTicker(r.Lease / 3)
	defer poll.Stop()
	for {
		done, err := r.pauseOver(ctx, tenant, threadID, seq)
		if err != nil || done {
			return done, err
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-r.draining:
			return false, nil // shutting down: the request ends with the pause
		case <-deadline.C():
			// A decision made at the very end still counts.
			return r.pauseOver(ctx, tenant, threadID, seq)
		case <-sub.C:
		case <-sub.Dropped:
			sub.Drain()
		case <-poll.C():
		}
	}
}

// pauseOver reports whether the thread no longer waits on the pause whose
// terminal event is at seq: it left Waiting (queued for its resume, or
// running it), or it has events after seq (a resume ran, and may have
// paused again on a new decision).
func (r *Runner) pauseOver(ctx context.Context, tenant, threadID string, seq int64) (bool, error) {
	th, err := r.Store.GetThread(ctx, tenant, threadID)
	if err != nil {
		return false, err
	}
	if th.Status != store.Waiting {
		return true, nil
	}
	evs, err := r.Store.Events(ctx, tenant, threadID, seq, 1)
	if err != nil {
		return false, err
	}
	return len(evs) > 0, nil
}

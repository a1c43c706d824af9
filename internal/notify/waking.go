package notify

import (
	"context"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/store"
)

// Waking wraps s so that its writes that may add notices (a checkpoint
// with new decisions, a decision, the end of a run) wake d once they
// committed: local facts are delivered at once, not at the next poll.
func (d *Dispatcher) Waking(s store.Store) store.Store { return waking{Store: s, d: d} }

type waking struct {
	store.Store
	d *Dispatcher
}

func (w waking) Checkpoint(ctx context.Context, c store.Checkpoint) error {
	err := w.Store.Checkpoint(ctx, c)
	if err == nil && (len(c.Interrupts) > 0 || startsRun(c.Events)) {
		w.d.Wake() // decisions' notices, or a resumed task's push notification
	}
	return err
}

func (w waking) BeginRun(ctx context.Context, b store.BeginRun) (*store.Begun, error) {
	begun, err := w.Store.BeginRun(ctx, b)
	if err == nil && b.Continue {
		w.d.Wake() // a recovered task's push notification
	}
	return begun, err
}

func startsRun(evs []event.Event) bool {
	for _, e := range evs {
		if e.Type == event.RunStarted {
			return true
		}
	}
	return false
}

func (w waking) Decide(ctx context.Context, tenant, id string, dec store.Decision) (store.DecideResult, error) {
	res, err := w.Store.Decide(ctx, tenant, id, dec)
	if err == nil {
		w.d.Wake()
	}
	return res, err
}

func (w waking) FinishRun(ctx context.Context, f store.FinishRun) error {
	err := w.Store.FinishRun(ctx, f)
	if err == nil {
		w.d.Wake()
	}
	return err
}

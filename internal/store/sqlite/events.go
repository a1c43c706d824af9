package sqlite

import (
	"context"
	"fmt"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/store"
)

// Events returns up to limit (all when limit <= 0) of the thread's stored
// events with Seq > after, in Seq order.
func (s *Store) Events(ctx context.Context, tenant, threadID string, after int64, limit int) ([]event.Event, error) {
	if err := store.CheckText("events", "tenant", tenant, "threadID", threadID); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	if limit <= 0 {
		limit = -1 // no limit
	}
	rows, err := s.rc.QueryContext(ctx, `SELECT seq, v, json FROM events
		WHERE tenant = ? AND thread_id = ? AND seq > ? ORDER BY seq LIMIT ?`, tenant, threadID, after, limit)
	if err != nil {
		return nil, mapErr("events", err)
	}
	defer rows.Close()
	out, err := store.ScanEvents(rows)
	if err != nil {
		return nil, mapErr("events", err)
	}
	if len(out) == 0 {
		if err := s.threadExists(ctx, s.rc, tenant, threadID); err != nil {
			return nil, mapErr("events", err)
		}
	}
	return out, nil
}

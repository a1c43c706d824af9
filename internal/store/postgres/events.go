package postgres

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
		return nil, fmt.Errorf("postgres: %w", err)
	}
	var lim any // NULL: no limit
	if limit > 0 {
		lim = limit
	}
	rows, err := s.pool.Query(ctx, `SELECT seq, v, json FROM events
		WHERE tenant = $1 AND thread_id = $2 AND seq > $3 ORDER BY seq LIMIT $4`, tenant, threadID, after, lim)
	if err != nil {
		return nil, mapErr("events", err)
	}
	defer rows.Close()
	out, err := store.ScanEvents(rows)
	if err != nil {
		return nil, mapErr("events", err)
	}
	if len(out) == 0 {
		if err := s.threadExists(ctx, s.pool, tenant, threadID); err != nil {
			return nil, mapErr("events", err)
		}
	}
	return out, nil
}

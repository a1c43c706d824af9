package sqlite

import (
	"context"
	"database/sql"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/store"
)

// Events returns up to limit (all when limit <= 0) of the thread's stored
// events with Seq > after, in Seq order.
func (s *Store) Events(ctx context.Context, tenant, threadID string, after int64, limit int) ([]event.Event, error) {
	if limit <= 0 {
		limit = -1 // no limit
	}
	rows, err := s.r.QueryContext(ctx, `SELECT seq, v, json FROM events
		WHERE tenant = ? AND thread_id = ? AND seq > ? ORDER BY seq LIMIT ?`, tenant, threadID, after, limit)
	if err != nil {
		return nil, mapErr("events", err)
	}
	defer rows.Close()
	var (
		out  []event.Event
		seq  int64
		v    int
		data sql.RawBytes
	)
	for rows.Next() {
		if err := rows.Scan(&seq, &v, &data); err != nil {
			return nil, mapErr("events", err)
		}
		e, err := store.DecodeEvent(v, data)
		if err != nil {
			return nil, mapErr("events", err)
		}
		e.Seq = seq
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr("events", err)
	}
	if len(out) == 0 {
		if err := s.threadExists(ctx, s.r, tenant, threadID); err != nil {
			return nil, mapErr("events", err)
		}
	}
	return out, nil
}

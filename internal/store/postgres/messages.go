package postgres

import (
	"context"
	"fmt"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
)

// GetMessage returns the tenant's message with the given id.
func (s *Store) GetMessage(ctx context.Context, tenant, id string) (*message.Message, error) {
	if err := store.CheckText("get message", "tenant", tenant, "id", id); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT v, json FROM messages
		WHERE tenant = $1 AND substring(json::text from '^\{"id":"([^"\\]*)"') = $2 LIMIT 1`, tenant, id)
	if err != nil {
		return nil, mapErr("get message", err)
	}
	defer rows.Close()
	msgs, err := store.ScanMessages(rows)
	if err != nil {
		return nil, mapErr("get message", err)
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("postgres: message %q: %w", id, store.ErrNotFound)
	}
	return &msgs[0], nil
}

package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stackbone/stackbone/internal/store"
)

// PutConversation creates or updates a conversation and appends items.
func (s *Store) PutConversation(ctx context.Context, c store.Conversation, items []store.ConversationItem) error {
	if err := store.CheckConversation("put conversation", c, items); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = s.now()
	}
	return s.tx(ctx, "put conversation", func(tx pgx.Tx) error {
		// Deleted stays deleted: an update racing a delete does not undo it.
		var deleted bool
		if err := tx.QueryRow(ctx, `INSERT INTO conversations (tenant, id, metadata, created_at, deleted) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (tenant, id) DO UPDATE SET metadata = excluded.metadata, deleted = conversations.deleted OR excluded.deleted
			RETURNING deleted`,
			c.Tenant, c.ID, c.MetadataOf(), c.CreatedAt, c.Deleted).Scan(&deleted); err != nil {
			return err
		}
		if deleted && !c.Deleted {
			return fmt.Errorf("conversation %q is deleted: %w", c.ID, store.ErrNotFound)
		}
		if c.Deleted {
			_, err := tx.Exec(ctx, `DELETE FROM conversation_items WHERE tenant = $1 AND conversation_id = $2`, c.Tenant, c.ID)
			return err
		}
		return addItems(ctx, tx, c.Tenant, c.ID, items)
	})
}

func addItems(ctx context.Context, tx pgx.Tx, tenant, id string, items []store.ConversationItem) error {
	for _, it := range items {
		if _, err := tx.Exec(ctx, `INSERT INTO conversation_items (tenant, conversation_id, item_id, item) VALUES ($1, $2, $3, $4)`,
			tenant, id, it.ID, string(it.Item)); err != nil {
			return err
		}
	}
	return nil
}

// GetConversation returns the tenant's conversation, or store.ErrNotFound.
func (s *Store) GetConversation(ctx context.Context, tenant, id string) (*store.Conversation, error) {
	if err := store.CheckText("get conversation", "tenant", tenant, "id", id); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	c := &store.Conversation{Tenant: tenant, ID: id}
	var meta string
	var created time.Time
	err := s.pool.QueryRow(ctx, `SELECT metadata::text, created_at, deleted FROM conversations WHERE tenant = $1 AND id = $2`,
		tenant, id).Scan(&meta, &created, &c.Deleted)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: conversation %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr("get conversation", err)
	}
	c.Metadata, c.CreatedAt = []byte(meta), created.UTC()
	return c, nil
}

// AddConversationItems appends items to a conversation.
func (s *Store) AddConversationItems(ctx context.Context, tenant, id string, items []store.ConversationItem) error {
	if err := store.CheckConversation("add conversation items", store.Conversation{Tenant: tenant, ID: id}, items); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return s.tx(ctx, "add conversation items", func(tx pgx.Tx) error {
		// A deleted conversation takes no items (one with no row, a
		// thread's, does). The row lock orders this against a delete.
		var deleted bool
		switch err := tx.QueryRow(ctx, `SELECT deleted FROM conversations WHERE tenant = $1 AND id = $2 FOR SHARE`,
			tenant, id).Scan(&deleted); {
		case err == nil && deleted:
			return fmt.Errorf("conversation %q is deleted: %w", id, store.ErrNotFound)
		case err != nil && !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		return addItems(ctx, tx, tenant, id, items)
	})
}

// ConversationItems returns a conversation's items in order.
func (s *Store) ConversationItems(ctx context.Context, tenant, id string) ([]store.ConversationItem, error) {
	if err := store.CheckText("conversation items", "tenant", tenant, "id", id); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT seq, item_id, item FROM conversation_items
		WHERE tenant = $1 AND conversation_id = $2 ORDER BY seq`, tenant, id)
	if err != nil {
		return nil, mapErr("conversation items", err)
	}
	defer rows.Close()
	var out []store.ConversationItem
	for rows.Next() {
		var it store.ConversationItem
		var raw string
		if err := rows.Scan(&it.Seq, &it.ID, &raw); err != nil {
			return nil, mapErr("conversation items", err)
		}
		it.Item = []byte(raw)
		out = append(out, it)
	}
	return out, mapErr("conversation items", rows.Err())
}

// DeleteConversationItems deletes a conversation's items by id.
func (s *Store) DeleteConversationItems(ctx context.Context, tenant, id string, itemIDs []string) (int, error) {
	for _, v := range append([]string{tenant, id}, itemIDs...) {
		if err := store.CheckText("delete conversation items", "id", v); err != nil {
			return 0, fmt.Errorf("postgres: %w", err)
		}
	}
	if len(itemIDs) == 0 {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM conversation_items WHERE tenant = $1 AND conversation_id = $2 AND item_id = ANY($3)`,
		tenant, id, itemIDs)
	if err != nil {
		return 0, mapErr("delete conversation items", err)
	}
	return int(tag.RowsAffected()), nil
}

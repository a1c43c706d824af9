package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/stackbone/stackbone/internal/store"
)

// Conversation statements (prepared once through the statement caches).
const (
	putConversationSQL = `INSERT INTO conversations (tenant, id, metadata, created_at, deleted) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (tenant, id) DO UPDATE SET metadata = excluded.metadata, deleted = conversations.deleted OR excluded.deleted
		RETURNING deleted`
	getConversationSQL       = `SELECT metadata, created_at, deleted FROM conversations WHERE tenant = ? AND id = ?`
	conversationDeletedSQL   = `SELECT 1 FROM conversations WHERE tenant = ? AND id = ? AND deleted`
	addConversationItemSQL   = `INSERT INTO conversation_items (tenant, conversation_id, item_id, item) VALUES (?, ?, ?, ?)`
	conversationItemsSQL     = `SELECT seq, item_id, item FROM conversation_items WHERE tenant = ? AND conversation_id = ? ORDER BY seq`
	clearConversationItemSQL = `DELETE FROM conversation_items WHERE tenant = ? AND conversation_id = ?`
)

// PutConversation creates or updates a conversation and appends items.
func (s *Store) PutConversation(ctx context.Context, c store.Conversation, items []store.ConversationItem) error {
	if err := store.CheckConversation("put conversation", c, items); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = s.now()
	}
	return s.write(ctx, "put conversation", func(tx *wtx) error {
		// Deleted stays deleted: an update racing a delete does not undo it.
		var deleted bool
		if err := tx.QueryRowContext(ctx, putConversationSQL, c.Tenant, c.ID, c.MetadataOf(), c.CreatedAt.UnixMicro(), c.Deleted).Scan(&deleted); err != nil {
			return err
		}
		if deleted && !c.Deleted {
			return fmt.Errorf("conversation %q is deleted: %w", c.ID, store.ErrNotFound)
		}
		if c.Deleted {
			_, err := tx.ExecContext(ctx, clearConversationItemSQL, c.Tenant, c.ID)
			return err
		}
		return addItems(ctx, tx, c.Tenant, c.ID, items)
	})
}

func addItems(ctx context.Context, tx *wtx, tenant, id string, items []store.ConversationItem) error {
	for _, it := range items {
		if _, err := tx.ExecContext(ctx, addConversationItemSQL, tenant, id, it.ID, string(it.Item)); err != nil {
			return err
		}
	}
	return nil
}

// GetConversation returns the tenant's conversation, or store.ErrNotFound.
func (s *Store) GetConversation(ctx context.Context, tenant, id string) (*store.Conversation, error) {
	if err := store.CheckText("get conversation", "tenant", tenant, "id", id); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	c := &store.Conversation{Tenant: tenant, ID: id}
	var meta string
	var created sql.NullInt64
	err := s.rc.QueryRowContext(ctx, getConversationSQL, tenant, id).Scan(&meta, &created, &c.Deleted)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: conversation %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr("get conversation", err)
	}
	c.Metadata, c.CreatedAt = []byte(meta), fromMicros(created)
	return c, nil
}

// AddConversationItems appends items to a conversation.
func (s *Store) AddConversationItems(ctx context.Context, tenant, id string, items []store.ConversationItem) error {
	if err := store.CheckConversation("add conversation items", store.Conversation{Tenant: tenant, ID: id}, items); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	return s.write(ctx, "add conversation items", func(tx *wtx) error {
		// A deleted conversation takes no items (one with no row, a
		// thread's, does).
		var one int
		switch err := tx.QueryRowContext(ctx, conversationDeletedSQL, tenant, id).Scan(&one); {
		case err == nil:
			return fmt.Errorf("conversation %q is deleted: %w", id, store.ErrNotFound)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		return addItems(ctx, tx, tenant, id, items)
	})
}

// ConversationItems returns a conversation's items in order.
func (s *Store) ConversationItems(ctx context.Context, tenant, id string) ([]store.ConversationItem, error) {
	if err := store.CheckText("conversation items", "tenant", tenant, "id", id); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	rows, err := s.rc.QueryContext(ctx, conversationItemsSQL, tenant, id)
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
	if err := store.CheckText("delete conversation items", append([]string{"tenant", tenant, "id", id}, pairs("item id", itemIDs)...)...); err != nil {
		return 0, fmt.Errorf("sqlite: %w", err)
	}
	if len(itemIDs) == 0 {
		return 0, nil
	}
	args := []any{tenant, id}
	for _, v := range itemIDs {
		args = append(args, v)
	}
	q := `DELETE FROM conversation_items WHERE tenant = ? AND conversation_id = ? AND item_id IN (?` +
		strings.Repeat(", ?", len(itemIDs)-1) + `)`
	var n int64
	err := s.write(ctx, "delete conversation items", func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// pairs names each of vs for store.CheckText.
func pairs(name string, vs []string) []string {
	out := make([]string, 0, 2*len(vs))
	for _, v := range vs {
		out = append(out, name, v)
	}
	return out
}

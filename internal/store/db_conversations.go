package store

import (
	"context"
	"errors"
	"fmt"
)

// PutConversation creates or updates a conversation and appends items.
func (db *DB) PutConversation(ctx context.Context, c Conversation, items []ConversationItem) error {
	if err := CheckConversation("put conversation", c, items); err != nil {
		return db.invalid(err)
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = db.now()
	}
	return db.d.Write(ctx, "put conversation", func(tx Tx) error {
		// Deleted stays deleted: an update racing a delete does not undo
		// it. The upsert locks the row, which orders this against
		// AddConversationItems.
		var deleted bool
		if err := tx.QueryRow(ctx, `INSERT INTO conversations (tenant, id, metadata, created_at, deleted, owner) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (tenant, id) DO UPDATE SET metadata = excluded.metadata, deleted = conversations.deleted OR excluded.deleted
			RETURNING deleted`,
			c.Tenant, c.ID, c.MetadataOf(), c.CreatedAt, c.Deleted, c.Owner).Scan(&deleted); err != nil {
			return err
		}
		if deleted && !c.Deleted {
			return fmt.Errorf("conversation %q is deleted: %w", c.ID, ErrNotFound)
		}
		if c.Deleted {
			tx.Queue(`DELETE FROM conversation_items WHERE tenant = $1 AND conversation_id = $2`, c.Tenant, c.ID)
			return nil
		}
		queueItems(tx, c.Tenant, c.ID, items)
		return nil
	})
}

// queueItems queues the inserts of items, in order (each row of a
// multi-row insert takes the next seq).
func queueItems(tx Tx, tenant, id string, items []ConversationItem) {
	if len(items) == 0 {
		return
	}
	rows := make([][]any, len(items))
	for i, it := range items {
		rows[i] = []any{tenant, id, it.ID, string(it.Item)}
	}
	queueInsert(tx, `INSERT INTO conversation_items (tenant, conversation_id, item_id, item)`, 4, rows)
}

// GetConversation returns the tenant's conversation, or ErrNotFound.
func (db *DB) GetConversation(ctx context.Context, tenant, id string) (*Conversation, error) {
	if err := CheckText("get conversation", "tenant", tenant, "id", id); err != nil {
		return nil, db.invalid(err)
	}
	c := &Conversation{Tenant: tenant, ID: id}
	var meta string
	err := db.d.Read().QueryRow(ctx, `SELECT metadata::text, created_at, deleted, owner FROM conversations WHERE tenant = $1 AND id = $2`,
		tenant, id).Scan(&meta, ScanTime(&c.CreatedAt), &c.Deleted, &c.Owner)
	if errors.Is(err, ErrNoRows) {
		return nil, fmt.Errorf("%s: conversation %q: %w", db.name, id, ErrNotFound)
	}
	if err != nil {
		return nil, db.read("get conversation", err)
	}
	c.Metadata = []byte(meta)
	return c, nil
}

// AddConversationItems appends items to a conversation.
func (db *DB) AddConversationItems(ctx context.Context, tenant, id string, items []ConversationItem) error {
	if err := CheckConversation("add conversation items", Conversation{Tenant: tenant, ID: id}, items); err != nil {
		return db.invalid(err)
	}
	return db.d.Write(ctx, "add conversation items", func(tx Tx) error {
		// A deleted conversation takes no items (one with no row, a
		// thread's, does). The row lock orders this against a delete.
		var deleted bool
		switch err := tx.QueryRow(ctx, `SELECT deleted FROM conversations WHERE tenant = $1 AND id = $2 FOR SHARE`,
			tenant, id).Scan(&deleted); {
		case err == nil && deleted:
			return fmt.Errorf("conversation %q is deleted: %w", id, ErrNotFound)
		case err != nil && !errors.Is(err, ErrNoRows):
			return err
		}
		queueItems(tx, tenant, id, items)
		return nil
	})
}

// ConversationItems returns a conversation's items in order.
func (db *DB) ConversationItems(ctx context.Context, tenant, id string) ([]ConversationItem, error) {
	if err := CheckText("conversation items", "tenant", tenant, "id", id); err != nil {
		return nil, db.invalid(err)
	}
	rows, err := db.d.Read().Query(ctx, `SELECT seq, item_id, item FROM conversation_items
		WHERE tenant = $1 AND conversation_id = $2 ORDER BY seq`, tenant, id)
	if err != nil {
		return nil, db.read("conversation items", err)
	}
	defer rows.Close()
	var out []ConversationItem
	for rows.Next() {
		var (
			it  ConversationItem
			raw string
		)
		if err := rows.Scan(&it.Seq, &it.ID, &raw); err != nil {
			return nil, db.read("conversation items", err)
		}
		it.Item = []byte(raw)
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, db.read("conversation items", err)
	}
	return out, nil
}

// DeleteConversationItems deletes a conversation's items by id.
func (db *DB) DeleteConversationItems(ctx context.Context, tenant, id string, itemIDs []string) (int, error) {
	check := make([]string, 0, 4+2*len(itemIDs))
	check = append(check, "tenant", tenant, "id", id)
	for _, v := range itemIDs {
		check = append(check, "item id", v)
	}
	if err := CheckText("delete conversation items", check...); err != nil {
		return 0, db.invalid(err)
	}
	if len(itemIDs) == 0 {
		return 0, nil
	}
	var n int64
	err := db.d.Write(ctx, "delete conversation items", func(tx Tx) error {
		n = 0
		// In chunks, so the statement texts (prepared and cached by the
		// drivers) stay few.
		for ids := itemIDs; len(ids) > 0; {
			k := min(len(ids), insertChunk)
			args := append([]any{tenant, id}, anys(ids[:k])...)
			m, err := tx.Exec(ctx, `DELETE FROM conversation_items WHERE tenant = $1 AND conversation_id = $2 AND item_id IN (`+
				Params(3, k)+`)`, args...)
			if err != nil {
				return err
			}
			n += m
			ids = ids[k:]
		}
		return nil
	})
	return int(n), err
}

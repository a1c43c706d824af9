package store

import (
	"encoding/json"
	"fmt"
	"time"
)

// Conversation is a conversation of the Conversations API (POST
// /v1/conversations): its metadata and whether it was deleted. Its id is
// also the id of its thread, which the first response naming the
// conversation creates (a thread is bound to an agent at its first turn);
// until then the conversation holds only the items a client added
// (ConversationItem).
type Conversation struct {
	Tenant string
	ID     string
	// Metadata is a JSON object ("{}" when none).
	Metadata  json.RawMessage
	CreatedAt time.Time
	// Deleted is set once the conversation was deleted.
	Deleted bool
	// Owner is the end user who created it ('' for the tenant's), kept
	// from its creation on: an update does not change it.
	Owner string
}

// ConversationItem is an item a client added to a conversation outside a
// turn (POST /v1/conversations/{id}/items), kept until a turn of the
// conversation's thread takes it as input.
type ConversationItem struct {
	// ID is the item's id.
	ID string
	// Seq orders a conversation's items (the store sets it: later items
	// have greater numbers).
	Seq int64
	// Item is the item's JSON, opaque to the store.
	Item json.RawMessage
}

// CheckConversation returns ErrInvalid for a conversation a driver must
// not store: an empty tenant or id, text that is not storable, metadata
// that is not a JSON object, an item without an id or JSON.
func CheckConversation(op string, c Conversation, items []ConversationItem) error {
	if c.Tenant == "" || c.ID == "" {
		return fmt.Errorf("%w: %s: tenant and id are required", ErrInvalid, op)
	}
	if err := CheckText(op, "tenant", c.Tenant, "id", c.ID, "owner", c.Owner); err != nil {
		return err
	}
	if len(c.Metadata) > 0 {
		var obj map[string]json.RawMessage
		if json.Unmarshal(c.Metadata, &obj) != nil || obj == nil {
			return fmt.Errorf("%w: %s: metadata is not a JSON object", ErrInvalid, op)
		}
		if err := checkJSONText(op, "metadata", c.Metadata); err != nil {
			return err
		}
	}
	for _, it := range items {
		if it.ID == "" || !json.Valid(it.Item) {
			return fmt.Errorf("%w: %s: an item needs an id and JSON", ErrInvalid, op)
		}
		if err := CheckText(op, "item id", it.ID, "item", string(it.Item)); err != nil {
			return err
		}
	}
	return nil
}

// MetadataOf is c's metadata as stored: "{}" when empty.
func (c Conversation) MetadataOf() string {
	if len(c.Metadata) == 0 {
		return "{}"
	}
	return string(c.Metadata)
}

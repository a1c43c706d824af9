package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/store"
)

func convItems(ids ...string) []store.ConversationItem {
	out := make([]store.ConversationItem, 0, len(ids))
	for _, id := range ids {
		out = append(out, store.ConversationItem{ID: id, Item: json.RawMessage(`{"type":"message","id":"` + id + `"}`)})
	}
	return out
}

func itemIDs(t *testing.T, s store.Store, tenant, id string) []string {
	t.Helper()
	items, err := s.ConversationItems(context.Background(), tenant, id)
	if err != nil {
		t.Fatalf("ConversationItems(%s, %s): %v", tenant, id, err)
	}
	var out []string
	var last int64
	for _, it := range items {
		if it.Seq <= last {
			t.Fatalf("item %s: seq %d after %d", it.ID, it.Seq, last)
		}
		last = it.Seq
		var obj struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(it.Item, &obj); err != nil || obj.ID != it.ID {
			t.Fatalf("item %s: stored JSON %s (%v)", it.ID, it.Item, err)
		}
		out = append(out, it.ID)
	}
	return out
}

func sameIDs(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: got %v, want %v", what, got, want)
		}
	}
}

// testConversations: a conversation round-trips with its metadata and
// items in order; an update keeps its creation time; items are deleted by
// id; deleting it marks it and drops its items; another tenant sees none of
// it; unstorable input is ErrInvalid.
func testConversations(t *testing.T, s store.Store) {
	ctx := context.Background()
	c := store.Conversation{Tenant: "t1", ID: "conv_1", Metadata: json.RawMessage(`{"topic":"demo"}`), CreatedAt: T0}
	if err := s.PutConversation(ctx, c, convItems("msg_a", "msg_b")); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetConversation(ctx, "t1", "conv_1")
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]string
	if err := json.Unmarshal(got.Metadata, &meta); err != nil || meta["topic"] != "demo" || got.Deleted || !got.CreatedAt.Equal(T0) {
		t.Fatalf("GetConversation: %+v (metadata %s)", got, got.Metadata)
	}
	if err := s.AddConversationItems(ctx, "t1", "conv_1", convItems("msg_c", "msg_d")); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, "items", itemIDs(t, s, "t1", "conv_1"), "msg_a", "msg_b", "msg_c", "msg_d")

	// An update replaces the metadata and keeps the creation time.
	if err := s.PutConversation(ctx, store.Conversation{Tenant: "t1", ID: "conv_1", CreatedAt: T0.Add(time.Hour)}, nil); err != nil {
		t.Fatal(err)
	}
	if got, err = s.GetConversation(ctx, "t1", "conv_1"); err != nil || string(got.Metadata) != "{}" || !got.CreatedAt.Equal(T0) {
		t.Fatalf("after update: %+v, %v", got, err)
	}
	// The end user who created a conversation owns it; an update keeps the
	// owner it was created with.
	if err := s.PutConversation(ctx, store.Conversation{Tenant: "t1", ID: "conv_owned", Owner: "alice"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.PutConversation(ctx, store.Conversation{Tenant: "t1", ID: "conv_owned", Metadata: json.RawMessage(`{"a":"b"}`)}, nil); err != nil {
		t.Fatal(err)
	}
	owned, err := s.GetConversation(ctx, "t1", "conv_owned")
	var ometa map[string]string
	if err != nil || owned.Owner != "alice" || json.Unmarshal(owned.Metadata, &ometa) != nil || ometa["a"] != "b" {
		t.Fatalf("owned conversation: %+v, %v", owned, err)
	}
	if got.Owner != "" {
		t.Fatalf("a conversation created without an owner has owner %q", got.Owner)
	}

	if n, err := s.DeleteConversationItems(ctx, "t1", "conv_1", []string{"msg_b", "msg_d", "msg_zz"}); err != nil || n != 2 {
		t.Fatalf("DeleteConversationItems: %d, %v", n, err)
	}
	sameIDs(t, "items after delete", itemIDs(t, s, "t1", "conv_1"), "msg_a", "msg_c")

	// Another tenant: nothing, and its writes touch nothing of t1's.
	if _, err := s.GetConversation(ctx, "t2", "conv_1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("t2 GetConversation: %v", err)
	}
	sameIDs(t, "t2 items", itemIDs(t, s, "t2", "conv_1"))
	if n, err := s.DeleteConversationItems(ctx, "t2", "conv_1", []string{"msg_a"}); err != nil || n != 0 {
		t.Fatalf("t2 DeleteConversationItems: %d, %v", n, err)
	}
	if err := s.AddConversationItems(ctx, "t2", "conv_1", convItems("msg_x")); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, "t1 items after t2 wrote", itemIDs(t, s, "t1", "conv_1"), "msg_a", "msg_c")
	sameIDs(t, "t2 items", itemIDs(t, s, "t2", "conv_1"), "msg_x")

	// Deleted: marked, its items gone.
	if err := s.PutConversation(ctx, store.Conversation{Tenant: "t1", ID: "conv_1", Deleted: true}, nil); err != nil {
		t.Fatal(err)
	}
	if got, err = s.GetConversation(ctx, "t1", "conv_1"); err != nil || !got.Deleted {
		t.Fatalf("after delete: %+v, %v", got, err)
	}
	sameIDs(t, "items of a deleted conversation", itemIDs(t, s, "t1", "conv_1"))
	sameIDs(t, "t2 items after t1 deleted", itemIDs(t, s, "t2", "conv_1"), "msg_x")

	if _, err := s.GetConversation(ctx, "t1", "conv_unknown"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown: %v", err)
	}
	for name, err := range map[string]error{
		"no id":             s.PutConversation(ctx, store.Conversation{Tenant: "t1"}, nil),
		"metadata":          s.PutConversation(ctx, store.Conversation{Tenant: "t1", ID: "conv_2", Metadata: json.RawMessage(`[1]`)}, nil),
		"item without id":   s.AddConversationItems(ctx, "t1", "conv_2", []store.ConversationItem{{Item: json.RawMessage(`{}`)}}),
		"item without JSON": s.AddConversationItems(ctx, "t1", "conv_2", []store.ConversationItem{{ID: "msg_1", Item: json.RawMessage(`{`)}}),
		"NUL in id":         s.PutConversation(ctx, store.Conversation{Tenant: "t1", ID: "conv_\x00"}, nil),
	} {
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: want ErrInvalid, got %v", name, err)
		}
	}
	if _, err := s.GetConversation(ctx, "t1", "conv_2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an invalid put stored a conversation: %v", err)
	}
}

// testDeletedConversationStaysDeleted: a deleted conversation does not come
// back: an update that read it before the delete (metadata, items) is
// refused with ErrNotFound and leaves it deleted and empty, and items
// cannot be added to it. Items still go to a conversation with no row (a
// thread's).
func testDeletedConversationStaysDeleted(t *testing.T, s store.Store) {
	ctx := context.Background()
	c := store.Conversation{Tenant: "t1", ID: "conv_del", Metadata: json.RawMessage(`{"v":"1"}`), CreatedAt: T0}
	if err := s.PutConversation(ctx, c, convItems("msg_a")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutConversation(ctx, store.Conversation{Tenant: "t1", ID: "conv_del", Deleted: true}, nil); err != nil {
		t.Fatal(err)
	}
	// The update raced the delete: it still holds Deleted: false.
	c.Metadata = json.RawMessage(`{"v":"2"}`)
	if err := s.PutConversation(ctx, c, nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update of a deleted conversation: want ErrNotFound, got %v", err)
	}
	if err := s.PutConversation(ctx, c, convItems("msg_b")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("put with items on a deleted conversation: want ErrNotFound, got %v", err)
	}
	if err := s.AddConversationItems(ctx, "t1", "conv_del", convItems("msg_c")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("add items to a deleted conversation: want ErrNotFound, got %v", err)
	}
	got, err := s.GetConversation(ctx, "t1", "conv_del")
	if err != nil || !got.Deleted || string(got.Metadata) == `{"v":"2"}` {
		t.Fatalf("after the racing writes: %+v (metadata %s), %v", got, got.Metadata, err)
	}
	sameIDs(t, "items of the deleted conversation", itemIDs(t, s, "t1", "conv_del"))
	// Deleting again is fine; another tenant's conversation of the same id
	// and a conversation with no row take items.
	if err := s.PutConversation(ctx, store.Conversation{Tenant: "t1", ID: "conv_del", Deleted: true}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.AddConversationItems(ctx, "t2", "conv_del", convItems("msg_x")); err != nil {
		t.Fatal(err)
	}
	if err := s.AddConversationItems(ctx, "t1", "conv_norow", convItems("msg_y")); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, "t2 items", itemIDs(t, s, "t2", "conv_del"), "msg_x")
}

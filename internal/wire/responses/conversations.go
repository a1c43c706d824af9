package responses

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/wire/httpjson"
)

// The Conversations API (POST /v1/conversations and its routes) on the
// durable threads. A conversation's id is its thread's id: the thread is
// created (and bound to an agent) by the first response that names the
// conversation, and every thread of the Responses wire is a conversation
// too (a response's conversation.id). A conversation's items are its
// thread's messages, as Responses items, then the items a client added
// outside a turn that no turn took yet. A turn of the conversation's
// thread takes those as input before its own (a response naming a
// conversation created with items continues from them), and they become
// thread messages with the same ids. Thread messages are the thread's
// history: they cannot be deleted one by one. Deleting a conversation
// hides it from every route (and from POST /v1/responses); its thread and
// responses stay, for audit (GET /v1/threads, Studio).

// maxConversationItems is how many items a request may add at once (as
// OpenAI's API).
const maxConversationItems = 20

// ConversationObject is a conversation as the API returns it.
type ConversationObject struct {
	ID        string          `json:"id"`
	Object    string          `json:"object"`
	CreatedAt int64           `json:"created_at"`
	Metadata  json.RawMessage `json:"metadata"`
}

// conversationRoutes are the Conversations API's routes.
func (wr *Wire) conversationRoutes() map[string]func(http.ResponseWriter, *http.Request) error {
	return map[string]func(http.ResponseWriter, *http.Request) error{
		"POST /v1/conversations":                        wr.createConversation,
		"GET /v1/conversations/{id}":                    wr.getConversation,
		"POST /v1/conversations/{id}":                   wr.updateConversation,
		"DELETE /v1/conversations/{id}":                 wr.deleteConversation,
		"GET /v1/conversations/{id}/items":              wr.listConversationItems,
		"POST /v1/conversations/{id}/items":             wr.addConversationItems,
		"GET /v1/conversations/{id}/items/{item_id}":    wr.getConversationItem,
		"DELETE /v1/conversations/{id}/items/{item_id}": wr.deleteConversationItem,
	}
}

func conversationNotFound(id string) *apierror.Error {
	return apierror.New(apierror.NotFound, "not_found", fmt.Sprintf("Conversation with id '%s' not found.", id))
}

func itemNotFound(id string) error {
	return apierror.New(apierror.NotFound, "not_found", fmt.Sprintf("Item with id '%s' not found.", id))
}

// conversationBody is what create and update read.
type conversationBody struct {
	Items    json.RawMessage   `json:"items"`
	Metadata map[string]string `json:"metadata"`
}

func readConversationBody(r *http.Request) (conversationBody, error) {
	var b conversationBody
	body, err := httpjson.ReadBody(r)
	if err != nil || len(bytes.TrimSpace(body)) == 0 {
		return b, err
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return b, apierror.Invalid("", "The request body is not valid JSON: %v", httpjson.Problem(err))
	}
	if err := checkMetadata(b.Metadata); err != nil {
		return b, err
	}
	return b, nil
}

func encodeMetadata(m map[string]string) json.RawMessage {
	if m == nil {
		return json.RawMessage("{}")
	}
	b, _ := json.Marshal(m) // a map of strings always encodes
	return b
}

// conversation is a conversation of the caller's tenant: its record (one
// made up from its thread when it has none), its thread (nil before the
// first response) and its thread's messages. Unknown, deleted and foreign
// conversations are a 404.
type conversation struct {
	rec    store.Conversation
	thread *store.Thread
}

func (wr *Wire) conversation(ctx context.Context, id string) (*conversation, error) {
	if err := apierror.CheckID("conversation_id", id); err != nil {
		return nil, err
	}
	tenant := wr.c.Tenant(ctx)
	c := &conversation{}
	rec, err := wr.c.Store.GetConversation(ctx, tenant, id)
	switch {
	case err == nil && rec.Deleted:
		return nil, conversationNotFound(id)
	case err == nil && !wr.sees(ctx, rec.Owner):
		return nil, conversationNotFound(id) // another user's, before its first turn
	case err == nil:
		c.rec = *rec
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	th, err := wr.c.Store.GetThread(ctx, tenant, id)
	switch {
	case err == nil && wr.c.Sees != nil && !wr.c.Sees(ctx, th.Owner):
		return nil, conversationNotFound(id) // another user's
	case err == nil:
		c.thread = th
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	case rec == nil:
		return nil, conversationNotFound(id)
	}
	if rec == nil {
		c.rec = store.Conversation{Tenant: tenant, ID: id, Metadata: json.RawMessage("{}"), CreatedAt: th.CreatedAt}
	}
	return c, nil
}

// sees reports whether the caller sees what owner owns (Config.Sees; all
// when it is nil).
func (wr *Wire) sees(ctx context.Context, owner string) bool {
	return owner == "" || wr.c.Sees == nil || wr.c.Sees(ctx, owner)
}

// owner is the end user the caller is ("" for a key: Config.Owner).
func (wr *Wire) owner(ctx context.Context) string {
	if wr.c.Owner == nil {
		return ""
	}
	return wr.c.Owner(ctx)
}

func (c *conversation) object() ConversationObject {
	return ConversationObject{ID: c.rec.ID, Object: "conversation", CreatedAt: c.rec.CreatedAt.Unix(),
		Metadata: json.RawMessage(c.rec.MetadataOf())}
}

// items are the conversation's items in order, and the client-added ones
// no turn took yet (pending).
func (wr *Wire) items(ctx context.Context, c *conversation) (all []Item, pending []store.ConversationItem, err error) {
	known := map[string]bool{}
	if c.thread != nil {
		msgs, err := wr.c.Store.Messages(ctx, c.rec.Tenant, c.rec.ID)
		if err != nil {
			return nil, nil, err
		}
		all = ThreadItems(msgs)
		for _, it := range all {
			known[it.ID] = true
		}
	}
	added, err := wr.c.Store.ConversationItems(ctx, c.rec.Tenant, c.rec.ID)
	if err != nil {
		return nil, nil, err
	}
	for _, a := range added {
		if known[a.ID] {
			continue // a turn took it: it is a thread message now
		}
		var it Item
		if err := json.Unmarshal(a.Item, &it); err != nil {
			return nil, nil, fmt.Errorf("responses: item %s of conversation %s: %w", a.ID, c.rec.ID, err)
		}
		all, pending = append(all, it), append(pending, a)
	}
	return all, pending, nil
}

// ThreadItems are a thread's messages as Responses items: user and
// assistant messages, the assistant's function calls (id fc_<call id>, as
// in a response's output) and the tools' outputs. System messages, a
// subagent's messages and summaries are not part of the conversation.
func ThreadItems(msgs []message.Message) []Item {
	var out []Item
	for _, m := range msgs {
		if m.TaskCallID != "" || m.Summarizes != "" {
			continue
		}
		switch m.Role {
		case message.User:
			parts := []map[string]any{}
			if m.Content != "" || len(m.Parts) == 0 {
				parts = append(parts, map[string]any{"type": "input_text", "text": m.Content})
			}
			for _, p := range m.Parts {
				url := p.URL
				if url == "" && p.Data != "" {
					url = "data:" + p.MediaType + ";base64," + p.Data
				}
				parts = append(parts, map[string]any{"type": "input_image", "image_url": url, "detail": "auto"})
			}
			content, _ := json.Marshal(parts)
			out = append(out, Item{Type: ItemMessage, ID: m.ID, Role: "user", Status: StatusCompleted, Content: content})
		case message.Assistant:
			if m.Content != "" {
				content, _ := json.Marshal([]OutputPart{{Type: "output_text", Text: m.Content, Annotations: []any{}, Logprobs: []any{}}})
				out = append(out, Item{Type: ItemMessage, ID: m.ID, Role: "assistant", Status: StatusCompleted, Content: content})
			}
			for _, c := range m.ToolCalls {
				args := c.Arguments
				out = append(out, Item{Type: ItemFunctionCall, ID: "fc_" + c.ID, Status: StatusCompleted, CallID: c.ID,
					Name: c.Name, Arguments: &args})
			}
		case message.Tool:
			output, _ := json.Marshal(m.Content)
			out = append(out, Item{Type: ItemFunctionCallOutput, ID: m.ID, Status: StatusCompleted, CallID: m.ToolCallID, Output: output})
		}
	}
	return out
}

// clientItems reads the items a client adds (create's or items.create's
// items): at most maxConversationItems message, function_call and
// function_call_output items, each with a fresh id (a function call's is
// fc_<call id>, as its thread message will list it). A conversation whose
// thread exists takes only user messages and function call outputs: a
// turn's input continues the thread after its last assistant message, so
// the model's own items come from its turns.
func (wr *Wire) clientItems(raw json.RawMessage, threaded bool) ([]Item, []store.ConversationItem, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil, nil
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil, nil, apierror.Invalid("items", "`items` must be a list of items.")
	}
	if len(list) > maxConversationItems {
		return nil, nil, apierror.Invalid("items", "`items` holds at most %d items per request.", maxConversationItems)
	}
	if len(list) == 0 {
		return nil, nil, nil
	}
	req := Request{Input: raw}
	items, err := req.Items(wr.c.NewID)
	if err != nil {
		return nil, nil, itemsParam(err)
	}
	for i := range items {
		it := &items[i]
		param := fmt.Sprintf("items[%d]", i)
		switch it.Type {
		case ItemMessage:
			if it.Role == "system" || it.Role == "developer" {
				return nil, nil, apierror.Invalid(param+".role", "A conversation holds user and assistant messages: send instructions with each response (`instructions`).")
			}
			if threaded && it.Role == "assistant" {
				return nil, nil, apierror.Invalid(param+".role", "This conversation has turns already: add user messages and function call outputs; the assistant's items come from its responses.")
			}
			it.ID = wr.c.NewID("msg")
		case ItemFunctionCall:
			if threaded {
				return nil, nil, apierror.Invalid(param+".type", "This conversation has turns already: add user messages and function call outputs; the assistant's items come from its responses.")
			}
			it.ID = "fc_" + it.CallID
		case ItemFunctionCallOutput:
			it.ID = wr.c.NewID("fco")
		default:
			return nil, nil, apierror.Invalid(param+".type", "Unsupported item type %q: add message, function_call or function_call_output items.", it.Type)
		}
		if it.Status == "" {
			it.Status = StatusCompleted
		}
	}
	if _, _, err := Messages(nil, items, nil); err != nil {
		return nil, nil, itemsParam(err)
	}
	rows := make([]store.ConversationItem, 0, len(items))
	for _, it := range items {
		b, err := json.Marshal(it)
		if err != nil {
			return nil, nil, err
		}
		rows = append(rows, store.ConversationItem{ID: it.ID, Item: b})
	}
	return items, rows, nil
}

// itemsParam names the request's items where an input error names input.
func itemsParam(err error) error {
	var e *apierror.Error
	if errors.As(err, &e) && strings.HasPrefix(e.Param, "input") {
		c := *e
		c.Param = "items" + strings.TrimPrefix(e.Param, "input")
		c.Message = strings.ReplaceAll(c.Message, "`input`", "`items`")
		return &c
	}
	return err
}

func (wr *Wire) createConversation(w http.ResponseWriter, r *http.Request) error {
	b, err := readConversationBody(r)
	if err != nil {
		return err
	}
	_, rows, err := wr.clientItems(b.Items, false)
	if err != nil {
		return err
	}
	c := &conversation{rec: store.Conversation{Tenant: wr.c.Tenant(r.Context()), ID: wr.c.NewID("conv"),
		Metadata: encodeMetadata(b.Metadata), CreatedAt: wr.c.Now(), Owner: wr.owner(r.Context())}}
	if err := wr.c.Store.PutConversation(r.Context(), c.rec, rows); err != nil {
		return err
	}
	return httpjson.Write(w, http.StatusOK, c.object())
}

func (wr *Wire) getConversation(w http.ResponseWriter, r *http.Request) error {
	c, err := wr.conversation(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return httpjson.Write(w, http.StatusOK, c.object())
}

// updateConversation replaces the conversation's metadata.
func (wr *Wire) updateConversation(w http.ResponseWriter, r *http.Request) error {
	c, err := wr.conversation(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	b, err := readConversationBody(r)
	if err != nil {
		return err
	}
	if b.Metadata == nil {
		return apierror.Invalid("metadata", "`metadata` is required: the conversation's new metadata.")
	}
	c.rec.Metadata = encodeMetadata(b.Metadata)
	if err := wr.c.Store.PutConversation(r.Context(), c.rec, nil); err != nil {
		return err
	}
	return httpjson.Write(w, http.StatusOK, c.object())
}

// deleteConversation marks the conversation deleted and drops the items no
// turn took; its thread stays.
func (wr *Wire) deleteConversation(w http.ResponseWriter, r *http.Request) error {
	c, err := wr.conversation(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	c.rec.Deleted = true
	if err := wr.c.Store.PutConversation(r.Context(), c.rec, nil); err != nil {
		return err
	}
	return httpjson.Write(w, http.StatusOK, map[string]any{"id": c.rec.ID, "object": "conversation.deleted", "deleted": true})
}

func (wr *Wire) listConversationItems(w http.ResponseWriter, r *http.Request) error {
	c, err := wr.conversation(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	items, _, err := wr.items(r.Context(), c)
	if err != nil {
		return err
	}
	return writePage(w, r, items, "No item of this conversation has id %q.")
}

// addConversationItems appends a client's items to the conversation.
func (wr *Wire) addConversationItems(w http.ResponseWriter, r *http.Request) error {
	c, err := wr.conversation(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	b, err := readConversationBody(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b.Items)) == 0 {
		return apierror.Invalid("items", "`items` is required: the items to add.")
	}
	items, rows, err := wr.clientItems(b.Items, c.thread != nil)
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		return apierror.Invalid("items", "`items` must hold at least one item.")
	}
	if err := wr.c.Store.AddConversationItems(r.Context(), c.rec.Tenant, c.rec.ID, rows); err != nil {
		return err
	}
	return httpjson.Write(w, http.StatusOK, map[string]any{"object": "list", "data": items, "has_more": false,
		"first_id": items[0].ID, "last_id": items[len(items)-1].ID})
}

func (wr *Wire) getConversationItem(w http.ResponseWriter, r *http.Request) error {
	c, err := wr.conversation(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	items, _, err := wr.items(r.Context(), c)
	if err != nil {
		return err
	}
	id := r.PathValue("item_id")
	for _, it := range items {
		if it.ID == id {
			return httpjson.Write(w, http.StatusOK, it)
		}
	}
	return itemNotFound(id)
}

// deleteConversationItem deletes an item a client added that no turn took;
// a thread message is refused (the thread's history is append-only).
func (wr *Wire) deleteConversationItem(w http.ResponseWriter, r *http.Request) error {
	c, err := wr.conversation(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	items, pending, err := wr.items(r.Context(), c)
	if err != nil {
		return err
	}
	id := r.PathValue("item_id")
	for _, p := range pending {
		if p.ID != id {
			continue
		}
		if _, err := wr.c.Store.DeleteConversationItems(r.Context(), c.rec.Tenant, c.rec.ID, []string{id}); err != nil {
			return err
		}
		return httpjson.Write(w, http.StatusOK, c.object())
	}
	for _, it := range items {
		if it.ID == id {
			e := apierror.Invalid("item_id", "Item '%s' is a message of the conversation's turns, which are kept as they happened: only items added with POST …/items that no response has taken yet can be deleted.", id)
			e.Code = "item_not_deletable"
			return e
		}
	}
	return itemNotFound(id)
}

// writePage writes a list of items as the list routes page them: newest
// first unless order=asc, limit 1–100 (20), after an item id (notAfter
// says there is none with the id).
func writePage(w http.ResponseWriter, r *http.Request, items []Item, notAfter string) error {
	q := r.URL.Query()
	limit := 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return apierror.Invalid("limit", "`limit` must be an integer from 1 to 100.")
		}
		limit = n
	}
	items = append([]Item(nil), items...)
	switch q.Get("order") {
	case "", "desc":
		for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
			items[i], items[j] = items[j], items[i]
		}
	case "asc":
	default:
		return apierror.Invalid("order", "`order` must be asc or desc.")
	}
	if after := q.Get("after"); after != "" {
		found := false
		for i, it := range items {
			if it.ID == after {
				items, found = items[i+1:], true
				break
			}
		}
		if !found {
			return apierror.Invalid("after", notAfter, after)
		}
	}
	more := len(items) > limit
	if more {
		items = items[:limit]
	}
	if items == nil {
		items = []Item{}
	}
	list := map[string]any{"object": "list", "data": items, "has_more": more, "first_id": nil, "last_id": nil}
	if len(items) > 0 {
		list["first_id"], list["last_id"] = items[0].ID, items[len(items)-1].ID
	}
	return httpjson.Write(w, http.StatusOK, list)
}

// conversationInput prepares a stored turn of thread: a deleted
// conversation is a 404; the items a client added that no turn took yet
// go before the turn's own input (after its instructions), with their
// ids, and are remembered (t.taken) to be dropped once the turn began.
func (t *turn) conversationInput(ctx context.Context, in *engine.Input, thread string) error {
	rec, err := t.wr.c.Store.GetConversation(ctx, in.Tenant, thread)
	if err == nil && (rec.Deleted || !t.wr.sees(ctx, rec.Owner)) {
		e := conversationNotFound(thread)
		e.Param = "conversation"
		return e
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	added, err := t.wr.c.Store.ConversationItems(ctx, in.Tenant, thread)
	if err != nil || len(added) == 0 {
		return err
	}
	known := map[string]bool{}
	if _, err := t.wr.c.Store.GetThread(ctx, in.Tenant, thread); err == nil {
		msgs, err := t.wr.c.Store.Messages(ctx, in.Tenant, thread)
		if err != nil {
			return err
		}
		for _, it := range ThreadItems(msgs) {
			known[it.ID] = true
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	var items []Item
	var stale []string
	for _, a := range added {
		if known[a.ID] {
			stale = append(stale, a.ID) // a turn took it (its cleanup did not happen)
			continue
		}
		var it Item
		if err := json.Unmarshal(a.Item, &it); err != nil {
			return fmt.Errorf("responses: item %s of conversation %s: %w", a.ID, thread, err)
		}
		items, t.taken = append(items, it), append(t.taken, a.ID)
	}
	if len(stale) > 0 {
		_, _ = t.wr.c.Store.DeleteConversationItems(ctx, in.Tenant, thread, stale) // best effort: listed once either way
	}
	if len(items) == 0 {
		return nil
	}
	msgs, origin, err := Messages(nil, items, nil)
	if err != nil {
		return err
	}
	for k := range msgs {
		msgs[k].ID = items[origin[k]].ID
	}
	at := 0
	for at < len(in.Messages) && in.Messages[at].Role == message.System {
		at++
	}
	in.Messages = append(append(append([]message.Message{}, in.Messages[:at]...), msgs...), in.Messages[at:]...)
	pre := make([]int, len(msgs))
	for k := range pre {
		pre[k] = -1
	}
	if len(t.origin) >= at {
		t.origin = append(append(append([]int{}, t.origin[:at]...), pre...), t.origin[at:]...)
	}
	return nil
}

package responses

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/wire"
)

// A request that names no conversation (no previous_response_id,
// conversation or x-stackbone-session) starts a thread of its own, so the
// engine, which recognises a retry of a durable turn on its thread, cannot
// tell a client's retry of it from a new question. The wire finds the first
// attempt itself, through a response key in the store (so on any replica,
// and after a restart):
//
//   - with an Idempotency-Key, under a digest of the key, for the retry
//     window and for as long as the attempt runs: the same request again is a
//     retry of that attempt; another request with the key is refused;
//   - without one, under the request's digest, while the attempt runs (or
//     its process died and it waits to be recovered): once it ended, the
//     same request is a new question.
//
// The claim is one conditional write, so of concurrent attempts exactly one
// starts the thread. A retry goes to the first attempt's thread, where the
// engine attaches it to that turn (its answer, or the run still going; a
// turn that failed runs again without storing its input twice). When the
// conversation has gone on since, or the response was cancelled, the retry
// is answered with the first attempt's response, read again from the
// thread's events (Replay).

// keyClaims bounds how often a request claims its key while other requests
// keep replacing the entry it found.
const keyClaims = 4

// digest names the request for its retries: the request as decoded, encoded
// again (the same JSON with other spacing is the same request), without
// stream (a streamed and a JSON answer of one request are one response).
func (req *Request) digest() (string, error) {
	r := *req
	r.Stream = false
	b, err := json.Marshal(&r)
	if err != nil {
		return "", fmt.Errorf("responses: digest the request: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// newChain returns the thread of a stored request that names none: the
// thread of the first attempt this request retries, or a new one it
// claimed for itself.
func (t *turn) newChain(ctx context.Context, in engine.Input) (string, error) {
	digest, err := t.req.digest()
	if err != nil {
		return "", err
	}
	name, key := "req:"+digest, ""
	if in.IdempotencyKey != "" {
		key = engine.KeyDigest(in.IdempotencyKey)
		name = "key:" + key
	}
	now := t.wr.c.Now()
	fresh := t.wr.c.NewID("conv")
	replace := ""
	for range keyClaims {
		e, won, err := t.wr.c.Store.ClaimResponseKey(ctx, store.ResponseKey{Tenant: in.Tenant, Key: name, Digest: digest,
			ThreadID: fresh, CreatedAt: now, ExpiresAt: now.Add(max(t.wr.c.RetryWindow, 0))}, replace)
		if err != nil {
			return "", err
		}
		if won {
			return fresh, nil
		}
		retry, err := t.retries(ctx, e, digest, key, now)
		if err != nil {
			return "", err
		}
		if retry {
			return e.ThreadID, nil
		}
		replace = e.ThreadID // the entry names nothing to retry: take it over
	}
	return "", fmt.Errorf("responses: the entry of request key %s kept changing hands", name)
}

// retries reports whether the request is a retry of the first attempt e
// names (key: the digest of the request's Idempotency-Key, "" for none).
// A retry that the engine cannot attach to its turn gets the response to
// replay (t.replay).
func (t *turn) retries(ctx context.Context, e *store.ResponseKey, digest, key string, now time.Time) (bool, error) {
	th, err := t.wr.c.Store.GetThread(ctx, t.tenant, e.ThreadID)
	if errors.Is(err, store.ErrNotFound) {
		// The first attempt has not begun its turn yet (the engine's
		// conditional write makes one of the two the attempt, the other
		// its retry), or never will (it failed before).
		if key != "" && e.Digest != digest {
			return false, nil // the key never named a turn: this request may have it
		}
		return true, nil
	}
	if err != nil {
		return false, err
	}
	running := th.Status == store.Running || th.Status == store.Queued
	first, err := t.wr.c.Store.NextResponse(ctx, t.tenant, e.ThreadID, 0)
	if errors.Is(err, store.ErrNotFound) {
		first, err = nil, nil // not named yet: the thread's only turn is the first attempt's
	}
	if err != nil {
		return false, err
	}
	if key == "" {
		// While it runs, or after it failed within the window (the engine
		// continues a failed turn from its stored steps, as the chat wires'
		// retries do): once it succeeded, the same body is a new question.
		failed := th.Status == store.Failed && !now.After(e.ExpiresAt)
		return (running || failed) && (first == nil || first.Seq == th.Turn.Seq), nil
	}
	if !running && now.After(e.ExpiresAt) {
		return false, nil // the window passed: the key is free again
	}
	if e.Digest != digest {
		ie := apierror.Invalid(wire.IdempotencyKeyHeader, "This Idempotency-Key was used with a different request; send a new key for a new request.")
		ie.Code = engine.CodeIdempotencyKeyReused
		return false, ie
	}
	if th.Turn.Key == key && (first == nil || !first.Cancelled) {
		return true, nil // the engine attaches to the key's turn (or runs it again when it failed)
	}
	if first == nil {
		return false, fmt.Errorf("responses: conversation %s went on before its first response was recorded", e.ThreadID)
	}
	t.replay = first
	return true, nil
}

// Replay answers a retry whose first attempt's turn is no longer its
// thread's last, or was cancelled: that attempt's response, from the
// thread's events (then live, should it still run). nil: start the turn.
func (t *turn) Replay(ctx context.Context) (*engine.Run, error) {
	if t.replay == nil {
		return nil, nil
	}
	return t.wr.c.Runner.Follow(ctx, t.tenant, t.replay.ThreadID, t.replay.Seq)
}

var _ wire.Replayer = (*turn)(nil)

// A client that keeps the conversation itself (the OpenAI Agents SDK in its
// default mode) sends the whole conversation again on every model call,
// with store left true and no previous_response_id: each call would start
// a thread of its own. As a durable chat turn takes a full-history resend
// on its thread, such a request continues the thread whose latest response
// its history ends with. Every stored response that completes records its
// last output item under a response key "item:<id>" (the last assistant
// message's id, else its last function call's); a request that names no
// conversation and whose input replays an assistant item with the id a key
// names continues that thread, when the thread's last assistant message is
// still that item and it belongs to the request's agent (else, a branch of
// the conversation, it starts a thread of its own). The engine then takes
// what follows the history's last assistant message as the turn's input.

// continueWindow is how long a response's last item keeps naming its
// thread for a client's replay of the conversation.
const continueWindow = 7 * 24 * time.Hour

// itemKey names the last assistant item of items (what a response's output
// ends with, or a request's input history): the last assistant message's
// id in the trailing run of assistant items, else the last function call's
// id; "" when there is none.
func itemKey(items []Item) string {
	end := -1
	for i := len(items) - 1; i >= 0; i-- {
		if assistantItem(items[i]) {
			end = i
			break
		}
	}
	if end < 0 {
		return ""
	}
	start := end
	for start > 0 && assistantItem(items[start-1]) {
		start--
	}
	call := ""
	for i := end; i >= start; i-- {
		it := items[i]
		if it.Type == ItemMessage || it.Type == "" || it.Type == ItemReference {
			if it.ID != "" {
				return "item:" + it.ID
			}
			continue
		}
		if call == "" {
			if it.ID != "" {
				call = it.ID
			} else if it.CallID != "" {
				call = "fc_" + it.CallID
			}
		}
	}
	if call == "" {
		return ""
	}
	return "item:" + call
}

// assistantItem reports whether an item is the model's: an assistant
// message or a function call, or a reference to a stored output message
// (what the AI SDK sends instead of the message; should it name another
// message, continued finds the thread does not end with it).
func assistantItem(it Item) bool {
	return it.Type == ItemFunctionCall || it.Type == ItemReference ||
		((it.Type == ItemMessage || it.Type == "") && it.Role == "assistant")
}

// outputItems are a response's output as items, for itemKey.
func outputItems(out []OutputItem) []Item {
	items := make([]Item, 0, len(out))
	for _, o := range out {
		role := o.Role
		if o.Type == ItemMessage {
			role = "assistant"
		}
		items = append(items, Item{Type: o.Type, ID: o.ID, Role: role, CallID: o.CallID})
	}
	return items
}

// remember records, once a stored response completed, that its last output
// item ends its thread's conversation (see continueWindow). It is best
// effort: without the record a replay starts a thread of its own.
func (t *turn) remember(r Response) {
	key := itemKey(outputItems(r.Output))
	if key == "" || t.in.ThreadID == "" {
		return
	}
	now := t.wr.c.Now()
	k := store.ResponseKey{Tenant: t.tenant, Key: key, Digest: r.ID, ThreadID: t.in.ThreadID, CreatedAt: now,
		ExpiresAt: now.Add(continueWindow)}
	e, won, err := t.wr.c.Store.ClaimResponseKey(t.ctx, k, "")
	if err == nil && !won && e.ThreadID != k.ThreadID {
		// The same call id ended another thread's response (models repeat
		// ids): the latest response's thread holds the key.
		_, _, _ = t.wr.c.Store.ClaimResponseKey(t.ctx, k, e.ThreadID)
	}
}

// continued returns the thread a request that names no conversation
// continues, by the last assistant item of its input, or "" for none.
func (t *turn) continued(ctx context.Context, in engine.Input) (string, error) {
	key := itemKey(t.items)
	if key == "" {
		return "", nil
	}
	e, err := t.wr.c.Store.GetResponseKey(ctx, in.Tenant, key)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	th, err := t.wr.c.Store.GetThread(ctx, in.Tenant, e.ThreadID)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if th.Agent != in.Agent {
		return "", nil
	}
	msgs, err := t.wr.c.Store.Messages(ctx, in.Tenant, e.ThreadID)
	if err != nil {
		return "", err
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role != message.Assistant || m.TaskCallID != "" || m.Summarizes != "" {
			continue // a subagent's or a summary
		}
		if "item:"+m.ID == key {
			return th.ID, nil
		}
		for _, c := range m.ToolCalls {
			if "item:fc_"+c.ID == key {
				return th.ID, nil
			}
		}
		return "", nil // the thread went on since: a branch starts its own
	}
	return "", nil
}

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
		return running && (first == nil || first.Seq == th.Turn.Seq), nil
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

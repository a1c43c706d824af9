package server_test

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/store/sqlite"
)

// countingReads counts the conversation and interrupt reads a turn makes.
type countingReads struct {
	store.Store
	messages, callInterrupts atomic.Int64
}

func (c *countingReads) Messages(ctx context.Context, tenant, threadID string) ([]message.Message, error) {
	c.messages.Add(1)
	return c.Store.Messages(ctx, tenant, threadID)
}

func (c *countingReads) CallInterrupts(ctx context.Context, tenant, threadID string, ids []string) ([]store.Interrupt, error) {
	c.callInterrupts.Add(1)
	return c.Store.CallInterrupts(ctx, tenant, threadID, ids)
}

// TestDurableTurnReadsTheConversationOnce: a turn on an existing thread
// reads its conversation once before BeginRun (which returns it as read
// under the lease, no second read), and a step that pauses on an approval
// does not read back the decision it just stored.
func TestDurableTurnReadsTheConversationOnce(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "reads.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	cs := &countingReads{Store: st}
	env := stacktest.New(t, stacktest.Options{Store: cs})
	turn := func(text string) {
		t.Helper()
		if r := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"`+text+`"}]}`,
			"x-stackbone-session", "reads"); r.status != http.StatusOK {
			t.Fatalf("%s: %d %s", text, r.status, r.body)
		}
	}
	turn("hi")
	cs.messages.Store(0)
	turn("hi again")
	if n := cs.messages.Load(); n != 1 {
		t.Fatalf("a turn on an existing thread read its conversation %d times, want 1", n)
	}
	cs.messages.Store(0)
	turn("refund please")
	if n := cs.callInterrupts.Load(); n != 0 {
		t.Fatalf("a step that paused read its own pending decisions back %d times", n)
	}
	if n := cs.messages.Load(); n != 1 {
		t.Fatalf("the pausing turn read its conversation %d times, want 1", n)
	}
	if it := pendingOf(t, env, "reads"); it.Tool != "refund" {
		t.Fatalf("pending: %+v", it)
	}
}

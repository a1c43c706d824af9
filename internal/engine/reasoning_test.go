package engine_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestReasoningStoredBounded: a model's plain-text reasoning is shown live
// (a Reasoning event before the text) and stored with the answer, cut at
// message.MaxReasoningText with the marker, however long the provider
// yielded it (the scripted provider does not cut it).
func TestReasoningStoredBounded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("ö thought ", message.MaxReasoningText/5)
	e := stacktest.NewEngine(t, stacktest.Options{Script: `[{"reply": {"reasoning": "` + long + `", "text": "done"}}]`})
	evs := e.Turn(t, engine.Input{Agent: "assistant", ThreadID: "rsn", Messages: user("think")})
	success(t, "the turn", evs)
	shown := ofType(evs, event.Reasoning)
	if len(shown) != 1 || text(evs) != "done" {
		t.Fatalf("%d reasoning events, text %q", len(shown), text(evs))
	}
	msgs, err := e.Store.Messages(context.Background(), "dev", "rsn")
	if err != nil {
		t.Fatal(err)
	}
	a := msgs[len(msgs)-1]
	if a.Role != message.Assistant || len(a.Reasoning) != 1 {
		t.Fatalf("the stored answer %+v", a)
	}
	r := a.Reasoning[0]
	if r.Type != message.ReasoningText || len(r.Text) > message.MaxReasoningText || !utf8.ValidString(r.Text) ||
		!strings.HasSuffix(r.Text, message.ReasoningTruncated) || !strings.HasPrefix(long, strings.TrimSuffix(r.Text, message.ReasoningTruncated)) {
		t.Fatalf("stored reasoning of %d bytes (type %q) ends %q", len(r.Text), r.Type, r.Text[max(0, len(r.Text)-30):])
	}
	if shown[0].Content != r.Text {
		t.Fatal("the live reasoning is not the stored one")
	}
}

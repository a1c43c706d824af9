package message_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stackbone/stackbone/internal/message"
)

// TruncateReasoning keeps text that fits as it is, and cuts longer text on
// a rune boundary to MaxReasoningText bytes, marker included.
func TestTruncateReasoning(t *testing.T) {
	fits := strings.Repeat("a", message.MaxReasoningText)
	if got := message.TruncateReasoning(fits); got != fits {
		t.Fatal("text that fits was changed")
	}
	for _, pad := range []string{"", "a", "aa", "aaa"} { // every offset of a 4-byte rune against the cut
		long := pad + strings.Repeat("😀", message.MaxReasoningText/4+1)
		got := message.TruncateReasoning(long)
		body, ok := strings.CutSuffix(got, message.ReasoningTruncated)
		if !ok || len(got) > message.MaxReasoningText || len(got) < message.MaxReasoningText-3 || !utf8.ValidString(got) || !strings.HasPrefix(long, body) {
			t.Fatalf("pad %d: %d bytes, valid %v, marked %v", len(pad), len(got), utf8.ValidString(got), ok)
		}
	}
}

// Shown: thinking and plain-text blocks with text are shown; redacted and
// empty ones are not.
func TestReasoningShown(t *testing.T) {
	for _, c := range []struct {
		r    message.Reasoning
		want bool
	}{
		{message.Reasoning{Type: message.ReasoningThinking, Text: "t", Signature: "s"}, true},
		{message.Reasoning{Type: message.ReasoningText, Text: "t"}, true},
		{message.Reasoning{Type: message.ReasoningRedacted, Data: "d"}, false},
		{message.Reasoning{Type: message.ReasoningThinking, Signature: "s"}, false},
	} {
		if got := c.r.Shown(); got != c.want {
			t.Errorf("%+v shown %v", c.r, got)
		}
	}
}

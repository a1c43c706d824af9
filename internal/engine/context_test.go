package engine

import (
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/message"
)

func ctxUser(id string) message.Message {
	return message.Message{ID: id, Role: message.User, Content: "question " + id + strings.Repeat(".", 40)}
}

func ctxAnswer(id string) message.Message {
	return message.Message{ID: id, Role: message.Assistant, Content: "answer " + id + strings.Repeat(".", 40)}
}

func ctxCalls(id string, calls ...string) message.Message {
	m := message.Message{ID: id, Role: message.Assistant}
	for _, c := range calls {
		m.ToolCalls = append(m.ToolCalls, message.ToolCall{ID: c, Name: "lookup", Arguments: `{"q":"` + c + `"}`})
	}
	return m
}

func ctxResult(id, call string) message.Message {
	return message.Message{ID: id, Role: message.Tool, ToolCallID: call, ToolName: "lookup", Content: `{"result":"` + strings.Repeat("r", 60) + `"}`}
}

func ctxTokens(msgs ...message.Message) int {
	n := 0
	for _, m := range msgs {
		n += estimateTokens(m)
	}
	return n
}

func ctxIDs(msgs []message.Message) string {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return strings.Join(ids, " ")
}

// checkWellFormed fails unless kept is msgs' subsequence in order, within
// budget, starting with a user message, holding the latest user message
// and the last message, with every tool result next to its call and every
// call with all its results.
func checkWellFormed(t *testing.T, msgs, kept []message.Message, budget int) {
	t.Helper()
	if got := ctxTokens(kept...); got > budget {
		t.Fatalf("budget %d: kept %d tokens: %s", budget, got, ctxIDs(kept))
	}
	j := 0
	for _, m := range kept {
		for j < len(msgs) && msgs[j].ID != m.ID {
			j++
		}
		if j == len(msgs) {
			t.Fatalf("budget %d: kept %s is not in order of %s", budget, ctxIDs(kept), ctxIDs(msgs))
		}
	}
	if len(kept) == 0 || kept[0].Role != message.User {
		t.Fatalf("budget %d: kept %s does not start with a user message", budget, ctxIDs(kept))
	}
	if kept[len(kept)-1].ID != msgs[len(msgs)-1].ID {
		t.Fatalf("budget %d: the last message was dropped: %s", budget, ctxIDs(kept))
	}
	lastUser := ""
	for _, m := range msgs {
		if m.Role == message.User {
			lastUser = m.ID
		}
	}
	calls := map[string]bool{}
	results := map[string]bool{}
	hasLastUser := false
	for _, m := range kept {
		hasLastUser = hasLastUser || m.ID == lastUser
		for _, c := range m.ToolCalls {
			calls[c.ID] = true
		}
		if m.Role == message.Tool {
			if !calls[m.ToolCallID] {
				t.Fatalf("budget %d: result %s sent without its call: %s", budget, m.ID, ctxIDs(kept))
			}
			results[m.ToolCallID] = true
		}
	}
	if !hasLastUser {
		t.Fatalf("budget %d: the latest user message %s was dropped: %s", budget, lastUser, ctxIDs(kept))
	}
	for c := range calls {
		if !results[c] {
			t.Fatalf("budget %d: call %s sent without its result: %s", budget, c, ctxIDs(kept))
		}
	}
}

// TestTrimToFit: the oldest turns go first, tool calls and their results go
// together, the latest user message and the message being answered stay, the
// order is kept and the budget holds; a budget too small for the latest
// message is reported.
func TestTrimToFit(t *testing.T) {
	history := []message.Message{
		ctxUser("u1"), ctxCalls("a1", "c1"), ctxResult("t1", "c1"), ctxAnswer("a1b"),
		ctxUser("u2"), ctxAnswer("a2"),
		ctxUser("u3"),
	}
	loop := []message.Message{
		ctxUser("u1"), ctxAnswer("a1"),
		ctxUser("u2"), ctxCalls("a2", "c2"), ctxResult("t2", "c2"),
		ctxCalls("a3", "c3a", "c3b"), ctxResult("t3a", "c3a"), ctxResult("t3b", "c3b"),
	}
	cases := []struct {
		name   string
		msgs   []message.Message
		budget int
		want   string
		ok     bool
	}{
		{"everything fits", history, ctxTokens(history...), "u1 a1 t1 a1b u2 a2 u3", true},
		{"oldest turn dropped", history, ctxTokens(history[4:]...), "u2 a2 u3", true},
		// a1+t1 is one unit: with room for t1 but not a1 both go, and the
		// lone answer a1b loses its question so it goes too.
		{"pair not split", history, ctxTokens(history[2:]...), "u2 a2 u3", true},
		{"one turn back", history, ctxTokens(history[4:]...) - 1, "u3", true},
		{"only the latest", history, ctxTokens(history[6]), "u3", true},
		{"latest too large", history, ctxTokens(history[6]) - 1, "u3", false},
		{"tool loop: user and last step", loop, ctxTokens(loop[2], loop[5], loop[6], loop[7]), "u2 a3 t3a t3b", true},
		{"tool loop: whole turn", loop, ctxTokens(loop[2:]...), "u2 a2 t2 a3 t3a t3b", true},
		{"tool loop: too large", loop, ctxTokens(loop[2], loop[5], loop[6], loop[7]) - 1, "u2 a3 t3a t3b", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := ctxIDs(c.msgs)
			kept, ok := trimToFit(c.msgs, c.budget)
			if ok != c.ok || ctxIDs(kept) != c.want {
				t.Fatalf("got %q ok=%v, want %q ok=%v", ctxIDs(kept), ok, c.want, c.ok)
			}
			if ctxIDs(c.msgs) != before {
				t.Fatalf("the input changed: %s", ctxIDs(c.msgs))
			}
		})
	}
	for _, msgs := range [][]message.Message{history, loop} {
		total := ctxTokens(msgs...)
		for budget := 0; budget <= total+1; budget++ {
			kept, ok := trimToFit(msgs, budget)
			if ok {
				checkWellFormed(t, msgs, kept, budget)
			}
		}
	}
}

// TestEstimateTokens: about four bytes a token plus a per-message overhead,
// tool calls, images and thinking blocks counted, the same answer every time.
func TestEstimateTokens(t *testing.T) {
	if got := estimateTokens(message.Message{Role: message.User, Content: strings.Repeat("a", 400)}); got != 104 {
		t.Fatalf("400 bytes: %d tokens, want 104", got)
	}
	withCall := ctxCalls("a", "c")
	if got := estimateTokens(withCall); got <= messageOverhead+toolCallOverhead {
		t.Fatalf("a tool call costs nothing: %d", got)
	}
	img := message.Message{Role: message.User, Parts: []message.Part{{Type: "image", MediaType: "image/png", Data: strings.Repeat("A", 100000)}}}
	if got := estimateTokens(img); got != messageOverhead+imageTokens {
		t.Fatalf("an image: %d tokens, want %d", got, messageOverhead+imageTokens)
	}
	// Thinking blocks go back with their message: they count.
	thought := message.Message{Role: message.Assistant, Content: strings.Repeat("a", 400),
		Reasoning: []message.Reasoning{{Type: "thinking", Text: strings.Repeat("t", 4000), Signature: "s"}, {Type: "redacted_thinking", Data: strings.Repeat("d", 400)}}}
	if got := estimateTokens(thought); got != 104+1000+100 {
		t.Fatalf("a message with thinking: %d tokens, want %d", got, 104+1000+100)
	}
}

// TestSummaryCut: what is summarised is what trim would leave out of the
// turns after the latest summary: whole units (a tool call with its
// results), ending before the first turn kept; nothing when all fits; not
// ok when the latest turn alone does not fit.
func TestSummaryCut(t *testing.T) {
	msgs := []message.Message{
		ctxUser("u1"), ctxCalls("a1", "c1"), ctxResult("t1", "c1"), ctxAnswer("a1b"),
		ctxUser("u2"), ctxAnswer("a2"),
		ctxUser("u3"),
	}
	cases := []struct {
		name   string
		from   int
		budget int
		cut    int
		ok     bool
	}{
		{"all fits", 0, ctxTokens(msgs...), 0, true},
		{"first turn with its tool pair", 0, ctxTokens(msgs[4:]...), 4, true},
		// room for t1 and a1b but not a1: the pair and the answer left
		// without its question are summarised together.
		{"pair not split", 0, ctxTokens(msgs[2:]...), 4, true},
		{"all but the latest", 0, ctxTokens(msgs[6]), 6, true},
		{"after a summary", 4, ctxTokens(msgs[6]), 6, true},
		{"after a summary, the rest fits", 4, ctxTokens(msgs[4:]...), 4, true},
		{"latest too large", 0, ctxTokens(msgs[6]) - 1, 0, false},
	}
	for _, c := range cases {
		cut, ok := summaryCut(msgs, c.from, c.budget)
		if cut != c.cut || ok != c.ok {
			t.Errorf("%s: cut %d ok=%v, want %d ok=%v", c.name, cut, ok, c.cut, c.ok)
		}
	}
}

// TestLatestSummary: the newest summary of the conversation counts, and the
// recent turns start after the message it covers; another conversation's
// summary (a subagent's), or one covering a message no longer there, does
// not count.
func TestLatestSummary(t *testing.T) {
	msgs := []message.Message{ctxUser("u1"), ctxAnswer("a1"), ctxUser("u2"), ctxAnswer("a2"), ctxUser("u3")}
	s1 := message.Message{ID: "s1", Role: message.System, Content: "one", Summarizes: "a1"}
	s2 := message.Message{ID: "s2", Role: message.System, Content: "two", Summarizes: "a2"}
	sub := message.Message{ID: "s3", Role: message.System, Content: "sub", Summarizes: "x", TaskCallID: "task1"}
	all := []message.Message{msgs[0], msgs[1], msgs[2], s1, msgs[3], msgs[4], s2, sub}
	if sum, from := latestSummary(all, msgs, ""); sum == nil || sum.ID != "s2" || from != 4 {
		t.Fatalf("latest: %+v from %d, want s2 from 4", sum, from)
	}
	if sum, from := latestSummary(all[:6], msgs, ""); sum == nil || sum.ID != "s1" || from != 2 {
		t.Fatalf("before s2: %+v from %d, want s1 from 2", sum, from)
	}
	if sum, from := latestSummary(msgs, msgs, ""); sum != nil || from != 0 {
		t.Fatalf("no summary: %+v from %d", sum, from)
	}
	gone := message.Message{ID: "s4", Role: message.System, Summarizes: "missing"}
	if sum, from := latestSummary(append(all[:7:7], gone), msgs, ""); sum != nil || from != 0 {
		t.Fatalf("a summary of a missing message: %+v from %d", sum, from)
	}
}

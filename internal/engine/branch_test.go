package engine

import (
	"encoding/json"
	"testing"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
)

func seqd(msgs ...message.Message) []message.Message {
	for i := range msgs {
		msgs[i].Seq = int64(i + 1)
	}
	return msgs
}

func u(id, text string) message.Message {
	return message.Message{ID: id, Role: message.User, Content: text}
}
func a(id, text string) message.Message {
	return message.Message{ID: id, Role: message.Assistant, Content: text}
}

// TestDiverge: where a request sending its whole conversation leaves the
// stored one, by content (no ids) and by id.
func TestDiverge(t *testing.T) {
	// u1 a1 (a server tool's call and result) a1' u2 a2: seqs 1..7.
	stored := seqd(u("u1", "hi"), a("a1", "hello"),
		message.Message{ID: "c1", Role: message.Assistant, ToolCalls: []message.ToolCall{{ID: "k", Name: "get_weather"}}},
		message.Message{ID: "r1", Role: message.Tool, ToolCallID: "k", Content: "sunny"},
		a("a1b", "it is sunny"), u("u2", "more"), a("a2", "x"))
	noID := func(ms ...message.Message) []message.Message {
		for i := range ms {
			ms[i].ID = ""
		}
		return ms
	}
	sys := message.Message{Role: message.System, Content: "be brief"}
	for _, c := range []struct {
		name  string
		sent  []message.Message
		from  int64
		regen bool
		sentN int // -1: the request as sent
	}{
		{"the conversation and a new message", noID(sys, u("", "hi"), a("", "hello it is sunny"), u("", "more"), a("", "x"), u("", "next")), 0, false, 1},
		{"a new message only", noID(u("", "next")), 0, false, -1},
		{"the last answer left out", noID(sys, u("", "hi"), a("", "hello it is sunny"), u("", "more")), 6, true, 0},
		{"the last user message edited", noID(u("", "hi"), a("", "hello it is sunny"), u("", "more, edited")), 5, false, 1},
		{"the first user message edited, with history", noID(u("", "hi!"), a("", "hello"), u("", "more")), store.FromStart, false, 3},
		{"the first question again, later turns left out", noID(u("", "hi"), a("", "?"), u("", "other")), 5, false, 1},
		{"the whole conversation, nothing new", noID(u("", "hi"), a("", "hello"), u("", "more"), a("", "x")), 0, false, -1},
		{"by id: the whole conversation and more", []message.Message{u("u1", "hi"), a("a1", ""), stored[2], stored[3], a("a1b", ""), u("u2", "more"), a("a2", ""), u("u3", "new")}, 0, false, -1},
		{"by id: only the new message", []message.Message{u("u3", "new")}, 0, false, -1},
		{"by id: the last answer left out", []message.Message{u("u1", "hi"), a("a1", ""), stored[2], stored[3], a("a1b", ""), u("u2", "more")}, 6, true, -1},
		{"by id: an earlier message edited", []message.Message{u("u1", "hi"), a("a1", ""), stored[2], stored[3], a("a1b", ""), u("u2", "changed")}, 5, false, -1},
		{"by id: a new message after an earlier point", []message.Message{u("u1", "hi"), a("a1", ""), stored[2], stored[3], a("a1b", ""), u("u9", "instead")}, 5, false, -1},
		{"by id: the first message edited", []message.Message{u("u1", "hello?")}, store.FromStart, false, -1},
		{"by id: a message skipped in the middle", []message.Message{u("u1", "hi"), a("a1b", ""), u("u2", "more"), a("a2", ""), u("u3", "new")}, 0, false, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := diverge(stored, c.sent)
			if d.from != c.from || d.regen != c.regen {
				t.Fatalf("diverge = from %d regen %v; want from %d regen %v", d.from, d.regen, c.from, c.regen)
			}
			want := len(c.sent)
			if c.sentN >= 0 {
				want = c.sentN
			}
			if len(d.sent) != want {
				t.Fatalf("diverge kept %d of the request's messages as its input, want %d: %+v", len(d.sent), want, d.sent)
			}
		})
	}
}

// BenchmarkDiverge: the check a full-history request pays on each turn, on
// a 200-message conversation sent whole with one new message.
func BenchmarkDiverge(b *testing.B) {
	var stored, sent []message.Message
	for i := range 100 {
		q, ans := u("", "question "+string(rune('a'+i%26))), a("", "answer")
		stored = append(stored, q, ans)
		sent = append(sent, q, ans)
	}
	stored = seqd(stored...)
	sent = append(sent, u("", "next"))
	b.ReportAllocs()
	for b.Loop() {
		if d := diverge(stored, sent); d.from != 0 {
			b.Fatal("diverged")
		}
	}
}

// TestBringsNothingEdit: a request holding only stored ids brings nothing
// new, unless it changed a user message's text (an edit keeps its id).
func TestBringsNothingEdit(t *testing.T) {
	stored := seqd(u("u1", "hi"), a("a1", "hello"), u("u2", "more"), a("a2", "x"))
	for _, c := range []struct {
		name string
		sent []message.Message
		want bool
	}{
		{"the same messages", []message.Message{u("u1", "hi"), a("a1", ""), u("u2", "more"), a("a2", "")}, true},
		{"the last answer left out", []message.Message{u("u1", "hi"), a("a1", ""), u("u2", "more")}, true},
		{"a user message edited", []message.Message{u("u1", "hi"), a("a1", ""), u("u2", "changed")}, false},
		{"a new message", []message.Message{u("u1", "hi"), a("a1", ""), u("u3", "new")}, false},
	} {
		if got := bringsNothing(stored, c.sent); got != c.want {
			t.Errorf("%s: bringsNothing = %v; want %v", c.name, got, c.want)
		}
	}
}

// TestChangedKeys: the client's state keys that differ from the state it
// was last shown, as JSON values (not bytes).
func TestChangedKeys(t *testing.T) {
	keys := map[string]json.RawMessage{"same": json.RawMessage(`{"b": 2, "a": 1}`), "changed": json.RawMessage(`"v2"`), "added": json.RawMessage(`true`)}
	got := changedKeys(json.RawMessage(`{"same":{"a":1,"b":2},"changed":"v1","other":0}`), keys)
	if len(got) != 2 || string(got["changed"]) != `"v2"` || string(got["added"]) != `true` {
		t.Fatalf("changedKeys = %s; want changed and added", got)
	}
	if got := changedKeys(nil, keys); len(got) != 3 {
		t.Fatalf("changedKeys on no state = %s; want all", got)
	}
}

// TestDivergeUnanswered: a client sending its whole history after a turn
// that got no answer (stopped, or still running) holds that turn's question
// again; only what follows it is new.
func TestDivergeUnanswered(t *testing.T) {
	stored := seqd(u("u1", "hi"), a("a1", "hello"), u("u2", "more"))
	d := diverge(stored, []message.Message{u("", "hi"), a("", "hello"), u("", "more"), u("", "and this")})
	if d.from != 0 || len(d.sent) != 1 || d.sent[0].Content != "and this" {
		t.Fatalf("diverge = from %d, input %+v; want the head, with only the new question", d.from, d.sent)
	}
	// The same from a client that never got an answer to show.
	d = diverge(seqd(u("u1", "hi")), []message.Message{u("", "hi"), u("", "and this")})
	if d.from != 0 || len(d.sent) != 1 || d.sent[0].Content != "and this" {
		t.Fatalf("diverge after an unanswered first question = from %d, input %+v; want only the new question", d.from, d.sent)
	}
	// A turn still at its tool steps (a follow-up sent while it runs), or
	// one whose answer a cancel cut short: the question is not new either.
	call := message.Message{ID: "c1", Role: message.Assistant, Content: "Checking.", ToolCalls: []message.ToolCall{{ID: "k", Name: "get_weather"}}}
	res := message.Message{ID: "r1", Role: message.Tool, ToolCallID: "k", Content: "{}"}
	cut := a("a1", "It is")
	cut.Cancelled = true
	for name, st := range map[string][]message.Message{
		"tool steps": seqd(u("u1", "hi"), call, res),
		"cancelled":  seqd(u("u1", "hi"), call, res, cut),
	} {
		d = diverge(st, []message.Message{u("", "hi"), u("", "and this")})
		if d.from != 0 || len(d.sent) != 1 || d.sent[0].Content != "and this" {
			t.Fatalf("%s: diverge = from %d, input %+v; want only the new question", name, d.from, d.sent)
		}
	}
	// An answered question sent again without its answer is new.
	d = diverge(seqd(u("u1", "hi"), call, res, a("a1", "It is sunny.")), []message.Message{u("", "hi"), u("", "and this")})
	if d.from != 0 || len(d.sent) != 2 {
		t.Fatalf("after an answer: diverge = from %d, input %+v; want both messages as new", d.from, d.sent)
	}
}

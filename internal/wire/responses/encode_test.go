package responses

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
)

type frame struct {
	Type  string `json:"type"`
	Seq   int64  `json:"sequence_number"`
	Delta string `json:"delta"`
}

// encodeAll runs events through a streaming fold that resumes after after.
func encodeAll(t *testing.T, evs []event.Event, after int64) []frame {
	t.Helper()
	var out []frame
	f := newFold(Response{ID: "resp_1", Model: "a"}, func(typ string, data []byte) error {
		var fr frame
		if err := json.Unmarshal(data, &fr); err != nil || fr.Type != typ {
			t.Fatalf("frame %s: %s", typ, data)
		}
		out = append(out, fr)
		return nil
	}, after)
	for _, e := range evs {
		if err := f.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// live is a turn as its run streams it: text in small deltas, a server
// tool's call and result, a second message, a pending client call.
func live() []event.Event {
	return []event.Event{
		{Type: event.RunStarted, Seq: 1},
		{Type: event.TextStart, MessageID: "m1"},
		{Type: event.TextDelta, MessageID: "m1", Delta: "Héllo"},
		{Type: event.TextDelta, MessageID: "m1", Delta: ", wor"},
		{Type: event.TextDelta, MessageID: "m1", Delta: "ld."},
		{Type: event.TextEnd, MessageID: "m1", Content: "Héllo, world.", Seq: 2},
		{Type: event.ToolCallStart, MessageID: "m1", ToolCallID: "c1", ToolName: "lookup"},
		{Type: event.ToolCallEnd, MessageID: "m1", ToolCallID: "c1", Arguments: "{}", Seq: 3},
		{Type: event.ToolResult, ToolCallID: "c1", Content: "ok", Seq: 4},
		{Type: event.TextStart, MessageID: "m2"},
		{Type: event.TextDelta, MessageID: "m2", Delta: "Done"},
		{Type: event.TextEnd, MessageID: "m2", Content: "Done", Seq: 5},
		{Type: event.RunFinished, Seq: 6, Outcome: &event.Outcome{PendingCalls: []message.ToolCall{{ID: "c2", Name: "open_modal", Arguments: `{"x":1}`}}},
			Usage: &event.Usage{InputTokens: 3, OutputTokens: 4}},
	}
}

// stored is the same turn read back from the store, in live form.
func stored() []event.Event {
	var out []event.Event
	for _, e := range live() {
		if e.Seq == 0 {
			continue // live-only
		}
		out = append(out, event.LiveForm(e)...)
	}
	return out
}

func text(frames []frame) string {
	var b strings.Builder
	for _, f := range frames {
		if f.Type == "response.output_text.delta" {
			b.WriteString(f.Delta)
		}
	}
	return b.String()
}

// TestSequenceNumbersMatchStoredReplay: the stream read again from the
// store numbers every event as the live one did, so a client that resumes
// after any number it saw gets exactly the rest.
func TestSequenceNumbersMatchStoredReplay(t *testing.T) {
	lv, st := encodeAll(t, live(), -1), encodeAll(t, stored(), -1)
	if text(lv) != "Héllo, world.Done" || text(st) != text(lv) {
		t.Fatalf("texts %q / %q", text(lv), text(st))
	}
	last := int64(-1)
	for _, f := range lv {
		if f.Seq <= last {
			t.Fatalf("not increasing: %d after %d", f.Seq, last)
		}
		last = f.Seq
	}
	nonDelta := func(fs []frame) map[int64]string {
		m := map[int64]string{}
		for _, f := range fs {
			if f.Type != "response.output_text.delta" {
				m[f.Seq] = f.Type
			}
		}
		return m
	}
	a, b := nonDelta(lv), nonDelta(st)
	if len(a) != len(b) {
		t.Fatalf("live %v\nstored %v", a, b)
	}
	for k, v := range a {
		if b[k] != v {
			t.Fatalf("seq %d: live %s, stored %s", k, v, b[k])
		}
	}
	// Resume after every number the live client saw.
	for i, f := range lv {
		seen := text(lv[:i+1])
		rest := encodeAll(t, stored(), f.Seq)
		if seen+text(rest) != text(lv) {
			t.Fatalf("resumed after %d (%s): %q + %q", f.Seq, f.Type, seen, text(rest))
		}
		for _, r := range rest {
			if r.Seq <= f.Seq {
				t.Fatalf("resumed after %d sent %d", f.Seq, r.Seq)
			}
		}
		if len(rest) == 0 && i != len(lv)-1 || len(rest) > 0 && rest[len(rest)-1].Type != "response.completed" {
			t.Fatalf("resumed after %d: %v", f.Seq, rest)
		}
	}
}

// TestFoldBuildsResponse: the response object a fold builds (what a GET
// returns): messages, the pending call, usage, and a resumed run's output
// added to the paused one's.
func TestFoldBuildsResponse(t *testing.T) {
	f := newFold(Response{ID: "resp_1"}, nil, -1)
	for _, e := range stored() {
		_ = f.Write(e)
	}
	r := f.snapshot()
	if r.Status != StatusCompleted || len(r.Output) != 3 || r.Output[0].Content[0].Text != "Héllo, world." ||
		r.Output[2].Type != "function_call" || r.Output[2].CallID != "c2" || *r.Output[2].Arguments != `{"x":1}` || r.Usage.TotalTokens != 7 {
		b, _ := json.Marshal(r)
		t.Fatalf("response %s", b)
	}
	// The run resumes after a decision and answers.
	for _, e := range []event.Event{{Type: event.RunStarted}, {Type: event.TextEnd, MessageID: "m3", Content: "Resumed."},
		{Type: event.RunFinished, Usage: &event.Usage{InputTokens: 1, OutputTokens: 1}}} {
		for _, le := range event.LiveForm(e) {
			_ = f.Write(le)
		}
	}
	r = f.snapshot()
	if r.Status != StatusCompleted || len(r.Output) != 4 || r.Output[3].Content[0].Text != "Resumed." || r.Usage.TotalTokens != 9 {
		b, _ := json.Marshal(r)
		t.Fatalf("resumed response %s", b)
	}
	// A turn cut off by its token limit is incomplete.
	g := newFold(Response{}, nil, -1)
	_ = g.Write(event.Event{Type: event.RunStarted})
	_ = g.Write(event.Event{Type: event.RunFinished, Outcome: &event.Outcome{Stop: event.StopLength}})
	if s := g.snapshot(); s.Status != StatusIncomplete || s.IncompleteDetails == nil || s.IncompleteDetails.Reason != "max_output_tokens" {
		t.Fatalf("cut off: %+v", s)
	}
}

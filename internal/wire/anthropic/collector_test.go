package anthropic

import (
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/event"
)

// largeAnswer is a run that streams an answer of size bytes in deltas of
// piece bytes, as a model does token by token.
func largeAnswer(size, piece int) []event.Event {
	evs := []event.Event{{Type: event.RunStarted}, {Type: event.TextStart, MessageID: "m1"}}
	d := strings.Repeat("x", piece)
	for n := 0; n < size; n += piece {
		evs = append(evs, text("m1", d))
	}
	return append(evs, event.Event{Type: event.TextEnd, MessageID: "m1"},
		finished(&event.Outcome{Type: event.Success, Stop: event.StopEnd}))
}

func collect(t testing.TB, evs []event.Event) *Response {
	c := NewCollector("msg_1", "assistant")
	for _, e := range evs {
		c.Add(e)
	}
	res, err := c.Result()
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A large answer is collected in linear time: the allocations do not grow
// with the number of deltas (before, every delta copied the whole text so
// far: a 400 KB answer took 16 s).
func TestCollectorLargeAnswerIsLinear(t *testing.T) {
	const size, piece = 400 << 10, 4
	evs := largeAnswer(size, piece)
	var res *Response
	allocs := testing.AllocsPerRun(1, func() { res = collect(t, evs) })
	if got := len(*res.Content[0].Text); len(res.Content) != 1 || got != size {
		t.Fatalf("collected %d blocks, first of %d bytes; want 1 of %d", len(res.Content), got, size)
	}
	// A builder grows by doubling: a few dozen allocations, not one per
	// delta (102400 here).
	if allocs > 200 {
		t.Fatalf("collecting %d deltas made %.0f allocations; want a handful (linear growth)", len(evs), allocs)
	}
}

// The blocks of a multi-message turn keep their own text.
func TestCollectorTextBlocksPerMessage(t *testing.T) {
	res := collect(t, []event.Event{
		{Type: event.RunStarted},
		text("m1", "Check"), text("m1", "ing."), {Type: event.TextEnd, MessageID: "m1"},
		text("m2", "Tool "), text("m2", "said"), {Type: event.TextEnd, MessageID: "m2"},
		finished(&event.Outcome{Type: event.Success, Stop: event.StopEnd}),
	})
	var got []string
	for _, b := range res.Content {
		got = append(got, *b.Text)
	}
	if strings.Join(got, "|") != "Checking.|Tool said" {
		t.Fatalf("blocks = %q", got)
	}
}

// BenchmarkCollectorLargeAnswer collects a 400 KB answer sent in 4-byte
// deltas (go test -bench CollectorLargeAnswer ./internal/wire/anthropic/).
func BenchmarkCollectorLargeAnswer(b *testing.B) {
	evs := largeAnswer(400<<10, 4)
	b.ReportAllocs()
	for b.Loop() {
		collect(b, evs)
	}
}

package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/store/sqlite"
)

// gatedEvents is a store whose next Events call, once armed, reads the
// store and then holds its (by then stale) answer until the gate opens: the
// thread event stream it serves stops consuming the live feed for as long as
// the test wants, like a client that reads too slowly.
type gatedEvents struct {
	store.Store
	armed  atomic.Bool
	parked chan struct{}
	gate   chan struct{}
}

func (g *gatedEvents) Events(ctx context.Context, tenant, threadID string, after int64, limit int) ([]event.Event, error) {
	evs, err := g.Store.Events(ctx, tenant, threadID, after, limit)
	if g.armed.CompareAndSwap(true, false) {
		close(g.parked)
		<-g.gate
	}
	return evs, err
}

// TestThreadEventsSlowConsumerMissesNoStoredEvent: a stream that falls so far
// behind that the bus drops events for it (a turn of ~700 token deltas while
// it is held) still delivers every stored event, ids 1..n without a hole,
// the turn's run_finished included.
func TestThreadEventsSlowConsumerMissesNoStoredEvent(t *testing.T) {
	words := strings.TrimSpace(strings.Repeat("word ", 2100)) // 700 deltas of 3 words
	script := `[{"when": {"lastUser": "long"}, "reply": {"text": "` + words + `"}}, {"reply": {"text": "echo: {{lastUser}}"}}]`
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "gate.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	gs := &gatedEvents{Store: st, parked: make(chan struct{}), gate: make(chan struct{})}
	env := stacktest.New(t, stacktest.Options{Script: script, Store: gs})
	if r := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"hi"}]}`,
		"x-stackbone-session", "slow"); r.status != http.StatusOK {
		t.Fatalf("first turn: %d %s", r.status, r.body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gs.armed.Store(true)
	req, _ := http.NewRequestWithContext(ctx, "GET", env.URL+"/v1/threads/slow/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-gs.parked // subscribed, replay read, now held
	if r := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"long answer please"}]}`,
		"x-stackbone-session", "slow"); r.status != http.StatusOK {
		t.Fatalf("long turn: %d %s", r.status, r.body)
	}
	// The turn is over: every event is stored and was published while the
	// stream was held, far more than its bus buffer holds.
	close(gs.gate)

	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var ids []int
	finished := 0
	for finished < 2 && sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e event.Event
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		if e.Seq > 0 {
			ids = append(ids, int(e.Seq))
		}
		if e.Type == event.RunFinished {
			finished++
		}
	}
	if finished != 2 {
		t.Fatalf("saw %d run_finished events of 2 turns (stored ids seen: %v)", finished, ids)
	}
	stored, err := env.Store.Events(context.Background(), "dev", "slow", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(stored) {
		t.Fatalf("the stream carried stored ids %v, the store holds %d events", ids, len(stored))
	}
	for i, id := range ids {
		if id != i+1 {
			t.Fatalf("stored event ids %v: want 1..%d without a hole or a repeat", ids, len(stored))
		}
	}
}

// TestThreadEventsFieldsSayWhatTheyAre: on the thread event stream a
// tool_call_end carries the call's arguments as "arguments" and a
// decision_made its outcome as "status"; neither borrows another event's
// field (delta, message).
func TestThreadEventsFieldsSayWhatTheyAre(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"refund please"}]}`,
		"x-stackbone-session", "fields")
	it := pendingOf(t, env, "fields")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", env.URL+"/v1/threads/fields/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	next := func(want event.Type) map[string]any {
		t.Helper()
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			if m["type"] == string(want) {
				return m
			}
		}
		t.Fatalf("the stream ended before a %s event: %v", want, sc.Err())
		return nil
	}
	end := next(event.ToolCallEnd)
	if end["arguments"] != `{"orderId":"ord_42","amount":19.99}` || end["delta"] != nil {
		t.Fatalf("tool_call_end: %v", end)
	}
	next(event.RunFinished) // the pause
	if r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", `{}`); r.status != http.StatusOK {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	d := next(event.DecisionMade)
	if d["status"] != "approved" || d["message"] != nil || d["toolCallId"] != it.ToolCallID {
		t.Fatalf("decision_made: %v", d)
	}
}

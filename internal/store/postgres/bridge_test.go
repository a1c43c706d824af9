package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stackbone/stackbone/internal/bus"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/store/storetest"
)

// replica is one process's store, bus and bridge.
type replica struct {
	store  *Store
	bus    *bus.Bus
	bridge *Bridge
}

func newReplica(t testing.TB, schema string) *replica {
	t.Helper()
	r := &replica{store: openSchema(t, schema), bus: bus.New()}
	br, err := StartBridge(t.Context(), r.store, r.bus, testLogger(t))
	if err != nil {
		t.Fatalf("StartBridge: %v", err)
	}
	r.bridge = br
	t.Cleanup(func() { br.Close() }) // before the store closes
	return r
}

// next returns the next event of sub, failing after a few seconds.
func next(t testing.TB, sub *bus.Subscription, what string) event.Event {
	t.Helper()
	select {
	case e := <-sub.C:
		return *e
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no event arrived", what)
		return event.Event{}
	}
}

// none checks sub got nothing before a marker event: publish sends the
// marker the way an unwanted event would have travelled, after it, so an
// unwanted event would arrive first. No waiting for a quiet period.
func none(t testing.TB, sub *bus.Subscription, what string, publish func(event.Event)) {
	t.Helper()
	marker := event.Event{Type: event.TextDelta, Delta: "marker: " + what}
	publish(marker)
	if e := next(t, sub, what); e.Type != marker.Type || e.Delta != marker.Delta {
		t.Fatalf("%s: unexpected event %+v", what, e)
	}
}

func sameEvent(t testing.TB, what string, got, want event.Event) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("%s:\n got  %.300s\n want %.300s", what, g, w)
	}
}

func TestBridgeCarriesEventsBetweenReplicas(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	a, b := newReplica(t, schema), newReplica(t, schema)
	subA := a.bus.Subscribe("acme", "t1")
	defer subA.Close()
	subB := b.bus.Subscribe("acme", "t1")
	defer subB.Close()
	tenantB := b.bus.SubscribeTenant("acme")
	defer tenantB.Close()
	otherB := b.bus.Subscribe("acme", "t2")
	defer otherB.Close()

	// A small live event.
	delta := event.Event{Type: event.TextDelta, ThreadID: "t1", RunID: "r1", MessageID: "m1", Delta: "héllo \"world\" <b>", Time: 1}
	a.bus.Publish("acme", "t1", delta)
	sameEvent(t, "A's own subscriber", next(t, subA, "A's subscriber"), delta)
	sameEvent(t, "B's subscriber", next(t, subB, "B's subscriber"), delta)
	sameEvent(t, "B's tenant subscriber", next(t, tenantB, "B's tenant subscriber"), delta)

	// A stored event too large for a notification is read back by its Seq.
	big := strings.Repeat("résultat ", 2000)
	stored := []event.Event{{Type: event.ToolResult, ToolCallID: "c1", Content: big}}
	if _, err := a.store.BeginRun(ctx, store.BeginRun{Tenant: "acme", ThreadID: "t1", Agent: "x", RunID: "r1",
		Now: storetest.T0, LeaseUntil: storetest.T0.Add(time.Minute), Events: stored}); err != nil {
		t.Fatal(err)
	}
	a.bus.Publish("acme", "t1", stored[0])
	sameEvent(t, "A's own subscriber", next(t, subA, "A's subscriber"), stored[0])
	got := next(t, subB, "B's subscriber (large stored event)")
	if got.Seq != 1 {
		t.Fatalf("large stored event arrived with seq %d", got.Seq)
	}
	sameEvent(t, "large stored event", got, stored[0])

	// A live-only event too large for a notification travels in parts.
	snap := event.Event{Type: event.MessagesSnapshot, ThreadID: "t1", RunID: "r1"}
	for i := range 40 {
		snap.Messages = append(snap.Messages, storetestMessage(i, big[:1000]))
	}
	a.bus.Publish("acme", "t1", snap)
	sameEvent(t, "large live event", next(t, subB, "B's subscriber (large live event)"), snap)

	// Many events keep their order; identical ones are not folded together.
	for i := range 100 {
		a.bus.Publish("acme", "t1", event.Event{Type: event.TextDelta, Delta: fmt.Sprint(i % 2)})
	}
	for i := range 100 {
		if e := next(t, subB, "ordered deltas"); e.Delta != fmt.Sprint(i%2) {
			t.Fatalf("delta %d arrived as %q", i, e.Delta)
		}
	}

	for range 1 + 100 { // A's own subscriber got the snapshot and the deltas
		next(t, subA, "A's subscriber")
	}

	// The other way round, and nothing echoes back to its sender.
	back := event.Event{Type: event.RunFinished, ThreadID: "t1", RunID: "r2", Outcome: &event.Outcome{Type: event.Success}}
	b.bus.Publish("acme", "t1", back)
	sameEvent(t, "A's subscriber", next(t, subA, "A's subscriber (from B)"), back)
	for range 1 + 1 + 100 { // what A published after the first delta
		next(t, tenantB, "B's tenant subscriber")
	}
	sameEvent(t, "B's own tenant subscriber", next(t, tenantB, "B's tenant subscriber"), back)
	sameEvent(t, "B's own subscriber", next(t, subB, "B's subscriber (its own event)"), back)
	none(t, subA, "A's subscriber after B's event", func(e event.Event) { b.bus.Publish("acme", "t1", e) })
	none(t, otherB, "a subscriber of another thread", func(e event.Event) { a.bus.Publish("acme", "t2", e) })
}

func TestBridgeIsPerSchema(t *testing.T) {
	t.Parallel()
	schemaA, schemaO := newSchema(t), newSchema(t)
	a, sameA := newReplica(t, schemaA), newReplica(t, schemaA)
	other, sameO := newReplica(t, schemaO), newReplica(t, schemaO)
	sub := other.bus.Subscribe("acme", "t1")
	defer sub.Close()
	seen := sameA.bus.Subscribe("acme", "t1")
	defer seen.Close()
	a.bus.Publish("acme", "t1", event.Event{Type: event.TextDelta, Delta: "x"})
	// Once a replica on A's schema has it, A's notification is committed:
	// a marker sent on the other schema after it comes later in PostgreSQL's
	// one notification queue.
	next(t, seen, "a replica on the same schema")
	none(t, sub, "a replica on another schema", func(e event.Event) { sameO.bus.Publish("acme", "t1", e) })
}

// TestBridgeListensAgainAfterLosingItsConnection kills the listening
// connection: the bridge reconnects and events flow again.
func TestBridgeListensAgainAfterLosingItsConnection(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	a, b := newReplica(t, schema), newReplica(t, schema)
	sub := b.bus.Subscribe("acme", "t1")
	defer sub.Close()
	a.bus.Publish("acme", "t1", event.Event{Type: event.TextDelta, Delta: "before"})
	if e := next(t, sub, "before"); e.Delta != "before" {
		t.Fatalf("got %+v", e)
	}

	conn, err := pgx.Connect(ctx, testURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var killed int
	if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE query = $1`, `LISTEN `+pgx.Identifier{channelName(schema)}.Sanitize()).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed != 2 {
		t.Fatalf("terminated %d listening connections, want 2", killed)
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		a.bus.Publish("acme", "t1", event.Event{Type: event.TextDelta, Delta: fmt.Sprint("after ", i)})
		select {
		case e := <-sub.C:
			if !strings.HasPrefix(e.Delta, "after") {
				t.Fatalf("got %+v", e)
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no event arrived after the listening connection was killed")
		}
	}
}

func TestBridgeCloseStopsForwarding(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	a, b, c := newReplica(t, schema), newReplica(t, schema), newReplica(t, schema)
	sub := b.bus.Subscribe("acme", "t1")
	defer sub.Close()
	local := a.bus.Subscribe("acme", "t1")
	defer local.Close()
	if err := a.bridge.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.bridge.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	a.bus.Publish("acme", "t1", event.Event{Type: event.TextDelta, Delta: "x"})
	if e := next(t, local, "A's local subscriber"); e.Delta != "x" {
		t.Fatalf("local event: %+v", e)
	}
	none(t, sub, "B after A's bridge closed", func(e event.Event) { c.bus.Publish("acme", "t1", e) })
}

func TestChannelNameFitsAnIdentifier(t *testing.T) {
	if got := channelName("public"); got != "stackbone_events.public" {
		t.Fatalf("channel of public: %q", got)
	}
	long := strings.Repeat("s", 80)
	if a, b := channelName(long), channelName(long+"x"); len(a) > 63 || a == b {
		t.Fatalf("channels of long schemas: %q %q", a, b)
	}
}

func storetestMessage(i int, text string) message.Message {
	return message.Message{ID: fmt.Sprint("m", i), Role: message.User, Content: text}
}

// TestBridgeEncoding checks how events travel: whole when they fit, by Seq
// when stored, in parts otherwise, every payload within PostgreSQL's limit.
func TestBridgeEncoding(t *testing.T) {
	br := &Bridge{origin: "bridge_x", logger: testLogger(t), partials: map[string]*partial{}}
	big := strings.Repeat("é\"<", 5000)
	decode := func(p string) note {
		t.Helper()
		if len(p) > MaxNotifyPayload {
			t.Fatalf("payload of %d bytes", len(p))
		}
		var n note
		if err := json.Unmarshal([]byte(p), &n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	ps := br.encode(nil, outgoing{"acme", "t1", event.Event{Type: event.TextDelta, Delta: "hi"}})
	if len(ps) != 1 || decode(ps[0]).E == nil {
		t.Fatalf("small event: %q", ps)
	}
	ps = br.encode(nil, outgoing{"acme", "t1", event.Event{Type: event.ToolResult, Seq: 7, Content: big}})
	if n := decode(ps[0]); len(ps) != 1 || n.S != 7 || n.E != nil {
		t.Fatalf("large stored event: %q", ps)
	}
	live := event.Event{Type: event.ToolResult, Content: big}
	ps = br.encode(nil, outgoing{"acme", "t1", live})
	if len(ps) < 3 {
		t.Fatalf("large live event in %d parts", len(ps))
	}
	// Parts reassemble in any order.
	var whole []byte
	for i := len(ps) - 1; i >= 0; i-- {
		n := decode(ps[i])
		if n.P == nil || n.P.K != len(ps) {
			t.Fatalf("part %d: %+v", i, n.P)
		}
		n.O = "bridge_other"
		if got := br.assemble(n); got != nil {
			whole = got
		}
	}
	var e event.Event
	if err := json.Unmarshal(whole, &e); err != nil {
		t.Fatalf("reassembled event: %v", err)
	}
	sameEvent(t, "reassembled event", e, live)
	if len(br.partials) != 0 {
		t.Fatalf("%d partial events left", len(br.partials))
	}
}

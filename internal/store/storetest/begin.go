package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
)

// testBeginRunNewHint: BeginRun with the New hint creates a thread as
// without it, and on a thread that exists after all it behaves as without
// it: admitted and appended, or refused with nothing written.
func testBeginRunNewHint(t *testing.T, s store.Store) {
	ctx := t.Context()
	b, err := s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: "t", Agent: "x", RunID: "r1", Owner: "o", Now: T0,
		LeaseUntil: at(time.Minute), Input: []message.Message{userMsg("m1", "hi")}, Events: []event.Event{{Type: event.RunStarted}}, New: true,
		Turn: store.Turn{Key: "k1", Digest: "d1"}})
	if err != nil {
		t.Fatal(err)
	}
	if b.Status != store.Running || b.RunID != "r1" || b.Turn.Seq != 1 || b.Turn.Key != "k1" || msgIDs(b.Messages)[0] != "m1" {
		t.Fatalf("new thread: %+v", b)
	}
	// Another BeginRun hinted New while r1 holds the thread: refused, and
	// nothing of it is written.
	_, err = s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: "t", Agent: "x", RunID: "r2", Owner: "o", Now: at(time.Second),
		LeaseUntil: at(time.Minute), Input: []message.Message{userMsg("m2", "again")}, Events: []event.Event{{Type: event.RunStarted}}, New: true})
	wantErr(t, "BeginRun hinted New on a running thread", err, store.ErrRunInProgress)
	sameStrings(t, "messages after the refusal", msgIDs(messages(t, s, "a", "t")), []string{"m1"})
	if es := events(t, s, "a", "t", 0, 0); len(es) != 1 {
		t.Fatalf("events after the refusal: %+v", es)
	}
	finish(t, s, "a", "t", "r1", store.Idle, at(2*time.Second))
	// Hinted New on the idle thread: it is an existing thread's turn.
	b, err = s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: "t", Agent: "x", RunID: "r3", Owner: "o", Now: at(3 * time.Second),
		LeaseUntil: at(time.Minute), Input: []message.Message{userMsg("m3", "more")}, Events: []event.Event{{Type: event.RunStarted}}, New: true})
	if err != nil {
		t.Fatal(err)
	}
	sameStrings(t, "conversation of the hinted turn on an existing thread", msgIDs(b.Messages), []string{"m1", "m3"})
	if es := events(t, s, "a", "t", 0, 0); len(es) != 2 || es[1].Seq != 2 || es[1].RunID != "r3" {
		t.Fatalf("events: %+v", es)
	}
	// Racing creators all hinted New: one wins, the rest are refused.
	threads := make([]*store.Begun, racers)
	errs := race(racers, func(i int) error {
		var err error
		threads[i], err = s.BeginRun(t.Context(), store.BeginRun{Tenant: "a", ThreadID: "race", Agent: "x",
			RunID: fmt.Sprintf("q%d", i), Owner: "o", Now: T0, LeaseUntil: at(time.Minute), New: true,
			Input: []message.Message{userMsg(fmt.Sprintf("n%d", i), "hi")}, Events: []event.Event{{Type: event.RunStarted}}})
		return err
	})
	w := oneWinner(t, "concurrent hinted BeginRun", errs, store.ErrRunInProgress)
	sameStrings(t, "messages of the race", msgIDs(messages(t, s, "a", "race")), []string{fmt.Sprintf("n%d", w)})
	if es := events(t, s, "a", "race", 0, 0); len(es) != 1 || es[0].RunID != fmt.Sprintf("q%d", w) {
		t.Fatalf("events of the race: %+v", es)
	}
}

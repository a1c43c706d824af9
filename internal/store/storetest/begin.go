package storetest

import (
	"errors"
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

// testBeginRunExpectContinue: BeginRun.Expect admits the run only while
// the thread's run is the one the caller read (refused with Changed and
// nothing written otherwise, even racing), and BeginRun.Continue keeps the
// thread's last turn (its Seq, key and digest) instead of recording b.Turn.
func testBeginRunExpectContinue(t *testing.T, s store.Store) {
	ctx := t.Context()
	begin := func(runID, expect string, cont bool, now time.Time, input ...message.Message) (*store.Begun, error) {
		return s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: "e", Agent: "x", RunID: runID, Owner: "o", Now: now,
			LeaseUntil: now.Add(time.Minute), Input: input, Events: []event.Event{{Type: event.RunStarted}},
			Turn: store.Turn{Key: "k-" + runID, Digest: "d-" + runID}, Expect: expect, Continue: cont})
	}
	if _, err := begin("r1", "", false, T0, userMsg("m1", "hi")); err != nil {
		t.Fatal(err)
	}
	finish(t, s, "a", "e", "r1", store.Failed, at(time.Second))
	// The thread's run is r1, not r0: refused, nothing written.
	_, err := begin("r2", "r0", false, at(2*time.Second), userMsg("m2", "new"))
	wantErr(t, "BeginRun expecting another run", err, store.ErrRunInProgress)
	var rip *store.RunInProgressError
	if !errors.As(err, &rip) || !rip.Changed {
		t.Fatalf("the refusal of an unexpected run says the thread changed: %#v", err)
	}
	sameStrings(t, "messages after the refusal", msgIDs(messages(t, s, "a", "e")), []string{"m1"})
	// Continuing r1's turn: no input, the turn kept.
	b, err := begin("r3", "r1", true, at(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if b.Turn.Seq != 1 || b.Turn.Key != "k-r1" || b.Turn.Digest != "d-r1" || b.RunID != "r3" {
		t.Fatalf("a continued turn: %+v", b.Turn)
	}
	finish(t, s, "a", "e", "r3", store.Failed, at(4*time.Second))
	// Racing continuations of r3: one wins.
	errs := race(racers, func(i int) error {
		_, err := begin(fmt.Sprintf("c%d", i), "r3", true, at(5*time.Second))
		return err
	})
	oneWinner(t, "concurrent continuations", errs, store.ErrRunInProgress)
	th, err := s.GetThread(ctx, "a", "e")
	if err != nil || th.Turn.Key != "k-r1" || th.Turn.Seq != 1 {
		t.Fatalf("after the race: %+v, %v", th, err)
	}
}

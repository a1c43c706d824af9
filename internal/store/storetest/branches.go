package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
)

func assistantMsg(id, text string) message.Message {
	return message.Message{ID: id, Role: message.Assistant, Content: text}
}

// turn runs one turn on the thread: input, an answer, the end.
func turn(t *testing.T, s store.Store, thread, run string, now time.Time, from int64, known int, input, answer message.Message) *store.Begun {
	t.Helper()
	b, err := s.BeginRun(t.Context(), store.BeginRun{Tenant: "t1", ThreadID: thread, Agent: "ag", RunID: run, Owner: "o",
		Now: now, LeaseUntil: now.Add(time.Minute), Input: []message.Message{input}, From: from, Known: known})
	if err != nil {
		t.Fatalf("BeginRun %s (from %d): %v", run, from, err)
	}
	checkpoint(t, s, store.Checkpoint{Tenant: "t1", ThreadID: thread, RunID: run, Messages: []message.Message{answer}})
	finish(t, s, "t1", thread, run, store.Idle, now.Add(time.Second))
	return b
}

func conversation(t *testing.T, s store.Store, thread string) []string {
	t.Helper()
	ms, err := s.Messages(t.Context(), "t1", thread)
	if err != nil {
		t.Fatal(err)
	}
	return msgIDs(ms)
}

// testBranchFromEarlier: a turn from an earlier message starts a branch
// there, in its own transaction; the conversation is then that message's
// path and the new turn, the earlier line is kept, and later turns go on
// the new head, read incrementally as on a line.
func testBranchFromEarlier(t *testing.T, s store.Store) {
	ctx := t.Context()
	turn(t, s, "th", "r1", at(0), 0, 0, userMsg("u1", "hi"), assistantMsg("a1", "hello"))         // seqs 1, 2
	turn(t, s, "th", "r2", at(time.Minute), 0, 2, userMsg("u2", "more"), assistantMsg("a2", "x")) // 3, 4
	// Regenerate the answer to u2: go on from u2 (seq 3) with nothing new?
	// No: edit u2 — go on from a1 (seq 2) with an edited u2.
	b := turn(t, s, "th", "r3", at(2*time.Minute), 2, 4, userMsg("u2b", "more, edited"), assistantMsg("a2b", "y")) // 5, 6
	if !b.Branched || !slices.Equal(msgIDs(b.Messages), []string{"u1", "a1", "u2b"}) || b.HeadBranch != 1 {
		t.Fatalf("Begun = branched %v head %d %v; want a new branch holding u1 a1 u2b", b.Branched, b.HeadBranch, msgIDs(b.Messages))
	}
	if got := conversation(t, s, "th"); !slices.Equal(got, []string{"u1", "a1", "u2b", "a2b"}) {
		t.Fatalf("conversation after the branch = %v", got)
	}
	// The next turn goes on the head and reads only what is new to it.
	b = turn(t, s, "th", "r4", at(3*time.Minute), 0, 4, userMsg("u3", "and?"), assistantMsg("a3", "z")) // 7, 8
	if b.Branched || !slices.Equal(msgIDs(b.Messages), []string{"u3"}) {
		t.Fatalf("a turn on the head: branched %v, new messages %v; want u3 only", b.Branched, msgIDs(b.Messages))
	}
	if got := conversation(t, s, "th"); !slices.Equal(got, []string{"u1", "a1", "u2b", "a2b", "u3", "a3"}) {
		t.Fatalf("conversation = %v", got)
	}
	// A branch of a branch, from the first line's a2 (seq 4): its path is
	// the first line up to a2.
	turn(t, s, "th", "r5", at(4*time.Minute), 4, 6, userMsg("u4", "back"), assistantMsg("a4", "w"))
	if got := conversation(t, s, "th"); !slices.Equal(got, []string{"u1", "a1", "u2", "a2", "u4", "a4"}) {
		t.Fatalf("conversation from the first line's a2 = %v", got)
	}
	// And from within branch 1 (its a2b, seq 6): branch 1's path up to it.
	turn(t, s, "th", "r6", at(5*time.Minute), 6, 6, userMsg("u5", "again"), assistantMsg("a5", "v"))
	if got := conversation(t, s, "th"); !slices.Equal(got, []string{"u1", "a1", "u2b", "a2b", "u5", "a5"}) {
		t.Fatalf("conversation from branch 1's a2b = %v", got)
	}
	bs, err := s.Branches(ctx, "t1", "th")
	if err != nil {
		t.Fatal(err)
	}
	type br struct{ id, parent, fork int64 }
	var got []br
	for _, b := range bs {
		got = append(got, br{b.ID, b.Parent, b.ForkSeq})
	}
	if want := []br{{0, 0, 0}, {1, 0, 2}, {2, 0, 4}, {3, 1, 6}}; !slices.Equal(got, want) {
		t.Fatalf("branches = %v; want %v", got, want)
	}
	th, err := s.GetThread(ctx, "t1", "th")
	if err != nil || th.HeadBranch != 3 {
		t.Fatalf("thread head %+v, %v; want branch 3", th, err)
	}
}

// testBranchFromTip: going on from the conversation's last message is
// simply the next turn: no branch (Begun.Messages, with From, is the whole
// conversation).
func testBranchFromTip(t *testing.T, s store.Store) {
	turn(t, s, "th", "r1", at(0), 0, 0, userMsg("u1", "hi"), assistantMsg("a1", "hello"))
	b := turn(t, s, "th", "r2", at(time.Minute), 2, 2, userMsg("u2", "more"), assistantMsg("a2", "x"))
	if b.Branched || b.HeadBranch != 0 || !slices.Equal(msgIDs(b.Messages), []string{"u1", "a1", "u2"}) {
		t.Fatalf("from the last message: branched %v head %d %v; want the line going on", b.Branched, b.HeadBranch, msgIDs(b.Messages))
	}
	if bs, err := s.Branches(t.Context(), "t1", "th"); err != nil || len(bs) != 1 {
		t.Fatalf("branches = %v, %v; want the first line only", bs, err)
	}
}

// testBranchUnknown: going on from a message the thread does not have, or
// on a thread that does not exist, is refused and writes nothing.
func testBranchUnknown(t *testing.T, s store.Store) {
	ctx := t.Context()
	turn(t, s, "th", "r1", at(0), 0, 0, userMsg("u1", "hi"), assistantMsg("a1", "hello"))
	_, err := s.BeginRun(ctx, store.BeginRun{Tenant: "t1", ThreadID: "th", Agent: "ag", RunID: "r2", Owner: "o", Now: at(time.Minute),
		LeaseUntil: at(2 * time.Minute), Input: []message.Message{userMsg("u2", "x")}, From: 9})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("from an unknown message: %v; want ErrInvalid", err)
	}
	if got := conversation(t, s, "th"); !slices.Equal(got, []string{"u1", "a1"}) {
		t.Fatalf("conversation after a refused branch = %v", got)
	}
	if th := getThread(t, s, "t1", "th"); th.Status != store.Idle || th.BranchSeq != 0 {
		t.Fatalf("thread after a refused branch: %s, %d branches", th.Status, th.BranchSeq)
	}
	_, err = s.BeginRun(ctx, store.BeginRun{Tenant: "t1", ThreadID: "none", Agent: "ag", RunID: "r3", Owner: "o", Now: at(time.Minute),
		LeaseUntil: at(2 * time.Minute), Input: []message.Message{userMsg("u", "x")}, From: 1, New: true})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("from a message of a thread that does not exist: %v; want ErrNotFound", err)
	}
}

// testBranchConcurrent: a branching turn and a plain turn racing on one
// thread: one begins, the other is refused as a run in progress, and the
// conversation is one of the two, whole.
func testBranchConcurrent(t *testing.T, s store.Store) {
	turn(t, s, "th", "r1", at(0), 0, 0, userMsg("u1", "hi"), assistantMsg("a1", "hello"))
	turn(t, s, "th", "r2", at(time.Minute), 0, 2, userMsg("u2", "more"), assistantMsg("a2", "x"))
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, from := range []int64{2, 0} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.BeginRun(t.Context(), store.BeginRun{Tenant: "t1", ThreadID: "th", Agent: "ag", RunID: []string{"rb", "rp"}[i],
				Owner: "o", Now: at(2 * time.Minute), LeaseUntil: at(3 * time.Minute), Known: 4,
				Input: []message.Message{userMsg([]string{"ub", "up"}[i], "x")}, From: from})
		}()
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if won >= 0 {
				t.Fatalf("both turns began")
			}
			won = i
		case !errors.Is(err, store.ErrRunInProgress):
			t.Fatalf("turn %d: %v; want ErrRunInProgress for the loser", i, err)
		}
	}
	want := [][]string{{"u1", "a1", "ub"}, {"u1", "a1", "u2", "a2", "up"}}[won]
	if got := conversation(t, s, "th"); !slices.Equal(got, want) {
		t.Fatalf("conversation = %v; want %v", got, want)
	}
}

// stateTurn is turn with the answer's checkpoint replacing the state.
func stateTurn(t *testing.T, s store.Store, thread, run string, now time.Time, from int64, input, answer message.Message, state string) *store.Begun {
	t.Helper()
	b, err := s.BeginRun(t.Context(), store.BeginRun{Tenant: "t1", ThreadID: thread, Agent: "ag", RunID: run, Owner: "o",
		Now: now, LeaseUntil: now.Add(time.Minute), Input: []message.Message{input}, From: from})
	if err != nil {
		t.Fatalf("BeginRun %s (from %d): %v", run, from, err)
	}
	c := store.Checkpoint{Tenant: "t1", ThreadID: thread, RunID: run, Messages: []message.Message{answer}}
	if state != "" {
		c.State = json.RawMessage(state)
	}
	checkpoint(t, s, c)
	finish(t, s, "t1", thread, run, store.Idle, now.Add(time.Second))
	return b
}

// testBranchState: a branch starts from the shared state as it was at its
// branch point (the latest write at or before it on its path), not the
// state the thread reached since; a branch point before any write starts
// from {}.
func testBranchState(t *testing.T, s store.Store) {
	stateTurn(t, s, "th", "r1", at(0), 0, userMsg("u1", "a"), assistantMsg("a1", "ok"), `{"n":1}`)           // seqs 1, 2: n=1 at 2
	stateTurn(t, s, "th", "r2", at(time.Minute), 0, userMsg("u2", "b"), assistantMsg("a2", "ok"), `{"n":2}`) // 3, 4: n=2 at 4
	b := stateTurn(t, s, "th", "r3", at(2*time.Minute), 2, userMsg("u3", "c"), assistantMsg("a3", "ok"), "") // branch 1 from 2
	if string(b.State) != `{"n":1}` {
		t.Fatalf("a branch from message 2 starts from state %s; want {\"n\":1}", b.State)
	}
	stateTurn(t, s, "th", "r4", at(3*time.Minute), 0, userMsg("u4", "d"), assistantMsg("a4", "ok"), `{"n":3}`) // 7, 8 on branch 1: n=3 at 8
	if b := stateTurn(t, s, "th", "r5", at(4*time.Minute), 4, userMsg("u5", "e"), assistantMsg("a5", "ok"), ""); string(b.State) != `{"n":2}` {
		t.Fatalf("a branch from the first line's message 4 starts from %s; want {\"n\":2}", b.State)
	}
	if b := stateTurn(t, s, "th", "r6", at(5*time.Minute), 6, userMsg("u6", "f"), assistantMsg("a6", "ok"), ""); string(b.State) != `{"n":1}` {
		t.Fatalf("a branch from branch 1's message 6 (before its write) starts from %s; want {\"n\":1}", b.State)
	}
	if b := stateTurn(t, s, "th", "r7", at(6*time.Minute), 8, userMsg("u7", "g"), assistantMsg("a7", "ok"), ""); string(b.State) != `{"n":3}` {
		t.Fatalf("a branch from branch 1's message 8 starts from %s; want {\"n\":3}", b.State)
	}
	if b := stateTurn(t, s, "th", "r8", at(7*time.Minute), 1, userMsg("u8", "h"), assistantMsg("a8", "ok"), ""); string(b.State) != `{}` {
		t.Fatalf("a branch from before any write starts from %s; want {}", b.State)
	}
	if th := getThread(t, s, "t1", "th"); string(th.State) != `{}` {
		t.Fatalf("the thread's state is %s; want its head's, {}", th.State)
	}
}

// endedTurn runs one turn as the engine does (its run recorded at its
// end), from message from; it returns the turn's sequence number.
func endedTurn(t *testing.T, s store.Store, thread, run string, now time.Time, from int64, input, answer message.Message) int64 {
	t.Helper()
	b, err := s.BeginRun(t.Context(), store.BeginRun{Tenant: "t1", ThreadID: thread, Agent: "ag", RunID: run, Owner: "o",
		Now: now, LeaseUntil: now.Add(time.Minute), Input: []message.Message{input}, From: from,
		Events: []event.Event{{Type: event.RunStarted, RunID: run}}})
	if err != nil {
		t.Fatalf("BeginRun %s (from %d): %v", run, from, err)
	}
	checkpoint(t, s, store.Checkpoint{Tenant: "t1", ThreadID: thread, RunID: run, Messages: []message.Message{answer}})
	end := now.Add(time.Second)
	if err := s.FinishRun(t.Context(), store.FinishRun{Tenant: "t1", ThreadID: thread, RunID: run, Status: store.Idle, Now: end,
		Run: &store.RunRecord{Status: "completed", StartedAt: now, EndedAt: &end}}); err != nil {
		t.Fatalf("FinishRun %s: %v", run, err)
	}
	return b.Turn.Seq
}

// testTurnEnds: each turn's end is where its own conversation stopped,
// on its branch, whatever came after it on the thread; the conversation
// up to any message is that message's path.
func testTurnEnds(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := endedTurn(t, s, "te", "r1", at(0), 0, userMsg("u1", "a"), assistantMsg("a1", "A"))           // 1, 2
	b := endedTurn(t, s, "te", "r2", at(time.Minute), 0, userMsg("u2", "b"), assistantMsg("a2", "B")) // 3, 4
	// c goes on from a's end: a branch, whose turn ends at its own answer.
	aEnd, err := s.TurnEnd(ctx, "t1", "te", a)
	if err != nil || aEnd != 2 {
		t.Fatalf("TurnEnd(a) = %d, %v; want 2", aEnd, err)
	}
	c := endedTurn(t, s, "te", "r3", at(2*time.Minute), aEnd, userMsg("u3", "c"), assistantMsg("a3", "C")) // 5, 6
	for _, w := range []struct {
		name      string
		turn, end int64
	}{{"a", a, 2}, {"b", b, 4}, {"c", c, 6}} {
		got, err := s.TurnEnd(ctx, "t1", "te", w.turn)
		if err != nil || got != w.end {
			t.Errorf("TurnEnd(%s) = %d, %v; want %d", w.name, got, err, w.end)
		}
	}
	if _, err := s.TurnEnd(ctx, "t1", "te", c+1000); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("TurnEnd of no turn: %v, want ErrNotFound", err)
	}
	if _, err := s.TurnEnd(ctx, "t2", "te", a); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("TurnEnd of another tenant's thread: %v, want ErrNotFound", err)
	}
	for seq, want := range map[int64][]string{
		2: {"u1", "a1"}, 4: {"u1", "a1", "u2", "a2"}, 6: {"u1", "a1", "u3", "a3"}, 5: {"u1", "a1", "u3"},
	} {
		ms, err := s.MessagesTo(ctx, "t1", "te", seq)
		if err != nil || !slices.Equal(msgIDs(ms), want) {
			t.Errorf("MessagesTo(%d) = %v, %v; want %v", seq, msgIDs(ms), err, want)
		}
		if err == nil && ms[len(ms)-1].Seq != seq {
			t.Errorf("MessagesTo(%d) ends at seq %d", seq, ms[len(ms)-1].Seq)
		}
	}
	if _, err := s.MessagesTo(ctx, "t1", "te", 99); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("MessagesTo an unknown message: %v, want ErrNotFound", err)
	}
	if _, err := s.MessagesTo(ctx, "t2", "te", 2); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("MessagesTo on another tenant's thread: %v, want ErrNotFound", err)
	}
}

// testRunTurns: a recorded run names the first event of its turn; an
// unknown run, another thread's or another tenant's is not found.
func testRunTurns(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := endedTurn(t, s, "rt", "r1", at(0), 0, userMsg("u1", "a"), assistantMsg("a1", "A"))
	b := endedTurn(t, s, "rt", "r2", at(time.Minute), 0, userMsg("u2", "b"), assistantMsg("a2", "B"))
	for run, want := range map[string]int64{"r1": a, "r2": b} {
		if got, err := s.RunTurn(ctx, "t1", "rt", run); err != nil || got != want {
			t.Errorf("RunTurn(%s) = %d, %v; want %d", run, got, err, want)
		}
	}
	if a == b {
		t.Fatalf("two turns began at the same event %d", a)
	}
	for _, c := range []struct{ tenant, thread, run string }{{"t1", "rt", "r9"}, {"t1", "other", "r1"}, {"t2", "rt", "r1"}} {
		if _, err := s.RunTurn(ctx, c.tenant, c.thread, c.run); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("RunTurn(%s, %s, %s): %v, want ErrNotFound", c.tenant, c.thread, c.run, err)
		}
	}
}

// testBranchFromStart: a turn from before the first message (its first
// message edited) is a branch holding none of the earlier messages, with
// the state as it was before any.
func testBranchFromStart(t *testing.T, s store.Store) {
	stateTurn(t, s, "fs", "r1", at(0), 0, userMsg("u1", "hi"), assistantMsg("a1", "hello"), `{"n":1}`)
	b := turn(t, s, "fs", "r2", at(time.Minute), store.FromStart, 2, userMsg("u1b", "hi, edited"), assistantMsg("a1b", "hey"))
	if !b.Branched || b.HeadBranch != 1 || !slices.Equal(msgIDs(b.Messages), []string{"u1b"}) || string(b.State) != "{}" {
		t.Fatalf("Begun = branched %v head %d %v state %s; want a new branch holding u1b only, state {}", b.Branched, b.HeadBranch, msgIDs(b.Messages), b.State)
	}
	if got := conversation(t, s, "fs"); !slices.Equal(got, []string{"u1b", "a1b"}) {
		t.Fatalf("conversation after a branch from the start = %v", got)
	}
	// The first line is kept: the path to its answer.
	ms, err := s.MessagesTo(t.Context(), "t1", "fs", 2)
	if err != nil || !slices.Equal(msgIDs(ms), []string{"u1", "a1"}) {
		t.Fatalf("MessagesTo(2) = %v, %v", msgIDs(ms), err)
	}
}

// testBeginRunStaleHead: a turn that read the thread before its head was
// switched is refused as changed (it read the other branch's
// conversation), and writes nothing; read again, it begins on the new head.
func testBeginRunStaleHead(t *testing.T, s store.Store) {
	ctx := t.Context()
	turn(t, s, "sh", "r1", at(0), 0, 0, userMsg("u1", "hi"), assistantMsg("a1", "hello"))         // 1, 2
	turn(t, s, "sh", "r2", at(time.Minute), 0, 2, userMsg("u2", "more"), assistantMsg("a2", "x")) // 3, 4
	read, err := s.GetThread(ctx, "t1", "sh")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetHead(ctx, store.SetHead{Tenant: "t1", ThreadID: "sh", At: 2, Now: at(2 * time.Minute)}); err != nil {
		t.Fatalf("SetHead: %v", err)
	}
	begin := func(run string, th *store.Thread) (*store.Begun, error) {
		return s.BeginRun(ctx, store.BeginRun{Tenant: "t1", ThreadID: "sh", Agent: "ag", RunID: run, Owner: "o",
			Now: at(3 * time.Minute), LeaseUntil: at(4 * time.Minute), Input: []message.Message{userMsg("u3-"+run, "next")},
			Known: 4, Expect: th.RunID, Head: th.HeadBranch})
	}
	_, err = begin("r3", read)
	var rip *store.RunInProgressError
	if !errors.As(err, &rip) || !rip.Changed {
		t.Fatalf("BeginRun after a head switch it did not see: %v; want RunInProgressError (changed)", err)
	}
	if got := conversation(t, s, "sh"); !slices.Equal(got, []string{"u1", "a1"}) {
		t.Fatalf("the refused turn wrote: conversation %v", got)
	}
	again, err := s.GetThread(ctx, "t1", "sh")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := begin("r4", again); err != nil {
		t.Fatalf("BeginRun read again: %v", err)
	}
	if got := conversation(t, s, "sh"); !slices.Equal(got, []string{"u1", "a1", "u3-r4"}) {
		t.Fatalf("conversation on the new head = %v", got)
	}
}

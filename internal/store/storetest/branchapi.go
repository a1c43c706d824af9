package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
)

// branchAPITests are the cases of the branch API (listing, paths, state at
// a message, head switches, forks), registered in Run.
var branchAPITests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"Branches/ListWithTips", testBranchesTips},
	{"Branches/PathOfABranch", testBranchPath},
	{"Branches/FindMessage", testFindMessage},
	{"Branches/StateAtMessages", testStateAtMessages},
	{"Branches/SetHead", testSetHead},
	{"Branches/Rewind", testRewind},
	{"Branches/SetHeadRefused", testSetHeadRefused},
	{"Branches/Fork", testFork},
	{"Branches/OtherTenant", testBranchAPITenants},
}

// forked builds thread th: u1 a1 u2 a2 (seqs 1-4, state n=1 at 2, n=2 at
// 4) on the first line, then branch 1 from a1: u2b a2b (5, 6; n=5 at 6),
// the head.
func forked(t *testing.T, s store.Store) {
	t.Helper()
	stateTurn(t, s, "th", "r1", at(0), 0, userMsg("u1", "a"), assistantMsg("a1", "ok"), `{"n":1}`)
	stateTurn(t, s, "th", "r2", at(time.Minute), 0, userMsg("u2", "b"), assistantMsg("a2", "ok"), `{"n":2}`)
	stateTurn(t, s, "th", "r3", at(2*time.Minute), 2, userMsg("u2b", "b'"), assistantMsg("a2b", "ok"), `{"n":5}`)
}

// branchRow is a Branch without its time.
type branchRow struct {
	ID, Parent, ForkSeq int64
	ForkID              string
	Messages            int
	Tip                 int64
	TipID               string
}

func branchRows(t *testing.T, s store.Store, tenant, thread string) []branchRow {
	t.Helper()
	bs, err := s.Branches(t.Context(), tenant, thread)
	if err != nil {
		t.Fatalf("Branches %s/%s: %v", tenant, thread, err)
	}
	out := make([]branchRow, len(bs))
	for i, b := range bs {
		out[i] = branchRow{b.ID, b.Parent, b.ForkSeq, b.ForkMessageID, b.Messages, b.TipSeq, b.TipMessageID}
	}
	return out
}

func wantBranches(t *testing.T, s store.Store, thread string, want ...branchRow) {
	t.Helper()
	if got := branchRows(t, s, "t1", thread); !slices.Equal(got, want) {
		t.Fatalf("branches of %s =\n%+v\nwant\n%+v", thread, got, want)
	}
}

func wantPath(t *testing.T, what string, ms []message.Message, err error, ids ...string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got := msgIDs(ms); !slices.Equal(got, ids) {
		t.Fatalf("%s = %v; want %v", what, got, ids)
	}
}

func wantMissing(t *testing.T, what string, err error, kind string) {
	t.Helper()
	var me *store.MissingError
	if !errors.As(err, &me) || me.What != kind || !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("%s: %v; want a *MissingError of a %s (ErrNotFound)", what, err, kind)
	}
}

// testBranchesTips: each branch with its fork's message, its own messages'
// count and the last message of its path.
func testBranchesTips(t *testing.T, s store.Store) {
	forked(t, s)
	wantBranches(t, s, "th", branchRow{0, 0, 0, "", 4, 4, "a2"}, branchRow{1, 0, 2, "a1", 2, 6, "a2b"})
	// An empty branch (a rewind) has its fork as its tip.
	if _, err := s.SetHead(t.Context(), store.SetHead{Tenant: "t1", ThreadID: "th", At: 3, Now: at(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	wantBranches(t, s, "th", branchRow{0, 0, 0, "", 4, 4, "a2"}, branchRow{1, 0, 2, "a1", 2, 6, "a2b"},
		branchRow{2, 0, 3, "u2", 0, 3, "u2"})
	// A thread that never branched is its first line.
	turn(t, s, "line", "r1", at(0), 0, 0, userMsg("x1", "a"), assistantMsg("y1", "b"))
	wantBranches(t, s, "line", branchRow{0, 0, 0, "", 2, 2, "y1"})
}

// testBranchPath: any branch's path, the head or not, numbered by seq; an
// unknown branch is a MissingError.
func testBranchPath(t *testing.T, s store.Store) {
	ctx := t.Context()
	forked(t, s)
	ms, err := s.BranchPath(ctx, "t1", "th", 0)
	wantPath(t, "path of branch 0 (not the head)", ms, err, "u1", "a1", "u2", "a2")
	var seqs []int64
	for _, m := range ms {
		seqs = append(seqs, m.Seq)
	}
	if !slices.Equal(seqs, []int64{1, 2, 3, 4}) {
		t.Fatalf("seqs of branch 0's path = %v", seqs)
	}
	ms, err = s.BranchPath(ctx, "t1", "th", 1)
	wantPath(t, "path of branch 1 (the head)", ms, err, "u1", "a1", "u2b", "a2b")
	if ms[2].Seq != 5 {
		t.Fatalf("u2b's seq = %d; want 5", ms[2].Seq)
	}
	for _, b := range []int64{2, -1} {
		_, err = s.BranchPath(ctx, "t1", "th", b)
		wantMissing(t, "path of an unknown branch", err, "branch")
	}
	_, err = s.BranchPath(ctx, "t1", "none", 0)
	wantErr(t, "path of an unknown thread", err, store.ErrNotFound)
}

// testFindMessage: a message by id, on any branch.
func testFindMessage(t *testing.T, s store.Store) {
	forked(t, s)
	for id, want := range map[string]store.MessageRef{"a2": {ID: "a2", Seq: 4}, "a2b": {ID: "a2b", Seq: 6, Branch: 1}} {
		ref, err := s.FindMessage(t.Context(), "t1", "th", id)
		if err != nil || *ref != want {
			t.Fatalf("FindMessage %s = %+v, %v; want %+v", id, ref, err, want)
		}
	}
	_, err := s.FindMessage(t.Context(), "t1", "th", "nope")
	wantMissing(t, "an unknown message", err, "message")
}

func wantStateAt(t *testing.T, s store.Store, thread string, seq int64, want string) {
	t.Helper()
	st, err := s.StateAt(t.Context(), "t1", thread, seq)
	if err != nil {
		t.Fatalf("StateAt %s %d: %v", thread, seq, err)
	}
	sameJSON(t, "state at message", json.RawMessage(st), json.RawMessage(want))
}

// testStateAtMessages: the state right after a message, on two branches.
func testStateAtMessages(t *testing.T, s store.Store) {
	forked(t, s)
	for seq, want := range map[int64]string{1: `{}`, 2: `{"n":1}`, 3: `{"n":1}`, 4: `{"n":2}`, 5: `{"n":1}`, 6: `{"n":5}`} {
		wantStateAt(t, s, "th", seq, want)
	}
	_, err := s.StateAt(t.Context(), "t1", "th", 9)
	wantMissing(t, "state at an unknown message", err, "message")
}

// testSetHead: the head goes back to branch 0 with its state; the next
// turn reads and appends on it; a write of state only on that line is the
// state at its tip.
func testSetHead(t *testing.T, s store.Store) {
	ctx := t.Context()
	forked(t, s)
	th, err := s.SetHead(ctx, store.SetHead{Tenant: "t1", ThreadID: "th", Branch: 0, Now: at(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if th.HeadBranch != 0 || th.BranchSeq != 1 {
		t.Fatalf("after the switch: head %d, %d branches", th.HeadBranch, th.BranchSeq)
	}
	sameJSON(t, "state after the switch", th.State, json.RawMessage(`{"n":2}`))
	wantPath(t, "conversation after the switch", messages(t, s, "t1", "th"), nil, "u1", "a1", "u2", "a2")
	b, err := s.BeginRun(ctx, store.BeginRun{Tenant: "t1", ThreadID: "th", Agent: "ag", RunID: "r4", Owner: "o",
		Now: at(2 * time.Hour), LeaseUntil: at(2*time.Hour + time.Minute), Input: []message.Message{userMsg("u3", "c")}})
	if err != nil {
		t.Fatal(err)
	}
	wantPath(t, "Begun.Messages on the new head", b.Messages, nil, "u1", "a1", "u2", "a2", "u3")
	if b.HeadBranch != 0 || b.Branched {
		t.Fatalf("Begun: head %d, branched %v", b.HeadBranch, b.Branched)
	}
	checkpoint(t, s, store.Checkpoint{Tenant: "t1", ThreadID: "th", RunID: "r4", Messages: []message.Message{assistantMsg("a3", "d")}})
	// A write that replaces the state and appends nothing.
	checkpoint(t, s, store.Checkpoint{Tenant: "t1", ThreadID: "th", RunID: "r4", State: json.RawMessage(`{"n":7}`)})
	finish(t, s, "t1", "th", "r4", store.Idle, at(2*time.Hour+time.Second))
	wantPath(t, "conversation after the turn", messages(t, s, "t1", "th"), nil, "u1", "a1", "u2", "a2", "u3", "a3")
	ms, err := s.BranchPath(ctx, "t1", "th", 1)
	wantPath(t, "branch 1 after the turn on branch 0", ms, err, "u1", "a1", "u2b", "a2b")
	if ref, err := s.FindMessage(ctx, "t1", "th", "a3"); err != nil || ref.Seq != 8 || ref.Branch != 0 {
		t.Fatalf("a3 = %+v, %v; want seq 8 on branch 0", ref, err)
	}
	wantStateAt(t, s, "th", 8, `{"n":7}`)
	// Back to branch 1 and to 0 again: each takes the state at its tip.
	th, err = s.SetHead(ctx, store.SetHead{Tenant: "t1", ThreadID: "th", Branch: 1, Now: at(3 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "state of branch 1", th.State, json.RawMessage(`{"n":5}`))
	th, err = s.SetHead(ctx, store.SetHead{Tenant: "t1", ThreadID: "th", Branch: 0, Now: at(4 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "state of branch 0 again", th.State, json.RawMessage(`{"n":7}`))
	_, err = s.SetHead(ctx, store.SetHead{Tenant: "t1", ThreadID: "th", Branch: 5, Now: at(5 * time.Hour)})
	wantMissing(t, "switch to an unknown branch", err, "branch")
	if th := getThread(t, s, "t1", "th"); th.HeadBranch != 0 {
		t.Fatalf("a refused switch moved the head to %d", th.HeadBranch)
	}
}

// testRewind: a rewind to a message that is no branch's tip makes an
// empty branch there (no message copied); the next turn goes on from the
// rewind point; a rewind to a tip switches to its branch.
func testRewind(t *testing.T, s store.Store) {
	ctx := t.Context()
	stateTurn(t, s, "th", "r1", at(0), 0, userMsg("u1", "a"), assistantMsg("a1", "ok"), `{"n":1}`)
	stateTurn(t, s, "th", "r2", at(time.Minute), 0, userMsg("u2", "b"), assistantMsg("a2", "ok"), `{"n":2}`)
	th, err := s.SetHead(ctx, store.SetHead{Tenant: "t1", ThreadID: "th", At: 2, Now: at(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if th.HeadBranch != 1 || th.BranchSeq != 1 {
		t.Fatalf("after the rewind: head %d, %d branches; want a new branch 1", th.HeadBranch, th.BranchSeq)
	}
	sameJSON(t, "state after the rewind", th.State, json.RawMessage(`{"n":1}`))
	wantPath(t, "conversation after the rewind", messages(t, s, "t1", "th"), nil, "u1", "a1")
	wantBranches(t, s, "th", branchRow{0, 0, 0, "", 4, 4, "a2"}, branchRow{1, 0, 2, "a1", 0, 2, "a1"})
	// Again at the same message: the empty branch there, no other.
	if th, err = s.SetHead(ctx, store.SetHead{Tenant: "t1", ThreadID: "th", At: 2, Now: at(2 * time.Hour)}); err != nil || th.BranchSeq != 1 {
		t.Fatalf("a second rewind to a1: %+v, %v; want the same branch", th, err)
	}
	b, err := s.BeginRun(ctx, store.BeginRun{Tenant: "t1", ThreadID: "th", Agent: "ag", RunID: "r3", Owner: "o",
		Now: at(3 * time.Hour), LeaseUntil: at(3*time.Hour + time.Minute), Input: []message.Message{userMsg("u3", "c")}})
	if err != nil {
		t.Fatal(err)
	}
	wantPath(t, "Begun.Messages after the rewind", b.Messages, nil, "u1", "a1", "u3")
	sameJSON(t, "Begun.State after the rewind", b.State, json.RawMessage(`{"n":1}`))
	checkpoint(t, s, store.Checkpoint{Tenant: "t1", ThreadID: "th", RunID: "r3", Messages: []message.Message{assistantMsg("a3", "d")}})
	finish(t, s, "t1", "th", "r3", store.Idle, at(3*time.Hour+time.Second))
	wantPath(t, "conversation after the turn", messages(t, s, "t1", "th"), nil, "u1", "a1", "u3", "a3")
	ms, err := s.BranchPath(ctx, "t1", "th", 0)
	wantPath(t, "the first line after the turn", ms, err, "u1", "a1", "u2", "a2")
	// A rewind to a2, branch 0's tip, switches to branch 0.
	if th, err = s.SetHead(ctx, store.SetHead{Tenant: "t1", ThreadID: "th", At: 4, Now: at(4 * time.Hour)}); err != nil || th.HeadBranch != 0 || th.BranchSeq != 1 {
		t.Fatalf("rewind to a2: %+v, %v; want branch 0, no new branch", th, err)
	}
	_, err = s.SetHead(ctx, store.SetHead{Tenant: "t1", ThreadID: "th", At: 42, Now: at(5 * time.Hour)})
	wantMissing(t, "rewind to an unknown message", err, "message")
}

// testSetHeadRefused: no switch while a run holds the thread or a decision
// is pending on it; nothing changes.
func testSetHeadRefused(t *testing.T, s store.Store) {
	ctx := t.Context()
	forked(t, s)
	begin(t, s, "t1", "th", "ag", "r4", at(time.Hour), userMsg("u4", "x"))
	for _, h := range []store.SetHead{{Branch: 0}, {At: 2}} {
		h.Tenant, h.ThreadID, h.Now = "t1", "th", at(time.Hour+time.Second)
		_, err := s.SetHead(ctx, h)
		wantErr(t, "switch while running", err, store.ErrRunInProgress)
		var rip *store.RunInProgressError
		if !errors.As(err, &rip) {
			t.Fatalf("switch while running: %T; want a *RunInProgressError", err)
		}
	}
	// Its lease lapsed: the run is due for recovery, still refused.
	_, err := s.SetHead(ctx, store.SetHead{Tenant: "t1", ThreadID: "th", Branch: 0, Now: at(2 * time.Hour)})
	wantErr(t, "switch while a recovery is due", err, store.ErrRunInProgress)
	finish(t, s, "t1", "th", "r4", store.Idle, at(time.Hour+2*time.Second))
	waiting(t, s, "t1", "th", "ag", "r5", at(3*time.Hour), interrupt("i1", "c1", at(3*time.Hour)))
	for _, h := range []store.SetHead{{Branch: 0}, {At: 2}} {
		h.Tenant, h.ThreadID, h.Now = "t1", "th", at(4*time.Hour)
		_, err := s.SetHead(ctx, h)
		wantErr(t, "switch while a decision is pending", err, store.ErrApprovalPending)
	}
	th := getThread(t, s, "t1", "th")
	if th.HeadBranch != 1 || th.BranchSeq != 1 || th.Status != store.Waiting {
		t.Fatalf("after refused switches: head %d, %d branches, %s", th.HeadBranch, th.BranchSeq, th.Status)
	}
	wantPath(t, "conversation after refused switches", messages(t, s, "t1", "th"), nil, "u1", "a1", "u2b", "a2b", "u4", "m-r5")
}

// testFork: a fork is a new idle thread holding exactly the path up to its
// point, renumbered, with the state there; a taken id is refused.
func testFork(t *testing.T, s store.Store) {
	ctx := t.Context()
	forked(t, s)
	f, err := s.Fork(ctx, store.Fork{Tenant: "t1", ThreadID: "th", NewID: "f1", At: 4, Now: at(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if f.ID != "f1" || f.Agent != "ag" || f.Status != store.Idle || f.HeadBranch != 0 || f.BranchSeq != 0 {
		t.Fatalf("fork = %+v", f)
	}
	sameTime(t, "fork's creation", f.CreatedAt, at(time.Hour))
	sameJSON(t, "fork's state", f.State, json.RawMessage(`{"n":2}`))
	ms := messages(t, s, "t1", "f1")
	wantPath(t, "fork of a2 (not on the head)", ms, nil, "u1", "a1", "u2", "a2")
	for i, m := range ms {
		if m.Seq != int64(i+1) {
			t.Fatalf("fork's message %s has seq %d; want %d", m.ID, m.Seq, i+1)
		}
	}
	wantStateAt(t, s, "f1", 4, `{"n":2}`)
	wantBranches(t, s, "f1", branchRow{0, 0, 0, "", 4, 4, "a2"})
	// A fork of the whole head, then a turn on it.
	f, err = s.Fork(ctx, store.Fork{Tenant: "t1", ThreadID: "th", NewID: "f2", Now: at(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "state of a fork of the head", f.State, json.RawMessage(`{"n":5}`))
	b := turn(t, s, "f2", "rf", at(2*time.Hour), 0, 4, userMsg("u9", "x"), assistantMsg("a9", "y"))
	wantPath(t, "a turn on the fork", b.Messages, nil, "u9")
	if b.Messages[0].Seq != 5 {
		t.Fatalf("the fork's next message has seq %d; want 5", b.Messages[0].Seq)
	}
	wantPath(t, "the fork after its turn", messages(t, s, "t1", "f2"), nil, "u1", "a1", "u2b", "a2b", "u9", "a9")
	wantPath(t, "the forked thread after it", messages(t, s, "t1", "th"), nil, "u1", "a1", "u2b", "a2b")
	for _, id := range []string{"th", "f1"} {
		_, err = s.Fork(ctx, store.Fork{Tenant: "t1", ThreadID: "th", NewID: id, At: 2, Now: at(3 * time.Hour)})
		wantErr(t, "fork onto a taken id", err, store.ErrThreadExists)
	}
	wantPath(t, "f1 after a refused fork", messages(t, s, "t1", "f1"), nil, "u1", "a1", "u2", "a2")
	_, err = s.Fork(ctx, store.Fork{Tenant: "t1", ThreadID: "th", NewID: "f3", At: 99, Now: at(3 * time.Hour)})
	wantMissing(t, "fork at an unknown message", err, "message")
	_, err = s.GetThread(ctx, "t1", "f3")
	wantErr(t, "the thread of a refused fork", err, store.ErrNotFound)
}

// testBranchAPITenants: another tenant finds none of it.
func testBranchAPITenants(t *testing.T, s store.Store) {
	ctx := t.Context()
	forked(t, s)
	_, err := s.Branches(ctx, "t2", "th")
	wantErr(t, "Branches of another tenant", err, store.ErrNotFound)
	_, err = s.BranchPath(ctx, "t2", "th", 0)
	wantErr(t, "BranchPath of another tenant", err, store.ErrNotFound)
	_, err = s.FindMessage(ctx, "t2", "th", "a1")
	wantErr(t, "FindMessage of another tenant", err, store.ErrNotFound)
	_, err = s.StateAt(ctx, "t2", "th", 2)
	wantErr(t, "StateAt of another tenant", err, store.ErrNotFound)
	_, err = s.SetHead(ctx, store.SetHead{Tenant: "t2", ThreadID: "th", Branch: 0, Now: at(time.Hour)})
	wantErr(t, "SetHead of another tenant", err, store.ErrNotFound)
	_, err = s.SetHead(ctx, store.SetHead{Tenant: "t2", ThreadID: "th", At: 2, Now: at(time.Hour)})
	wantErr(t, "rewind of another tenant", err, store.ErrNotFound)
	_, err = s.Fork(ctx, store.Fork{Tenant: "t2", ThreadID: "th", NewID: "mine", At: 2, Now: at(time.Hour)})
	wantErr(t, "Fork of another tenant's thread", err, store.ErrNotFound)
	_, err = s.Fork(ctx, store.Fork{Tenant: "t2", ThreadID: "th", NewID: "mine", Now: at(time.Hour)})
	wantErr(t, "Fork of another tenant's head", err, store.ErrNotFound)
	if _, err := s.GetThread(ctx, "t2", "mine"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused fork made a thread: %v", err)
	}
	if th := getThread(t, s, "t1", "th"); th.HeadBranch != 1 || th.BranchSeq != 1 {
		t.Fatalf("another tenant's calls changed the thread: head %d, %d branches", th.HeadBranch, th.BranchSeq)
	}
}

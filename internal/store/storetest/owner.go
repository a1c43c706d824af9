package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
)

var ownerTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"Owner/BeginRunRecordsAndGuards", testOwnerBeginRun},
	{"Owner/ListsAndForks", testOwnerLists},
	{"Owner/StatelessDecisions", testOwnerStatelessDecisions},
}

// A thread an end user creates is theirs: another user's BeginRun on it
// is ErrNotFound and writes nothing; an admin's (AnyOwner) goes on; a
// key's thread (no owner) is everyone's of the tenant.
func testOwnerBeginRun(t *testing.T, s store.Store) {
	ctx := t.Context()
	b := func(thread, run, user string, any bool, now time.Time, isNew bool) error {
		_, err := s.BeginRun(ctx, store.BeginRun{Tenant: "acme", ThreadID: thread, Agent: "a", RunID: run, Owner: "r",
			User: user, AnyOwner: any, Now: now, LeaseUntil: now.Add(time.Minute), Input: []message.Message{userMsg("m-"+run, "hi")}, New: isNew})
		return err
	}
	if err := b("t1", "r1", "alice", false, at(0), true); err != nil {
		t.Fatal(err)
	}
	if th, err := s.GetThread(ctx, "acme", "t1"); err != nil || th.Owner != "alice" {
		t.Fatalf("owner %+v %v", th, err)
	}
	finish(t, s, "acme", "t1", "r1", store.Idle, at(time.Second))
	for _, isNew := range []bool{false, true} { // the hint does not matter
		if err := b("t1", "r2", "bob", false, at(2*time.Second), isNew); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("another user's BeginRun (new %v): %v, want ErrNotFound", isNew, err)
		}
		if err := b("t1", "r2", "", false, at(2*time.Second), isNew); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a key's BeginRun on a user's thread (new %v): %v, want ErrNotFound", isNew, err)
		}
	}
	if m, _ := s.Messages(ctx, "acme", "t1"); len(m) != 1 {
		t.Fatalf("a refused BeginRun wrote: %d messages", len(m))
	}
	if err := b("t1", "r3", "", true, at(3*time.Second), false); err != nil {
		t.Fatalf("admin: %v", err)
	}
	finish(t, s, "acme", "t1", "r3", store.Idle, at(4*time.Second))
	if th, _ := s.GetThread(ctx, "acme", "t1"); th.Owner != "alice" {
		t.Fatalf("an admin's turn changed the owner to %q", th.Owner)
	}
	if err := b("t1", "r4", "alice", false, at(5*time.Second), false); err != nil {
		t.Fatalf("owner again: %v", err)
	}
	// A key's thread: any user of the tenant goes on with it, and it
	// stays the tenant's.
	if err := b("t2", "r5", "", false, at(0), true); err != nil {
		t.Fatal(err)
	}
	finish(t, s, "acme", "t2", "r5", store.Idle, at(time.Second))
	if err := b("t2", "r6", "bob", false, at(2*time.Second), false); err != nil {
		t.Fatal(err)
	}
	if th, _ := s.GetThread(ctx, "acme", "t2"); th.Owner != "" {
		t.Fatalf("a tenant thread became %q's", th.Owner)
	}
}

// ListThreads and ListInterrupts scoped to a user hold the tenant's
// threads and the user's own; a fork is its forker's.
func testOwnerLists(t *testing.T, s store.Store) {
	ctx := t.Context()
	for i, c := range []struct{ thread, user string }{{"ta", "alice"}, {"tb", "bob"}, {"tk", ""}} {
		run := "r-" + c.thread
		now := at(time.Duration(i) * time.Second)
		_, err := s.BeginRun(ctx, store.BeginRun{Tenant: "acme", ThreadID: c.thread, Agent: "a", RunID: run, Owner: "r",
			User: c.user, Now: now, LeaseUntil: now.Add(time.Minute), Input: []message.Message{userMsg("m-"+c.thread, "hi")}, New: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Checkpoint(ctx, store.Checkpoint{Tenant: "acme", ThreadID: c.thread, RunID: run,
			Interrupts: []store.Interrupt{interrupt("i-"+c.thread, "call-"+c.thread, now)}}); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(ths []store.Thread) map[string]bool {
		out := map[string]bool{}
		for _, th := range ths {
			out[th.ID] = true
		}
		return out
	}
	all, _ := s.ListThreads(ctx, "acme", store.ThreadFilter{})
	alice, _ := s.ListThreads(ctx, "acme", store.ThreadFilter{Scoped: true, User: "alice"})
	key, _ := s.ListThreads(ctx, "acme", store.ThreadFilter{Scoped: true})
	if len(all) != 3 || len(alice) != 2 || !ids(alice)["ta"] || !ids(alice)["tk"] || len(key) != 1 || key[0].ID != "tk" {
		t.Fatalf("lists: all %v, alice %v, key %v", ids(all), ids(alice), ids(key))
	}
	its, _ := s.ListInterrupts(ctx, "acme", store.InterruptFilter{Scoped: true, User: "bob"})
	got := map[string]bool{}
	for _, it := range its {
		got[it.ThreadID] = true
	}
	if len(its) != 2 || !got["tb"] || !got["tk"] {
		t.Fatalf("bob's decisions: %v", got)
	}
	if all, _ := s.ListInterrupts(ctx, "acme", store.InterruptFilter{}); len(all) != 3 {
		t.Fatalf("all decisions: %d", len(all))
	}
	f, err := s.Fork(ctx, store.Fork{Tenant: "acme", ThreadID: "tk", NewID: "tf", Now: at(time.Minute), User: "bob"})
	if err != nil || f.Owner != "bob" {
		t.Fatalf("fork %+v %v", f, err)
	}
}

// The record of a stateless turn's call keeps its end user (Owner): a
// scoped list holds the tenant's records (no owner) and the user's own, not
// another user's; an unscoped one (an admin's, an approver's) holds all. A
// decision of a user's thread carries the thread's owner.
func testOwnerStatelessDecisions(t *testing.T, s store.Store) {
	ctx := t.Context()
	for i, owner := range []string{"alice", "bob", ""} {
		now := at(time.Duration(i) * time.Second)
		in := store.Interrupt{ID: fmt.Sprintf("int_s%d", i), Tenant: "acme", RunID: fmt.Sprintf("run_s%d", i), Agent: "a",
			ToolCallID: "call", Tool: "refund", Status: store.Approved, CreatedAt: now, Owner: owner,
			Decision: &store.Decision{Approved: true, Via: store.ViaStateless, By: "acme/" + owner, At: now}}
		if err := s.RecordDecided(ctx, in); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetInterrupt(ctx, "acme", in.ID); err != nil || got.Owner != owner {
			t.Fatalf("record %s: %+v %v, want owner %q", in.ID, got, err, owner)
		}
	}
	list := func(f store.InterruptFilter) []string {
		t.Helper()
		f.Status = store.Approved
		ins, err := s.ListInterrupts(ctx, "acme", f)
		if err != nil {
			t.Fatal(err)
		}
		return interruptIDs(ins)
	}
	sameStrings(t, "alice's", list(store.InterruptFilter{Scoped: true, User: "alice"}), []string{"int_s2", "int_s0"})
	sameStrings(t, "bob's", list(store.InterruptFilter{Scoped: true, User: "bob"}), []string{"int_s2", "int_s1"})
	sameStrings(t, "a key's", list(store.InterruptFilter{Scoped: true}), []string{"int_s2"})
	sameStrings(t, "all", list(store.InterruptFilter{}), []string{"int_s2", "int_s1", "int_s0"})

	_, err := s.BeginRun(ctx, store.BeginRun{Tenant: "acme", ThreadID: "ta", Agent: "a", RunID: "r-ta", Owner: "r",
		User: "alice", Now: at(time.Minute), LeaseUntil: at(2 * time.Minute), Input: []message.Message{userMsg("m-ta", "hi")}, New: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(ctx, store.Checkpoint{Tenant: "acme", ThreadID: "ta", RunID: "r-ta",
		Interrupts: []store.Interrupt{interrupt("i-ta", "call-ta", at(time.Minute))}}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetInterrupt(ctx, "acme", "i-ta"); err != nil || got.Owner != "alice" {
		t.Fatalf("a decision of alice's thread: %+v %v", got, err)
	}
}

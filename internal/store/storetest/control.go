package storetest

import (
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/store"
)

// controlTests are the run control cases (store.RunControlStore) Run runs.
var controlTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"RunControl/CancelNamesTheRunningRun", testCancelNamesRun},
	{"RunControl/CancelOfNoRun", testCancelNoRun},
	{"RunControl/RenewLease", testRenewLease},
	{"RunControl/Waiting", testRunControlWaiting},
	{"RunControl/TenantIsolation", testRunControlTenants},
	{"RunControl/Invalid", testRunControlInvalid},
}

func runControl(t *testing.T, s store.Store, tenant, thread string) *store.RunControl {
	t.Helper()
	c, err := s.GetRunControl(t.Context(), tenant, thread)
	if err != nil {
		t.Fatalf("GetRunControl %s/%s: %v", tenant, thread, err)
	}
	return c
}

func requestCancel(t *testing.T, s store.Store, tenant, thread string, now time.Time) string {
	t.Helper()
	run, err := s.RequestCancel(t.Context(), tenant, thread, now)
	if err != nil {
		t.Fatalf("RequestCancel %s/%s: %v", tenant, thread, err)
	}
	return run
}

func renew(t *testing.T, s store.Store, tenant, thread, run string, until time.Time) *store.RunControl {
	t.Helper()
	c, err := s.RenewLease(t.Context(), store.RenewLease{Tenant: tenant, ThreadID: thread, RunID: run, LeaseUntil: until})
	if err != nil {
		t.Fatalf("RenewLease %s/%s %s: %v", tenant, thread, run, err)
	}
	return c
}

// testCancelNamesRun: a cancel names the run holding the thread when it is
// asked; the run learns of it from GetRunControl and from its lease
// renewal, and a later run of the thread is not cancelled by it.
func testCancelNamesRun(t *testing.T, s store.Store) {
	begin(t, s, "acme", "t1", "bot", "r1", at(0), userMsg("m1", "hi"))
	if c := renew(t, s, "acme", "t1", "r1", at(time.Minute)); c.Cancels("r1") {
		t.Fatalf("renewal before any cancel: %+v", c)
	}
	if got := requestCancel(t, s, "acme", "t1", at(time.Second)); got != "r1" {
		t.Fatalf("RequestCancel named run %q, want r1", got)
	}
	c := runControl(t, s, "acme", "t1")
	if !c.Cancels("r1") || c.Cancels("r2") || c.Cancels("") {
		t.Fatalf("control after the cancel: %+v", c)
	}
	sameTime(t, "cancel at", c.CancelAt, at(time.Second))
	if c := renew(t, s, "acme", "t1", "r1", at(2*time.Minute)); !c.Cancels("r1") {
		t.Fatalf("renewal after the cancel: %+v", c)
	}
	finish(t, s, "acme", "t1", "r1", store.Idle, at(3*time.Second))
	begin(t, s, "acme", "t1", "bot", "r2", at(4*time.Second), userMsg("m2", "again"))
	if c := renew(t, s, "acme", "t1", "r2", at(5*time.Minute)); c.Cancels("r2") {
		t.Fatalf("the next run's renewal: %+v", c)
	}
	// A second cancel names the run holding the thread now.
	if got := requestCancel(t, s, "acme", "t1", at(5*time.Second)); got != "r2" {
		t.Fatalf("second RequestCancel named run %q, want r2", got)
	}
	if c := runControl(t, s, "acme", "t1"); !c.Cancels("r2") || c.Cancels("r1") {
		t.Fatalf("control after the second cancel: %+v", c)
	}
}

// testCancelNoRun: a thread that runs nothing records no cancel; an
// unknown thread is ErrNotFound.
func testCancelNoRun(t *testing.T, s store.Store) {
	begin(t, s, "acme", "t1", "bot", "r1", at(0), userMsg("m1", "hi"))
	finish(t, s, "acme", "t1", "r1", store.Idle, at(time.Second))
	if got := requestCancel(t, s, "acme", "t1", at(2*time.Second)); got != "" {
		t.Fatalf("RequestCancel of an idle thread named run %q", got)
	}
	if c := runControl(t, s, "acme", "t1"); *c != (store.RunControl{}) {
		t.Fatalf("control of an idle thread after a cancel: %+v", c)
	}
	waiting(t, s, "acme", "t2", "bot", "r2", at(0), interrupt("i1", "c1", at(0)))
	if got := requestCancel(t, s, "acme", "t2", at(2*time.Second)); got != "" {
		t.Fatalf("RequestCancel of a waiting thread named run %q", got)
	}
	_, err := s.RequestCancel(t.Context(), "acme", "nope", at(0))
	wantErr(t, "RequestCancel of an unknown thread", err, store.ErrNotFound)
	if c := runControl(t, s, "acme", "nope"); *c != (store.RunControl{}) {
		t.Fatalf("control of an unknown thread: %+v", c)
	}
}

// testRenewLease: a renewal extends the lease; a run that lost the thread
// gets ErrLeaseLost, an unknown thread ErrNotFound.
func testRenewLease(t *testing.T, s store.Store) {
	begin(t, s, "acme", "t1", "bot", "r1", at(0), userMsg("m1", "hi"))
	renew(t, s, "acme", "t1", "r1", at(10*time.Minute))
	sameTime(t, "lease after renewal", getThread(t, s, "acme", "t1").LeaseUntil, at(10*time.Minute))
	_, err := s.RenewLease(t.Context(), store.RenewLease{Tenant: "acme", ThreadID: "t1", RunID: "other", LeaseUntil: at(time.Hour)})
	wantErr(t, "RenewLease of another run", err, store.ErrLeaseLost)
	finish(t, s, "acme", "t1", "r1", store.Idle, at(time.Second))
	_, err = s.RenewLease(t.Context(), store.RenewLease{Tenant: "acme", ThreadID: "t1", RunID: "r1", LeaseUntil: at(time.Hour)})
	wantErr(t, "RenewLease after the run ended", err, store.ErrLeaseLost)
	if th := getThread(t, s, "acme", "t1"); !th.LeaseUntil.IsZero() {
		t.Fatalf("a lost renewal wrote the lease: %+v", th)
	}
	_, err = s.RenewLease(t.Context(), store.RenewLease{Tenant: "acme", ThreadID: "nope", RunID: "r1", LeaseUntil: at(time.Hour)})
	wantErr(t, "RenewLease of an unknown thread", err, store.ErrNotFound)
}

// testRunControlWaiting: the waiting pause is set, replaced, and cleared
// only by a clear naming it; it leaves a cancel request as it is.
func testRunControlWaiting(t *testing.T, s store.Store) {
	ctx := t.Context()
	if err := s.SetWaiting(ctx, "acme", "t1", 7); err != nil {
		t.Fatalf("SetWaiting: %v", err)
	}
	if c := runControl(t, s, "acme", "t1"); c.WaitingSeq != 7 {
		t.Fatalf("waiting after SetWaiting 7: %+v", c)
	}
	if err := s.SetWaiting(ctx, "acme", "t1", 12); err != nil {
		t.Fatalf("SetWaiting: %v", err)
	}
	if ok, err := s.ClearWaiting(ctx, "acme", "t1", 7); err != nil || ok {
		t.Fatalf("ClearWaiting of a replaced pause: %v, %v", ok, err)
	}
	if c := runControl(t, s, "acme", "t1"); c.WaitingSeq != 12 {
		t.Fatalf("a stale clear changed the pause: %+v", c)
	}
	begin(t, s, "acme", "t1", "bot", "r1", at(0), userMsg("m1", "hi"))
	requestCancel(t, s, "acme", "t1", at(time.Second))
	if ok, err := s.ClearWaiting(ctx, "acme", "t1", 12); err != nil || !ok {
		t.Fatalf("ClearWaiting 12: %v, %v", ok, err)
	}
	if ok, err := s.ClearWaiting(ctx, "acme", "t1", 12); err != nil || ok {
		t.Fatalf("ClearWaiting again: %v, %v", ok, err)
	}
	if c := runControl(t, s, "acme", "t1"); c.WaitingSeq != 0 || !c.Cancels("r1") {
		t.Fatalf("control after the clear: %+v", c)
	}
	if err := s.SetWaiting(ctx, "acme", "t1", 20); err != nil {
		t.Fatalf("SetWaiting: %v", err)
	}
	if c := runControl(t, s, "acme", "t1"); c.WaitingSeq != 20 || !c.Cancels("r1") {
		t.Fatalf("SetWaiting changed the cancel request: %+v", c)
	}
	if ok, err := s.ClearWaiting(ctx, "acme", "t2", 0); err != nil || ok {
		t.Fatalf("ClearWaiting of nothing: %v, %v", ok, err)
	}
}

// testRunControlTenants: one tenant's control is invisible to another's
// thread of the same id.
func testRunControlTenants(t *testing.T, s store.Store) {
	begin(t, s, "acme", "t1", "bot", "r1", at(0), userMsg("m1", "hi"))
	begin(t, s, "globex", "t1", "bot", "g1", at(0), userMsg("m1", "hi"))
	requestCancel(t, s, "acme", "t1", at(time.Second))
	if err := s.SetWaiting(t.Context(), "acme", "t1", 3); err != nil {
		t.Fatal(err)
	}
	if c := runControl(t, s, "globex", "t1"); *c != (store.RunControl{}) {
		t.Fatalf("globex sees acme's control: %+v", c)
	}
	if c := renew(t, s, "globex", "t1", "g1", at(time.Hour)); c.CancelRun != "" {
		t.Fatalf("globex's renewal sees acme's cancel: %+v", c)
	}
}

// testRunControlInvalid: NUL bytes and a missing lease are ErrInvalid.
func testRunControlInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.RequestCancel(ctx, "acme", "t\x00", at(0))
	wantErr(t, "RequestCancel", err, store.ErrInvalid)
	_, err = s.GetRunControl(ctx, "ac\x00me", "t1")
	wantErr(t, "GetRunControl", err, store.ErrInvalid)
	_, err = s.RenewLease(ctx, store.RenewLease{Tenant: "acme", ThreadID: "t1", RunID: "r1"})
	wantErr(t, "RenewLease without a lease", err, store.ErrInvalid)
	wantErr(t, "SetWaiting 0", s.SetWaiting(ctx, "acme", "t1", 0), store.ErrInvalid)
	_, err = s.ClearWaiting(ctx, "acme", "\xff", 1)
	wantErr(t, "ClearWaiting", err, store.ErrInvalid)
}

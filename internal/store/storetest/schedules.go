package storetest

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/store"
)

// scheduleTests are the schedule cases (store.ScheduleStore) Run runs.
var scheduleTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"Schedules/CreateGetListDelete", testSchedulesCRUD},
	{"Schedules/Update", testSchedulesUpdate},
	{"Schedules/Due", testSchedulesDue},
	{"Schedules/ClaimOnce", testScheduleClaimOnce},
	{"Schedules/ClaimMovesNextForwardOnly", testScheduleClaimNext},
	{"Schedules/FinishFiring", testScheduleFinish},
	{"Schedules/Advance", testScheduleAdvance},
	{"Schedules/SyncFileSchedules", testScheduleSync},
	{"Schedules/TenantIsolation", testScheduleTenants},
	{"Schedules/Invalid", testScheduleInvalid},
	{"Concurrent/ClaimFiring", testConcurrentClaimFiring},
	{"Schedules/StaleFirings", testStaleFirings},
	{"Schedules/OpenFirings", testOpenFirings},
	{"Concurrent/RetakeFiring", testConcurrentRetake},
}

// testStaleFirings: a firing still claimed after the window is listed,
// across tenants, oldest first; one that reported its run's start is not.
// A retake moves its claim, so it is no longer stale.
func testStaleFirings(t *testing.T, s store.Store) {
	ctx := t.Context()
	createSchedule(t, s, sched("a", "sch_1", "one", at(time.Hour)))
	createSchedule(t, s, sched("b", "sch_2", "two", at(time.Hour)))
	claimFiring(t, s, firing("a", "sch_1", at(time.Hour), "r1"))
	claimFiring(t, s, firing("b", "sch_2", at(time.Hour-time.Minute), "r2"))
	claimFiring(t, s, firing("a", "sch_1", at(2*time.Hour), "r3"))
	if err := s.FinishFiring(ctx, store.FinishFiring{Tenant: "a", ScheduleID: "sch_1", DueAt: at(time.Hour), Status: store.FiringStarted}); err != nil {
		t.Fatal(err)
	}
	stale, err := s.StaleFirings(ctx, at(3*time.Hour), 10)
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	for _, f := range stale {
		runs = append(runs, f.RunID)
	}
	sameStrings(t, "stale firings", runs, []string{"r2", "r3"})
	if got, _ := s.StaleFirings(ctx, at(2*time.Hour), 10); len(got) != 1 || got[0].RunID != "r2" {
		t.Fatalf("stale before the second claim: %+v", got)
	}
	f := stale[0]
	f.Owner, f.ClaimedAt = "node-new", at(3*time.Hour)
	if ok, err := s.RetakeFiring(ctx, f, at(3*time.Hour)); err != nil || !ok {
		t.Fatalf("retake: %v %v", ok, err)
	}
	if ok, _ := s.RetakeFiring(ctx, f, at(3*time.Hour)); ok {
		t.Fatal("a retake of a firing just retaken won")
	}
	if got, _ := s.StaleFirings(ctx, at(3*time.Hour), 10); len(got) != 1 || got[0].RunID != "r3" {
		t.Fatalf("stale after the retake: %+v", got)
	}
	fs, _ := s.ListFirings(ctx, "b", "sch_2", 1)
	if fs[0].Owner != "node-new" || !fs[0].ClaimedAt.Equal(at(3*time.Hour)) || fs[0].RunID != "r2" || fs[0].Status != store.FiringClaimed {
		t.Fatalf("the retaken firing: %+v", fs[0])
	}
}

// testOpenFirings: started and waiting firings are open, across tenants,
// oldest claim first; claimed, completed and failed ones are not, nor one
// claimed after before.
func testOpenFirings(t *testing.T, s store.Store) {
	ctx := t.Context()
	createSchedule(t, s, sched("a", "sch_1", "one", at(time.Hour)))
	createSchedule(t, s, sched("b", "sch_2", "two", at(time.Hour)))
	finish := func(tenant, id string, due time.Duration, status string) {
		t.Helper()
		if err := s.FinishFiring(ctx, store.FinishFiring{Tenant: tenant, ScheduleID: id, DueAt: at(due), Status: status}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(tenant, id string, due, claimed time.Duration, run string) {
		t.Helper()
		f := firing(tenant, id, at(due), run)
		f.Firing.ClaimedAt = at(claimed)
		claimFiring(t, s, f)
	}
	claim("a", "sch_1", time.Hour, 3*time.Hour, "r1")
	claim("b", "sch_2", time.Hour, 2*time.Hour, "r2")
	claim("a", "sch_1", 2*time.Hour, 4*time.Hour, "r3")
	claim("b", "sch_2", 2*time.Hour, time.Hour, "r4")
	claim("a", "sch_1", 3*time.Hour, time.Hour, "r5")
	claim("a", "sch_1", 4*time.Hour, 5*time.Hour, "r6")
	finish("a", "sch_1", time.Hour, store.FiringStarted)
	finish("b", "sch_2", time.Hour, store.FiringWaiting)
	finish("a", "sch_1", 2*time.Hour, store.FiringStarted)
	finish("b", "sch_2", 2*time.Hour, store.FiringCompleted)
	finish("a", "sch_1", 3*time.Hour, store.FiringFailed)
	finish("a", "sch_1", 4*time.Hour, store.FiringStarted)
	open, err := s.OpenFirings(ctx, at(4*time.Hour+30*time.Minute), 10)
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	for _, f := range open {
		runs = append(runs, f.RunID)
	}
	if !slices.Equal(runs, []string{"r2", "r1", "r3"}) {
		t.Fatalf("open firings %q; want r2, r1, r3 (oldest claim first)", runs)
	}
	if got, _ := s.OpenFirings(ctx, at(4*time.Hour+30*time.Minute), 1); len(got) != 1 || got[0].RunID != "r2" {
		t.Fatalf("open firings, limit 1: %+v", got)
	}

	endRun := func(tenant, thread, run string, status store.ThreadStatus, now time.Time) {
		t.Helper()
		if err := s.FinishRun(ctx, store.FinishRun{Tenant: tenant, ThreadID: thread, RunID: run, Status: status, Now: now}); err != nil {
			t.Fatalf("FinishRun %s: %v", run, err)
		}
	}
	// A firing whose thread still runs its turn, or a waiting one whose
	// thread still waits on the decision, has nothing to settle: it is
	// left out before the limit, so firings waiting for days do not hide
	// the rest. A started firing whose thread waits now is listed (its
	// outcome moved to waiting), as is one whose thread went idle.
	waiting(t, s, "b", "th-r2", "bot", "r2", at(time.Hour), interrupt("int_r2", "c1", at(time.Hour)))
	begin(t, s, "a", "th-r1", "bot", "r1", at(time.Hour), userMsg("m1", "hi"))
	waiting(t, s, "a", "th-r3", "bot", "r3", at(time.Hour), interrupt("int_r3", "c1", at(time.Hour)))
	open, err = s.OpenFirings(ctx, at(4*time.Hour+30*time.Minute), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != 1 || open[0].RunID != "r3" {
		t.Fatalf("open firings with r2 still waiting and r1 running, limit 1: %+v; want r3 (started, its thread now waits)", open)
	}
	endRun("a", "th-r1", "r1", store.Idle, at(3*time.Hour))
	open, _ = s.OpenFirings(ctx, at(4*time.Hour+30*time.Minute), 10)
	runs = runs[:0]
	for _, f := range open {
		runs = append(runs, f.RunID)
	}
	if !slices.Equal(runs, []string{"r1", "r3"}) {
		t.Fatalf("open firings after r1's thread went idle: %q; want r1, r3", runs)
	}
}

// testConcurrentRetake: of many concurrent retakes of one stale firing
// exactly one wins.
func testConcurrentRetake(t *testing.T, s store.Store) {
	createSchedule(t, s, sched("acme", "sch_a", "daily", at(time.Hour)))
	claimFiring(t, s, firing("acme", "sch_a", at(time.Hour), "r1"))
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := range n {
		wg.Go(func() {
			f := firing("acme", "sch_a", at(time.Hour), "r1").Firing
			f.Owner, f.ClaimedAt = "node-"+string(rune('a'+i)), at(2*time.Hour)
			ok, err := s.RetakeFiring(t.Context(), f, at(90*time.Minute))
			if err != nil {
				t.Errorf("RetakeFiring: %v", err)
			}
			if ok {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d retakes won, want 1", wins)
	}
}

func tp(t time.Time) *time.Time { return &t }

// sched is an enabled API schedule of agent bot due at next.
func sched(tenant, id, name string, next time.Time) store.Schedule {
	return store.Schedule{Tenant: tenant, ID: id, Name: name, Agent: "bot", Cron: "0 9 * * *", Input: "report",
		Thread: store.NewThread, CatchUp: store.CatchUpOne, Enabled: true, Source: store.ScheduleAPI,
		CreatedAt: T0, UpdatedAt: T0, NextAt: tp(next)}
}

func createSchedule(t *testing.T, s store.Store, sc store.Schedule) {
	t.Helper()
	if err := s.CreateSchedule(t.Context(), sc); err != nil {
		t.Fatalf("CreateSchedule %s/%s: %v", sc.Tenant, sc.ID, err)
	}
}

func getSchedule(t *testing.T, s store.Store, tenant, id string) *store.Schedule {
	t.Helper()
	sc, err := s.GetSchedule(t.Context(), tenant, id)
	if err != nil {
		t.Fatalf("GetSchedule %s/%s: %v", tenant, id, err)
	}
	return sc
}

func firing(tenant, id string, due time.Time, run string) store.ClaimFiring {
	return store.ClaimFiring{Firing: store.Firing{Tenant: tenant, ScheduleID: id, DueAt: due, Owner: "node-" + run,
		ClaimedAt: due, ThreadID: "th-" + run, RunID: run}}
}

func claimFiring(t *testing.T, s store.Store, c store.ClaimFiring) bool {
	t.Helper()
	ok, err := s.ClaimFiring(t.Context(), c)
	if err != nil {
		t.Fatalf("ClaimFiring %s at %s: %v", c.ScheduleID, c.DueAt, err)
	}
	return ok
}

func sameNext(t *testing.T, what string, got *time.Time, want time.Time) {
	t.Helper()
	if got == nil || !got.Equal(want) {
		t.Fatalf("%s: got %v, want %s", what, got, want)
	}
}

// testSchedulesCRUD: a schedule reads back as stored; names are unique per
// tenant and agent; a deleted schedule is gone with its firings.
func testSchedulesCRUD(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := sched("acme", "sch_a", "daily", at(time.Hour))
	a.Timezone, a.Key, a.Thread, a.CatchUp = "Europe/Paris", "ops", "daily-report", store.CatchUpNone
	createSchedule(t, s, a)
	got := getSchedule(t, s, "acme", "sch_a")
	if got.Name != "daily" || got.Agent != "bot" || got.Cron != "0 9 * * *" || got.Timezone != "Europe/Paris" || got.Input != "report" ||
		got.Thread != "daily-report" || got.CatchUp != store.CatchUpNone || got.Key != "ops" || !got.Enabled ||
		got.Source != store.ScheduleAPI || !got.CreatedAt.Equal(T0) || got.LastDueAt != nil || got.LastStatus != "" {
		t.Fatalf("stored schedule: %+v", got)
	}
	sameNext(t, "next", got.NextAt, at(time.Hour))
	// The same name for the agent, or the same id, is taken; for another
	// agent it is not.
	dup := sched("acme", "sch_b", "daily", at(time.Hour))
	if err := s.CreateSchedule(ctx, dup); !errors.Is(err, store.ErrScheduleExists) {
		t.Fatalf("duplicate name: %v", err)
	}
	if err := s.CreateSchedule(ctx, sched("acme", "sch_a", "other", at(time.Hour))); !errors.Is(err, store.ErrScheduleExists) {
		t.Fatalf("duplicate id: %v", err)
	}
	dup.Agent = "writer"
	createSchedule(t, s, dup)
	off := sched("acme", "sch_c", "weekly", at(time.Hour))
	off.Enabled, off.NextAt = false, nil
	createSchedule(t, s, off)
	list, err := s.ListSchedules(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sc := range list {
		names = append(names, sc.Agent+"/"+sc.Name)
	}
	sameStrings(t, "schedules", names, []string{"bot/daily", "bot/weekly", "writer/daily"})
	if list[1].NextAt != nil || list[1].Enabled {
		t.Fatalf("disabled schedule: %+v", list[1])
	}
	claimFiring(t, s, firing("acme", "sch_a", at(time.Hour), "r1"))
	if err := s.DeleteSchedule(ctx, "acme", "sch_a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSchedule(ctx, "acme", "sch_a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted schedule: %v", err)
	}
	if fs, err := s.ListFirings(ctx, "acme", "sch_a", 10); err != nil || len(fs) != 0 {
		t.Fatalf("firings of a deleted schedule: %v %+v", err, fs)
	}
	if err := s.DeleteSchedule(ctx, "acme", "sch_a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleting again: %v", err)
	}
	// A new schedule may take the deleted one's name, and its firing times.
	createSchedule(t, s, sched("acme", "sch_d", "daily", at(time.Hour)))
	if !claimFiring(t, s, firing("acme", "sch_d", at(time.Hour), "r2")) {
		t.Fatal("the new schedule's firing was taken")
	}
}

// testSchedulesUpdate: an update replaces the definition and keeps what
// it does not own; a name taken by another schedule of the agent is
// refused and changes nothing.
func testSchedulesUpdate(t *testing.T, s store.Store) {
	ctx := t.Context()
	createSchedule(t, s, sched("acme", "sch_a", "daily", at(time.Hour)))
	createSchedule(t, s, sched("acme", "sch_b", "weekly", at(time.Hour)))
	claimFiring(t, s, firing("acme", "sch_a", at(time.Hour), "r1"))
	up := *getSchedule(t, s, "acme", "sch_a")
	up.Cron, up.Timezone, up.Input, up.Enabled, up.NextAt, up.UpdatedAt = "@every 15m", "Asia/Tokyo", "again", false, nil, at(time.Minute)
	if err := s.UpdateSchedule(ctx, up); err != nil {
		t.Fatal(err)
	}
	got := getSchedule(t, s, "acme", "sch_a")
	if got.Cron != "@every 15m" || got.Timezone != "Asia/Tokyo" || got.Input != "again" || got.Enabled || got.NextAt != nil ||
		!got.UpdatedAt.Equal(at(time.Minute)) || !got.CreatedAt.Equal(T0) || got.LastRunID != "r1" {
		t.Fatalf("updated: %+v", got)
	}
	up.Name = "weekly"
	if err := s.UpdateSchedule(ctx, up); !errors.Is(err, store.ErrScheduleExists) {
		t.Fatalf("rename onto a taken name: %v", err)
	}
	if got := getSchedule(t, s, "acme", "sch_a"); got.Name != "daily" {
		t.Fatalf("a refused rename changed the name: %q", got.Name)
	}
	up.Name = "daily" // its own name is not taken
	if err := s.UpdateSchedule(ctx, up); err != nil {
		t.Fatal(err)
	}
	up.ID = "sch_unknown"
	if err := s.UpdateSchedule(ctx, up); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown schedule: %v", err)
	}
}

// testSchedulesDue: due schedules across tenants, soonest first; disabled
// and not-yet-due ones are not listed.
func testSchedulesDue(t *testing.T, s store.Store) {
	createSchedule(t, s, sched("b", "sch_1", "one", at(2*time.Minute)))
	createSchedule(t, s, sched("a", "sch_2", "two", at(time.Minute)))
	createSchedule(t, s, sched("a", "sch_3", "three", at(time.Hour)))
	off := sched("a", "sch_4", "four", at(time.Second))
	off.Enabled = false
	createSchedule(t, s, off)
	none := sched("a", "sch_5", "five", at(time.Second))
	none.NextAt = nil
	createSchedule(t, s, none)
	due, err := s.DueSchedules(t.Context(), at(2*time.Minute), 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range due {
		ids = append(ids, d.Tenant+"/"+d.ID)
	}
	sameStrings(t, "due", ids, []string{"a/sch_2", "b/sch_1"})
	if due, err := s.DueSchedules(t.Context(), at(2*time.Minute), 1); err != nil || len(due) != 1 || due[0].ID != "sch_2" {
		t.Fatalf("limit 1: %v %+v", err, due)
	}
}

// testScheduleClaimOnce: a firing is claimed once; the claim records it
// and its thread and run as the schedule's latest.
func testScheduleClaimOnce(t *testing.T, s store.Store) {
	ctx := t.Context()
	createSchedule(t, s, sched("acme", "sch_a", "daily", at(time.Hour)))
	c := firing("acme", "sch_a", at(time.Hour), "r1")
	c.NextAt = at(25 * time.Hour)
	if !claimFiring(t, s, c) {
		t.Fatal("the first claim lost")
	}
	again := firing("acme", "sch_a", at(time.Hour), "r2")
	again.NextAt = at(25 * time.Hour)
	if claimFiring(t, s, again) {
		t.Fatal("a second claim of the same firing won")
	}
	got := getSchedule(t, s, "acme", "sch_a")
	sameNext(t, "next after the claim", got.NextAt, at(25*time.Hour))
	sameNext(t, "last due", got.LastDueAt, at(time.Hour))
	if got.LastRunID != "r1" || got.LastThreadID != "th-r1" || got.LastStatus != store.FiringClaimed {
		t.Fatalf("latest firing: %+v", got)
	}
	fs, err := s.ListFirings(ctx, "acme", "sch_a", 10)
	if err != nil || len(fs) != 1 {
		t.Fatalf("firings: %v %+v", err, fs)
	}
	if f := fs[0]; !f.DueAt.Equal(at(time.Hour)) || f.RunID != "r1" || f.ThreadID != "th-r1" || f.Owner != "node-r1" ||
		f.Status != store.FiringClaimed || f.Manual || f.EndedAt != nil {
		t.Fatalf("firing: %+v", f)
	}
	// Another due time is another firing; a manual one too.
	if !claimFiring(t, s, firing("acme", "sch_a", at(25*time.Hour), "r3")) {
		t.Fatal("the next firing was taken")
	}
	m := firing("acme", "sch_a", at(90*time.Minute).Add(123*time.Microsecond), "r4")
	m.Manual = true
	if !claimFiring(t, s, m) {
		t.Fatal("a manual firing was taken")
	}
	fs, _ = s.ListFirings(ctx, "acme", "sch_a", 10)
	if len(fs) != 3 || fs[0].RunID != "r3" || fs[1].RunID != "r4" || !fs[1].Manual || fs[2].RunID != "r1" {
		t.Fatalf("firings, latest due first: %+v", fs)
	}
	// The latest firing stays the schedule's latest by due time.
	if got := getSchedule(t, s, "acme", "sch_a"); got.LastRunID != "r3" {
		t.Fatalf("latest after an earlier manual firing: %+v", got)
	}
	if _, err := s.ClaimFiring(ctx, firing("acme", "sch_unknown", at(time.Hour), "r5")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("claim of an unknown schedule: %v", err)
	}
}

// testScheduleClaimNext: a claim moves the next firing forward, never back
// (a slow replica's claim of an older firing), and not for a disabled
// schedule.
func testScheduleClaimNext(t *testing.T, s store.Store) {
	createSchedule(t, s, sched("acme", "sch_a", "daily", at(time.Hour)))
	c := firing("acme", "sch_a", at(time.Hour), "r1")
	c.NextAt = at(3 * time.Hour)
	claimFiring(t, s, c)
	slow := firing("acme", "sch_a", at(time.Hour), "r2")
	slow.NextAt = at(2 * time.Hour)
	claimFiring(t, s, slow)
	sameNext(t, "next", getSchedule(t, s, "acme", "sch_a").NextAt, at(3*time.Hour))
	off := sched("acme", "sch_b", "off", at(time.Hour))
	off.Enabled, off.NextAt = false, nil
	createSchedule(t, s, off)
	m := firing("acme", "sch_b", at(time.Hour), "r3")
	m.NextAt = at(5 * time.Hour)
	claimFiring(t, s, m)
	if got := getSchedule(t, s, "acme", "sch_b"); got.NextAt != nil {
		t.Fatalf("a disabled schedule got a next firing: %+v", got)
	}
}

// testScheduleFinish: a firing's status and error are recorded, and the
// schedule's last status follows its latest firing only.
func testScheduleFinish(t *testing.T, s store.Store) {
	ctx := t.Context()
	createSchedule(t, s, sched("acme", "sch_a", "daily", at(time.Hour)))
	claimFiring(t, s, firing("acme", "sch_a", at(time.Hour), "r1"))
	finishFiring := func(due time.Time, status, msg string, when time.Time) {
		t.Helper()
		if err := s.FinishFiring(ctx, store.FinishFiring{Tenant: "acme", ScheduleID: "sch_a", DueAt: due, Status: status,
			Error: msg, At: when}); err != nil {
			t.Fatalf("FinishFiring %s: %v", status, err)
		}
	}
	finishFiring(at(time.Hour), store.FiringStarted, "", at(time.Hour))
	fs, _ := s.ListFirings(ctx, "acme", "sch_a", 1)
	if fs[0].Status != store.FiringStarted || fs[0].EndedAt != nil {
		t.Fatalf("started: %+v", fs[0])
	}
	finishFiring(at(time.Hour), store.FiringFailed, "boom\x00", at(time.Hour+time.Second))
	fs, _ = s.ListFirings(ctx, "acme", "sch_a", 1)
	if fs[0].Status != store.FiringFailed || fs[0].Error != "boom" {
		t.Fatalf("failed: %+v", fs[0])
	}
	sameNext(t, "ended", fs[0].EndedAt, at(time.Hour+time.Second))
	if got := getSchedule(t, s, "acme", "sch_a"); got.LastStatus != store.FiringFailed || got.LastError != "boom" {
		t.Fatalf("last status: %+v", got)
	}
	// A later firing is the latest: an earlier one's outcome does not
	// overwrite its status.
	claimFiring(t, s, firing("acme", "sch_a", at(25*time.Hour), "r2"))
	finishFiring(at(time.Hour), store.FiringCompleted, "", at(26*time.Hour))
	if got := getSchedule(t, s, "acme", "sch_a"); got.LastStatus != store.FiringClaimed || got.LastRunID != "r2" {
		t.Fatalf("last status after an older firing's outcome: %+v", got)
	}
	finishFiring(at(25*time.Hour), store.FiringWaiting, "", at(26*time.Hour))
	if got := getSchedule(t, s, "acme", "sch_a"); got.LastStatus != store.FiringWaiting {
		t.Fatalf("last status: %+v", got)
	}
	if err := s.FinishFiring(ctx, store.FinishFiring{Tenant: "acme", ScheduleID: "sch_a", DueAt: at(7 * time.Hour),
		Status: store.FiringCompleted}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown firing: %v", err)
	}
	if err := s.FinishFiring(ctx, store.FinishFiring{Tenant: "acme", ScheduleID: "sch_a", DueAt: at(time.Hour),
		Status: "exploded"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("unknown status: %v", err)
	}
}

// testScheduleAdvance: skipping missed firings moves the next firing
// forward only.
func testScheduleAdvance(t *testing.T, s store.Store) {
	ctx := t.Context()
	createSchedule(t, s, sched("acme", "sch_a", "daily", at(time.Hour)))
	if err := s.AdvanceSchedule(ctx, "acme", "sch_a", at(49*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.AdvanceSchedule(ctx, "acme", "sch_a", at(25*time.Hour)); err != nil {
		t.Fatal(err)
	}
	sameNext(t, "next", getSchedule(t, s, "acme", "sch_a").NextAt, at(49*time.Hour))
	if fs, _ := s.ListFirings(ctx, "acme", "sch_a", 10); len(fs) != 0 {
		t.Fatalf("advancing wrote a firing: %+v", fs)
	}
	if err := s.AdvanceSchedule(ctx, "acme", "sch_unknown", at(time.Hour)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown schedule: %v", err)
	}
}

// testScheduleSync: the agent-file schedules become exactly those given;
// an unchanged one keeps its next firing and its enabled flag, one whose
// timing changed takes the new next firing; API schedules are untouched.
func testScheduleSync(t *testing.T, s store.Store) {
	ctx := t.Context()
	file := func(id, name, cron string, next time.Time) store.Schedule {
		sc := sched("", id, name, next)
		sc.Cron, sc.Source = cron, store.ScheduleFile
		return sc
	}
	createSchedule(t, s, sched("acme", "sch_api", "api", at(time.Hour)))
	if err := s.SyncFileSchedules(ctx, "acme", []store.Schedule{file("f1", "one", "0 9 * * *", at(time.Hour)),
		file("f2", "two", "0 10 * * *", at(2*time.Hour))}, T0); err != nil {
		t.Fatal(err)
	}
	if got := getSchedule(t, s, "acme", "f1"); got.Source != store.ScheduleFile || got.Tenant != "acme" || !got.Enabled {
		t.Fatalf("synced: %+v", got)
	}
	claimFiring(t, s, store.ClaimFiring{Firing: firing("acme", "f1", at(time.Hour), "r1").Firing, NextAt: at(25 * time.Hour)})
	off := *getSchedule(t, s, "acme", "f2")
	off.Enabled, off.NextAt = false, nil
	if err := s.UpdateSchedule(ctx, off); err != nil {
		t.Fatal(err)
	}
	// A reload: f1 unchanged, f2's input changed (still disabled), f3 new;
	// then f2 gone.
	f2 := file("f2", "two", "0 10 * * *", at(50*time.Hour))
	f2.Input = "new input"
	if err := s.SyncFileSchedules(ctx, "acme", []store.Schedule{file("f1", "one", "0 9 * * *", at(99*time.Hour)), f2,
		file("f3", "three", "@every 1h", at(time.Hour))}, at(time.Minute)); err != nil {
		t.Fatal(err)
	}
	sameNext(t, "unchanged f1's next", getSchedule(t, s, "acme", "f1").NextAt, at(25*time.Hour))
	if got := getSchedule(t, s, "acme", "f2"); got.Enabled || got.NextAt != nil || got.Input != "new input" {
		t.Fatalf("f2 after the reload: %+v", got)
	}
	if err := s.SyncFileSchedules(ctx, "acme", []store.Schedule{file("f1", "one", "0 8 * * *", at(20*time.Hour)),
		file("f3", "three", "@every 1h", at(time.Hour))}, at(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	sameNext(t, "f1's next after its cron changed", getSchedule(t, s, "acme", "f1").NextAt, at(20*time.Hour))
	if _, err := s.GetSchedule(ctx, "acme", "f2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a schedule the files no longer declare: %v", err)
	}
	list, _ := s.ListSchedules(ctx, "acme")
	if len(list) != 3 {
		t.Fatalf("schedules after the syncs: %+v", list)
	}
	getSchedule(t, s, "acme", "sch_api")
	// Another tenant's file schedules are its own.
	if err := s.SyncFileSchedules(ctx, "other", nil, at(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	getSchedule(t, s, "acme", "f1")
}

// testScheduleTenants: a tenant sees and changes only its own schedules.
func testScheduleTenants(t *testing.T, s store.Store) {
	ctx := t.Context()
	createSchedule(t, s, sched("a", "sch_1", "daily", at(time.Hour)))
	createSchedule(t, s, sched("b", "sch_1", "daily", at(time.Hour))) // same id and name, other tenant
	if _, err := s.GetSchedule(ctx, "c", "sch_1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("foreign schedule: %v", err)
	}
	if err := s.DeleteSchedule(ctx, "c", "sch_1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleting a foreign schedule: %v", err)
	}
	if !claimFiring(t, s, firing("a", "sch_1", at(time.Hour), "r1")) || !claimFiring(t, s, firing("b", "sch_1", at(time.Hour), "r2")) {
		t.Fatal("tenants' firings collide")
	}
	if fs, _ := s.ListFirings(ctx, "a", "sch_1", 10); len(fs) != 1 || fs[0].RunID != "r1" {
		t.Fatalf("a's firings: %+v", fs)
	}
	if list, _ := s.ListSchedules(ctx, "c"); len(list) != 0 {
		t.Fatalf("c's schedules: %+v", list)
	}
}

// testScheduleInvalid: an invalid schedule or firing is ErrInvalid and
// stores nothing.
func testScheduleInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	bad := []store.Schedule{
		func() store.Schedule { sc := sched("a", "sch_1", "", at(0)); return sc }(),
		func() store.Schedule { sc := sched("a", "sch_1", "n", at(0)); sc.Cron = ""; return sc }(),
		func() store.Schedule { sc := sched("a", "sch_1", "n", at(0)); sc.CatchUp = "all"; return sc }(),
		func() store.Schedule { sc := sched("a", "sch_1", "n", at(0)); sc.Source = "x"; return sc }(),
		func() store.Schedule { sc := sched("a", "sch_1", "n\x00", at(0)); return sc }(),
		func() store.Schedule { sc := sched("a", "sch_1", "n", at(0)); sc.Input = "\xff"; return sc }(),
	}
	for i, sc := range bad {
		if err := s.CreateSchedule(ctx, sc); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("bad schedule %d: %v", i, err)
		}
	}
	if list, _ := s.ListSchedules(ctx, "a"); len(list) != 0 {
		t.Fatalf("an invalid schedule was stored: %+v", list)
	}
	createSchedule(t, s, sched("a", "sch_1", "n", at(time.Hour)))
	c := firing("a", "sch_1", at(time.Hour), "r1")
	c.RunID = ""
	if _, err := s.ClaimFiring(ctx, c); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a firing without a run: %v", err)
	}
	if _, err := s.GetSchedule(ctx, "a", "sch\x00"); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a NUL in an id: %v", err)
	}
	if fs, _ := s.ListFirings(ctx, "a", "sch_1", 10); len(fs) != 0 {
		t.Fatalf("an invalid firing was stored: %+v", fs)
	}
}

// testConcurrentClaimFiring: of many concurrent claims of one firing
// exactly one wins.
func testConcurrentClaimFiring(t *testing.T, s store.Store) {
	createSchedule(t, s, sched("acme", "sch_a", "daily", at(time.Hour)))
	const n = 8
	var wg sync.WaitGroup
	wins := make(chan string, n)
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			run := "r" + string(rune('a'+i))
			c := firing("acme", "sch_a", at(time.Hour), run)
			c.NextAt = at(25 * time.Hour)
			ok, err := s.ClaimFiring(t.Context(), c)
			if err != nil {
				errs <- err
			}
			if ok {
				wins <- run
			}
		})
	}
	wg.Wait()
	close(wins)
	close(errs)
	for err := range errs {
		t.Fatalf("ClaimFiring: %v", err)
	}
	var won []string
	for w := range wins {
		won = append(won, w)
	}
	if len(won) != 1 {
		t.Fatalf("%d claims won: %v", len(won), won)
	}
	fs, _ := s.ListFirings(t.Context(), "acme", "sch_a", 10)
	if len(fs) != 1 || fs[0].RunID != won[0] {
		t.Fatalf("firings: %+v, winner %s", fs, won[0])
	}
	sameNext(t, "next", getSchedule(t, s, "acme", "sch_a").NextAt, at(25*time.Hour))
}

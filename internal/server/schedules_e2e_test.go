package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/app"
	"github.com/stackbone/stackbone/internal/clock"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/notify"
	"github.com/stackbone/stackbone/internal/schedule"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/testwait"
)

// schedT0 is the fake clock's start in the schedule tests: a whole minute.
var schedT0 = time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)

type scheduleBody struct {
	Object string `json:"object"`
	store.Schedule
	Firings []store.Firing `json:"firings"`
}

type schedErr struct {
	Error struct {
		Message, Type, Code, Param string
	} `json:"error"`
}

func scheduler(t *testing.T, env *stacktest.Env) *schedule.Scheduler {
	t.Helper()
	s, ok := env.Server.Scheduler.(*schedule.Scheduler)
	if !ok {
		t.Fatalf("the server's scheduler is %T", env.Server.Scheduler)
	}
	return s
}

// fakeStack is a stack on a fake clock at schedT0.
func fakeStack(t *testing.T, opts stacktest.Options) (*stacktest.Env, *clock.Fake) {
	t.Helper()
	fake := clock.NewFake(schedT0)
	opts.Configure = func(cfg *config.Config) { cfg.Clock = fake }
	return stacktest.New(t, opts), fake
}

func createSched(t *testing.T, env *stacktest.Env, body string, hdr ...string) scheduleBody {
	t.Helper()
	r := call(t, "POST", env.URL+"/v1/schedules", body, hdr...)
	if r.status != 201 {
		t.Fatalf("create schedule %s: %d %s", body, r.status, r.body)
	}
	var sc scheduleBody
	if err := json.Unmarshal(r.body, &sc); err != nil || sc.Object != "schedule" || sc.ID == "" {
		t.Fatalf("created schedule: %v %s", err, r.body)
	}
	return sc
}

func getSched(t *testing.T, env *stacktest.Env, id string) scheduleBody {
	t.Helper()
	r := call(t, "GET", env.URL+"/v1/schedules/"+id, "")
	var sc scheduleBody
	if r.status != 200 || json.Unmarshal(r.body, &sc) != nil {
		t.Fatalf("get schedule %s: %d %s", id, r.status, r.body)
	}
	return sc
}

func listScheds(t *testing.T, env *stacktest.Env, hdr ...string) []scheduleBody {
	t.Helper()
	r := call(t, "GET", env.URL+"/v1/schedules", "", hdr...)
	var page struct {
		Object string         `json:"object"`
		Data   []scheduleBody `json:"data"`
	}
	if r.status != 200 || json.Unmarshal(r.body, &page) != nil || page.Object != "list" || page.Data == nil {
		t.Fatalf("list schedules: %d %s", r.status, r.body)
	}
	return page.Data
}

// tick fires what is due on env's scheduler at now and waits for the
// outcomes of the runs it started.
func tick(t *testing.T, env *stacktest.Env, now time.Time) int {
	t.Helper()
	s := scheduler(t, env)
	n, err := s.Tick(t.Context(), now)
	if err != nil {
		t.Fatalf("Tick at %s: %v", now, err)
	}
	s.Wait()
	return n
}

// TestSchedulesAPI: create, list, read, change and delete a schedule; the
// next firing follows the cron in its zone.
func TestSchedulesAPI(t *testing.T) {
	t.Parallel()
	env, _ := fakeStack(t, stacktest.Options{})
	sc := createSched(t, env, `{"name":"daily","agent":"assistant","cron":"0 9 * * 1-5","timezone":"Europe/Paris","input":"Send the daily report","thread":"daily-report"}`)
	if sc.Tenant != "dev" || sc.Name != "daily" || sc.CatchUp != "one" || sc.Thread != "daily-report" || !sc.Enabled || sc.Source != "api" ||
		sc.NextAt == nil || !sc.NextAt.Equal(schedT0) {
		// 08:00 UTC on Monday is 09:00 in Paris: the first firing is now.
		t.Fatalf("created: %+v next %v", sc, sc.NextAt)
	}
	if got := listScheds(t, env); len(got) != 1 || got[0].ID != sc.ID {
		t.Fatalf("list: %+v", got)
	}
	if got := getSched(t, env, sc.ID); len(got.Firings) != 0 || got.Input != "Send the daily report" {
		t.Fatalf("get: %+v", got)
	}
	r := call(t, "PATCH", env.URL+"/v1/schedules/"+sc.ID, `{"cron":"@every 15m","catchUp":"none"}`)
	var up scheduleBody
	if r.status != 200 || json.Unmarshal(r.body, &up) != nil || up.Cron != "@every 15m" || up.CatchUp != "none" ||
		up.Timezone != "Europe/Paris" || up.NextAt == nil || !up.NextAt.Equal(schedT0.Add(15*time.Minute)) {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	r = call(t, "PATCH", env.URL+"/v1/schedules/"+sc.ID, `{"enabled":false}`)
	if r.status != 200 || getSched(t, env, sc.ID).NextAt != nil || getSched(t, env, sc.ID).Enabled {
		t.Fatalf("disable: %d %s", r.status, r.body)
	}
	// Taken names are a 409.
	createSched(t, env, `{"name":"other","agent":"assistant","cron":"@hourly","input":"x"}`)
	r = call(t, "POST", env.URL+"/v1/schedules", `{"name":"daily","agent":"assistant","cron":"@hourly","input":"x"}`)
	var e schedErr
	if r.status != 409 || json.Unmarshal(r.body, &e) != nil || e.Error.Code != "schedule_exists" {
		t.Fatalf("duplicate name: %d %s", r.status, r.body)
	}
	if r := call(t, "PATCH", env.URL+"/v1/schedules/"+sc.ID, `{"name":"other"}`); r.status != 409 {
		t.Fatalf("rename onto a taken name: %d %s", r.status, r.body)
	}
	if r := call(t, "DELETE", env.URL+"/v1/schedules/"+sc.ID, ""); r.status != 200 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	for _, m := range []string{"GET", "DELETE"} {
		r := call(t, m, env.URL+"/v1/schedules/"+sc.ID, "")
		if r.status != 404 || json.Unmarshal(r.body, &e) != nil || e.Error.Code != "schedule_not_found" {
			t.Fatalf("%s of a deleted schedule: %d %s", m, r.status, r.body)
		}
	}
	if r := call(t, "POST", env.URL+"/v1/schedules/"+sc.ID+"/run", ""); r.status != 404 {
		t.Fatalf("run of a deleted schedule: %d %s", r.status, r.body)
	}
}

// TestSchedulesBadInput: every bad request is a 400 in the control API's
// error envelope naming the field, and writes nothing.
func TestSchedulesBadInput(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: roleKeys})
	auth := []string{"Authorization", "Bearer sk-admin-0001"}
	ok := `"name":"n","agent":"assistant","input":"hi"`
	for _, tc := range []struct{ body, param, says string }{
		{``, "", "JSON object"},
		{`{"name":`, "", "not valid"},
		{`{` + ok + `,"cron":"@hourly","color":"red"}`, "", "color"},
		{`{"name":"n","input":"hi","cron":"@hourly"}`, "agent", "agent is required"},
		{`{"name":"n","agent":"nobody","input":"hi","cron":"@hourly"}`, "agent", "nobody"},
		{`{` + ok + `}`, "cron", "cron is required"},
		{`{` + ok + `,"cron":"0 9 * *"}`, "cron", "five fields"},
		{`{` + ok + `,"cron":"0 0 9 * * *"}`, "cron", "five fields"},
		{`{` + ok + `,"cron":"@every 10"}`, "cron", "@every"},
		{`{` + ok + `,"cron":"0 0 30 2 *"}`, "cron", "never"},
		{`{` + ok + `,"cron":"@hourly","timezone":"Europe/Atlantis"}`, "timezone", "Europe/Atlantis"},
		{`{` + ok + `,"cron":"@hourly","catchUp":"all"}`, "catchUp", "'one' or 'none'"},
		{`{"name":"n","agent":"assistant","cron":"@hourly"}`, "input", "input is required"},
		{`{"agent":"assistant","cron":"@hourly","input":"hi"}`, "name", "name is required"},
		{`{` + ok + `,"cron":"@hourly","thread":"bad\u0000id"}`, "thread", "thread"},
		{`{` + ok + `,"cron":"@hourly","key":"nobody"}`, "key", "nobody"},
	} {
		r := call(t, "POST", env.URL+"/v1/schedules", tc.body, auth...)
		var e schedErr
		if r.status != 400 || json.Unmarshal(r.body, &e) != nil || e.Error.Type != "invalid_request_error" ||
			e.Error.Param != tc.param || !strings.Contains(strings.ToLower(e.Error.Message), strings.ToLower(tc.says)) {
			t.Errorf("POST %s: want a 400 on %q saying %q, got %d %s", tc.body, tc.param, tc.says, r.status, r.body)
		}
	}
	if got := listScheds(t, env, auth...); len(got) != 0 {
		t.Fatalf("a refused request wrote a schedule: %+v", got)
	}
	// A key label of the tenant is fine; so is a PATCH of it, and a bad
	// PATCH changes nothing.
	sc := createSched(t, env, `{`+ok+`,"cron":"@hourly","key":"alice"}`, auth...)
	for _, tc := range []struct{ body, param string }{
		{`{"cron":"nope"}`, "cron"},
		{`{"agent":"other"}`, "agent"},
		{`{"timezone":"Nowhere/City"}`, "timezone"},
		{`{"input":""}`, "input"},
		{`{"enabled":"yes"}`, ""},
	} {
		r := call(t, "PATCH", env.URL+"/v1/schedules/"+sc.ID, tc.body, auth...)
		var e schedErr
		if r.status != 400 || json.Unmarshal(r.body, &e) != nil || e.Error.Param != tc.param {
			t.Errorf("PATCH %s: want a 400 on %q, got %d %s", tc.body, tc.param, r.status, r.body)
		}
	}
	if got := listScheds(t, env, auth...); len(got) != 1 || got[0].Cron != "@hourly" || got[0].Input != "hi" || got[0].Key != "alice" {
		t.Fatalf("a refused PATCH changed the schedule: %+v", got)
	}
}

// TestSchedulesRoles: only admin keys create, change, delete or run
// schedules (403 forbidden_role); every role of the tenant may read them,
// and no other tenant sees them.
func TestSchedulesRoles(t *testing.T) {
	t.Parallel()
	keys := append(append([]config.Key{}, roleKeys...), config.Key{Tenant: "globex", Secret: "sk-globex-001", Role: config.RoleAdmin, Label: "globex"})
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: keys})
	admin := []string{"Authorization", "Bearer sk-admin-0001"}
	body := `{"name":"n","agent":"assistant","cron":"@hourly","input":"hi"}`
	for _, key := range []string{"sk-caller-001", "sk-approver-1"} {
		forbiddenRole(t, key+" create", call(t, "POST", env.URL+"/v1/schedules", body, "Authorization", "Bearer "+key))
	}
	if got := listScheds(t, env, admin...); len(got) != 0 {
		t.Fatalf("a refused create wrote: %+v", got)
	}
	sc := createSched(t, env, body, admin...)
	for _, key := range []string{"sk-caller-001", "sk-approver-1"} {
		h := []string{"Authorization", "Bearer " + key}
		forbiddenRole(t, key+" patch", call(t, "PATCH", env.URL+"/v1/schedules/"+sc.ID, `{"enabled":false}`, h...))
		forbiddenRole(t, key+" delete", call(t, "DELETE", env.URL+"/v1/schedules/"+sc.ID, "", h...))
		forbiddenRole(t, key+" run", call(t, "POST", env.URL+"/v1/schedules/"+sc.ID+"/run", "", h...))
		if got := listScheds(t, env, h...); len(got) != 1 || !got[0].Enabled {
			t.Fatalf("%s reading schedules: %+v", key, got)
		}
	}
	if env.Upstream.Count() != 0 {
		t.Fatal("a refused run called the model")
	}
	other := []string{"Authorization", "Bearer sk-globex-001"}
	if got := listScheds(t, env, other...); len(got) != 0 {
		t.Fatalf("another tenant sees %+v", got)
	}
	if r := call(t, "GET", env.URL+"/v1/schedules/"+sc.ID, "", other...); r.status != 404 {
		t.Fatalf("another tenant reading the schedule: %d %s", r.status, r.body)
	}
	if r := call(t, "DELETE", env.URL+"/v1/schedules/"+sc.ID, "", other...); r.status != 404 {
		t.Fatalf("another tenant deleting the schedule: %d %s", r.status, r.body)
	}
}

// TestScheduleFiresOnTheFakeClock: a due firing runs once as a durable
// turn on a new thread, under the tenant's admin; ticking again runs
// nothing; after downtime the missed firings run once (catchUp one) or
// not at all (catchUp none), never a burst.
func TestScheduleFiresOnTheFakeClock(t *testing.T) {
	t.Parallel()
	env, fake := fakeStack(t, stacktest.Options{})
	every := createSched(t, env, `{"name":"every","agent":"assistant","cron":"@every 15m","input":"hello from the schedule"}`)
	skip := createSched(t, env, `{"name":"skip","agent":"other","cron":"@every 15m","input":"skipped?","catchUp":"none","thread":"skip-thread"}`)

	if n := tick(t, env, schedT0.Add(15*time.Minute-time.Second)); n != 0 {
		t.Fatalf("%d runs before the first firing", n)
	}
	fake.Advance(15 * time.Minute)
	if n := tick(t, env, fake.Now()); n != 2 {
		t.Fatalf("%d runs at the first firing, want 2", n)
	}
	if n := tick(t, env, fake.Now()); n != 0 {
		t.Fatalf("ticking again at the same time ran %d", n)
	}
	if c := env.Upstream.Count(); c != 2 {
		t.Fatalf("%d model calls, want 2", c)
	}
	got := getSched(t, env, every.ID)
	if len(got.Firings) != 1 || got.LastStatus != store.FiringCompleted || got.Firings[0].Status != store.FiringCompleted ||
		!got.Firings[0].DueAt.Equal(schedT0.Add(15*time.Minute)) || got.NextAt == nil || !got.NextAt.Equal(schedT0.Add(30*time.Minute)) {
		t.Fatalf("after the first firing: %+v", got)
	}
	th := env.Thread(t, "dev", got.LastThreadID)
	if th.Agent != "assistant" || th.Status != store.Idle || th.RunID != got.LastRunID {
		t.Fatalf("the scheduled run's thread: %+v", th)
	}
	msgs, _ := env.Store.Messages(t.Context(), "dev", th.ID)
	if len(msgs) != 2 || msgs[0].Role != message.User || msgs[0].Content != "hello from the schedule" || msgs[1].Content != "echo: hello from the schedule" {
		t.Fatalf("the scheduled turn's messages: %+v", msgs)
	}
	runs, _ := env.Store.ListRuns(t.Context(), "dev", th.ID)
	if len(runs) != 1 || runs[0].Key != "dev" {
		t.Fatalf("the scheduled run counts under the tenant's admin: %+v", runs)
	}

	// Down for two hours (eight firings missed): one catch-up run of the
	// latest, none of the catchUp none schedule.
	fake.Advance(2*time.Hour + 5*time.Minute)
	if n := tick(t, env, fake.Now()); n != 1 {
		t.Fatalf("%d runs after downtime, want 1", n)
	}
	got = getSched(t, env, every.ID)
	if len(got.Firings) != 2 || !got.Firings[0].DueAt.Equal(schedT0.Add(2*time.Hour+15*time.Minute)) ||
		!got.NextAt.Equal(schedT0.Add(2*time.Hour+30*time.Minute)) {
		t.Fatalf("after the catch-up: %+v", got)
	}
	if got.LastThreadID == got.Firings[1].ThreadID {
		t.Fatal("thread new reused a thread")
	}
	sk := getSched(t, env, skip.ID)
	if len(sk.Firings) != 1 || !sk.NextAt.Equal(schedT0.Add(2*time.Hour+30*time.Minute)) {
		t.Fatalf("catchUp none after downtime: %+v", sk)
	}
	if c := env.Upstream.Count(); c != 3 {
		t.Fatalf("%d model calls, want 3", c)
	}
	// The next firing is on time again, for both.
	fake.Advance(10 * time.Minute)
	if n := tick(t, env, fake.Now()); n != 2 {
		t.Fatalf("%d runs at the next firing, want 2", n)
	}
	// A named thread takes every firing's turn.
	if msgs, _ := env.Store.Messages(t.Context(), "dev", "skip-thread"); len(msgs) != 4 {
		t.Fatalf("the named thread holds %d messages, want two turns", len(msgs))
	}
}

// TestScheduleFromTheAgentFile: an agent file's schedules are written for
// the tenant, fire like the API's, can be disabled but not deleted through
// the API, and go when the file drops them.
func TestScheduleFromTheAgentFile(t *testing.T) {
	t.Parallel()
	var specs []*agent.Spec
	env, fake := fakeStack(t, stacktest.Options{Agents: func(env *stacktest.Env) []*agent.Spec {
		specs = stacktest.DefaultAgents(env, "openai/test-model")
		specs[0].Schedules = []agent.Schedule{{Name: "morning", Cron: "0 9 * * *", Timezone: "Europe/Paris", Input: "good morning", Thread: "mornings"}}
		return specs
	}})
	if err := app.SyncSchedules(t.Context(), env.Config, env.Store, specs, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	list := listScheds(t, env)
	if len(list) != 1 || list[0].ID != schedule.FileID("assistant", "morning") || list[0].Source != "file" || list[0].CatchUp != "one" ||
		!list[0].NextAt.Equal(schedT0) { // 09:00 Paris is 08:00 UTC: now
		t.Fatalf("file schedules: %+v", list)
	}
	id := list[0].ID
	if n := tick(t, env, fake.Now()); n != 1 {
		t.Fatalf("%d runs at the file schedule's firing", n)
	}
	if r := call(t, "DELETE", env.URL+"/v1/schedules/"+id, ""); r.status != 409 {
		t.Fatalf("delete of a file schedule: %d %s", r.status, r.body)
	}
	if r := call(t, "PATCH", env.URL+"/v1/schedules/"+id, `{"cron":"@hourly"}`); r.status != 400 {
		t.Fatalf("changing a file schedule's cron: %d %s", r.status, r.body)
	}
	if r := call(t, "PATCH", env.URL+"/v1/schedules/"+id, `{"enabled":false}`); r.status != 200 {
		t.Fatalf("disabling a file schedule: %d %s", r.status, r.body)
	}
	// A reload that keeps it keeps it disabled; one that drops it deletes it.
	if err := app.SyncSchedules(t.Context(), env.Config, env.Store, specs, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if got := getSched(t, env, id); got.Enabled || len(got.Firings) != 1 {
		t.Fatalf("after a reload: %+v", got)
	}
	specs[0].Schedules = nil
	if err := app.SyncSchedules(t.Context(), env.Config, env.Store, specs, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if got := listScheds(t, env); len(got) != 0 {
		t.Fatalf("after the file dropped it: %+v", got)
	}
}

// TestScheduledRunPausesForApproval: a scheduled run is a normal durable
// turn: it pauses on a tool that needs approval, the decision is made
// through the API, and the resumed turn runs the tool once.
func TestScheduledRunPausesForApproval(t *testing.T) {
	t.Parallel()
	env, clk := fakeStack(t, stacktest.Options{})
	sc := createSched(t, env, `{"name":"refunds","agent":"assistant","cron":"0 0 1 1 *","input":"refund the late orders","thread":"nightly-refunds"}`)
	r := call(t, "POST", env.URL+"/v1/schedules/"+sc.ID+"/run", "")
	var f struct {
		Object string `json:"object"`
		store.Firing
	}
	if r.status != 202 || json.Unmarshal(r.body, &f) != nil || f.Object != "schedule.firing" || !f.Manual || f.ThreadID != "nightly-refunds" {
		t.Fatalf("run now: %d %s", r.status, r.body)
	}
	scheduler(t, env).Wait()
	got := getSched(t, env, sc.ID)
	if got.LastStatus != store.FiringWaiting || len(got.Firings) != 1 || got.Firings[0].Status != store.FiringWaiting ||
		!got.NextAt.Equal(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("the paused firing: %+v", got)
	}
	it := pendingOf(t, env, "nightly-refunds")
	if it.Tool != "refund" || env.Calls.Get("refund") != 0 {
		t.Fatalf("pending: %+v", it)
	}
	// The thread waits: a firing now is refused by the thread, and
	// recorded as failed, without a model call.
	calls := env.Upstream.Count()
	r = call(t, "POST", env.URL+"/v1/schedules/"+sc.ID+"/run", "")
	if r.status != 409 {
		t.Fatalf("a run on the waiting thread: %d %s", r.status, r.body)
	}
	if got := getSched(t, env, sc.ID); got.LastStatus != store.FiringFailed || env.Upstream.Count() != calls {
		t.Fatalf("the refused firing: %+v", got)
	}
	if r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", ""); r.status != 200 {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	stacktest.WaitFor(t, "the resumed scheduled turn", func() bool {
		return env.Thread(t, "dev", "nightly-refunds").Status == store.Idle
	})
	if n := env.Calls.Get("refund"); n != 1 {
		t.Fatalf("refund ran %d times", n)
	}
	msgs, _ := env.Store.Messages(t.Context(), "dev", "nightly-refunds")
	if last := msgs[len(msgs)-1]; !strings.HasPrefix(last.Content, "Refund result:") {
		t.Fatalf("the resumed turn ended with %+v", last)
	}
	// The scheduler's next look settles the paused firing from its
	// resumed run: completed, not waiting for ever.
	if n := tick(t, env, clk.Now()); n != 0 {
		t.Fatalf("the tick started %d runs", n)
	}
	got = getSched(t, env, sc.ID)
	if len(got.Firings) != 2 || got.Firings[1].Status != store.FiringCompleted || got.Firings[1].Error != "" ||
		got.Firings[0].Status != store.FiringFailed {
		t.Fatalf("firings after the approval: %+v", got.Firings)
	}
}

// TestScheduleReplicasFireOnce: two replicas ticking at once for the same
// due firing run it once: one claim, one run, one model call.
func TestScheduleReplicasFireOnce(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			fake := clock.NewFake(schedT0)
			a, b := stacktest.Replicas(t, driver == "postgres", stacktest.Options{Configure: func(cfg *config.Config) { cfg.Clock = fake }})
			createSched(t, a, `{"name":"race","agent":"assistant","cron":"*/5 * * * *","input":"only once"}`)
			for round := 1; round <= 3; round++ {
				fake.Advance(5 * time.Minute)
				var wg sync.WaitGroup
				started := make([]int, 2)
				for i, env := range []*stacktest.Env{a, b} {
					wg.Go(func() { started[i] = tick(t, env, fake.Now()) })
				}
				wg.Wait()
				if started[0]+started[1] != 1 {
					t.Fatalf("round %d: the replicas started %v runs, want one in all", round, started)
				}
				calls := a.Upstream.Count()
				if a != b {
					calls += b.Upstream.Count()
				}
				if calls != round {
					t.Fatalf("round %d: %d model calls, want %d", round, calls, round)
				}
			}
			sc := listScheds(t, b)[0]
			if got := getSched(t, b, sc.ID); len(got.Firings) != 3 || got.LastStatus != store.FiringCompleted {
				t.Fatalf("firings: %+v", got)
			}
			ths, _ := a.Store.ListThreads(t.Context(), "dev", store.ThreadFilter{})
			if len(ths) != 3 {
				t.Fatalf("%d threads, want one per firing", len(ths))
			}
		})
	}
}

// TestScheduleStaleClaimIsTakenOver: a firing whose claimer died between
// the claim and the run's start is started, once, by a scheduler a
// minute later with the ids chosen at the claim; one whose run had begun
// is left to the engine's recovery, not run again.
func TestScheduleStaleClaimIsTakenOver(t *testing.T) {
	t.Parallel()
	env, fake := fakeStack(t, stacktest.Options{})
	sc := createSched(t, env, `{"name":"nightly","agent":"assistant","cron":"0 0 1 1 *","input":"night work","thread":"new"}`)
	due := schedT0.Add(time.Minute)
	claimed := func(due time.Time, thread, run string) {
		t.Helper()
		ok, err := env.Store.ClaimFiring(t.Context(), store.ClaimFiring{Firing: store.Firing{Tenant: "dev", ScheduleID: sc.ID,
			DueAt: due, Owner: "node-dead", ClaimedAt: due, ThreadID: thread, RunID: run}})
		if err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
	}
	claimed(due, "thread_left", "run_left")
	fake.Advance(90 * time.Second) // not yet stale
	if n := tick(t, env, fake.Now()); n != 0 || env.Upstream.Count() != 0 {
		t.Fatalf("a fresh claim was taken over: %d runs", n)
	}
	fake.Advance(time.Minute)
	if n := tick(t, env, fake.Now()); n != 1 {
		t.Fatalf("%d runs from the stale claim, want 1", n)
	}
	if n := tick(t, env, fake.Now()); n != 0 || env.Upstream.Count() != 1 {
		t.Fatalf("the stale claim ran again: %d runs, %d model calls", n, env.Upstream.Count())
	}
	if th := env.Thread(t, "dev", "thread_left"); th.RunID != "run_left" || th.Status != store.Idle {
		t.Fatalf("the taken-over run: %+v", th)
	}
	fs := getSched(t, env, sc.ID).Firings
	if len(fs) != 1 || fs[0].Status != store.FiringCompleted {
		t.Fatalf("firings: %+v", fs)
	}

	// A claimer that died after its run began: the thread holds the run.
	due2 := fake.Now()
	claimed(due2, "thread_begun", "run_begun")
	run, err := env.Runner.Start(t.Context(), engineInput("dev", "assistant", "thread_begun", "run_begun", "night work"))
	if err != nil {
		t.Fatal(err)
	}
	for range run.Events() {
	}
	fake.Advance(2 * time.Minute)
	if n := tick(t, env, fake.Now()); n != 0 || env.Upstream.Count() != 2 {
		t.Fatalf("a begun run was started again: %d runs, %d model calls", n, env.Upstream.Count())
	}
	// Its outcome is settled from the run's record: it completed.
	if fs := getSched(t, env, sc.ID).Firings; fs[0].Status != store.FiringCompleted || fs[0].RunID != "run_begun" {
		t.Fatalf("the begun firing: %+v", fs[0])
	}
}

func engineInput(tenant, agentName, thread, run, text string) engine.Input {
	return engine.Input{Tenant: tenant, Agent: agentName, ThreadID: thread, RunID: run,
		Messages: []message.Message{{Role: message.User, Content: text}}}
}

// TestScheduledRunApprovedByWebhook: a scheduled run's pause reaches a
// webhook endpoint as decision.pending, and the endpoint's own code
// approves it through the API: the resumed run calls the tool once.
func TestScheduledRunApprovedByWebhook(t *testing.T) {
	t.Parallel()
	var base atomic.Value // the stack's URL, set before any delivery
	approved := make(chan string, 4)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n struct {
			Type string `json:"type"`
			Data struct {
				DecisionID string `json:"decisionId"`
				ThreadID   string `json:"threadId"`
			} `json:"data"`
		}
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if n.Type == "decision.pending" {
			resp, err := http.Post(base.Load().(string)+"/v1/hitl/"+n.Data.DecisionID+"/approve", "application/json", nil)
			if err != nil || resp.StatusCode != 200 {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			resp.Body.Close()
			approved <- n.Data.ThreadID
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rcv.Close)
	env := stacktest.New(t, stacktest.Options{Configure: func(c *config.Config) {
		c.WebhookURLs = []string{rcv.URL + "/hook"}
		c.WebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	}})
	base.Store(env.URL)
	d, err := notify.New(notify.Config{Store: env.Store, Endpoints: env.Config.WebhookURLs, Secret: env.Config.WebhookSecret,
		Poll: 20 * time.Millisecond, PublicURL: env.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })

	sc := createSched(t, env, `{"name":"refunds","agent":"assistant","cron":"@daily","input":"refund the late orders","thread":"hooked-refunds"}`)
	if r := call(t, "POST", env.URL+"/v1/schedules/"+sc.ID+"/run", ""); r.status != 202 {
		t.Fatalf("run now: %d %s", r.status, r.body)
	}
	if th := testwait.Recv(t, approved, "the webhook's approval"); th != "hooked-refunds" {
		t.Fatalf("the webhook approved a decision of thread %q", th)
	}
	stacktest.WaitFor(t, "the resumed scheduled turn", func() bool {
		return env.Thread(t, "dev", "hooked-refunds").Status == store.Idle
	})
	if n := env.Calls.Get("refund"); n != 1 {
		t.Fatalf("refund ran %d times", n)
	}
	it, err := env.Store.ListInterrupts(t.Context(), "dev", store.InterruptFilter{ThreadID: "hooked-refunds", Status: store.Approved})
	if err != nil || len(it) != 1 || it[0].Decision == nil || it[0].Decision.Via != "api" {
		t.Fatalf("the decision: %v %+v", err, it)
	}
}

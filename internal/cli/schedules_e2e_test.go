package cli_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/schedule"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/store/sqlite"
)

// schedulesProject writes a project whose agent file declares a schedule.
func schedulesProject(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	agentFile := `import { defineDeepAgent } from 'stackbone';
export default defineDeepAgent({
  name: 'reports', model: 'openai/test-model', instructions: 'You write reports.', todos: false, files: false,
  schedules: [{ name: 'hourly', cron: '@every 1h', input: 'Send the hourly report', thread: 'hourly-report' }],
});
`
	if err := os.WriteFile(filepath.Join(dir, "agents", "reports.ts"), []byte(agentFile), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func scheduleList(t *testing.T, env []string) []store.Schedule {
	t.Helper()
	r := run(t, env, "schedules", "list", "--json")
	if r.code != 0 {
		t.Fatalf("schedules list: %d %s", r.code, r.stderr)
	}
	var out []store.Schedule
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("schedules list --json: %v: %s", err, r.stdout)
	}
	return out
}

// TestSchedulesCLI: `stackbone schedules list|add|run|rm` against a dev
// server whose agent file declares a schedule; a firing missed while the
// server was down runs once when it starts again, not once per missed
// firing.
func TestSchedulesCLI(t *testing.T) {
	t.Parallel()
	mock := modeltest.Handler(modeltest.OpenAI, script.MustParse(`[{"reply":{"text":"echo: {{lastUser}}"}}]`))
	up := httptest.NewServer(mock)
	t.Cleanup(up.Close)
	dir := schedulesProject(t)
	srvEnv := []string{"OPENAI_BASE_URL=" + up.URL + "/v1", "OPENAI_API_KEY=sk-test"}
	p := startServer(t, srvEnv, "dev", "--dir", dir, "--addr", "127.0.0.1:0")
	env := []string{"STACKBONE_URL=" + p.URL()}

	var list []store.Schedule
	stacktest.WaitFor(t, "the agent file's schedule", func() bool { list = scheduleList(t, env); return len(list) == 1 })
	file := list[0]
	if file.ID != schedule.FileID("reports", "hourly") || file.Source != "file" || file.Thread != "hourly-report" || file.NextAt == nil {
		t.Fatalf("the file schedule: %+v", file)
	}
	table := run(t, env, "schedules", "list")
	if table.code != 0 || !strings.Contains(table.stdout, "NEXT") || !strings.Contains(table.stdout, "@every 1h") || !strings.Contains(table.stdout, file.ID) {
		t.Fatalf("schedules list: %d %s %s", table.code, table.stdout, table.stderr)
	}

	// Bad input is refused with the server's message, and adds nothing.
	bad := run(t, env, "schedules", "add", "--agent", "reports", "--name", "bad", "--cron", "0 9 * *", "--input", "x")
	if bad.code == 0 || !strings.Contains(bad.stderr, "five fields") {
		t.Fatalf("add with a bad cron: %d %q %q", bad.code, bad.stdout, bad.stderr)
	}
	add := run(t, env, "schedules", "add", "--agent", "reports", "--name", "weekly", "--cron", "0 9 * * MON",
		"--timezone", "Europe/Paris", "--input", "Send the weekly report")
	m := regexp.MustCompile(`Created schedule (sch_\S+) `).FindStringSubmatch(add.stdout)
	if add.code != 0 || m == nil || !strings.Contains(add.stdout, "next firing") {
		t.Fatalf("schedules add: %d %q %q", add.code, add.stdout, add.stderr)
	}
	id := m[1]
	ran := run(t, env, "schedules", "run", id)
	tm := regexp.MustCompile(`on thread (\S+) `).FindStringSubmatch(ran.stdout)
	if ran.code != 0 || tm == nil {
		t.Fatalf("schedules run: %d %q %q", ran.code, ran.stdout, ran.stderr)
	}
	stacktest.WaitFor(t, "the run's outcome", func() bool {
		for _, s := range scheduleList(t, env) {
			if s.ID == id {
				return s.LastStatus == store.FiringCompleted
			}
		}
		return false
	})
	show := run(t, env, "threads", "show", tm[1])
	if show.code != 0 || !strings.Contains(show.stdout, "echo: Send the weekly report") {
		t.Fatalf("the scheduled run's thread: %d %s %s", show.code, show.stdout, show.stderr)
	}
	if table := run(t, env, "schedules", "list"); !strings.Contains(table.stdout, "completed") {
		t.Fatalf("schedules list after the run: %s", table.stdout)
	}
	if rm := run(t, env, "schedules", "rm", file.ID); rm.code == 0 || !strings.Contains(rm.stderr, "agent file") {
		t.Fatalf("rm of the file schedule: %d %q %q", rm.code, rm.stdout, rm.stderr)
	}
	if rm := run(t, env, "schedules", "rm", id); rm.code != 0 || !strings.Contains(rm.stdout, "Deleted schedule "+id) {
		t.Fatalf("schedules rm: %d %q %q", rm.code, rm.stdout, rm.stderr)
	}
	if got := scheduleList(t, env); len(got) != 1 {
		t.Fatalf("after rm: %+v", got)
	}
	calls := mock.Count()

	// Down (kill -9) for three hours of the hourly schedule: its next
	// firing is set three hours and a minute back, as if the server had
	// been down since then.
	p.Kill(t)
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, ".stackbone", "stackbone.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := st.GetSchedule(context.Background(), "dev", file.ID)
	if err != nil {
		t.Fatal(err)
	}
	missed := time.Now().UTC().Add(-3*time.Hour - time.Minute).Truncate(time.Second)
	sc.NextAt = &missed
	if err := st.UpdateSchedule(context.Background(), *sc); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()

	p = startServer(t, srvEnv, "dev", "--dir", dir, "--addr", "127.0.0.1:0")
	env = []string{"STACKBONE_URL=" + p.URL()}
	var after store.Schedule
	stacktest.WaitFor(t, "the catch-up run", func() bool {
		after = scheduleList(t, env)[0]
		return after.LastStatus == store.FiringCompleted
	})
	if want := missed.Add(3 * time.Hour); after.LastDueAt == nil || !after.LastDueAt.Equal(want) {
		t.Fatalf("the catch-up ran the firing due %v, want the latest missed, %s", after.LastDueAt, want)
	}
	if after.NextAt == nil || !after.NextAt.After(time.Now()) {
		t.Fatalf("after the catch-up the next firing is %v, not in the future", after.NextAt)
	}
	if n := mock.Count() - calls; n != 1 {
		t.Fatalf("%d model calls after the restart, want the one catch-up run", n)
	}
	msgs := run(t, env, "threads", "show", "hourly-report")
	if msgs.code != 0 || strings.Count(msgs.stdout, "echo: Send the hourly report") != 1 {
		t.Fatalf("the catch-up's thread: %s %s", msgs.stdout, msgs.stderr)
	}
}

// TestScheduledRunSurvivesKill: a server killed (-9) during a scheduled
// run's model call finishes the run after its restart, as any durable
// turn, and the firing does not run again.
func TestScheduledRunSurvivesKill(t *testing.T) {
	t.Parallel()
	mock := modeltest.Handler(modeltest.OpenAI, script.MustParse(`[{"reply":{"text":"echo: {{lastUser}}"}}]`))
	release := mock.HoldOnce(script.When{LastUser: "nightly"})
	t.Cleanup(release)
	up := httptest.NewServer(mock)
	t.Cleanup(up.Close)
	dir := schedulesProject(t)
	srvEnv := []string{"OPENAI_BASE_URL=" + up.URL + "/v1", "OPENAI_API_KEY=sk-test"}
	p := startServer(t, srvEnv, "dev", "--dir", dir, "--addr", "127.0.0.1:0")
	env := []string{"STACKBONE_URL=" + p.URL()}
	add := run(t, env, "schedules", "add", "--agent", "reports", "--name", "night", "--cron", "0 3 * * *",
		"--input", "nightly work", "--thread", "night")
	m := regexp.MustCompile(`Created schedule (sch_\S+) `).FindStringSubmatch(add.stdout)
	if add.code != 0 || m == nil {
		t.Fatalf("schedules add: %d %q %q", add.code, add.stdout, add.stderr)
	}
	if r := run(t, env, "schedules", "run", m[1]); r.code != 0 {
		t.Fatalf("schedules run: %d %q", r.code, r.stderr)
	}
	stacktest.WaitFor(t, "the scheduled run's model call", func() bool { return mock.Count() >= 1 })
	p.Kill(t)
	release()

	p = startServer(t, srvEnv, "dev", "--dir", dir, "--addr", "127.0.0.1:0")
	env = []string{"STACKBONE_URL=" + p.URL()}
	var th struct {
		Status   string `json:"status"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	stacktest.WaitFor(t, "the recovered run", func() bool {
		return getJSON(t, p.URL()+"/v1/threads/night", &th) == 200 && th.Status == "idle"
	})
	answers := 0
	for _, msg := range th.Messages {
		if msg.Content == "echo: nightly work" {
			answers++
		}
	}
	if answers != 1 || len(th.Messages) != 2 {
		t.Fatalf("the recovered thread: %+v", th)
	}
	var sc struct {
		Firings []store.Firing `json:"firings"`
	}
	// The restarted scheduler settles the firing from its recovered run.
	waitUntil(t, "the firing to be settled as completed", 20*time.Second, func() bool {
		return getJSON(t, p.URL()+"/v1/schedules/"+m[1], &sc) == 200 && len(sc.Firings) == 1 && sc.Firings[0].Status == store.FiringCompleted
	})
	if n := mock.Count(); n != 2 {
		t.Fatalf("%d model calls, want the killed one and its retry", n)
	}
}

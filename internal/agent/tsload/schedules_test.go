package tsload

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/agent"
)

// TestSchedules: schedules reach the Spec with their defaults filled in
// (thread new, catch-up one).
func TestSchedules(t *testing.T) {
	s := loadOne(t, map[string]string{"agents/a.ts": `import { defineDeepAgent } from 'stackbone';
export default defineDeepAgent({ name: 'a', model: 'openai/gpt-4o', schedules: [
  { name: 'daily', cron: '0 9 * * 1-5', timezone: 'Europe/Paris', input: 'Send the daily report', thread: 'daily-report' },
  { name: 'watch', cron: '@every 15m', input: 'Check', catchUp: 'none', key: 'ops' },
] });
`}, Options{})
	want := []agent.Schedule{
		{Name: "daily", Cron: "0 9 * * 1-5", Timezone: "Europe/Paris", Input: "Send the daily report", Thread: "daily-report", CatchUp: "one"},
		{Name: "watch", Cron: "@every 15m", Input: "Check", Thread: "new", CatchUp: "none", Key: "ops"},
	}
	if !reflect.DeepEqual(s.Schedules, want) {
		t.Fatalf("schedules %+v, want %+v", s.Schedules, want)
	}
}

// TestScheduleErrors: a malformed schedule is a load error at the call
// site (the cron itself is parsed when the server checks the agents).
func TestScheduleErrors(t *testing.T) {
	head := "import { defineDeepAgent } from 'stackbone';\n"
	for _, c := range []struct{ name, schedules, want string }{
		{"not a list", `{ name: 'x' }`, `agent "a": schedules must be an array`},
		{"unknown field", `[{ name: 'x', cron: '@hourly', input: 'i', every: 5 }]`, `agent "a": schedules[0]: unknown field "every"`},
		{"no name", `[{ cron: '@hourly', input: 'i' }]`, `agent "a": schedules[0]: name is required`},
		{"duplicate name", `[{ name: 'x', cron: '@hourly', input: 'i' }, { name: 'x', cron: '@daily', input: 'j' }]`, `duplicate schedule name "x"`},
		{"no cron", `[{ name: 'x', input: 'i' }]`, `schedules[0] (x): cron is required`},
		{"no input", `[{ name: 'x', cron: '@hourly' }]`, `schedules[0] (x): input is required`},
		{"bad catchUp", `[{ name: 'x', cron: '@hourly', input: 'i', catchUp: 'all' }]`, `catchUp: unknown policy "all" (allowed: 'one', 'none')`},
		{"timezone not a string", `[{ name: 'x', cron: '@hourly', input: 'i', timezone: 1 }]`, `schedules[0] (x): timezone must be a string`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := writeProject(t, map[string]string{"agents/a.ts": head +
				"export default defineDeepAgent({ name: 'a', model: 'openai/x', schedules: " + c.schedules + " as any });\n"})
			_, err := LoadDir(context.Background(), dir, Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "agents/a.ts:2:") {
				t.Fatalf("error = %v\nwant it to contain %q at the call site", err, c.want)
			}
		})
	}
}

package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAgentsCheckFails: a syntax error, a scripted model without its script
// and a project without agents each make `agents check` exit 1 with one
// clear line naming the file (file:line:col where there is a position).
func TestAgentsCheckFails(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, file, src, want string }{
		{"syntax", "bad.ts", "export default {\n  name: 'x',,\n};\n", "agents/bad.ts:2:13: "},
		{"script", "c.ts", "import { defineDeepAgent } from 'stackbone';\nexport default defineDeepAgent({ name: 'c', model: 'scripted/nope' });\n",
			`agents/c.ts: agent c: model "scripted/nope"`},
		{"schedule", "s.ts", "import { defineDeepAgent } from 'stackbone';\nexport default defineDeepAgent({ name: 's', model: 'openai/x', schedules: [{ name: 'daily', cron: '0 9 * *', input: 'go' }] });\n",
			`agents/s.ts: agent s: schedule "daily": cron: "0 9 * *"`},
		{"empty", "", "", "no agents in "},
	} {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
			t.Fatal(err)
		}
		if tc.file != "" {
			if err := os.WriteFile(filepath.Join(dir, "agents", tc.file), []byte(tc.src), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		r := run(t, nil, "agents", "check", "--dir", dir)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || r.stdout != "" {
			t.Errorf("%s: agents check: %d stdout %q stderr %q", tc.name, r.code, r.stdout, r.stderr)
		}
	}
}

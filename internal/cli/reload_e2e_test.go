package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func agentFile(name string) string {
	return `import { defineDeepAgent } from 'stackbone';
export default defineDeepAgent({ name: '` + name + `', model: 'scripted/demo', instructions: 'Hi.' });
`
}

func modelIDs(t *testing.T, url string) string {
	var page struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	getJSON(t, url+"/v1/models", &page)
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	return strings.Join(ids, ",")
}

// TestDevReloadsAgents edits agent files under a running `dev` server: a good
// edit is picked up, a broken one keeps the last good agents and is logged.
func TestDevReloadsAgents(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	agents := filepath.Join(dir, "agents")
	if err := os.MkdirAll(agents, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(agents, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("demo.script.json", `[{"reply":{"text":"hi"}}]`)
	write("one.ts", agentFile("one"))
	p := startServer(t, nil, "dev", "--dir", dir, "--addr", "127.0.0.1:0")
	if got := modelIDs(t, p.URL()); got != "one" {
		t.Fatalf("models %q", got)
	}
	// The watcher starts just after the listening line, so a first write may
	// come before it watches: the file is written again every half second
	// until the agent is served.
	rewrite := every(500 * time.Millisecond)
	waitUntil(t, "the new agent to load", 10*time.Second, func() bool {
		if rewrite() {
			write("two.ts", agentFile("two"))
		}
		return modelIDs(t, p.URL()) == "one,two"
	})

	write("two.ts", "import { defineDeepAgent } from 'stackbone';\nexport default defineDeepAgent({ name: 'two', model: \n")
	waitUntil(t, "the broken edit to be logged", 10*time.Second, func() bool {
		return strings.Contains(p.Logs.String(), "agent reload failed") && strings.Contains(p.Logs.String(), "agents/two.ts:")
	})
	if got := modelIDs(t, p.URL()); got != "one,two" {
		t.Fatalf("a broken edit must keep the last good agents, got %q", got)
	}
}

// TestStartNeedsKeysAndReportsBadAgents: start refuses to run without keys,
// and a syntax error stops the server with file:line:col.
func TestStartNeedsKeysAndReportsBadAgents(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := run(t, []string{"STACKBONE_API_KEYS="}, "start", "--dir", dir, "--addr", "127.0.0.1:0")
	if r.code == 0 || !strings.Contains(r.stderr, "STACKBONE_API_KEYS") {
		t.Fatalf("start without keys: %d %q", r.code, r.stderr)
	}
	if err := os.WriteFile(filepath.Join(dir, "agents", "bad.ts"), []byte("export default {\n  name: 'x',,\n};\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = run(t, nil, "dev", "--dir", dir, "--addr", "127.0.0.1:0")
	if r.code == 0 || !strings.Contains(r.stderr, "agents/bad.ts:2:") {
		t.Fatalf("syntax error: %d %q", r.code, r.stderr)
	}
}

func TestStatelessApprovalFlagIsValidated(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"dev", "start"} {
		// The flag wins over the environment, and a bad value stops the server with a clear line.
		r := run(t, []string{"STACKBONE_STATELESS_APPROVAL=refuse", "STACKBONE_API_KEYS=acme:acme-secret-key"},
			mode, "--dir", dir, "--addr", "127.0.0.1:0", "--stateless-approval", "ask")
		if r.code == 0 || !strings.Contains(r.stderr, `stateless approval "ask" must be run or refuse`) {
			t.Fatalf("%s --stateless-approval ask: %d %q", mode, r.code, r.stderr)
		}
	}
}

// TestApprovalTTLFlagIsValidated: dev and start take --approval-ttl, which
// wins over STACKBONE_APPROVAL_TTL; a negative one stops the server with a
// clear line.
func TestApprovalTTLFlagIsValidated(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"dev", "start"} {
		r := run(t, []string{"STACKBONE_APPROVAL_TTL=30m", "STACKBONE_API_KEYS=acme:acme-secret-key"},
			mode, "--dir", dir, "--addr", "127.0.0.1:0", "--approval-ttl", "-1s")
		if r.code == 0 || !strings.Contains(r.stderr, "approval TTL -1s must not be negative") {
			t.Fatalf("%s --approval-ttl -1s: %d %q", mode, r.code, r.stderr)
		}
	}
}

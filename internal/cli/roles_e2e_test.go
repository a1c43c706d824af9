package cli_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// stackbone hitl approve with a caller key prints the server's 403 and
// decides nothing; with an approver key it approves, recorded under the
// key's label.
func TestHitlApproveKeyRoles(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: []config.Key{
		{Tenant: "acme", Secret: "sk-caller-0123", Role: config.RoleCaller, Label: "acme"},
		{Tenant: "acme", Secret: "sk-approver-01", Role: config.RoleApprover, Label: "alice"}}})
	body := `{"model":"assistant","messages":[{"role":"user","content":"please refund my order"}]}`
	req, _ := http.NewRequest("POST", env.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-stackbone-session", "cli-roles")
	req.Header.Set("Authorization", "Bearer sk-caller-0123")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	its, err := env.Store.ListInterrupts(context.Background(), "acme", store.InterruptFilter{ThreadID: "cli-roles"})
	if err != nil || len(its) != 1 {
		t.Fatalf("want one pending decision: %v %v", its, err)
	}
	id := its[0].ID

	r := run(t, []string{"STACKBONE_API_KEY=sk-caller-0123"}, "hitl", "approve", id, "--yes", "--url", env.URL)
	if r.code == 0 || !strings.Contains(r.stderr, `role "caller", which cannot decide`) {
		t.Fatalf("caller approve: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if it, _ := env.Store.GetInterrupt(t.Context(), "acme", id); it.Status != store.Pending {
		t.Fatalf("a refused approve decided: %+v", it)
	}
	r = run(t, nil, "hitl", "approve", id, "--yes", "--url", env.URL, "--api-key", "sk-approver-01")
	if r.code != 0 || !strings.Contains(r.stdout, "Approved "+id) {
		t.Fatalf("approver approve: %d %s %s", r.code, r.stdout, r.stderr)
	}
	stacktest.WaitFor(t, "resumed turn", func() bool { return env.Thread(t, "acme", "cli-roles").Status == store.Idle })
	if it, _ := env.Store.GetInterrupt(t.Context(), "acme", id); it.Decision == nil || it.Decision.By != "alice" || it.Decision.ClaimedVia != "cli" {
		t.Fatalf("decision %+v", it.Decision)
	}
}

// TestQuorumRefusesUnlabelledApproverKeys: decisions count principals by
// key label, so `start` refuses a tool needing 2 approvals while two
// approver keys of the tenant have no label (they would be one
// principal), naming the tool, the tenant and the fix; labelled keys start.
func TestQuorumRefusesUnlabelledApproverKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"agents/demo.script.json": `[{"reply":{"text":"hi"}}]`,
		"agents/pay.ts": `import { defineDeepAgent, tool } from 'stackbone';
export default defineDeepAgent({
  name: 'pay', model: 'scripted/demo',
  tools: { refund: tool({ needsApproval: { approvals: 2 }, async execute() { return 'ok'; } }) },
});
`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A server that starts instead is killed after 20s and fails below.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "start", "--dir", dir, "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "STACKBONE_API_KEYS=acme:caller-key-0001:caller,acme:approver-key-01:approver,acme:approver-key-02:approver")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	r := result{stderr: stderr.String()}
	if err != nil {
		r.code = 1
	}
	if ctx.Err() != nil || r.code == 0 || !strings.Contains(r.stderr, "tool refund needs 2 approvals") || !strings.Contains(r.stderr, `tenant "acme" has 2 keys that may decide labelled "acme"`) ||
		!strings.Contains(r.stderr, "tenant:secret:approver:NAME") {
		t.Fatalf("start with a quorum tool and unlabelled approver keys: %d %q", r.code, r.stderr)
	}
	p := startServer(t, []string{"STACKBONE_API_KEYS=acme:caller-key-0001:caller,acme:approver-key-01:approver:alice,acme:approver-key-02:approver:bob"},
		"start", "--dir", dir, "--addr", "127.0.0.1:0")
	if code := getJSON(t, p.URL()+"/healthz", nil); code != 200 {
		t.Fatalf("labelled approver keys: healthz %d", code)
	}
}

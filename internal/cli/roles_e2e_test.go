package cli_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

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

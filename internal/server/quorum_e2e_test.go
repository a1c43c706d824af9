package server_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// quorumEnv is a Start-mode server whose refund tool needs two approvals,
// with a caller key and two approver keys labelled alice and bob.
func quorumEnv(t *testing.T) *stacktest.Env {
	keys := []config.Key{
		{Tenant: "acme", Secret: "sk-caller-001", Role: config.RoleCaller, Label: "acme"},
		{Tenant: "acme", Secret: "sk-approver-1", Role: config.RoleApprover, Label: "alice"},
		{Tenant: "acme", Secret: "sk-approver-2", Role: config.RoleApprover, Label: "bob"},
	}
	return stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: keys, Agents: func(env *stacktest.Env) []*agent.Spec {
		specs := stacktest.DefaultAgents(env, "openai/test-model")
		for _, s := range specs {
			for _, tl := range s.Tools {
				if tl.Name == "refund" {
					tl.Approval.Approvals = 2
				}
			}
		}
		return specs
	}})
}

// TestQuorumAGUIResume: an AG-UI resume is one approval, by the resuming
// key: the run answers with the interrupt still pending (1 of 2), and an
// approval by another key over the API runs the tool once.
func TestQuorumAGUIResume(t *testing.T) {
	t.Parallel()
	env := quorumEnv(t)
	paused := aguiPost(t, env, "assistant", aguiInput("quorum-ag", "run-1", "refund my order"), "Authorization", "Bearer sk-caller-001")
	checkTerminal(t, paused)
	out, _ := paused.last()["outcome"].(map[string]any)
	if out["type"] != "interrupt" {
		t.Fatalf("want an interrupt, got %v", paused.last())
	}
	id := out["interrupts"].([]any)[0].(map[string]any)["id"].(string)
	body := fmt.Sprintf(`{"threadId":"quorum-ag","runId":"run-2","messages":[],"tools":[],"context":[],"resume":[{"interruptId":%q,"status":"resolved","payload":{"approved":true}}]}`, id)
	first := aguiPost(t, env, "assistant", body, "Authorization", "Bearer sk-approver-1")
	checkTerminal(t, first)
	out, _ = first.last()["outcome"].(map[string]any)
	if out["type"] != "interrupt" || out["interrupts"].([]any)[0].(map[string]any)["id"] != id {
		t.Fatalf("after one of two approvals the resume should answer the pending interrupt again, got %v", first.last())
	}
	got, err := env.Store.GetInterrupt(t.Context(), "acme", id)
	if err != nil || got.Status != store.Pending || len(got.Approvals) != 1 || got.Approvals[0].By != "alice" || got.Approvals[0].Via != "agui" {
		t.Fatalf("after alice's AG-UI resume: %+v %v", got, err)
	}
	if env.Calls.Get("refund") != 0 {
		t.Fatalf("refund ran after one of two approvals")
	}
	if r := call(t, "POST", env.URL+"/v1/hitl/"+id+"/approve", "", "Authorization", "Bearer sk-approver-2"); r.status != 200 {
		t.Fatalf("bob approve: %d %s", r.status, r.body)
	}
	stacktest.WaitFor(t, "thread to go idle", func() bool { return env.Thread(t, "acme", "quorum-ag").Status == store.Idle })
	if n := env.Calls.Get("refund"); n != 1 {
		t.Fatalf("refund ran %d times, want once", n)
	}
}

// TestQuorumApproval: a tool needing two approvals stays pending after
// alice's (GET /v1/hitl shows 1 of 2, by alice), refuses alice again with
// 409 already_approved_by_you, and runs once after bob's, finishing the turn.
func TestQuorumApproval(t *testing.T) {
	t.Parallel()
	env := quorumEnv(t)
	it := pauseAs(t, env, "sk-caller-001", "quorum-1")
	if it.ApprovalsNeeded != 2 || len(it.Approvals) != 0 {
		t.Fatalf("pending decision: needed %d, approvals %+v", it.ApprovalsNeeded, it.Approvals)
	}

	if r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "", "Authorization", "Bearer sk-approver-1"); r.status != 200 {
		t.Fatalf("alice approve: %d %s", r.status, r.body)
	}
	r := call(t, "GET", env.URL+"/v1/hitl?thread=quorum-1", "", "Authorization", "Bearer sk-caller-001")
	var page struct {
		Data []store.Interrupt `json:"data"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil || len(page.Data) != 1 {
		t.Fatalf("after one of two approvals, want one pending decision: %d %s", r.status, r.body)
	}
	if got := page.Data[0]; got.ApprovalsNeeded != 2 || len(got.Approvals) != 1 || got.Approvals[0].By != "alice" || got.Approvals[0].Via != "api" {
		t.Fatalf("GET /v1/hitl after alice: %s", r.body)
	}
	if env.Calls.Get("refund") != 0 || env.Thread(t, "acme", "quorum-1").Status != store.Waiting {
		t.Fatalf("one of two approvals ran the call or resumed the thread")
	}

	r = call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "", "Authorization", "Bearer sk-approver-1")
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	if r.status != 409 || json.Unmarshal(r.body, &e) != nil || e.Error.Code != "already_approved_by_you" {
		t.Fatalf("alice again: want 409 already_approved_by_you, got %d %s", r.status, r.body)
	}

	if r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "", "Authorization", "Bearer sk-approver-2"); r.status != 200 {
		t.Fatalf("bob approve: %d %s", r.status, r.body)
	}
	stacktest.WaitFor(t, "thread to go idle", func() bool { return env.Thread(t, "acme", "quorum-1").Status == store.Idle })
	got, err := env.Store.GetInterrupt(t.Context(), "acme", it.ID)
	if err != nil || got.Status != store.Approved || got.Decision.By != "bob" {
		t.Fatalf("decision %+v %v", got, err)
	}
	var by []string
	for _, a := range got.Approvals {
		by = append(by, a.By)
	}
	if !slices.Equal(by, []string{"alice", "bob"}) {
		t.Fatalf("approvals %v, want alice then bob", by)
	}
	if n := env.Calls.Get("refund"); n != 1 {
		t.Fatalf("refund ran %d times, want once", n)
	}
	msgs, err := env.Store.Messages(t.Context(), "acme", "quorum-1")
	if err != nil || len(msgs) == 0 || !strings.HasPrefix(msgs[len(msgs)-1].Content, "Refund result") {
		t.Fatalf("the turn did not finish with a reply: %+v", msgs)
	}
}

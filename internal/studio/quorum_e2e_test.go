package studio_test

import (
	"testing"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestInboxShowsQuorumApprovals: a decision needing two approvals shows
// "0 of 2 approvals" on its card, then, after one approval over the API,
// "1 of 2 approvals" and who gave it.
func TestInboxShowsQuorumApprovals(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Agents: func(env *stacktest.Env) []*agent.Spec {
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
	pause(t, env, "", "refund-q", "please refund my order")
	it := onePending(t, env, "", "refund-q")

	p := newPage(t)
	p.open(env.URL + "/studio/")
	p.waitText(card(it.ID)+" .meta .approvals", "0 of 2 approvals")

	// Approving in Studio counts one approval: the card stays, says who.
	p.click(card(it.ID) + ` button[data-action="approve"]`)
	p.waitText(card(it.ID)+" .meta .approvals", "1 of 2 approvals")
	got := onePending(t, env, "", "refund-q")
	if len(got.Approvals) != 1 || got.Approvals[0].By == "" {
		t.Fatalf("after one approval in Studio: %+v", got)
	}
	p.waitText(card(it.ID)+" .meta .approvals", "1 of 2 approvals: "+got.Approvals[0].By)
	if env.Calls.Get("refund") != 0 {
		t.Fatalf("refund ran after one of two approvals")
	}
	// The same principal again is refused, and the card says why.
	p.click(card(it.ID) + ` button[data-action="approve"]`)
	p.waitText(card(it.ID)+" .error", "already approved")
	// A reload shows the approval so far.
	p.open(env.URL + "/studio/")
	p.waitText(card(it.ID)+" .meta .approvals", "1 of 2 approvals: "+got.Approvals[0].By)
}

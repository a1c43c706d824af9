package studio_test

import (
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestInboxShowsWhenADecisionExpires: under an approval TTL the decision
// card says when the approval expires.
func TestInboxShowsWhenADecisionExpires(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Configure: func(cfg *config.Config) { cfg.ApprovalTTL = 90 * time.Second }})
	pause(t, env, "", "refund-exp", "please refund my order")
	it := onePending(t, env, "", "refund-exp")
	if it.ExpiresAt == nil {
		t.Fatalf("pending decision without expiresAt: %+v", it)
	}

	p := newPage(t)
	p.open(env.URL + "/studio/")
	p.waitText(card(it.ID)+" .meta .expires", "expires in 1 min")
}

package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/app"
	"github.com/stackbone/stackbone/internal/clock"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/testwait"
)

// TestApprovalExpiresEndToEnd: with STACKBONE_APPROVAL_TTL=300ms a paused
// refund shows its expiresAt on /v1/hitl; the server's recovery loop
// expires it once the (fake) clock passed it, the run resumes with "The approval request expired." as the
// tool result the model receives, the refund never runs, the audit record
// reads rejected via expiry, and approving it afterwards is a 409
// decision_expired.
func TestApprovalExpiresEndToEnd(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Now().Truncate(time.Second))
	env := stacktest.New(t, stacktest.Options{Configure: func(cfg *config.Config) {
		env := map[string]string{"STACKBONE_APPROVAL_TTL": "300ms"}
		if err := cfg.FromEnv(func(k string) string { return env[k] }); err != nil {
			t.Fatal(err)
		}
		cfg.Clock = fake
	}})
	if env.Config.ApprovalTTL != 300*time.Millisecond {
		t.Fatalf("ApprovalTTL = %s", env.Config.ApprovalTTL)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go app.RecoverLoop(ctx, env.Runner, env.Config, slog.New(slog.DiscardHandler))
	if err := fake.AwaitTimers(testwait.Context(t), 1); err != nil { // the loop's ticker, the only timer yet
		t.Fatal(err)
	}

	pause(t, env, "expiring", "please refund my order")
	it := pendingOf(t, env, "expiring")
	if want := fake.Now().Add(300 * time.Millisecond); it.ExpiresAt == nil || !it.ExpiresAt.Equal(want) {
		t.Fatalf("pending decision expiresAt %v, want %v", it.ExpiresAt, want)
	}
	raw := call(t, "GET", env.URL+"/v1/hitl?thread=expiring", "")
	if !strings.Contains(string(raw.body), `"expiresAt":"`) {
		t.Fatalf("/v1/hitl does not show expiresAt: %s", raw.body)
	}

	fake.Advance(300 * time.Millisecond) // the loop's ticks at 150 and 300ms: the second sweeps it
	waitIdle(t, env, "expiring")
	if n := env.Calls.Get("refund"); n != 0 {
		t.Fatalf("the expired refund ran %d times", n)
	}
	last, _ := env.Upstream.Last()
	var toolMsg *message.Message
	for i, m := range last.Request.Messages {
		if m.Role == message.Tool {
			toolMsg = &last.Request.Messages[i]
		}
	}
	if toolMsg == nil || toolMsg.Content != "The approval request expired." {
		t.Fatalf("the model did not receive the expiry as the tool result: %+v", last.Request.Messages)
	}
	got := call(t, "GET", env.URL+"/v1/hitl/"+it.ID, "")
	var decided store.Interrupt
	if err := json.Unmarshal(got.body, &decided); err != nil {
		t.Fatal(err)
	}
	if decided.Status != store.Rejected || decided.Decision == nil || decided.Decision.Via != "expiry" || decided.ExpiresAt == nil {
		t.Fatalf("audit record after the expiry: %s", got.body)
	}

	r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "")
	want := `{"error":{"message":"This decision expired before it was made; it was recorded as a rejection.","type":"invalid_request_error","code":"decision_expired"}}`
	if r.status != 409 || strings.TrimSpace(string(r.body)) != want {
		t.Fatalf("approving the expired decision: %d %s", r.status, r.body)
	}
	if n := env.Calls.Get("refund"); n != 0 {
		t.Fatalf("the refund ran after its approval expired: %d", n)
	}
}

// TestAGUIResumeOfExpiredApprovalIsRunError: an AG-UI resume that answers
// an approval past its expiry (before any sweep ran) is a RUN_ERROR with
// code decision_expired; the expiry is recorded then, the run resumes
// without the refund, and resuming again is still decision_expired.
func TestAGUIResumeOfExpiredApprovalIsRunError(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Now())
	env := stacktest.New(t, stacktest.Options{Configure: func(cfg *config.Config) {
		cfg.ApprovalTTL = 200 * time.Millisecond
		cfg.Clock = fake
	}})
	_, it := aguiInterrupt(t, env, "th-exp", "refund my order")
	fake.Advance(250 * time.Millisecond)
	resume := func(run string) aguiStream {
		body := `{"threadId":"th-exp","runId":"` + run + `","messages":[],"tools":[],"context":[],"resume":[{"interruptId":"` +
			it["id"].(string) + `","status":"resolved","payload":{"approved":true}}]}`
		return aguiPost(t, env, "assistant", body)
	}
	checkRunError(t, resume("run-late"), "decision_expired")
	waitIdle(t, env, "th-exp")
	if n := env.Calls.Get("refund"); n != 0 {
		t.Fatalf("the refund ran %d times after its approval expired", n)
	}
	d, err := env.Store.GetInterrupt(t.Context(), "dev", it["id"].(string))
	if err != nil || d.Status != store.Rejected || d.Decision == nil || d.Decision.Via != store.ViaExpiry {
		t.Fatalf("decision after the late resume: %+v %v", d, err)
	}
	checkRunError(t, resume("run-later"), "decision_expired")
}

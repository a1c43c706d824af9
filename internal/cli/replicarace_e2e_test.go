package cli_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/store"
)

// TestNextMessageAfterReplicaDiesMidToolWaitsForDecision: two replicas of
// the built binary on one PostgreSQL database. Replica A runs a charge (a
// tool that is not idempotent) and is killed (SIGKILL) after the charge
// reached the ledger, before its result was stored. The user's next
// message reaches replica B through the official OpenAI SDK with its
// default retries: it gets 409 run_in_progress with retry-after while A's
// lease holds, waits as told and sends it again just as the lease lapses,
// before B's recovery loop looked at the thread (B's lease is an hour, so
// its loop ticks every half hour). The next message must not win the
// thread and close the charge as "interrupted": the thread is recovered
// first, the charge waits as an in-doubt decision (announced by a
// decision.pending webhook), and the message is answered 409
// approval_pending. The charge ran once.
func TestNextMessageAfterReplicaDiesMidToolWaitsForDecision(t *testing.T) {
	t.Parallel()
	led := newLedger(t)
	hook := newHookReceiver(t)
	sc := script.MustParse(`[
	 {"when":{"lastTool":"charge"},"reply":{"text":"Charged."}},
	 {"when":{"lastUser":"charge order o1"},"reply":{"toolCalls":[{"name":"charge","arguments":{"orderId":"o1"}}]}},
	 {"reply":{"text":"echo: {{lastUser}}"}}
	]`)
	up := httptest.NewServer(modeltest.Handler(modeltest.OpenAI, sc))
	defer up.Close()

	const key = "acme-secret-key"
	dir := ledgerDir(t, led.URL)
	common := []string{"OPENAI_BASE_URL=" + up.URL + "/v1", "OPENAI_API_KEY=sk-test", "STACKBONE_API_KEYS=acme:" + key,
		"STACKBONE_DB=" + postgresURL(t)}
	args := []string{"start", "--dir", dir, "--addr", "127.0.0.1:0"}
	a := startServer(t, append(common, "STACKBONE_LEASE=2s"), args...)
	b := startServer(t, append(common, "STACKBONE_LEASE=1h", "STACKBONE_WEBHOOK_URL="+hook.URL+"/hooks",
		"STACKBONE_WEBHOOK_SECRET="+webhookSecret), args...)
	const session = "replica-race"

	sendAndForget(a.URL()+"/v1/chat/completions", key, // the turn's request dies with A
		`{"model":"shop","messages":[{"role":"user","content":"charge order o1"}]}`, "x-stackbone-session", session)
	waitUntil(t, "the charge to reach the ledger", 20*time.Second, func() bool { return len(led.calls()) == 1 })
	a.Kill(t)
	led.free()

	// The SDK with its defaults: two retries, obeying x-should-retry and
	// retry-after.
	c := openai.NewClient(option.WithBaseURL(b.URL()+"/v1"), option.WithAPIKey(key),
		option.WithHeader("x-stackbone-session", session))
	_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "shop",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("did my charge go through?")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict || apiErr.Code != "approval_pending" {
		t.Fatalf("the next message after the crash: %v, want 409 approval_pending", err)
	}

	var page struct {
		Data []store.Interrupt `json:"data"`
	}
	authed(t, "GET", b.URL()+"/v1/hitl", key, nil, &page)
	if len(page.Data) != 1 || page.Data[0].Reason != store.ReasonInDoubt || page.Data[0].Tool != "charge" {
		t.Fatalf("pending decisions: %+v", page.Data)
	}
	var th struct {
		Status   string `json:"status"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	authed(t, "GET", b.URL()+"/v1/threads/"+session, key, nil, &th)
	var roles []string
	for _, m := range th.Messages {
		roles = append(roles, m.Role)
	}
	if th.Status != "waiting" || strings.Join(roles, ",") != "user,assistant" {
		t.Fatalf("thread %s with messages %v: want waiting on the charge, nothing closed or added", th.Status, roles)
	}
	waitUntil(t, "the decision.pending webhook", 20*time.Second, func() bool {
		return slices.Contains(hook.types(), "decision.pending")
	})
	if n := len(led.calls()); n != 1 {
		t.Fatalf("the ledger saw %d charges", n)
	}
}

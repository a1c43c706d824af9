package cli_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ant "github.com/anthropics/anthropic-sdk-go/v2"
	antopt "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
)

// TestStatelessRetryAfterKillMidToolIsRefused: a turn without a session,
// sent with an Idempotency-Key, runs a charge (not idempotent); the server
// is killed (SIGKILL) after the charge reached the ledger and before any
// result existed, and started again on the same database. The client's
// retry with the same key, through the official OpenAI and Anthropic SDKs
// with their default retries, must not charge again: it is answered 409
// call_in_doubt (x-should-retry: false, so the SDKs stop), naming the call.
func TestStatelessRetryAfterKillMidToolIsRefused(t *testing.T) {
	t.Parallel()
	for _, st := range []struct {
		name string
		env  func(t *testing.T) []string
	}{
		{"sqlite", func(t *testing.T) []string { return nil }},
		{"postgres", func(t *testing.T) []string { return []string{"STACKBONE_DB=" + postgresURL(t)} }},
	} {
		for _, wire := range []string{"openai", "anthropic"} {
			t.Run(st.name+"/"+wire, func(t *testing.T) {
				t.Parallel()
				testStatelessKillMidTool(t, st.env(t), wire)
			})
		}
	}
}

func testStatelessKillMidTool(t *testing.T, dbEnv []string, wire string) {
	led := newLedger(t)
	sc := script.MustParse(`[
	 {"when":{"lastTool":"charge"},"reply":{"text":"Charged."}},
	 {"when":{"lastUser":"charge order o1"},"reply":{"toolCalls":[{"name":"charge","arguments":{"orderId":"o1"}}]}},
	 {"reply":{"text":"echo: {{lastUser}}"}}
	]`)
	kind, path, modelRef := modeltest.OpenAI, "/v1", "openai/test-model"
	if wire == "anthropic" {
		kind, path, modelRef = modeltest.Anthropic, "", "anthropic/test-model"
	}
	up := httptest.NewServer(modeltest.Handler(kind, sc))
	defer up.Close()
	const key = "acme-secret-key"
	dir := ledgerDir(t, led.URL)
	if wire == "anthropic" {
		file := filepath.Join(dir, "agents", "shop.ts")
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(strings.Replace(string(src), "openai/test-model", modelRef, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append([]string{"OPENAI_BASE_URL=" + up.URL + path, "OPENAI_API_KEY=sk-test",
		"ANTHROPIC_BASE_URL=" + up.URL + path, "ANTHROPIC_API_KEY=sk-test",
		"STACKBONE_API_KEYS=acme:" + key, "STACKBONE_LEASE=1s"}, dbEnv...)
	args := []string{"start", "--dir", dir, "--addr", "127.0.0.1:0"}
	const idem = "turn-charge-o1"

	a := startServer(t, env, args...)
	// The first attempt dies with the server.
	if wire == "anthropic" {
		sendAndForget(a.URL()+"/v1/messages", key,
			`{"model":"shop","max_tokens":256,"messages":[{"role":"user","content":"charge order o1"}]}`, "Idempotency-Key", idem)
	} else {
		sendAndForget(a.URL()+"/v1/chat/completions", key,
			`{"model":"shop","messages":[{"role":"user","content":"charge order o1"}]}`, "Idempotency-Key", idem)
	}
	waitUntil(t, "the charge to reach the ledger", 20*time.Second, func() bool { return len(led.calls()) == 1 })
	a.Kill(t)
	led.free()
	b := startServer(t, env, args...)

	var status int
	var code, msg string
	switch wire {
	case "openai":
		c := openai.NewClient(option.WithBaseURL(b.URL()+"/v1"), option.WithAPIKey(key), option.WithHeader("Idempotency-Key", idem))
		_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "shop",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("charge order o1")}})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("the retry: %v, want an API error", err)
		}
		status, code, msg = apiErr.StatusCode, apiErr.Code, apiErr.Message
	case "anthropic":
		c := ant.NewClient(antopt.WithoutEnvironmentDefaults(), antopt.WithBaseURL(b.URL()), antopt.WithAPIKey(key),
			antopt.WithHeader("Idempotency-Key", idem))
		_, err := c.Messages.New(context.Background(), ant.MessageNewParams{Model: "shop", MaxTokens: 256,
			Messages: []ant.MessageParam{ant.NewUserMessage(ant.NewTextBlock("charge order o1"))}})
		var apiErr *ant.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("the retry: %v, want an API error", err)
		}
		// The Messages wire's envelope has no code: the message says it.
		status, code, msg = apiErr.StatusCode, "call_in_doubt", apiErr.RawJSON()
	}
	if status != http.StatusConflict || code != "call_in_doubt" || !strings.Contains(msg, "may already have run") ||
		!strings.Contains(strings.ReplaceAll(msg, `\"`, `"`), `charge({"orderId":"o1"})`) {
		t.Fatalf("the retry after the crash: %d %q %s, want 409 call_in_doubt naming the charge", status, code, msg)
	}
	if n := len(led.calls()); n != 1 {
		t.Fatalf("the ledger saw %d charges", n)
	}
}

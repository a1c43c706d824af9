package app_test

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/app"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/redact"
	"github.com/stackbone/stackbone/internal/stacktest"
)

const providerKey = "sk-proj-T3stK3yThatMustN0tLeak42"

// TestUpstreamEchoingTheKeyIsRedactedInTheLog: the model upstream answers
// 401 with an error that repeats the API key it was sent (as OpenAI's does);
// after a turn through the real server, the process log holds no key, only
// the placeholder where it was.
func TestUpstreamEchoingTheKeyIsRedactedInTheLog(t *testing.T) {
	acme := config.Key{Tenant: "acme", Secret: "acme-secret-key-0123456789"}
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: []config.Key{acme},
		Configure: func(c *config.Config) { c.OpenAIKey, c.AnthropicKey = providerKey, providerKey },
		Script: `[{"reply": {"error": {"status": 401, "message": "Incorrect API key provided: ` + providerKey +
			` (Authorization: Bearer ` + providerKey + `; caller ` + acme.Secret + `)"}}}]`})

	for _, session := range []string{"", "t-echo"} {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", env.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"assistant","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+acme.Secret)
		if session != "" {
			req.Header.Set("x-stackbone-session", session)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode < 400 || strings.Contains(string(body), providerKey) {
			t.Fatalf("want the upstream failure without its text, got %d %s", res.StatusCode, body)
		}
	}
	if n := env.Upstream.Count(); n == 0 {
		t.Fatal("the upstream was never called")
	}
	env.Runner.Wait()
	log := env.Logs.String()
	for _, secret := range []string{providerKey, acme.Secret} {
		if n := strings.Count(log, secret); n > 0 {
			t.Fatalf("the log shows %s %d times:\n%s", secret, n, log)
		}
	}
	if !strings.Contains(log, "Incorrect API key provided: "+redact.Placeholder) {
		t.Fatalf("the upstream's error is not in the log, redacted:\n%s", log)
	}
}

func TestSecretsListsEveryKeyTheProcessUses(t *testing.T) {
	cfg := config.Defaults(config.Start)
	cfg.OpenAIKey, cfg.AnthropicKey = "sk-openai-key-1", "sk-ant-key-2"
	cfg.Keys = []config.Key{{Tenant: "acme", Secret: "acme-secret-3"}}
	got := app.Secrets(&cfg, []string{"STRIPE_API_KEY=rk_live_4", "STACKBONE_API_KEY=cli-key-5", "HOME=/root", "PATH=/bin"})
	for _, want := range []string{"sk-openai-key-1", "sk-ant-key-2", "acme-secret-3", "rk_live_4", "cli-key-5"} {
		if !slices.Contains(got, want) {
			t.Errorf("Secrets lacks %q: %q", want, got)
		}
	}
	if slices.Contains(got, "/root") || slices.Contains(got, "/bin") {
		t.Errorf("Secrets holds ordinary variables: %q", got)
	}
}

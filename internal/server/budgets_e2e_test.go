package server_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/stackbone/stackbone/internal/clock"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// budgetEnv is a stack whose stackbone.json holds budgets, on a fake clock.
func budgetEnv(t *testing.T, budgets string, st store.Store, fake *clock.Fake) *stacktest.Env {
	t.Helper()
	return stacktest.New(t, stacktest.Options{Store: st, Configure: func(cfg *config.Config) {
		if err := os.WriteFile(filepath.Join(cfg.Dir, "stackbone.json"), []byte(`{"budgets": `+budgets+`}`), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg.Clock = fake
		cfg.WebhookURLs = []string{"http://127.0.0.1:9/hooks"} // never delivered: the outbox is what is checked
		cfg.WebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	}})
}

// TestBudgetRefusesTheNextTurnOnEveryWire: once a tenant's daily token
// budget is spent, the next turn is refused before any model call on each
// wire in its own error format (429 budget_exceeded, retry-after until
// midnight UTC, x-should-retry: false), one budget.exceeded notice goes out,
// and the next day turns run again.
func TestBudgetRefusesTheNextTurnOnEveryWire(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Date(2026, 12, 2, 22, 0, 0, 0, time.UTC))
	env := budgetEnv(t, `[{"name": "daily", "scope": "tenant", "period": "day", "tokens": 5}]`, nil, fake)
	if _, err := client(env).Chat.Completions.New(context.Background(), params(user("hello there"))); err != nil {
		t.Fatalf("the first turn (nothing spent yet): %v", err)
	}
	before := len(env.Upstream.Requests())
	// The OpenAI SDK: a typed 429 it does not retry.
	_, err := client(env).Chat.Completions.New(context.Background(), params(user("hello again")))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Code != "budget_exceeded" {
		t.Fatalf("a turn past the budget: %v; want 429 budget_exceeded", err)
	}
	if !strings.Contains(apiErr.Message, `"daily"`) {
		t.Fatalf("message %q does not name the budget", apiErr.Message)
	}
	check := func(wire string, res apiResp, want string) {
		t.Helper()
		if res.status != http.StatusTooManyRequests || !strings.Contains(string(res.body), want) {
			t.Fatalf("%s: %d %s; want 429 with %s", wire, res.status, res.body, want)
		}
		ra, _ := strconv.Atoi(res.header.Get("retry-after"))
		if ra != 2*3600 || res.header.Get("x-should-retry") != "false" {
			t.Fatalf("%s: retry-after %q x-should-retry %q; want the 2 h to midnight, false", wire, res.header.Get("retry-after"), res.header.Get("x-should-retry"))
		}
	}
	check("anthropic", call(t, http.MethodPost, env.URL+"/v1/messages",
		`{"model":"assistant","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`), `"type":"rate_limit_error"`)
	check("responses", call(t, http.MethodPost, env.URL+"/v1/responses", `{"model":"assistant","input":"hi"}`), `"code":"budget_exceeded"`)
	check("chat on a session", call(t, http.MethodPost, env.URL+"/v1/chat/completions",
		`{"model":"assistant","messages":[{"role":"user","content":"hi"}]}`, "x-stackbone-session", "budget-s"), `"code":"budget_exceeded"`)
	ag := aguiPost(t, env, "assistant", `{"threadId":"budget-agui","runId":"r1","messages":[{"id":"m1","role":"user","content":"hi"}]}`)
	if len(ag.events) == 0 || ag.events[len(ag.events)-1]["type"] != "RUN_ERROR" || ag.events[len(ag.events)-1]["code"] != "budget_exceeded" {
		t.Fatalf("AG-UI: %d %s; want RUN_ERROR budget_exceeded", ag.status, ag.body)
	}
	if got := len(env.Upstream.Requests()); got != before {
		t.Fatalf("refused turns reached the model: %d requests, want %d", got, before)
	}
	if th, err := env.Store.GetThread(context.Background(), "dev", "budget-s"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused turn stored its thread: %+v, %v", th, err)
	}
	ds, err := env.Store.ListDeliveries(context.Background(), "dev", 100)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range ds {
		if d.Type == store.NoticeBudgetExceeded {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d budget.exceeded notices; want one per budget and period", n)
	}
	// The next day the budget is fresh.
	fake.Advance(2 * time.Hour)
	if _, err := client(env).Chat.Completions.New(context.Background(), params(user("a new day"))); err != nil {
		t.Fatalf("a turn after the reset: %v", err)
	}
}

// TestBudgetStopsARunBetweenSteps: a run that spends its budget midway
// finishes the step it is in (the tool's result is stored with its call)
// and stops before the next model call, with budget_exceeded.
func TestBudgetStopsARunBetweenSteps(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	env := budgetEnv(t, `[{"name": "assistant-daily", "scope": "agent", "match": "assistant", "period": "day", "tokens": 5}]`, nil, fake)
	_, err := client(env, session("budget-mid")).Chat.Completions.New(context.Background(), params(user("what is the weather")))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.Code != "budget_exceeded" {
		t.Fatalf("a run crossing its budget: %v; want budget_exceeded", err)
	}
	if got := len(env.Upstream.Requests()); got != 1 {
		t.Fatalf("%d model calls; want the first only", got)
	}
	msgs, err := env.Store.Messages(context.Background(), "dev", "budget-mid")
	if err != nil {
		t.Fatal(err)
	}
	last := msgs[len(msgs)-1]
	if last.Role != message.Tool || last.ToolName != "get_weather" || len(message.PendingCalls(msgs)) != 0 {
		t.Fatalf("the thread ends with %+v; want the tool's result, no call left without one", last)
	}
	if th := env.Thread(t, "dev", "budget-mid"); th.Status != store.Failed || !strings.Contains(th.LastError, "budget") {
		t.Fatalf("thread %s %q; want failed with the budget's message", th.Status, th.LastError)
	}
	// The other wires tell their clients the same, each its own way (AG-UI
	// shows the server tool's result before the error; the Anthropic wire
	// shows no server tool).
	for wire, turn := range map[string]func(env *stacktest.Env) string{
		"anthropic (stream)": func(env *stacktest.Env) string {
			return string(call(t, http.MethodPost, env.URL+"/v1/messages", `{"model":"assistant","max_tokens":100,"stream":true,
				"messages":[{"role":"user","content":"what is the weather"}]}`, "x-stackbone-session", "budget-mid-ant").body)
		},
		"ag-ui": func(env *stacktest.Env) string {
			return aguiPost(t, env, "assistant", `{"threadId":"budget-mid-agui","runId":"r1","messages":[{"id":"m1","role":"user","content":"what is the weather"}]}`).body
		},
	} {
		env := budgetEnv(t, `[{"name": "assistant-daily", "scope": "agent", "match": "assistant", "period": "day", "tokens": 5}]`, nil, fake)
		body := turn(env)
		if !strings.Contains(body, "budget_exceeded") || !strings.Contains(body, "assistant-daily") ||
			(wire == "ag-ui" && !strings.Contains(body, "temp_c")) || strings.Count(body, "budget_exceeded") != 1 {
			t.Fatalf("%s: the stream %s; want the tool's result, then budget_exceeded naming the budget", wire, body)
		}
	}
}

// TestBudgetHoldsAcrossReplicas: two replicas on one PostgreSQL database
// count one budget: turns on either replica are refused once the turns on
// both spent it, and no more than one step per replica is spent past it.
func TestBudgetHoldsAcrossReplicas(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	first := stacktest.Postgres(t, "budget_replicas")
	budgets := `[{"name": "daily", "scope": "tenant", "period": "day", "tokens": 60}]`
	a := budgetEnv(t, budgets, first, fake)
	b := budgetEnv(t, budgets, stacktest.PostgresReplica(t, first), fake)
	envs := []*stacktest.Env{a, b}
	refused := 0
	for i := 0; i < 20 && refused < 2; i++ {
		env := envs[i%2]
		_, err := client(env).Chat.Completions.New(context.Background(), params(user("hello number "+strconv.Itoa(i))))
		var apiErr *openai.Error
		switch {
		case err == nil:
		case errors.As(err, &apiErr) && apiErr.Code == "budget_exceeded":
			refused++
		default:
			t.Fatal(err)
		}
	}
	if refused < 2 {
		t.Fatalf("turns were never refused on both replicas")
	}
	rows, err := a.Store.Usage(context.Background(), store.UsageFilter{Tenant: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	spent := rows[0].Usage.InputTokens + rows[0].Usage.OutputTokens
	// Each turn is one model call of a few tokens: past the 60, at most
	// the one step each replica had in flight.
	if spent < 60 || rows[0].ModelCalls > 60/5+2 {
		t.Fatalf("spent %d tokens in %d calls against a budget of 60", spent, rows[0].ModelCalls)
	}
}

package studio_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// The run inspector's keys: an admin signs in to Studio, alice approves.
var (
	opsKey   = config.Key{Tenant: "acme", Secret: "sk-acme-ops-0123456789", Role: config.RoleAdmin, Label: "ops"}
	aliceKey = config.Key{Tenant: "acme", Secret: "sk-acme-alice-012345678", Role: config.RoleApprover, Label: "alice"}
)

// apiRun is a run as GET /v1/runs/{id} and GET /v1/threads/{id}/runs give it.
type apiRun struct {
	ID           string   `json:"id"`
	Status       string   `json:"status"`
	ResumedFrom  string   `json:"resumedFrom"`
	EndedAt      *string  `json:"endedAt"`
	TraceID      string   `json:"traceId"`
	TraceURL     string   `json:"traceUrl"`
	CostUSD      *float64 `json:"costUsd"`
	CostComplete bool     `json:"costComplete"`
	Usage        struct {
		TotalTokens int `json:"totalTokens"`
	} `json:"usage"`
	Steps []struct {
		ID       string   `json:"id"`
		Kind     string   `json:"kind"`
		Name     string   `json:"name"`
		CostUSD  *float64 `json:"costUsd"`
		Attempts int      `json:"attempts"`
		Usage    *struct {
			TotalTokens int `json:"totalTokens"`
		} `json:"usage"`
	} `json:"steps"`
	Decisions []struct {
		DecidedBy string `json:"decidedBy"`
	} `json:"decisions"`
}

func getAPI(t *testing.T, env *stacktest.Env, key, path string, out any) {
	t.Helper()
	var hdr []string
	if key != "" {
		hdr = []string{"Authorization", "Bearer " + key}
	}
	r := do(t, "GET", env.URL+path, "", hdr...)
	if r.status != 200 {
		t.Fatalf("GET %s: %d %s", path, r.status, r)
	}
	if err := json.Unmarshal(r.body, out); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, r)
	}
}

// threadRuns waits until thread has n runs, all ended, and returns them in
// full (with steps and decisions), oldest first.
func threadRuns(t *testing.T, env *stacktest.Env, key, thread string, n int) []apiRun {
	t.Helper()
	var list struct {
		Data []apiRun `json:"data"`
	}
	stacktest.WaitFor(t, fmt.Sprintf("%d ended runs on %s", n, thread), func() bool {
		getAPI(t, env, key, "/v1/threads/"+thread+"/runs", &list)
		if len(list.Data) != n {
			return false
		}
		for _, r := range list.Data {
			if r.EndedAt == nil {
				return false
			}
		}
		return true
	})
	out := make([]apiRun, n)
	for i, r := range list.Data {
		getAPI(t, env, key, "/v1/runs/"+r.ID, &out[i])
	}
	return out
}

// turn sends one durable turn to agent with key and waits for its answer.
func turn(t *testing.T, env *stacktest.Env, key, agentName, session, prompt string) {
	t.Helper()
	body := `{"model":` + jsonString(agentName) + `,"messages":[{"role":"user","content":` + jsonString(prompt) + `}]}`
	hdr := []string{"Authorization", "Bearer " + key}
	if session != "" {
		hdr = append(hdr, "x-stackbone-session", session)
	}
	if r := do(t, "POST", env.URL+"/v1/chat/completions", body, hdr...); r.status != 200 {
		t.Fatalf("turn: %d %s", r.status, r)
	}
}

// inspectEnv is a start-mode stack with the default agents on an unpriced
// model plus "priced" on openai/gpt-4o (a built-in price), two budgets,
// and on session inspect-1 a tool turn and a refund that paused and that
// alice approved. It returns the session's three runs.
func inspectEnv(t *testing.T) (*stacktest.Env, []apiRun) {
	t.Helper()
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: []config.Key{opsKey, aliceKey}, Script: slowScript(t),
		Agents: func(env *stacktest.Env) []*agent.Spec {
			return append(stacktest.DefaultAgents(env, "openai/test-model"),
				&agent.Spec{Name: "priced", Model: "openai/gpt-4o", Instructions: "A priced agent."})
		},
		Configure: func(cfg *config.Config) {
			// Spans recorded (and exported nowhere), so runs have trace ids.
			cfg.Tracer = sdktrace.NewTracerProvider()
			cfg.TraceURL = "http://127.0.0.1:16686/trace/{traceId}"
			file := `{"budgets": [
			  {"name": "team-daily", "scope": "tenant", "period": "day", "tokens": 1000000},
			  {"name": "priced-monthly", "scope": "agent", "match": "priced", "period": "month", "usd": 0.000001}]}`
			if err := os.WriteFile(filepath.Join(cfg.Dir, "stackbone.json"), []byte(file), 0o644); err != nil {
				t.Fatal(err)
			}
		}})
	turn(t, env, opsKey.Secret, "assistant", "inspect-1", "what is the weather in Paris?")
	pause(t, env, opsKey.Secret, "inspect-1", "please refund my order")
	it := onePending(t, env, opsKey.Secret, "inspect-1")
	if os.Getenv("STACKBONE_SCREENSHOTS") == "1" {
		time.Sleep(1500 * time.Millisecond) // a reviewer takes a moment: the gap shows it
	}
	if r := do(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "", "Authorization", "Bearer "+aliceKey.Secret); r.status != 200 {
		t.Fatalf("alice approves: %d %s", r.status, r)
	}
	waitIdle(t, env, "acme", "inspect-1")
	runs := threadRuns(t, env, opsKey.Secret, "inspect-1", 3)
	if runs[2].ResumedFrom != runs[1].ID || len(runs[1].Decisions) != 1 || runs[1].Decisions[0].DecidedBy != "alice" {
		t.Fatalf("want the third run resumed from the second, which alice decided: %+v", runs)
	}
	turn(t, env, opsKey.Secret, "priced", "priced-1", "hello there")
	threadRuns(t, env, opsKey.Secret, "priced-1", 1)
	return env, runs
}

// slowScript is stacktest.DefaultScript with model answers that take a
// little while, so the waterfall's bars have lengths to compare.
func slowScript(t *testing.T) string {
	t.Helper()
	var rules []map[string]any
	if err := json.Unmarshal([]byte(stacktest.DefaultScript), &rules); err != nil {
		t.Fatal(err)
	}
	for i, r := range rules {
		reply := r["reply"].(map[string]any)
		reply["delayMs"] = 40 + 25*(i%3)
		reply["chunkDelayMs"] = 10
	}
	b, err := json.Marshal(rules)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// signIn opens Studio and signs in with key.
func signIn(p *page, url string, key config.Key) {
	p.open(url + "/studio/")
	p.waitText("#signin-h", "Sign in")
	p.do(chromedp.SendKeys(chromedp.CSS("#apikey"), key.Secret))
	p.click(`#signin-form button[type="submit"]`)
	p.waitText("#tenant", key.Tenant)
}

// rowSel is the selector of a waterfall row of a step.
func rowSel(stepID string) string {
	return fmt.Sprintf(`#run-waterfall .wf-row[data-step=%s]`, js(stepID))
}

// TestRunWaterfall: a thread's page lists its runs; the resumed run opens
// as a waterfall drawn with the run it resumed: a bar for every model and
// tool call, the approval wait as a gap naming alice, token totals as the
// API counts them and "cost unknown" for the unpriced model. The tool turn
// draws its two model calls around the tool call.
func TestRunWaterfall(t *testing.T) {
	t.Parallel()
	env, runs := inspectEnv(t)
	p := newPage(t)
	signIn(p, env.URL, opsKey)
	p.open(env.URL + "/studio/#/threads/inspect-1?run=" + runs[2].ID)
	for _, r := range runs {
		p.waitJS("the run listed", `!!document.querySelector(`+js(`#runs-list tr[data-run="`+r.ID+`"]`)+`)`)
	}
	p.waitText(`#runs-list tr[data-run="`+runs[1].ID+`"]`, "paused")
	p.waitText(`#runs-list tr[data-run="`+runs[2].ID+`"]`, "resumes")

	// The resumed run is drawn with the run it resumed, and the wait between.
	p.waitJS("the chain drawn", `document.querySelectorAll('#run-waterfall .wf-row-run').length === 2`)
	gap := fmt.Sprintf(`#run-waterfall .wf-row-gap[data-from=%s][data-to=%s]`, js(runs[1].ID), js(runs[2].ID))
	p.waitText(gap, "refund approved by alice")
	p.waitText(gap, "waited")
	for _, r := range runs[1:] {
		checkRunDrawn(t, p, r)
	}
	// Each run's trace id, linked to the tracing UI. (The run an approval
	// resumes in the background has none yet: the API gives "".)
	if runs[1].TraceID == "" {
		t.Fatal("the paused run has no trace id")
	}
	for _, r := range runs[1:] {
		facts := fmt.Sprintf(`#run-waterfall .wf-runs li[data-run=%s]`, js(r.ID))
		if r.TraceID == "" {
			p.waitText(facts+" .wf-trace", "trace none")
			continue
		}
		if len(r.TraceID) != 32 || r.TraceURL != "http://127.0.0.1:16686/trace/"+r.TraceID {
			t.Fatalf("run %s: trace %q at %q", r.ID, r.TraceID, r.TraceURL)
		}
		link := facts + " a.trace-link"
		p.waitText(link, r.TraceID)
		if href := eval[string](p, `document.querySelector(`+js(link)+`).href`); href != r.TraceURL {
			t.Fatalf("the trace link of %s goes to %q", r.ID, href)
		}
	}
	// The resumed run's refund comes after the pause on the axis.
	if !eval[bool](p, `(() => { const x = (s) => parseFloat(document.querySelector(s).style.left);
	  return x(`+js(rowSel(runs[2].Steps[0].ID)+" .wf-bar")+`) > x(`+js(gap+" .wf-gap")+`); })()`) {
		t.Fatal("the resumed run's first step is not right of the pause")
	}
	// Unpriced: "cost unknown", never $0.
	p.waitText(rowSel(runs[1].Steps[0].ID)+" .wf-meta", "cost unknown")
	if eval[bool](p, `document.querySelector('#run-waterfall').textContent.includes('$0')`) {
		t.Fatal("an unknown cost is drawn as $0")
	}
	p.waitText(`#runs-list tr[data-run="`+runs[0].ID+`"]`, "unknown")
	p.waitText("#run-waterfall", "not recorded") // start mode without STACKBONE_TRACE_CONTENT

	// The tool turn: model, get_weather, model.
	p.click(`#runs-list button[data-run="` + runs[0].ID + `"]`)
	p.waitJS("the tool turn drawn alone", `document.querySelector('#run-waterfall .wf').dataset.run === `+js(runs[0].ID)+
		` && document.querySelectorAll('#run-waterfall .wf-row-run').length === 1`)
	checkRunDrawn(t, p, runs[0])
	names := eval[[]string](p, `[...document.querySelectorAll('#run-waterfall .wf-row[data-step]')].map((e) => e.dataset.kind + ':' + e.dataset.name)`)
	if strings.Join(names, " ") != "model:test-model tool:get_weather model:test-model" {
		t.Fatalf("the tool turn's rows: %v", names)
	}
	if !strings.Contains(eval[string](p, `location.hash`), "run="+runs[0].ID) {
		t.Fatal("the chosen run is not in the URL")
	}

	if os.Getenv("STACKBONE_SCREENSHOTS") == "1" {
		p.open(env.URL + "/studio/#/threads/inspect-1?run=" + runs[2].ID)
		p.waitText(gap, "alice")
		p.waitText("#events-status", "live")
		shotOf(t, p, "#thread-runs", "studio-runs.png")
	}
}

// checkRunDrawn checks a run's row and each of its steps' bars on the
// waterfall, and that the tokens shown add up to the API's.
func checkRunDrawn(t *testing.T, p *page, r apiRun) {
	t.Helper()
	run := fmt.Sprintf(`#run-waterfall .wf-row-run[data-run=%s]`, js(r.ID))
	p.waitJS("the run's row", `!!document.querySelector(`+js(run)+`)`)
	if got := eval[string](p, `document.querySelector(`+js(run)+`).dataset.tokens`); got != strconv.Itoa(r.Usage.TotalTokens) {
		t.Fatalf("run %s shows %s tokens; the API says %d", r.ID, got, r.Usage.TotalTokens)
	}
	p.waitText(fmt.Sprintf(`#run-waterfall .wf-runs li[data-run=%s]`, js(r.ID)), fmt.Sprintf("%d tokens", r.Usage.TotalTokens))
	sum := 0
	for _, s := range r.Steps {
		sel := rowSel(s.ID)
		p.waitJS("the step's row", `!!document.querySelector(`+js(sel)+`)`)
		if eval[string](p, `document.querySelector(`+js(sel)+`).dataset.kind`) != s.Kind {
			t.Fatalf("step %s drawn as another kind", s.ID)
		}
		if w := eval[float64](p, `document.querySelector(`+js(sel+" .wf-bar")+`).getBoundingClientRect().width`); w < 2 {
			t.Fatalf("step %s (%s %s) has no bar: width %v", s.ID, s.Kind, s.Name, w)
		}
		p.waitText(sel+" .wf-label", s.Name)
		p.waitText(sel+" .wf-meta", " ms")
		if s.Kind == "model" {
			sum += s.Usage.TotalTokens
			p.waitText(sel+" .wf-meta", fmt.Sprintf("%d tok", s.Usage.TotalTokens))
		}
	}
	if sum != r.Usage.TotalTokens {
		t.Fatalf("run %s: the steps' tokens add to %d, the run's are %d", r.ID, sum, r.Usage.TotalTokens)
	}
}

// TestRunWaterfallShowsContentInDevMode: in dev mode the server keeps what
// each model call sent and got back, and its step opens to show it.
func TestRunWaterfallShowsContentInDevMode(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	chat(t, env, "content-1", "what is the weather in Paris?")
	p := newPage(t)
	p.open(env.URL + "/studio/#/threads/content-1")
	p.waitJS("the model steps' content", `document.querySelectorAll('#run-waterfall details.wf-content').length === 2`)
	p.click(`#run-waterfall details.wf-content summary`)
	p.waitText(`#run-waterfall details.wf-content[open]`, "what is the weather in Paris?")
	p.waitText(`#run-waterfall details.wf-content[open]`, "get_weather")
	if eval[bool](p, `document.querySelector('#run-waterfall').textContent.includes('not recorded')`) {
		t.Fatal("dev mode says content is not recorded")
	}
}

// TestUsagePage: the Usage page draws today's tokens and cost, the groups
// by agent and by model (the unpriced model's cost unknown, gpt-4o's in
// dollars), the top threads linking to them, and both budgets, the priced
// agent's exceeded.
func TestUsagePage(t *testing.T) {
	t.Parallel()
	env, _ := inspectEnv(t)
	var total struct {
		Total struct {
			TotalTokens int      `json:"totalTokens"`
			CostUSD     *float64 `json:"costUsd"`
		} `json:"total"`
	}
	getAPI(t, env, opsKey.Secret, "/v1/usage?group_by=day", &total)
	p := newPage(t)
	signIn(p, env.URL, opsKey)
	p.click(`#nav a[data-nav="usage"]`)
	p.waitText("#usage-h", "Usage")
	p.waitText(`#usage-total [data-tile="tokens"] dd`, commas(total.Total.TotalTokens))
	p.waitText(`#usage-total [data-tile="cost"] dd`, "+ unknown")
	today := time.Now().UTC().Format("2006-01-02")
	day := fmt.Sprintf(`#usage-chart g.day[data-day=%s]`, js(today))
	p.waitJS("today's bar", `!!document.querySelector(`+js(day)+`)`)
	if got := eval[string](p, `document.querySelector(`+js(day)+`).dataset.tokens`); got != strconv.Itoa(total.Total.TotalTokens) {
		t.Fatalf("today's bar holds %s tokens; the API's total is %d", got, total.Total.TotalTokens)
	}
	if h := eval[float64](p, `Math.max(...[...document.querySelectorAll(`+js(day+" rect")+`)].map((r) => r.getBoundingClientRect().height))`); h < 10 {
		t.Fatalf("today's bar is %v px high", h)
	}
	p.waitText(`#usage-agents li[data-group="assistant"] .hbar-cost`, "unknown")
	p.waitText(`#usage-agents li[data-group="priced"] .hbar-cost`, "$")
	p.waitText(`#usage-models li[data-group="openai/test-model"] .hbar-cost`, "unknown")
	p.waitText(`#usage-models li[data-group="openai/gpt-4o"] .hbar-cost`, "$")
	if w := eval[float64](p, `document.querySelector('#usage-agents li[data-group="assistant"] .hbar-fill').getBoundingClientRect().width`); w < 20 {
		t.Fatalf("the assistant's bar is %v px wide", w)
	}
	p.waitText(`#usage-budgets [data-budget="team-daily"]`, "/ 1,000,000")
	p.waitText(`#usage-budgets [data-budget="priced-monthly"][data-exceeded="true"]`, "exceeded")
	p.waitJS("team-daily not exceeded", `document.querySelector('#usage-budgets [data-budget="team-daily"]').dataset.exceeded === 'false'`)
	p.waitText(`#usage-threads tr[data-thread="inspect-1"] .thread-cost`, "unknown")
	p.waitText(`#usage-threads tr[data-thread="priced-1"] .thread-cost`, "$")

	if os.Getenv("STACKBONE_SCREENSHOTS") == "1" {
		p.waitText("#live", "Live")
		p.waitJS("the sign-in toast to go", `!document.querySelector('#status').classList.contains('show')`)
		shot(t, p, "studio-usage.png")
	}
	// A top thread links to its page.
	p.click(`#usage-threads tr[data-thread="inspect-1"] a`)
	p.waitText("#thread-h", "inspect-1")
	p.waitJS("the thread's runs", `document.querySelectorAll('#runs-list tr[data-run]').length === 3`)
}

func commas(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// shotOf writes a screenshot of the element sel to docs/name.
func shotOf(t *testing.T, p *page, sel, name string) {
	t.Helper()
	p.waitJS("fonts and animations to settle", `document.fonts.status === 'loaded' && document.getAnimations().every((a) => a.playState !== 'running')`)
	ctx, cancel := context.WithTimeout(p.ctx, 15*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(sel), chromedp.NodeVisible))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join("..", "..", "docs", name)
	if err := os.WriteFile(out, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", out)
}

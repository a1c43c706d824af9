package cli_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/store"
)

// usageServer starts `stackbone dev` on a project with two agents: shop on
// an unpriced model (lookup runs at once, refund needs approval) and pricey
// on openai/gpt-4o (a built-in price), and two budgets, pricey's tiny.
func usageServer(t *testing.T) *proc {
	t.Helper()
	up := httptest.NewServer(modeltest.Handler(modeltest.OpenAI, script.MustParse(`[
	 {"when":{"lastTool":"lookup"},"reply":{"text":"Found: {{lastTool}}"}},
	 {"when":{"lastTool":"refund"},"reply":{"text":"Refunded."}},
	 {"when":{"lastUser":"look"},"reply":{"toolCalls":[{"name":"lookup","arguments":{"orderId":"o1"}}]}},
	 {"when":{"lastUser":"refund"},"reply":{"toolCalls":[{"name":"refund","arguments":{"orderId":"o1"}}]}},
	 {"reply":{"text":"echo: {{lastUser}}"}}
	]`)))
	t.Cleanup(up.Close)
	dir := t.TempDir()
	files := map[string]string{
		"agents/shop.ts": `import { defineDeepAgent, tool } from 'stackbone';
const params = { type: 'object', properties: { orderId: { type: 'string' } }, required: ['orderId'] } as const;
export default defineDeepAgent({
  name: 'shop', model: 'openai/test-model', instructions: 'You handle orders.', todos: false, files: false,
  tools: {
    lookup: tool({ description: 'Look an order up', parameters: params, async execute(args) { return { orderId: args.orderId, state: 'shipped' }; } }),
    refund: tool({ description: 'Refund an order', parameters: params, needsApproval: true, async execute(args) { return { refunded: args.orderId }; } }),
  },
});
`,
		"agents/pricey.ts": `import { defineDeepAgent } from 'stackbone';
export default defineDeepAgent({ name: 'pricey', model: 'openai/gpt-4o', instructions: 'You answer.', todos: false, files: false });
`,
		"stackbone.json": `{"budgets": [
  {"name": "daily", "scope": "tenant", "period": "day", "tokens": 1000000},
  {"name": "pricey-cap", "scope": "agent", "match": "pricey", "period": "month", "usd": 0.0000001}]}`,
	}
	for name, content := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := startServer(t, []string{"OPENAI_BASE_URL=" + up.URL + "/v1", "OPENAI_API_KEY=sk-test"}, "dev", "--dir", dir, "--addr", "127.0.0.1:0")
	t.Cleanup(func() { p.Kill(t) })
	return p
}

// chatAs sends one turn to agent on session ("" for a stateless turn).
func chatAs(t *testing.T, base, agentName, session, text string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}]}`, agentName, text)
	req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set("x-stackbone-session", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("turn to %s: %d", agentName, resp.StatusCode)
	}
}

type cliRun struct {
	ID          string  `json:"id"`
	ResumedFrom string  `json:"resumedFrom"`
	EndedAt     *string `json:"endedAt"`
	Usage       struct {
		TotalTokens int `json:"totalTokens"`
	} `json:"usage"`
	Steps []struct {
		Kind string `json:"kind"`
		Name string `json:"name"`
	} `json:"steps"`
	Decisions []struct {
		DecidedBy string `json:"decidedBy"`
	} `json:"decisions"`
}

// endedRuns waits until thread has n runs, all ended.
func endedRuns(t *testing.T, base, thread string, n int) []cliRun {
	t.Helper()
	var list struct {
		Data []cliRun `json:"data"`
	}
	waitUntil(t, fmt.Sprintf("%d ended runs on %s", n, thread), 20*time.Second, func() bool {
		getJSON(t, base+"/v1/threads/"+thread+"/runs", &list)
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
	return list.Data
}

// columnsAligned checks that in the table starting at the line holding
// header, every row until a blank line starts its second column where the
// header's does.
func columnsAligned(t *testing.T, out, header, second string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, header) {
			continue
		}
		col := len([]rune(l[:strings.Index(l, second)]))
		for _, line := range lines[i+1:] {
			if strings.TrimSpace(line) == "" {
				return
			}
			row := []rune(line)
			if len(row) <= col || row[col-1] != ' ' || row[col] == ' ' {
				t.Fatalf("column %s of row %q is not under its header (at %d):\n%s", second, line, col, out)
			}
		}
		return
	}
	t.Fatalf("no table headed %q in:\n%s", header, out)
}

// TestRunsShow: `stackbone runs show` prints a run's header and its steps
// as an aligned table (the tool turn: model, lookup, model; tokens as the
// API counts them; cost unknown for an unpriced model), a paused run's
// decision and who made it, the resumed run's link back; --json prints the
// server's run; an unknown run is the server's 404, exit 1.
func TestRunsShow(t *testing.T) {
	t.Parallel()
	p := usageServer(t)
	chatAs(t, p.URL(), "shop", "cli-runs", "look up order o1")
	chatAs(t, p.URL(), "shop", "cli-runs", "refund order o1")
	var page struct {
		Data []store.Interrupt `json:"data"`
	}
	getJSON(t, p.URL()+"/v1/hitl?thread=cli-runs", &page)
	if len(page.Data) != 1 {
		t.Fatalf("pending: %+v", page.Data)
	}
	if r := run(t, nil, "hitl", "approve", page.Data[0].ID, "--yes", "--url", p.URL()); r.code != 0 {
		t.Fatalf("approve: %d %s", r.code, r.stderr)
	}
	runs := endedRuns(t, p.URL(), "cli-runs", 3)

	r := run(t, nil, "runs", "show", runs[0].ID, "--url", p.URL())
	if r.code != 0 {
		t.Fatalf("runs show: %d %s", r.code, r.stderr)
	}
	for _, want := range []string{"Run:", runs[0].ID, "Thread:", "cli-runs", "Agent:", "shop", "Status:", "idle", "Duration:",
		"Tokens:", strconv.Itoa(runs[0].Usage.TotalTokens) + " (input", "Cost:", "unknown", "Calls:", "2 model, 1 tool",
		"KIND", "NAME", "DURATION", "TOKENS", "COST", "OUTCOME"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("runs show lacks %q:\n%s", want, r.stdout)
		}
	}
	t.Logf("stackbone runs show:\n%s", r.stdout)
	columnsAligned(t, r.stdout, "#", "KIND")
	columnsAligned(t, r.stdout, "#", "OUTCOME")
	var kinds []string
	sum := 0
	for _, l := range strings.Split(r.stdout, "\n") {
		f := strings.Fields(l)
		if len(f) >= 9 && (f[1] == "model" || f[1] == "tool") {
			kinds = append(kinds, f[1]+":"+f[2])
			if f[1] == "model" {
				n, err := strconv.Atoi(f[5])
				if err != nil || f[6] != "unknown" {
					t.Fatalf("model row %q: want its tokens and cost unknown", l)
				}
				sum += n
			}
		}
	}
	if strings.Join(kinds, " ") != "model:test-model tool:lookup model:test-model" || sum != runs[0].Usage.TotalTokens {
		t.Fatalf("steps %v adding to %d tokens (the API: %d):\n%s", kinds, sum, runs[0].Usage.TotalTokens, r.stdout)
	}

	// The paused run: its decision and who made it; the resumed run links back.
	r = run(t, []string{"STACKBONE_URL=" + p.URL()}, "runs", "show", runs[1].ID)
	if r.code != 0 || !strings.Contains(r.stdout, "DECIDED BY") || !strings.Contains(r.stdout, "approved") || !strings.Contains(r.stdout, "refund") {
		t.Fatalf("paused run: %d %s %s", r.code, r.stdout, r.stderr)
	}
	columnsAligned(t, r.stdout, "DECISION", "DECIDED BY")
	r = run(t, nil, "runs", "show", runs[2].ID, "--url", p.URL())
	if r.code != 0 || !strings.Contains(r.stdout, "Resumed from:") || !strings.Contains(r.stdout, runs[1].ID) {
		t.Fatalf("resumed run: %d %s %s", r.code, r.stdout, r.stderr)
	}

	r = run(t, nil, "runs", "show", runs[1].ID, "--json", "--url", p.URL())
	var got cliRun
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil || got.ID != runs[1].ID || len(got.Decisions) != 1 || got.Decisions[0].DecidedBy != "dev" {
		t.Fatalf("--json: %d %s %s", r.code, r.stdout, r.stderr)
	}

	r = run(t, nil, "runs", "show", "run_nope", "--url", p.URL())
	if r.code != 1 || !strings.Contains(r.stderr, `"run_nope"`) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Fatalf("unknown run: %d %q", r.code, r.stderr)
	}
}

// TestUsage: `stackbone usage` prints the groups and the total as an
// aligned table (shop's cost unknown, pricey's in dollars), the top
// threads and the budgets, pricey's exceeded; --group-by day and model,
// --json; a bad --group-by and a bad --from fail with a clear message.
func TestUsage(t *testing.T) {
	t.Parallel()
	p := usageServer(t)
	chatAs(t, p.URL(), "shop", "cli-usage", "look up order o1")
	chatAs(t, p.URL(), "pricey", "cli-pricey", "hello")
	endedRuns(t, p.URL(), "cli-usage", 1)
	endedRuns(t, p.URL(), "cli-pricey", 1)
	var api struct {
		Total struct {
			TotalTokens int `json:"totalTokens"`
			Runs        int `json:"runs"`
		} `json:"total"`
	}
	getJSON(t, p.URL()+"/v1/usage", &api)
	if api.Total.Runs != 2 || api.Total.TotalTokens == 0 {
		t.Fatalf("the API's usage: %+v", api)
	}

	r := run(t, nil, "usage", "--url", p.URL())
	if r.code != 0 {
		t.Fatalf("usage: %d %s", r.code, r.stderr)
	}
	t.Logf("stackbone usage:\n%s", r.stdout)
	columnsAligned(t, r.stdout, "AGENT", "COST")
	columnsAligned(t, r.stdout, "AGENT", "RUNS")
	rows := map[string][]string{}
	for _, l := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			rows[f[0]] = f
		}
	}
	if f := rows["shop"]; len(f) < 9 || f[6] != "unknown" || f[7] != "1" {
		t.Fatalf("shop's row %q:\n%s", f, r.stdout)
	}
	if f := rows["pricey"]; len(f) < 9 || !strings.HasPrefix(f[6], "$") {
		t.Fatalf("pricey's row %q:\n%s", f, r.stdout)
	}
	// The total's cost is "$x + unknown": three fields before RUNS.
	if f := rows["TOTAL"]; len(f) != 11 || f[5] != strconv.Itoa(api.Total.TotalTokens) || f[7]+" "+f[8] != "+ unknown" || f[9] != "2" {
		t.Fatalf("the total row %q (the API's total %d):\n%s", f, api.Total.TotalTokens, r.stdout)
	}
	for _, want := range []string{"Top threads by cost", "cli-pricey", "cli-usage", "Budgets", "NAME", "daily", "/ 1000000", "pricey-cap", "agent pricey", "/ $0.0000001", "EXCEEDED"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("usage lacks %q:\n%s", want, r.stdout)
		}
	}
	if f := rows["daily"]; len(f) == 0 || f[len(f)-1] != "ok" {
		t.Fatalf("the daily budget's row %q:\n%s", f, r.stdout)
	}

	today := time.Now().UTC().Format("2006-01-02")
	r = run(t, []string{"STACKBONE_URL=" + p.URL()}, "usage", "--group-by", "day", "--from", today)
	if r.code != 0 || !strings.Contains(r.stdout, "DAY") || !strings.Contains(r.stdout, today) {
		t.Fatalf("--group-by day: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = run(t, nil, "usage", "--group-by", "model", "--json", "--url", p.URL())
	var byModel struct {
		GroupBy string `json:"groupBy"`
		Data    []struct {
			Group   string   `json:"group"`
			CostUSD *float64 `json:"costUsd"`
		} `json:"data"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &byModel) != nil || byModel.GroupBy != "model" || len(byModel.Data) != 2 {
		t.Fatalf("--json: %d %s %s", r.code, r.stdout, r.stderr)
	}

	r = run(t, nil, "usage", "--group-by", "color", "--url", p.URL())
	if r.code != 1 || !strings.Contains(r.stderr, "--group-by") || !strings.Contains(r.stderr, "agent, model, key, day") {
		t.Fatalf("bad --group-by: %d %q", r.code, r.stderr)
	}
	r = run(t, nil, "usage", "--from", "last tuesday", "--url", p.URL())
	if r.code != 1 || !strings.Contains(r.stderr, "from must be an RFC 3339 time") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Fatalf("bad --from: %d %q", r.code, r.stderr)
	}
}

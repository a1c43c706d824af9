package tsload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stackbone/stackbone/internal/agent"
)

var (
	npmOnce sync.Once
	npmErr  error
)

// zodFixture returns testdata/zodagent with its node_modules installed
// (npm ci from the committed package-lock.json). Without npm the test fails
// in CI and is skipped elsewhere.
func zodFixture(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "zodagent"))
	if err != nil {
		t.Fatal(err)
	}
	installed := func() bool {
		for _, p := range []string{"zod/package.json", "typescript/package.json"} {
			if _, err := os.Stat(filepath.Join(dir, "node_modules", p)); err != nil {
				return false
			}
		}
		return true
	}
	if installed() {
		return dir
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("npm is needed to install the zod fixture (testdata/zodagent): %v", err)
		}
		t.Skipf("npm not found, cannot install testdata/zodagent/node_modules: %v", err)
	}
	npmOnce.Do(func() {
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			npmErr = fmt.Errorf("npm ci in %s: %v\n%s", dir, err, out)
		} else if !installed() {
			npmErr = fmt.Errorf("npm ci in %s left zod or typescript missing", dir)
		}
	})
	if npmErr != nil {
		t.Fatal(npmErr)
	}
	return dir
}

func specsByName(specs []*agent.Spec) map[string]*agent.Spec {
	m := map[string]*agent.Spec{}
	for _, s := range specs {
		m[s.Name] = s
	}
	return m
}

func TestZodAgent(t *testing.T) {
	dir := zodFixture(t)
	log, rec := newRecorder()
	specs := specsByName(mustLoad(t, dir, Options{Logger: log}))
	s := specs["orders"]
	if s == nil || s.Model != "openai/gpt-4o-mini" || s.Instructions != "You handle orders." {
		t.Fatalf("orders = %+v (have %v)", s, specs)
	}
	refund := mustTool(t, s, "refund")
	var params map[string]any
	if err := json.Unmarshal(refund.Parameters, &params); err != nil {
		t.Fatal(err)
	}
	if _, ok := params["$schema"]; ok {
		t.Fatalf("$schema must be stripped: %s", refund.Parameters)
	}
	props, _ := params["properties"].(map[string]any)
	jsonEqual(t, string(mustJSON(props["orderId"])), `{"type":"string","minLength":1,"description":"Order id, e.g. o1"}`)
	jsonEqual(t, string(mustJSON(props["amount"])), `{"type":"number","exclusiveMinimum":0,"maximum":10000}`)
	jsonEqual(t, string(mustJSON(props["reason"])), `{"type":"string","enum":["damaged","late","other"]}`)
	jsonEqual(t, string(mustJSON(params["required"])), `["orderId","amount"]`)
	if params["type"] != "object" {
		t.Fatalf("parameters = %s", refund.Parameters)
	}
	jsonEqual(t, string(s.EditableState["draft"]), `{"type":"string","maxLength":200}`)
	jsonEqual(t, string(s.EditableState["note"]), `{"type":"string"}`)

	res, err := run(t, s, "refund", `{"orderId":"o1","amount":19.99}`)
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, res.Content, `{"refunded":19.99,"orderId":"o1","reason":null,"callId":"call_1"}`)

	_, err = run(t, s, "refund", `{"orderId":"","amount":-1,"reason":"bored"}`)
	if err == nil || !errors.Is(err, ErrInvalidArguments) {
		t.Fatalf("invalid args: %v", err)
	}
	for _, want := range []string{
		"invalid tool arguments: ",
		"orderId: Too small: expected string to have >=1 characters",
		"amount: Too small: expected number to be >0",
		"reason: Invalid option",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if len(rec.find("WARN", "invalid tool arguments")) != 0 {
		t.Error("bad arguments from the model are not a code failure and must not be logged as warnings")
	}

	ctx := context.Background()
	for amount, want := range map[string]bool{"500": true, "19.99": false} {
		got, err := refund.Approval.When(ctx, json.RawMessage(`{"orderId":"o1","amount":`+amount+`}`))
		if err != nil || got != want {
			t.Fatalf("when(%s) = %v, %v", amount, got, err)
		}
	}
	d, err := refund.Approval.Description(ctx, json.RawMessage(`{"orderId":"o1","amount":500}`))
	if err != nil || d != "Refund order o1 for 500.00" {
		t.Fatalf("description = %q, %v", d, err)
	}

	// output: a zod schema becomes the answer's JSON Schema.
	report := specs["report.v1"]
	if report == nil {
		t.Fatal("report.v1 agent (zod output) not loaded")
	}
	var out map[string]any
	if err := json.Unmarshal(report.Output, &out); err != nil || out["type"] != "object" || out["$schema"] != nil {
		t.Fatalf("report output = %s (%v)", report.Output, err)
	}
	oprops, _ := out["properties"].(map[string]any)
	jsonEqual(t, string(mustJSON(oprops["summary"])), `{"type":"string","minLength":1}`)
	jsonEqual(t, string(mustJSON(out["required"])), `["summary","score"]`)
	if f := report.OutputFormat(); f == nil || f.Name != "report_v1" || string(f.Schema) != string(report.Output) {
		t.Fatalf("report format = %+v", f)
	}

	mini := specs["mini"]
	if mini == nil {
		t.Fatal("mini agent (zod/mini) not loaded")
	}
	lookup := mustTool(t, mini, "lookup")
	var mp map[string]any
	_ = json.Unmarshal(lookup.Parameters, &mp)
	if mp["type"] != "object" || mp["$schema"] != nil || !strings.Contains(string(lookup.Parameters), `"minLength":3`) {
		t.Fatalf("mini parameters = %s", lookup.Parameters)
	}
	if res, err := run(t, mini, "lookup", `{"sku":"abc"}`); err != nil || res.Content != "abc x1" {
		t.Fatalf("lookup = %q, %v", res.Content, err)
	}
	if _, err := run(t, mini, "lookup", `{"sku":"a"}`); !errors.Is(err, ErrInvalidArguments) || !strings.Contains(err.Error(), "sku: ") {
		t.Fatalf("mini invalid = %v", err)
	}
}

// TestEditorTypes runs tsc over the fixture (which must pass) and over an
// agent file with mistakes the types must catch.
func TestEditorTypes(t *testing.T) {
	t.Parallel() // tsc runs while the package's other tests do
	fixture := zodFixture(t)
	tsc := filepath.Join(fixture, "node_modules", ".bin", "tsc")

	// One tsc run checks the fixture's agents (which must be clean; they
	// have the same compiler options) and a broken agent (which must not).
	types, err := filepath.Abs(filepath.Join("..", "..", "..", "types", "stackbone"))
	if err != nil {
		t.Fatal(err)
	}
	tsconfig := `{
  "compilerOptions": {
    "target": "ES2022", "module": "ESNext", "moduleResolution": "Bundler", "lib": ["ES2023"], "types": [],
    "strict": true, "noEmit": true, "skipLibCheck": true,
    "paths": { "stackbone": ["` + filepath.ToSlash(filepath.Join(types, "index.d.ts")) + `"] }
  },
  "include": ["agents/**/*.ts", "` + filepath.ToSlash(filepath.Join(fixture, "agents")) + `/**/*.ts", "` + filepath.ToSlash(filepath.Join(types, "globals.d.ts")) + `"]
}`
	dir := writeProject(t, map[string]string{
		"tsconfig.json": tsconfig,
		"agents/bad.ts": `import { defineDeepAgent, tool } from 'stackbone';
import { z } from 'zod';
export default defineDeepAgent({
  name: 'bad',
  modle: 'openai/gpt-4o-mini',
  env: ['PAYMENTS_TOKEN'],
  tools: {
    t: tool({
      parameters: z.object({ n: z.number() }),
      needsApproval: { allowedDecisions: ['maybe'] },
      async execute({ n }, ctx) { ctx.state.x = 1; const tok: string = ctx.env.PAYMENTS_TOKEN; return n.toUpperCase() + tok; },
    }),
  },
});
`,
		"agents/bad2.ts": `import { defineDeepAgent } from 'stackbone';
export default defineDeepAgent({ name: 'bad2', model: 'openai/x', modelSettings: { reasoningEffort: 'extreme' } });
`,
		"agents/good.ts": `import { defineDeepAgent } from 'stackbone';
export default defineDeepAgent({
  name: 'good',
  model: 'openai/gpt-4o-mini',
  instructions: async ({ state, threadId, agent }) => 'Draft: ' + String(state.draft ?? 'none') + threadId + agent,
  modelSettings: { timeout: '2m', temperature: 0.2, topP: 0.9, maxTokens: 512, stop: ['END'], seed: 1, reasoningEffort: 'low',
    parallelToolCalls: false, providerOptions: { openai: { user: 'u1' } } },
  clientOverrides: ['temperature', 'maxTokens'],
  subagents: [{ name: 's', description: 'd', instructions: 'i', modelSettings: { temperature: 0 } }],
});
`,
	})
	if err := os.Symlink(filepath.Join(fixture, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(tsc, "-p", dir).CombinedOutput()
	if err == nil {
		t.Fatalf("tsc accepted a broken agent:\n%s", out)
	}
	if strings.Contains(string(out), "zodagent/agents/") || strings.Contains(string(out), "agents/good.ts") {
		t.Fatalf("tsc on the fixture's agents:\n%s", out)
	}
	for _, want := range []string{"'modle' does not exist", `"maybe"`, `"extreme"`, "'toUpperCase' does not exist on type 'number'",
		"Type 'string | undefined' is not assignable to type 'string'"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("tsc output lacks %q:\n%s", want, out)
		}
	}
}

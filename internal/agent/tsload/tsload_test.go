package tsload

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/tool"
)

const refundsAgent = `import { defineDeepAgent, tool } from 'stackbone';
import { money, type Money } from './lib/money';

enum Level { Low = 1, High = 2 }

class Ledger {
  #entries: Money[] = [];
  constructor(private readonly currency: string) {}
  add(m: Money): string { this.#entries.push(m); return money(m.amount, this.currency); }
}

export default defineDeepAgent({
  name: 'refunds',
  model: 'openai/gpt-4o-mini',
  description: 'Refunds orders under a limit.',
  instructions: 'You handle refunds.',
  maxSteps: 7,
  todos: false,
  tools: {
    refund: tool({
      description: 'Refund an order',
      parameters: {
        type: 'object',
        properties: { orderId: { type: 'string' }, amount: { type: 'number' } },
        required: ['orderId', 'amount'],
      },
      needsApproval: {
        description: ({ orderId, amount }) => ` + "`Refund order ${orderId} for ${amount}`" + `,
        allowedDecisions: ['approve', 'reject', 'edit'],
      },
      timeoutMs: 1500,
      async execute({ orderId, amount }: { orderId: string; amount: number }, ctx) {
        const pretty = new Ledger('USD').add({ amount });
        return { refunded: amount, pretty, orderId, level: amount > 100 ? Level.High : Level.Low,
                 thread: ctx.threadId, call: ctx.toolCallId, key: ctx.idempotencyKey, agent: ctx.agent, aborted: ctx.signal.aborted, user: ctx.user };
      },
    }),
    echo: tool({
      description: 'Echo text back',
      parameters: { type: 'object', properties: { text: { type: 'string' } } },
      idempotent: true,
      execute: ({ text }) => text,
    }),
    nothing: { execute() {} },
  },
  subagents: [
    { name: 'researcher', description: 'Looks things up', instructions: 'Research.', tools: ['echo', 'read_file'] },
    { name: 'writer', description: 'Writes', instructions: 'Write.', model: 'anthropic/claude-sonnet-4-5' },
  ],
  editableState: { draft: { type: 'string', $schema: 'https://json-schema.org/draft/2020-12/schema' } },
});
`

const moneyLib = `export interface Money { amount: number }
export function money(n: number, cur = 'USD'): string {
  return (cur === 'USD' ? '$' : cur + ' ') + n.toFixed(2);
}
`

func TestLoadValidAgentWithRelativeImport(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"agents/refunds.ts":     refundsAgent,
		"agents/lib/money.ts":   moneyLib,
		"agents/lib/types.d.ts": "export type X = number;\n",
	})
	specs := mustLoad(t, dir, Options{})
	if len(specs) != 1 {
		t.Fatalf("got %d specs, want 1 (agents/lib/*.ts are imports, not entries)", len(specs))
	}
	s := specs[0]
	abs, _ := filepath.Abs(dir)
	if s.Name != "refunds" || s.Model != "openai/gpt-4o-mini" || s.Instructions != "You handle refunds." || s.Description != "Refunds orders under a limit." ||
		s.MaxSteps != 7 || !s.NoTodos || s.NoFiles || s.Dir != abs || s.Source != filepath.Join(abs, "agents", "refunds.ts") {
		t.Fatalf("spec = %+v", s)
	}
	jsonEqual(t, string(s.EditableState["draft"]), `{"type":"string"}`)
	wantSubs := `[{"Name":"researcher","Description":"Looks things up","Instructions":"Research.","Model":"","Tools":["echo","read_file"]},
		{"Name":"writer","Description":"Writes","Instructions":"Write.","Model":"anthropic/claude-sonnet-4-5","Tools":null}]`
	subs, _ := json.Marshal(s.Subagents)
	jsonEqual(t, string(subs), wantSubs)

	if got := []string{s.Tools[0].Name, s.Tools[1].Name, s.Tools[2].Name}; !reflect.DeepEqual(got, []string{"refund", "echo", "nothing"}) {
		t.Fatalf("tool order = %v", got)
	}
	refund := mustTool(t, s, "refund")
	if refund.Description != "Refund an order" || refund.Timeout != 1500*time.Millisecond || refund.TimeLimit() != 1500*time.Millisecond {
		t.Fatalf("refund tool = %+v", refund)
	}
	jsonEqual(t, string(refund.Parameters),
		`{"type":"object","properties":{"orderId":{"type":"string"},"amount":{"type":"number"}},"required":["orderId","amount"]}`)
	if refund.Approval == nil || refund.Approval.When != nil || refund.Approval.Description == nil {
		t.Fatalf("approval = %+v", refund.Approval)
	}
	if got := refund.Approval.Allowed(); !reflect.DeepEqual(got, []tool.Decision{tool.Approve, tool.Reject, tool.Edit}) {
		t.Fatalf("allowed = %v", got)
	}
	desc, err := refund.Approval.Description(context.Background(), json.RawMessage(`{"orderId":"o1","amount":19.99}`))
	if err != nil || desc != "Refund order o1 for 19.99" {
		t.Fatalf("description = %q, %v", desc, err)
	}
	jsonEqual(t, string(mustTool(t, s, "nothing").Parameters), `{"type":"object","properties":{}}`)

	res, err := run(t, s, "refund", `{"orderId":"o1","amount":19.99}`)
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, res.Content, `{"refunded":19.99,"pretty":"$19.99","orderId":"o1","level":1,
		"thread":"th_1","call":"call_1","key":"sbk_1","agent":"refunds","aborted":false,"user":null}`)
	if res.State != nil {
		t.Fatalf("state changed: %s", res.State)
	}
	// An end user's turn: ctx.user is who their token names.
	res, err = refund.Execute(context.Background(), tool.Call{ThreadID: "th_2", ToolCallID: "call_2", IdempotencyKey: "sbk_2", Agent: s.Name,
		User: &tool.User{ID: "auth0|42", Label: "ann@example.com"}, Args: json.RawMessage(`{"orderId":"o2","amount":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, res.Content, `{"refunded":1,"pretty":"$1.00","orderId":"o2","level":1,
		"thread":"th_2","call":"call_2","key":"sbk_2","agent":"refunds","aborted":false,"user":{"id":"auth0|42","label":"ann@example.com"}}`)
	if res, err := run(t, s, "echo", `{"text":"hi \"there\""}`); err != nil || res.Content != `hi "there"` {
		t.Fatalf("echo = %q, %v (a string result stays a plain string)", res.Content, err)
	}
	if res, err := run(t, s, "nothing", `{}`); err != nil || res.Content != "" {
		t.Fatalf("nothing = %q, %v", res.Content, err)
	}
	if mustTool(t, s, "echo").Approval != nil {
		t.Fatal("echo must not need approval")
	}
	if !mustTool(t, s, "echo").Idempotent || refund.Idempotent {
		t.Fatal("idempotent: true makes a tool idempotent; a tool without it is not")
	}
}

func TestLoadFileAndEmptyProject(t *testing.T) {
	dir := writeProject(t, map[string]string{"agents/refunds.ts": refundsAgent, "agents/lib/money.ts": moneyLib})
	s, err := LoadFile(context.Background(), dir, "agents/refunds.ts", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Name != "refunds" {
		t.Fatalf("name = %q", s.Name)
	}
	specs, err := LoadDir(context.Background(), t.TempDir(), Options{})
	if err != nil || len(specs) != 0 {
		t.Fatalf("empty project: %v, %v", specs, err)
	}
	if _, err := LoadDir(context.Background(), filepath.Join(t.TempDir(), "missing"), Options{}); err == nil {
		t.Fatal("a missing project folder must be an error")
	}
}

func TestSyntaxErrorHasFileLineCol(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"agents/broken.ts": `import { defineDeepAgent, tool } from 'stackbone';

export default defineDeepAgent({
  name: 'broken',
  model: 'openai/gpt-4o-mini',
  tools: {
    t: tool({
      description: 'x',
      async execute(args: { a: number } {
        return 1;
      },
    }),
  },
});
`,
	})
	_, err := LoadDir(context.Background(), dir, Options{})
	if err == nil {
		t.Fatal("want an error")
	}
	want := `agents/broken.ts:9:41: Expected ")" but found "{"`
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %q, want it to contain %q", err, want)
	}
	var le *LoadError
	if !errors.As(err, &le) || le.File != "agents/broken.ts" || le.Line != 9 || le.Col != 41 {
		t.Fatalf("LoadError = %+v", le)
	}
}

func TestUnresolvableImport(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"agents/nodeapi.ts": "import { randomBytes } from 'node:crypto';\nexport default randomBytes;\n",
	})
	_, err := LoadDir(context.Background(), dir, Options{})
	if err == nil || !strings.Contains(err.Error(), `agents/nodeapi.ts:1:29: Could not resolve "node:crypto"`) {
		t.Fatalf("error = %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	head := "import { defineDeepAgent, tool } from 'stackbone';\n"
	cases := []struct {
		name, src, want string
	}{
		{"missing name", head + "export default defineDeepAgent({\n  model: 'openai/x',\n});\n",
			"agents/a.ts:2:32: defineDeepAgent: name is required"},
		{"bad model", head + "\nexport default defineDeepAgent({ name: 'a', model: 'gpt-4o' });\n",
			`agents/a.ts:3:32: agent "a": model must be a "provider/model" string such as "openai/gpt-4o-mini", got "gpt-4o"`},
		{"missing model", head + "export default defineDeepAgent({ name: 'a' });\n",
			`agents/a.ts:2:32: agent "a": model is required`},
		{"description not a string", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', description: 42 as any });\n",
			`agents/a.ts:2:32: agent "a": description must be a string`},
		{"tool without execute", head + "const t = 1;\nexport default defineDeepAgent({ name: 'a', model: 'openai/x', tools: {\n  x: tool({ description: 'no execute' } as any),\n} });\n",
			`agents/a.ts:4:11: tool(): execute must be a function`},
		{"plain tool without execute", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', tools: { x: { description: 'd' } as any } });\n",
			`agents/a.ts:2:32: tool "x": execute must be a function`},
		{"built-in name", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', tools: {\n  read_file: tool({ execute() {} }),\n} });\n",
			`agents/a.ts:3:19: agent "a": tool "read_file" clashes with a built-in tool`},
		{"tools as array", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', tools: [] as any });\n",
			`agents/a.ts:2:32: agent "a": tools must be an object mapping tool names to tool({...})`},
		{"bad decision", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', tools: {\n  x: tool({ needsApproval: { allowedDecisions: ['maybe'] } as any, execute() {} }),\n} });\n",
			`agents/a.ts:3:11: tool(): needsApproval.allowedDecisions: unknown decision "maybe" (allowed: approve, reject, edit)`},
		{"idempotent not a boolean", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', tools: {\n  x: tool({ idempotent: 'yes', execute() {} } as any),\n} });\n",
			`agents/a.ts:3:11: tool(): idempotent must be true or false`},
		{"unknown subagent tool", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x',\n  subagents: [{ name: 's', description: 'd', instructions: 'i', tools: ['nope'] }] });\n",
			`agents/a.ts:2:32: agent "a": subagents[0] (s): unknown tool "nope"`},
		{"bad model timeout", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', modelSettings: { timeout: '10 minutes' } });\n",
			`agents/a.ts:2:32: agent "a": modelSettings.timeout must be a positive number of milliseconds or a duration string such as "90s" or "2m", got "10 minutes"`},
		{"zero idle timeout", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', modelSettings: { idleTimeout: 0 } });\n",
			`agents/a.ts:2:32: agent "a": modelSettings.idleTimeout must be a positive number`},
		{"unknown model setting", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', modelSettings: { frequencyPenalty: 1 } as any });\n",
			`agents/a.ts:2:32: agent "a": modelSettings: unknown field "frequencyPenalty" (allowed: timeout, idleTimeout, temperature, topP, maxTokens, stop, seed, reasoningEffort, parallelToolCalls, providerOptions)`},
		{"temperature out of range", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', modelSettings: { temperature: 3 } });\n",
			`agents/a.ts:2:32: agent "a": modelSettings.temperature must be a number from 0 to 2, got 3`},
		{"bad reasoning effort", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', modelSettings: { reasoningEffort: 'max' } as any });\n",
			`agents/a.ts:2:32: agent "a": modelSettings.reasoningEffort must be one of "minimal", "low", "medium", "high", got "max"`},
		{"fractional maxTokens", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', modelSettings: { maxTokens: 1.5 } });\n",
			`agents/a.ts:2:32: agent "a": modelSettings.maxTokens must be a positive integer, got 1.5`},
		{"provider options not an object", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', modelSettings: { providerOptions: { openai: 1 } } as any });\n",
			`agents/a.ts:2:32: agent "a": modelSettings.providerOptions.openai must be an object of request body fields`},
		{"unknown client override", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', clientOverrides: ['seed'] as any });\n",
			`agents/a.ts:2:32: agent "a": clientOverrides: unknown setting "seed" (allowed: temperature, maxTokens, stop, reasoningEffort)`},
		{"subagent timeout", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x',\n  subagents: [{ name: 's', description: 'd', instructions: 'i', modelSettings: { timeout: '1m' } as any }] });\n",
			`agents/a.ts:2:32: agent "a": subagents[0] (s): modelSettings: unknown field "timeout"`},
		{"instructions neither string nor function", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', instructions: 42 as any });\n",
			`agents/a.ts:2:32: agent "a": instructions must be a string or a function ({ state, threadId, agent }) => string`},
		{"bad MCP server name", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', mcpServers: { 'git hub': { url: 'http://x/mcp' } } });\n",
			`agents/a.ts:2:32: agent "a": MCP server name "git hub" must be 1-64 letters, digits, "_" or "-"`},
		{"MCP url and command", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', mcpServers: { g: { url: 'http://x/mcp', command: 'node' } as any } });\n",
			`agents/a.ts:2:32: agent "a": mcpServers.g: give either url (streamable HTTP) or command (stdio), not both`},
		{"MCP bad approval", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', mcpServers: { g: { command: 'node', approval: 'sometimes' } as any } });\n",
			`agents/a.ts:2:32: agent "a": mcpServers.g: approval must be "annotations", "always", "never" or an object mapping tool names to needsApproval`},
		{"MCP header not a string", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', mcpServers: { g: { url: 'https://x/mcp', headers: { A: 1 } } as any } });\n",
			`agents/a.ts:2:32: agent "a": mcpServers.g.headers.A must be a string`},
		{"contextWindow not an integer", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', contextWindow: '128k' as any });\n",
			`agents/a.ts:2:32: agent "a": contextWindow must be a positive integer (tokens)`},
		{"unknown context policy", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', contextPolicy: 'compress' as any });\n",
			`agents/a.ts:2:32: agent "a": contextPolicy: unknown policy "compress" (allowed: 'trim', 'summarize')`},
		{"unknown multitask strategy", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', multitask: 'later' as any });\n",
			`agents/a.ts:2:32: agent "a": multitask: unknown strategy "later" (allowed: 'reject', 'enqueue', 'interrupt', 'rollback')`},
		{"no default export", head + "export const x = defineDeepAgent({ name: 'a', model: 'openai/x' });\n",
			"agents/a.ts: no default export"},
		{"throw at top level", head + "function f(): never {\n  throw new TypeError('bad setup');\n}\nf();\nexport default defineDeepAgent({ name: 'a', model: 'openai/x' });\n",
			"agents/a.ts:3:9: TypeError: bad setup"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeProject(t, map[string]string{"agents/a.ts": c.src})
			_, err := LoadDir(context.Background(), dir, Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, c.want)
			}
			var le *LoadError
			if !errors.As(err, &le) || le.File != "agents/a.ts" {
				t.Fatalf("not a *LoadError for agents/a.ts: %#v", err)
			}
		})
	}
}

func TestMCPServersParsed(t *testing.T) {
	src := `import { defineDeepAgent } from 'stackbone';
export default defineDeepAgent({ name: 'a', model: 'openai/x', mcpServers: {
  gh: { url: 'https://example.com/mcp', headers: { Authorization: 'Bearer ${GH_TOKEN}' } },
  local: { command: 'node', args: ['s.mjs'], env: { KEY: '${KEY}-x' }, approval: 'never' },
  fine: { command: 'node', approval: { drop: true, read: false, ask: { description: (a: any) => 'ask ' + a.q, allowedDecisions: ['approve'] } } },
} });
`
	env := map[string]string{"GH_TOKEN": "tok", "KEY": "k"}
	s := loadOne(t, map[string]string{"agents/a.ts": src}, Options{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if len(s.MCPServers) != 3 {
		t.Fatalf("servers %+v", s.MCPServers)
	}
	gh, local, fine := s.MCPServers[0], s.MCPServers[1], s.MCPServers[2]
	if gh.Name != "gh" || gh.Transport() != "http" || gh.Headers["Authorization"] != "Bearer tok" || gh.Approval.Mode != agent.MCPApprovalAnnotations {
		t.Fatalf("gh %+v", gh)
	}
	if local.Transport() != "stdio" || local.Command != "node" || local.Args[0] != "s.mjs" || local.Env["KEY"] != "k-x" || local.Approval.Mode != agent.MCPApprovalNever {
		t.Fatalf("local %+v", local)
	}
	ap := fine.Approval.Tools
	if ap["drop"] == nil || ap["drop"].When != nil || len(ap) != 3 {
		t.Fatalf("fine approvals %+v", ap)
	}
	if a, ok := ap["read"]; !ok || a != nil {
		t.Fatalf("read: false should mean no approval, got %+v", a)
	}
	desc, err := ap["ask"].Description(context.Background(), json.RawMessage(`{"q":"x"}`))
	if err != nil || desc != "ask x" || len(ap["ask"].AllowedDecisions) != 1 {
		t.Fatalf("ask approval: %q %v %+v", desc, err, ap["ask"])
	}
}

// TestContextSettings: contextWindow and contextPolicy reach the Spec;
// without them the Spec has none (the engine then uses the model's known
// window).
func TestContextSettings(t *testing.T) {
	s := loadOne(t, map[string]string{"agents/a.ts": "import { defineDeepAgent } from 'stackbone';\n" +
		"export default defineDeepAgent({ name: 'a', model: 'openai/gpt-4o', contextWindow: 32000, contextPolicy: 'trim' });\n"}, Options{})
	if sum := loadOne(t, map[string]string{"agents/a.ts": "import { defineDeepAgent } from 'stackbone';\n" +
		"export default defineDeepAgent({ name: 'a', model: 'openai/gpt-4o', contextPolicy: 'summarize' });\n"}, Options{}); sum.ContextPolicy != agent.ContextSummarize {
		t.Fatalf("contextPolicy summarize: %q", sum.ContextPolicy)
	}
	if s.ContextWindow != 32000 || s.ContextPolicy != agent.ContextTrim {
		t.Fatalf("contextWindow %d, contextPolicy %q", s.ContextWindow, s.ContextPolicy)
	}
	s = loadOne(t, map[string]string{"agents/a.ts": "import { defineDeepAgent } from 'stackbone';\n" +
		"export default defineDeepAgent({ name: 'a', model: 'openai/gpt-4o' });\n"}, Options{})
	if s.ContextWindow != 0 || s.ContextPolicy != "" || s.Window("gpt-4o") != 128_000 {
		t.Fatalf("defaults: contextWindow %d, contextPolicy %q, window %d", s.ContextWindow, s.ContextPolicy, s.Window("gpt-4o"))
	}
}

// TestMultitask: multitask reaches the Spec ("" without it: reject).
func TestMultitask(t *testing.T) {
	s := loadOne(t, map[string]string{"agents/a.ts": "import { defineDeepAgent } from 'stackbone';\n" +
		"export default defineDeepAgent({ name: 'a', model: 'openai/gpt-4o', multitask: 'rollback' });\n"}, Options{})
	if s.Multitask != agent.MultitaskRollback {
		t.Fatalf("multitask %q, want rollback", s.Multitask)
	}
	s = loadOne(t, map[string]string{"agents/a.ts": "import { defineDeepAgent } from 'stackbone';\n" +
		"export default defineDeepAgent({ name: 'a', model: 'openai/gpt-4o' });\n"}, Options{})
	if s.Multitask != "" {
		t.Fatalf("multitask %q without one, want none", s.Multitask)
	}
}

func TestModelSettingsTimeouts(t *testing.T) {
	for src, want := range map[string]model.Timeouts{
		"{ timeout: '1m30s', idleTimeout: 45000 }": {Call: 90 * time.Second, Idle: 45 * time.Second},
		"{ idleTimeout: '500ms' }":                 {Idle: 500 * time.Millisecond},
		"{}":                                       {},
	} {
		s := loadOne(t, map[string]string{"agents/a.ts": "import { defineDeepAgent } from 'stackbone';\n" +
			"export default defineDeepAgent({ name: 'a', model: 'openai/x', modelSettings: " + src + " });\n"}, Options{})
		if s.ModelTimeouts != want {
			t.Errorf("modelSettings %s: %+v, want %+v", src, s.ModelTimeouts, want)
		}
	}
}

// TestModelSettingsSampling: modelSettings' sampling fields and
// clientOverrides reach the Spec (stop as a string becomes a list); a
// subagent's own settings are kept for the engine to lay over the parent's.
func TestModelSettingsSampling(t *testing.T) {
	s := loadOne(t, map[string]string{"agents/a.ts": `import { defineDeepAgent } from 'stackbone';
export default defineDeepAgent({ name: 'a', model: 'openai/x', clientOverrides: ['temperature', 'stop'],
  modelSettings: { timeout: '2m', temperature: 0.3, topP: 0.9, maxTokens: 512, stop: 'END', seed: 7,
    reasoningEffort: 'low', parallelToolCalls: false, providerOptions: { openai: { user: 'u1' } } },
  subagents: [{ name: 's', description: 'd', instructions: 'i', modelSettings: { temperature: 0 } },
    { name: 'p', description: 'd', instructions: 'i' }],
});
`}, Options{})
	got, _ := json.Marshal(s.ModelSettings)
	jsonEqual(t, string(got), `{"temperature":0.3,"topP":0.9,"maxTokens":512,"stop":["END"],"seed":7,"reasoningEffort":"low",
		"parallelToolCalls":false,"providerOptions":{"openai":{"user":"u1"}}}`)
	if s.ModelTimeouts.Call != 2*time.Minute || strings.Join(s.ClientOverrides, ",") != "temperature,stop" {
		t.Fatalf("timeouts %+v, overrides %v", s.ModelTimeouts, s.ClientOverrides)
	}
	if ms := s.Subagents[0].ModelSettings; ms == nil || ms.Temperature == nil || *ms.Temperature != 0 || ms.TopP != nil {
		t.Fatalf("subagent settings %+v", ms)
	}
	if s.Subagents[1].ModelSettings != nil {
		t.Fatalf("a subagent without modelSettings has %+v", s.Subagents[1].ModelSettings)
	}
	if s.InstructionsFn != nil {
		t.Fatal("string instructions made a function")
	}
}

// TestInstructionsFunction: a function-valued instructions is called with
// the state, thread and agent (async allowed); what it throws or a
// non-string it returns is an error naming the problem.
func TestInstructionsFunction(t *testing.T) {
	s := loadOne(t, map[string]string{"agents/a.ts": `import { defineDeepAgent } from 'stackbone';
export default defineDeepAgent({ name: 'a', model: 'openai/x',
  instructions: async ({ state, threadId, agent }) => {
    if (state.mode === 'throw') throw new Error('no draft yet');
    if (state.mode === 'number') return 42 as any;
    return 'Agent ' + agent + ' on ' + threadId + ', draft: ' + (state.draft ?? 'none');
  },
});
`}, Options{})
	if s.InstructionsFn == nil || s.Instructions != "" {
		t.Fatalf("InstructionsFn %v, Instructions %q", s.InstructionsFn != nil, s.Instructions)
	}
	call := func(state string) (string, error) {
		return s.InstructionsFn(context.Background(), agent.InstructionsInput{State: json.RawMessage(state), ThreadID: "t1", Agent: "a"})
	}
	if got, err := call(`{"draft":"v2"}`); err != nil || got != "Agent a on t1, draft: v2" {
		t.Fatalf("got %q, %v", got, err)
	}
	if got, err := call(`{}`); err != nil || got != "Agent a on t1, draft: none" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := call(`{"mode":"throw"}`); err == nil || err.Error() != "no draft yet" {
		t.Fatalf("thrown: %v", err)
	}
	if _, err := call(`{"mode":"number"}`); err == nil || !strings.Contains(err.Error(), "instructions must return a string, got number") {
		t.Fatalf("non-string: %v", err)
	}
}

func TestDuplicateAgentNamesAcrossFiles(t *testing.T) {
	src := "import { defineDeepAgent } from 'stackbone';\n\nexport default defineDeepAgent({ name: 'same', model: 'openai/x' });\n"
	dir := writeProject(t, map[string]string{"agents/a.ts": src, "agents/b.ts": src})
	_, err := LoadDir(context.Background(), dir, Options{})
	want := `agents/b.ts:3:32: duplicate agent name "same" (also defined in agents/a.ts)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v, want %q", err, want)
	}
}

const faultyAgent = `import { defineDeepAgent, tool } from 'stackbone';

function chargeCard(n: number): number {
  throw new Error('card declined for ' + n);
}

let calls = 0;

export default defineDeepAgent({
  name: 'faulty',
  model: 'openai/gpt-4o-mini',
  tools: {
    charge: tool({ async execute({ n }: { n: number }) { return chargeCard(n); } }),
    typeErr: tool({ execute() { const o: any = null; return o.x; } }),
    throwString: tool({ execute() { throw 'plain string'; } }),
    throwObject: tool({ async execute() { throw { code: 42 }; } }),
    spin: tool({ timeoutMs: 200, execute() { for (;;) {} } }),
    spinAsync: tool({ timeoutMs: 200, async execute() { await null; for (;;) {} } }),
    sleepy: tool({ timeoutMs: 100, async execute() { await new Promise((r) => setTimeout(r, 10_000)); return 'late'; } }),
    hang: tool({ execute() { return new Promise(() => {}); } }),
    count: tool({ async execute() { await Promise.resolve(); return ++calls; } }),
    recurse: tool({ execute() { const f = (n: number): number => f(n + 1) + 1; return f(0); } }),
  },
});
`

func TestThrownErrorMessageAndLoggedStack(t *testing.T) {
	log, rec := newRecorder()
	s := loadOne(t, map[string]string{"agents/faulty.ts": faultyAgent}, Options{Logger: log})
	_, err := run(t, s, "charge", `{"n":5}`)
	if err == nil || err.Error() != "card declined for 5" {
		t.Fatalf("error = %v, want exactly the JS message", err)
	}
	var te *ToolError
	if !errors.As(err, &te) || te.Name != "Error" || te.Tool != "charge" || te.Agent != "faulty" {
		t.Fatalf("ToolError = %+v", te)
	}
	lines := rec.find("WARN", "card declined for 5", "agents/faulty.ts:4:", "at chargeCard", "at execute (agents/faulty.ts:13:")
	if len(lines) != 1 {
		t.Fatalf("want one warn line with the TS stack, log:\n%s", rec)
	}
	if strings.Contains(lines[0], "stackbone:prelude") {
		t.Fatalf("host frames leak into the stack: %s", lines[0])
	}
	if _, err := run(t, s, "typeErr", `{}`); err == nil || !strings.HasPrefix(err.Error(), "TypeError: ") {
		t.Fatalf("typeErr = %v", err)
	}
	if _, err := run(t, s, "throwString", `{}`); err == nil || err.Error() != "plain string" {
		t.Fatalf("throwString = %v", err)
	}
	if _, err := run(t, s, "throwObject", `{}`); err == nil || err.Error() != `{"code":42}` {
		t.Fatalf("throwObject = %v", err)
	}
	if _, err := run(t, s, "recurse", `{}`); err == nil {
		t.Fatal("runaway recursion must fail")
	}
	if res, err := run(t, s, "count", `{}`); err != nil || res.Content == "" {
		t.Fatalf("runtime unusable after a stack overflow: %v", err)
	}
}

func TestEndlessLoopIsCutAndNextCallWorks(t *testing.T) {
	s := loadOne(t, map[string]string{"agents/faulty.ts": faultyAgent}, Options{PoolSize: 1})
	for _, name := range []string{"spin", "spinAsync", "sleepy"} {
		start := time.Now()
		_, err := run(t, s, name, `{}`)
		took := time.Since(start)
		limit := mustTool(t, s, name).TimeLimit()
		want := `tool "` + name + `" timed out after ` + limit.String()
		if err == nil || err.Error() != want {
			t.Fatalf("%s: error = %v, want %q", name, err, want)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: error does not match context.DeadlineExceeded", name)
		}
		if took < limit || took > limit+time.Second {
			t.Fatalf("%s: took %s", name, took)
		}
		// With a pool of one, the next call must get a fresh, working runtime
		// (an interrupted goja runtime never runs promise jobs again).
		res, err := run(t, s, "count", `{}`)
		if err != nil || res.Content == "" {
			t.Fatalf("after %s: %q, %v", name, res.Content, err)
		}
	}
}

func TestNeverSettlingPromiseFailsFast(t *testing.T) {
	s := loadOne(t, map[string]string{"agents/faulty.ts": faultyAgent}, Options{})
	start := time.Now()
	_, err := run(t, s, "hang", `{}`)
	if err == nil || !strings.Contains(err.Error(), "never settles") || time.Since(start) > time.Second {
		t.Fatalf("hang = %v after %s", err, time.Since(start))
	}
}

func TestParentContextCancel(t *testing.T) {
	s := loadOne(t, map[string]string{"agents/faulty.ts": faultyAgent}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	tl := mustTool(t, s, "spin")
	tl.Timeout = 5 * time.Second
	_, err := tl.Execute(ctx, tool.Call{Args: json.RawMessage(`{}`)})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
}

const fetchAgent = `import { defineDeepAgent, tool } from 'stackbone';

export default defineDeepAgent({
  name: 'fetcher',
  model: 'openai/gpt-4o-mini',
  tools: {
    refund: tool({
      parameters: { type: 'object', properties: { orderId: { type: 'string' }, amount: { type: 'number' } } },
      async execute({ orderId, amount }, ctx) {
        const res = await ctx.fetch(ctx.state.base + '/refund?order=' + encodeURIComponent(orderId), {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-idempotency-key': ctx.toolCallId },
          body: JSON.stringify({ amount }),
        });
        const upstream = await res.json();
        return { status: res.status, ok: res.ok, type: res.headers.get('Content-Type'), upstream };
      },
    }),
    parallel: tool({
      timeoutMs: 5000,
      async execute(_args, ctx) {
        const all = await Promise.all([1, 2, 3].map((i) => fetch(ctx.state.base + '/slow?i=' + i).then((r) => r.text())));
        return { all };
      },
    }),
    missing: tool({
      async execute(_args, ctx) {
        const r = await ctx.fetch(ctx.state.base + '/nope');
        return { status: r.status, ok: r.ok, text: await r.text() };
      },
    }),
    unreachable: tool({
      async execute() {
        try { await fetch('http://127.0.0.1:1/'); return 'no error'; }
        catch (e: any) { return e.name + ': ' + e.message.slice(0, 12); }
      },
    }),
    forever: tool({ timeoutMs: 300, async execute(_args, ctx) { await ctx.fetch(ctx.state.base + '/forever'); return 'done'; } }),
  },
});
`

func TestAsyncExecuteWithFetch(t *testing.T) {
	released := make(chan struct{})
	var cancelled sync.WaitGroup
	cancelled.Add(1)
	var arrived sync.WaitGroup
	arrived.Add(3)
	allIn := make(chan struct{})
	go func() { arrived.Wait(); close(allIn) }()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/refund":
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{
				"method": r.Method, "order": r.URL.Query().Get("order"), "body": string(body),
				"ct": r.Header.Get("Content-Type"), "key": r.Header.Get("X-Idempotency-Key"),
			})
		case "/slow":
			// Each of the three fetches answers only once all three are
			// under way: they must overlap.
			arrived.Done()
			select {
			case <-allIn:
				_, _ = io.WriteString(w, "s"+r.URL.Query().Get("i"))
			case <-r.Context().Done():
			}
		case "/forever":
			select {
			case <-r.Context().Done():
				cancelled.Done()
			case <-released:
			}
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	defer close(released)
	s := loadOne(t, map[string]string{"agents/fetcher.ts": fetchAgent}, Options{HTTPClient: srv.Client()})
	state := json.RawMessage(`{"base":"` + srv.URL + `"}`)
	call := func(name string) (tool.Result, error) {
		return mustTool(t, s, name).Execute(context.Background(), tool.Call{ToolCallID: "call_9", Args: json.RawMessage(`{"orderId":"o 1","amount":19.99}`), State: state})
	}

	res, err := call("refund")
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, res.Content, `{"status":200,"ok":true,"type":"application/json",
		"upstream":{"method":"POST","order":"o 1","body":"{\"amount\":19.99}","ct":"application/json","key":"call_9"}}`)

	res, err = call("parallel")
	if err != nil {
		t.Fatal(err)
	}
	var par struct{ All []string }
	_ = json.Unmarshal([]byte(res.Content), &par)
	if !reflect.DeepEqual(par.All, []string{"s1", "s2", "s3"}) {
		t.Fatalf("parallel = %s (the three fetches must overlap)", res.Content)
	}

	res, err = call("missing")
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, res.Content, `{"status":404,"ok":false,"text":"404 page not found\n"}`)

	res, err = call("unreachable")
	if err != nil || res.Content != "TypeError: fetch failed" {
		t.Fatalf("unreachable = %s, %v", res.Content, err)
	}

	_, err = call("forever")
	if err == nil || err.Error() != `tool "forever" timed out after 300ms` {
		t.Fatalf("forever = %v", err)
	}
	waitOrFail(t, &cancelled, "the upstream request was not cancelled with the call")
	if _, err := call("refund"); err != nil {
		t.Fatalf("after a timeout: %v", err)
	}
}

func waitOrFail(t *testing.T, wg *sync.WaitGroup, msg string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal(msg)
	}
}

func TestStateMutationComesBackAsResultState(t *testing.T) {
	s := loadOne(t, map[string]string{"agents/st.ts": `import { defineDeepAgent, tool } from 'stackbone';
export default defineDeepAgent({
  name: 'st', model: 'openai/x',
  tools: {
    bump: tool({ execute(_a, ctx) { ctx.state.count = (ctx.state.count ?? 0) + 1; ctx.state.todos[0].done = true; return 'ok'; } }),
    read: tool({ execute(_a, ctx) { return ctx.state.todos.length; } }),
    replace: tool({ execute(_a, ctx) { ctx.state = { fresh: true }; return null; } }),
    fromEmpty: tool({ execute(_a, ctx) { ctx.state.x = 1; } }),
  },
});
`}, Options{})
	state := json.RawMessage(`{"count": 1, "todos": [{"content": "a", "status": "pending", "done": false}]}`)
	exec := func(name string, st json.RawMessage) tool.Result {
		res, err := mustTool(t, s, name).Execute(context.Background(), tool.Call{Args: json.RawMessage(`{}`), State: st})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := exec("bump", state)
	jsonEqual(t, string(res.State), `{"count":2,"todos":[{"content":"a","status":"pending","done":true}]}`)
	jsonEqual(t, string(state), `{"count": 1, "todos": [{"content": "a", "status": "pending", "done": false}]}`)
	if res := exec("read", state); res.State != nil || res.Content != "1" {
		t.Fatalf("read = %+v (an unchanged state must be nil)", res)
	}
	if res := exec("replace", state); res.Content != "null" {
		t.Fatalf("replace content = %q", res.Content)
	} else {
		jsonEqual(t, string(res.State), `{"fresh":true}`)
	}
	jsonEqual(t, string(exec("fromEmpty", nil).State), `{"x":1}`)
	jsonEqual(t, string(exec("fromEmpty", json.RawMessage(`null`)).State), `{"x":1}`)
}

func TestModuleEvaluationIsBounded(t *testing.T) {
	dir := writeProject(t, map[string]string{"agents/loop.ts": `import { defineDeepAgent } from 'stackbone';
while (true) {}
export default defineDeepAgent({ name: 'loop', model: 'openai/x' });
`})
	start := time.Now()
	_, err := LoadDir(context.Background(), dir, Options{EvalTimeout: 100 * time.Millisecond})
	if err == nil || err.Error() != "agents/loop.ts: evaluating the module took longer than 100ms" {
		t.Fatalf("error = %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("took %s", time.Since(start))
	}
}

func TestNeedsApprovalForms(t *testing.T) {
	s := loadOne(t, map[string]string{"agents/ap.ts": `import { defineDeepAgent, tool } from 'stackbone';
const exec = () => 'ok';
export default defineDeepAgent({
  name: 'ap', model: 'openai/x',
  tools: {
    always: tool({ needsApproval: true, execute: exec }),
    never: tool({ needsApproval: false, execute: exec }),
    pred: tool({ needsApproval: ({ amount }) => amount > 100, execute: exec }),
    asyncPred: tool({ needsApproval: async ({ amount }) => { await null; return amount > 10; }, execute: exec }),
    full: tool({
      needsApproval: { when: (a) => a.amount > 100, description: ({ orderId, amount }) => 'Refund ' + orderId + ' for ' + amount, allowedDecisions: ['approve', 'edit'] },
      execute: exec,
    }),
    static: tool({ needsApproval: { description: 'Sends an email' }, execute: exec }),
    off: tool({ needsApproval: { when: false, description: 'never shown' }, execute: exec }),
    badPred: tool({ needsApproval: () => { throw new Error('pred broke'); }, execute: exec }),
  },
});
`}, Options{})
	ctx := context.Background()
	args := func(amount float64) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"orderId": "o1", "amount": amount})
		return b
	}
	if a := mustTool(t, s, "always").Approval; a == nil || a.When != nil || a.Description != nil {
		t.Fatalf("always = %+v", a)
	}
	for _, n := range []string{"never", "off"} {
		if a := mustTool(t, s, n).Approval; a != nil {
			t.Fatalf("%s = %+v, want nil", n, a)
		}
	}
	for _, c := range []struct {
		tool   string
		amount float64
		want   bool
	}{{"pred", 500, true}, {"pred", 19.99, false}, {"asyncPred", 11, true}, {"asyncPred", 5, false}, {"full", 101, true}, {"full", 100, false}} {
		got, err := mustTool(t, s, c.tool).Approval.When(ctx, args(c.amount))
		if err != nil || got != c.want {
			t.Fatalf("%s(%v) = %v, %v; want %v", c.tool, c.amount, got, err, c.want)
		}
	}
	full := mustTool(t, s, "full").Approval
	if d, err := full.Description(ctx, args(500)); err != nil || d != "Refund o1 for 500" {
		t.Fatalf("description = %q, %v", d, err)
	}
	if got := full.Allowed(); !reflect.DeepEqual(got, []tool.Decision{tool.Approve, tool.Edit}) {
		t.Fatalf("allowed = %v", got)
	}
	st := mustTool(t, s, "static").Approval
	if d, err := st.Description(ctx, nil); err != nil || d != "Sends an email" || st.When != nil {
		t.Fatalf("static = %q, %v", d, err)
	}
	if _, err := mustTool(t, s, "badPred").Approval.When(ctx, args(1)); err == nil || err.Error() != "pred broke" {
		t.Fatalf("badPred = %v", err)
	}
}

func TestPoolServesConcurrentCalls(t *testing.T) {
	log, rec := newRecorder()
	s := loadOne(t, map[string]string{"agents/p.ts": `import { defineDeepAgent, tool } from 'stackbone';
let n = 0;
export default defineDeepAgent({ name: 'p', model: 'openai/x', tools: {
  work: tool({ async execute({ i }) { await new Promise((r) => setTimeout(r, 20)); n++; return i * 2; } }),
} });
`}, Options{PoolSize: 3, Logger: log})
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	start := time.Now()
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, _ := json.Marshal(map[string]int{"i": i})
			res, err := mustTool(t, s, "work").Execute(context.Background(), tool.Call{Args: b})
			if err == nil && res.Content != strings.TrimSpace(string(mustJSON(i*2))) {
				err = errors.New("wrong result " + res.Content)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// 12 calls of 20ms over 3 runtimes: about 4 rounds, not 12.
	if took := time.Since(start); took >= 240*time.Millisecond {
		t.Fatalf("12 concurrent calls took %s", took)
	}
	if w := rec.find("WARN"); len(w) > 0 {
		t.Fatalf("unexpected warnings: %v", w)
	}
	// Close drops idle runtimes; calls still work afterwards.
	s.Close()
	if _, err := run(t, s, "work", `{"i":1}`); err != nil {
		t.Fatalf("after Close: %v", err)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// TestNeedsApprovalExpiresAfter: needsApproval.expiresAfter, a duration
// string or milliseconds, becomes tool.Approval.ExpiresAfter; without it
// the server's default applies (zero); a bad value fails the load.
func TestNeedsApprovalExpiresAfter(t *testing.T) {
	s := loadOne(t, map[string]string{"agents/ex.ts": `import { defineDeepAgent, tool } from 'stackbone';
const exec = () => 'ok';
export default defineDeepAgent({
  name: 'ex', model: 'openai/x',
  tools: {
    text: tool({ needsApproval: { expiresAfter: '30m' }, execute: exec }),
    ms: tool({ needsApproval: { when: (a) => a.n > 1, expiresAfter: 1500 }, execute: exec }),
    plain: tool({ needsApproval: true, execute: exec }),
  },
});
`}, Options{})
	for name, want := range map[string]time.Duration{"text": 30 * time.Minute, "ms": 1500 * time.Millisecond, "plain": 0} {
		if got := mustTool(t, s, name).Approval.ExpiresAfter; got != want {
			t.Fatalf("%s: ExpiresAfter = %s, want %s", name, got, want)
		}
	}
	dir := writeProject(t, map[string]string{"agents/a.ts": "import { defineDeepAgent, tool } from 'stackbone';\n" +
		"export default defineDeepAgent({ name: 'a', model: 'openai/x', tools: {\n  x: tool({ needsApproval: { expiresAfter: 'soon' } as any, execute() {} }),\n} });\n"})
	_, err := LoadDir(context.Background(), dir, Options{})
	if err == nil || !strings.Contains(err.Error(), `needsApproval.expiresAfter must be a positive number of milliseconds or a duration string`) {
		t.Fatalf("bad expiresAfter: %v", err)
	}
}

// TestNeedsApprovalApprovals: needsApproval.approvals, the quorum, becomes
// tool.Approval.Approvals (zero without it); a value that is not an integer
// of at least 1 fails the load.
func TestNeedsApprovalApprovals(t *testing.T) {
	s := loadOne(t, map[string]string{"agents/q.ts": `import { defineDeepAgent, tool } from 'stackbone';
const exec = () => 'ok';
export default defineDeepAgent({
  name: 'q', model: 'openai/x',
  tools: {
    two: tool({ needsApproval: { approvals: 2 }, execute: exec }),
    plain: tool({ needsApproval: true, execute: exec }),
  },
});
`}, Options{})
	for name, want := range map[string]int{"two": 2, "plain": 0} {
		if got := mustTool(t, s, name).Approval.Approvals; got != want {
			t.Fatalf("%s: Approvals = %d, want %d", name, got, want)
		}
	}
	for _, bad := range []string{"0", "1.5", "'2'"} {
		dir := writeProject(t, map[string]string{"agents/a.ts": "import { defineDeepAgent, tool } from 'stackbone';\n" +
			"export default defineDeepAgent({ name: 'a', model: 'openai/x', tools: {\n  x: tool({ needsApproval: { approvals: " + bad + " } as any, execute() {} }),\n} });\n"})
		_, err := LoadDir(context.Background(), dir, Options{})
		if err == nil || !strings.Contains(err.Error(), `needsApproval.approvals must be an integer of at least 1`) {
			t.Fatalf("approvals %s: %v", bad, err)
		}
	}
}

// TestApprovalMode: approvalMode reaches the Spec ('pause' is the default,
// none set); an unknown mode is a load error naming the allowed ones.
func TestApprovalMode(t *testing.T) {
	src := func(mode string) map[string]string {
		return map[string]string{"agents/a.ts": "import { defineDeepAgent } from 'stackbone';\n" +
			"export default defineDeepAgent({ name: 'a', model: 'openai/gpt-4o'" + mode + " });\n"}
	}
	if s := loadOne(t, src(", approvalMode: 'wait'"), Options{}); s.ApprovalMode != agent.ApprovalWait {
		t.Fatalf("approvalMode wait: %q", s.ApprovalMode)
	}
	if s := loadOne(t, src(", approvalMode: 'pause'"), Options{}); s.ApprovalMode != agent.ApprovalPause {
		t.Fatalf("approvalMode pause: %q", s.ApprovalMode)
	}
	if s := loadOne(t, src(""), Options{}); s.ApprovalMode != "" {
		t.Fatalf("approvalMode default: %q", s.ApprovalMode)
	}
	_, err := LoadDir(context.Background(), writeProject(t, src(", approvalMode: 'hold'")), Options{})
	if err == nil || !strings.Contains(err.Error(), "approvalMode: unknown mode \"hold\" (allowed: 'pause', 'wait')") {
		t.Fatalf("unknown approvalMode: %v", err)
	}
}

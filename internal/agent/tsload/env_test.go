package tsload

import (
	"context"
	"errors"
	"strings"
	"testing"
)

const envAgent = `import { defineDeepAgent, tool } from 'stackbone';
let stash = '';
export default defineDeepAgent({
  name: 'payer', model: 'openai/x',
  env: ['PAYMENTS_TOKEN', 'REGION', 'NOT_SET_ANYWHERE'],
  tools: {
    show: tool({ async execute(_a, ctx) {
      return { listed: typeof ctx.env.PAYMENTS_TOKEN, len: (ctx.env.PAYMENTS_TOKEN || '').length, region: ctx.env.REGION,
               unset: ctx.env.NOT_SET_ANYWHERE === undefined, unlisted: ctx.env.HOME === undefined && ctx.env.OTHER === undefined,
               proto: ctx.env.toString === undefined, frozen: Object.isFrozen(ctx.env), keys: Object.keys(ctx.env).sort() };
    } }),
    leak: tool({ async execute(_a, ctx) { console.log('token is', ctx.env.PAYMENTS_TOKEN); ctx.state.copy = 'x' + ctx.env.PAYMENTS_TOKEN; return 'got ' + ctx.env.PAYMENTS_TOKEN; } }),
    boom: tool({ async execute(_a, ctx) { throw new Error('payments API refused token ' + ctx.env.PAYMENTS_TOKEN); } }),
    stashIt: tool({ needsApproval: { description: () => 'stash ' + stash }, async execute(_a, ctx) { stash = ctx.env.PAYMENTS_TOKEN; return 'ok'; } }),
  },
  mcpServers: { gh: { url: 'https://example.com/mcp', headers: { Authorization: 'Bearer ${GH_TOKEN}' } } },
});
`

const secretToken = "tok_live_s3cr3t_value"

func TestAgentEnv(t *testing.T) {
	env := map[string]string{"PAYMENTS_TOKEN": secretToken, "REGION": "eu-west-1", "OTHER": "other-value", "GH_TOKEN": "gh_secret_token_value"}
	logger, rec := newRecorder()
	s := loadOne(t, map[string]string{"agents/a.ts": envAgent}, Options{Logger: logger,
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})

	if got := rec.find("WARN", "agent env", "NOT_SET_ANYWHERE"); len(got) != 1 {
		t.Fatalf("a listed name set nowhere must be a load warning:\n%s", rec)
	}
	res, err := run(t, s, "show", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	// Every listed value is a secret: REGION, returned as is, is redacted too.
	jsonEqual(t, res.Content, `{"listed":"string","len":21,"region":"[REDACTED]","unset":true,"unlisted":true,"proto":true,"frozen":true,
		"keys":["PAYMENTS_TOKEN","REGION"]}`)

	// What leaves the agent's code carries no value: results, state, the
	// console, thrown errors and their logged stacks.
	res, err = run(t, s, "leak", `{}`)
	if err != nil || res.Content != "got [REDACTED]" || string(res.State) != `{"copy":"x[REDACTED]"}` {
		t.Fatalf("leak: %q %s %v", res.Content, res.State, err)
	}
	_, err = run(t, s, "boom", `{}`)
	var te *ToolError
	if !errors.As(err, &te) || te.Error() != "payments API refused token [REDACTED]" || strings.Contains(te.Stack, secretToken) {
		t.Fatalf("boom: %v", err)
	}
	if _, err := run(t, s, "stashIt", `{}`); err != nil {
		t.Fatal(err)
	}
	desc, err := mustTool(t, s, "stashIt").Approval.Description(context.Background(), []byte(`{}`))
	if err != nil || desc != "stash [REDACTED]" {
		t.Fatalf("approval description %q %v", desc, err)
	}
	if !strings.Contains(rec.String(), "token is [REDACTED]") || !strings.Contains(rec.String(), "refused token [REDACTED]") {
		t.Fatalf("the console line and the error are logged, redacted:\n%s", rec)
	}
	if strings.Contains(rec.String(), secretToken) {
		t.Fatalf("the log shows the value:\n%s", rec)
	}
	// ${VAR} values of mcpServers are secrets of the agent's log too.
	if s.MCPServers[0].Headers["Authorization"] != "Bearer gh_secret_token_value" {
		t.Fatalf("headers %v", s.MCPServers[0].Headers)
	}
}

func TestAgentEnvAbsentIsEmpty(t *testing.T) {
	s := loadOne(t, map[string]string{"agents/a.ts": `import { defineDeepAgent, tool } from 'stackbone';
export default defineDeepAgent({ name: 'a', model: 'openai/x',
  tools: { t: tool({ async execute(_a, ctx) { return Object.keys(ctx.env).length + ':' + String(ctx.env.PATH); } }) } });
`}, Options{})
	res, err := run(t, s, "t", `{}`)
	if err != nil || res.Content != "0:undefined" {
		t.Fatalf("an agent without env reads nothing, not even PATH: %q %v", res.Content, err)
	}
}

func TestAgentEnvBadNames(t *testing.T) {
	for src, want := range map[string]string{
		`env: 'PAYMENTS_TOKEN'`:   `agent "a": env must be an array of environment variable names`,
		`env: ['PAYMENTS-TOKEN']`: `agent "a": env: "PAYMENTS-TOKEN" is not an environment variable name`,
		`env: ['1TOKEN']`:         `env: "1TOKEN" is not an environment variable name`,
		`env: ['']`:               `env: "" is not an environment variable name`,
		`env: [42]`:               `env: 42 is not an environment variable name`,
	} {
		dir := writeProject(t, map[string]string{"agents/a.ts": "import { defineDeepAgent } from 'stackbone';\n" +
			"export default defineDeepAgent({ name: 'a', model: 'openai/x', " + src + " });\n"})
		_, err := LoadDir(context.Background(), dir, Options{})
		var le *LoadError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), want) || le.Line != 2 {
			t.Errorf("%s: %v, want %q at line 2", src, err, want)
		}
	}
}

package tsload

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestA2AAgents: a2aAgents entries become agent.A2AAgent with their
// ${VAR} headers expanded, the header values (and the URL's credentials)
// are secrets of the agent, and bad entries are load errors at the
// defineDeepAgent call naming the field.
func TestA2AAgents(t *testing.T) {
	const key = "rk_live_0a1b2c3d4e"
	s := loadOne(t, map[string]string{"agents/a.ts": `import { defineDeepAgent } from 'stackbone';
export default defineDeepAgent({ name: 'boss', model: 'openai/x',
  a2aAgents: {
    research: { url: 'https://research.example.com/a2a/research', headers: { Authorization: 'Bearer ${RESEARCH_KEY}' } },
    'card.one': { url: 'https://other.example.com/.well-known/agent-card.json?token=qtok_9z8y7x6w', description: 'Writes summaries.' },
  },
});
`}, Options{LookupEnv: func(k string) (string, bool) {
		if k == "RESEARCH_KEY" {
			return key, true
		}
		return "", false
	}})
	if len(s.A2AAgents) != 2 {
		t.Fatalf("a2aAgents %+v", s.A2AAgents)
	}
	r := s.A2AAgent("research")
	if r == nil || r.URL != "https://research.example.com/a2a/research" || r.Headers["Authorization"] != "Bearer "+key || r.Description != "" {
		t.Fatalf("research %+v", r)
	}
	if c := s.A2AAgent("card.one"); c == nil || c.Description != "Writes summaries." {
		t.Fatalf("card.one %+v", c)
	}
	secrets := strings.Join(s.Secrets, "\n")
	for _, name := range []string{"research", "a2a"} {
		if strings.Contains("\n"+secrets+"\n", "\n"+name+"\n") {
			t.Fatalf("the URL path segment %q (an agent's name) must stay readable: %q", name, s.Secrets)
		}
	}
	if !strings.Contains(secrets, "Bearer "+key) || !strings.Contains(secrets, "qtok_9z8y7x6w") {
		t.Fatalf("the header value and the URL's token must be secrets: %q", s.Secrets)
	}
	for _, info := range s.A2AAgentInfos() {
		if strings.Contains(info.URL, "qtok_9z8y7x6w") || (info.Name == "research" && strings.Join(info.Headers, ",") != "Authorization") {
			t.Fatalf("A2AAgentInfos shows a secret: %+v", info)
		}
	}

	head := "import { defineDeepAgent } from 'stackbone';\n"
	for name, c := range map[string]struct{ src, want string }{
		"bad url": {"a2aAgents: { r: { url: 'ftp://x/a2a' } }",
			`agents/a.ts:2:32: agent "a": a2aAgents.r: url must be an http:// or https:// URL (the agent's A2A base or its agent card), got "ftp://x/a2a"`},
		"no url": {"a2aAgents: { r: { headers: {} } as any }", `a2aAgents.r: url must be an http:// or https:// URL`},
		"clash with a subagent": {"subagents: [{ name: 'r', description: 'd', instructions: 'i' }], a2aAgents: { r: { url: 'http://x/a2a/r' } }",
			`agent "a": a2aAgents.r: the name clashes with a subagent of the same name`},
		"clash with general-purpose": {"a2aAgents: { 'general-purpose': { url: 'http://x/a2a/r' } }",
			`a2aAgents.general-purpose: the name clashes with a subagent of the same name`},
		"bad name":       {"a2aAgents: { 'a b': { url: 'http://x/a2a/r' } }", `A2A agent name "a b" must be 1-64 letters`},
		"unknown key":    {"a2aAgents: { r: { url: 'http://x/a2a/r', token: 'x' } as any }", `a2aAgents.r: unknown field "token"`},
		"header number":  {"a2aAgents: { r: { url: 'http://x/a2a/r', headers: { A: 1 } } as any }", `a2aAgents.r.headers.A must be a string`},
		"not an object":  {"a2aAgents: [] as any", `a2aAgents must be an object mapping agent names to { url, headers?, description? }`},
		"unset variable": {"a2aAgents: { r: { url: 'http://x/a2a/r', headers: { A: '${NOPE_KEY}' } } }", `a2aAgents.r.headers.A: environment variable NOPE_KEY is not set`},
	} {
		t.Run(name, func(t *testing.T) {
			dir := writeProject(t, map[string]string{"agents/a.ts": head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', " + c.src + " });\n"})
			_, err := LoadDir(context.Background(), dir, Options{LookupEnv: func(string) (string, bool) { return "", false }})
			var le *LoadError
			if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &le) {
				t.Fatalf("error = %v\nwant a *LoadError containing %q", err, c.want)
			}
		})
	}
}

package tsload

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/model"
)

// TestAgentOutputJSONSchema: defineDeepAgent({ output }) with a JSON Schema
// object becomes Spec.Output, and the agent asks for a json_schema response
// format named after it (a "." a provider refuses in a name becomes "_").
// An agent without output asks for none.
func TestAgentOutputJSONSchema(t *testing.T) {
	s := loadOne(t, map[string]string{"agents/a.ts": `import { defineDeepAgent } from 'stackbone';
export default defineDeepAgent({ name: 'triage.v2', model: 'openai/x', output: {
  properties: { label: { type: 'string', enum: ['bug', 'question'] } }, required: ['label'],
} });
`}, Options{})
	jsonEqual(t, string(s.Output), `{"type":"object","properties":{"label":{"type":"string","enum":["bug","question"]}},"required":["label"]}`)
	f := s.OutputFormat()
	if f == nil || f.Type != model.FormatJSONSchema || f.Name != "triage_v2" || f.Strict {
		t.Fatalf("format = %+v", f)
	}
	jsonEqual(t, string(f.Schema), string(s.Output))

	plain := loadOne(t, map[string]string{"agents/a.ts": `import { defineDeepAgent } from 'stackbone';
export default defineDeepAgent({ name: 'plain', model: 'openai/x' });
`}, Options{})
	if plain.Output != nil || plain.OutputFormat() != nil {
		t.Fatalf("no output declared, got %s / %+v", plain.Output, plain.OutputFormat())
	}
}

// TestAgentOutputErrors: an output that is not a schema, or whose schema
// does not describe an object, fails the load at the defineDeepAgent call.
func TestAgentOutputErrors(t *testing.T) {
	head := "import { defineDeepAgent } from 'stackbone';\n"
	for _, c := range []struct{ name, src, want string }{
		{"not an object", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', output: 'json' as any });\n",
			`agents/a.ts:2:32: agent "a": output must be a JSON Schema object or a Standard Schema (such as zod)`},
		{"not an object schema", head + "export default defineDeepAgent({ name: 'a', model: 'openai/x', output: { type: 'string' } });\n",
			`agents/a.ts:2:32: agent "a": output must describe a JSON object (JSON Schema "type": "object")`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadDir(context.Background(), writeProject(t, map[string]string{"agents/a.ts": c.src}), Options{})
			var le *LoadError
			if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &le) {
				t.Fatalf("error = %v\nwant it to contain %q", err, c.want)
			}
		})
	}
}

package tsload

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/tool"
)

// TestMemoryField: memory reaches the Spec (true: the default namespace,
// nil; an object: its namespace; absent or false: off).
func TestMemoryField(t *testing.T) {
	for _, c := range []struct {
		memory string
		want   []string
		on     bool
	}{
		{"", nil, false},
		{"memory: false,", nil, false},
		{"memory: true,", nil, true},
		{"memory: {},", nil, true},
		{"memory: { namespace: ['teams', '{userId}', 'facts'] },", []string{"teams", "{userId}", "facts"}, true},
	} {
		s := loadOne(t, map[string]string{"agents/a.ts": "import { defineDeepAgent } from 'stackbone';\n" +
			"export default defineDeepAgent({ name: 'a', model: 'openai/x', " + c.memory + " });\n"}, Options{})
		if (s.Memory != nil) != c.on || (s.Memory != nil && !reflect.DeepEqual(s.Memory.Namespace, c.want)) {
			t.Fatalf("%q: memory %+v", c.memory, s.Memory)
		}
	}
}

// TestMemoryErrors: a malformed memory field, or a tool named like a
// memory tool while memory is on, is a load error at the call site.
func TestMemoryErrors(t *testing.T) {
	head := "import { defineDeepAgent, tool } from 'stackbone';\n"
	for _, c := range []struct{ name, fields, want string }{
		{"not a boolean or object", `memory: 'yes'`, `memory must be true, false or { namespace`},
		{"unknown field", `memory: { ns: [] }`, `agent "a": memory: unknown field "ns"`},
		{"empty namespace", `memory: { namespace: [] }`, `memory.namespace must be a non-empty array`},
		{"dotted label", `memory: { namespace: ['a.b'] }`, `memory.namespace[0] must be a non-empty string without '.'`},
		{"clashing tool", `memory: true, tools: { recall: tool({ execute: () => 'x' }) }`, `clashes with a built-in memory tool`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := writeProject(t, map[string]string{"agents/a.ts": head +
				"export default defineDeepAgent({ name: 'a', model: 'openai/x', " + c.fields + " } as any);\n"})
			_, err := LoadDir(context.Background(), dir, Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "agents/a.ts:2:") {
				t.Fatalf("error = %v\nwant it to contain %q at the call site", err, c.want)
			}
		})
	}
}

// TestStoreWithoutMemory: ctx.store on a call without a memory store
// rejects with a clear message (the tool's error).
func TestStoreWithoutMemory(t *testing.T) {
	s := loadOne(t, map[string]string{"agents/a.ts": `import { defineDeepAgent, tool } from 'stackbone';
export default defineDeepAgent({ name: 'a', model: 'openai/x', tools: {
  t: tool({ async execute(_, ctx) { return await ctx.store.get(['a'], 'k'); } }),
} });
`}, Options{})
	_, err := mustTool(t, s, "t").Execute(context.Background(), tool.Call{Args: json.RawMessage(`{}`)})
	if err == nil || !strings.Contains(err.Error(), "ctx.store.get: this server has no memory store") {
		t.Fatalf("error = %v", err)
	}
}

package tsload

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stackbone/stackbone/internal/tool"
)

const benchAgent = `import { defineDeepAgent, tool } from 'stackbone';
export default defineDeepAgent({ name: 'bench', model: 'openai/x', tools: {
  echo: tool({
    parameters: { type: 'object', properties: { text: { type: 'string' } } },
    async execute({ text }, ctx) { return { text, n: text.length, thread: ctx.threadId }; },
  }),
} });
`

// BenchmarkPooledCall measures one small async tool call through the runtime
// pool (JS overhead only: no I/O).
func BenchmarkPooledCall(b *testing.B) {
	s := loadOne(b, map[string]string{"agents/bench.ts": benchAgent}, Options{})
	echo := mustTool(b, s, "echo")
	call := tool.Call{ThreadID: "th", ToolCallID: "c1", Args: json.RawMessage(`{"text":"hello"}`), State: json.RawMessage(`{"a":1}`)}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := echo.Execute(ctx, call)
			if err != nil || res.Content == "" {
				b.Fatal(res, err)
			}
		}
	})
}

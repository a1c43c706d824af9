package tsload

import (
	"context"
	"encoding/json"
	"fmt"
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

// BenchmarkPooledCallLarger is BenchmarkPooledCall with arguments and a
// thread state of a more typical size (about 1 KB and 4 KB of JSON), by a
// tool that reads the state without changing it and by one that ignores it.
func BenchmarkPooledCallLarger(b *testing.B) {
	s := loadOne(b, map[string]string{"agents/bench.ts": `import { defineDeepAgent, tool } from 'stackbone';
export default defineDeepAgent({ name: 'bench', model: 'openai/x', tools: {
  readsState: tool({
    async execute({ id, lines }, ctx) { return { id, n: lines.length, todos: ctx.state.todos.length }; },
  }),
  ignoresState: tool({
    async execute({ id, lines }, ctx) { return { id, n: lines.length, thread: ctx.threadId }; },
  }),
} });
`}, Options{})
	var lines, todos []map[string]any
	for i := range 10 {
		lines = append(lines, map[string]any{"sku": fmt.Sprintf("sku-%04d", i), "qty": i + 1, "price": 9.99 + float64(i),
			"note": "gift wrap, leave at the door", "tags": []string{"a", "b"}})
	}
	for i := range 30 {
		todos = append(todos, map[string]any{"content": fmt.Sprintf("step %d: check the order lines and confirm with the customer", i),
			"status": "pending", "id": i})
	}
	args, _ := json.Marshal(map[string]any{"id": "ord_123", "lines": lines, "rush": true, "customer": map[string]any{"name": "Zoë", "email": "z@example.com"}})
	state, _ := json.Marshal(map[string]any{"todos": todos, "files": map[string]string{"notes.md": "# Notes\n\nsome text"}})
	call := tool.Call{ThreadID: "th", ToolCallID: "c1", Args: args, State: state}
	ctx := context.Background()
	for _, name := range []string{"readsState", "ignoresState"} {
		t := mustTool(b, s, name)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					res, err := t.Execute(ctx, call)
					if err != nil || res.Content == "" || res.State != nil {
						b.Fatal(res, err)
					}
				}
			})
		})
	}
}

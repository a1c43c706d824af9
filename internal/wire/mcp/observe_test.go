package mcp_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/telemetry/otlptest"
)

// TestMCPBudgetIsAToolError: past a spent budget an MCP tools/call answers
// a tool error naming the budget (the client's model reads it), not a
// protocol error, and no model call is made.
func TestMCPBudgetIsAToolError(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Configure: func(cfg *config.Config) {
		budgets := `{"budgets": [{"name": "daily", "scope": "tenant", "period": "day", "tokens": 5}]}`
		if err := os.WriteFile(filepath.Join(cfg.Dir, "stackbone.json"), []byte(budgets), 0o644); err != nil {
			t.Fatal(err)
		}
	}})
	cs := connect(t, env, protocols[0], "", nil)
	if res := callAgent(t, cs, "assistant", map[string]any{"message": "hello"}); res.IsError {
		t.Fatalf("the first call (nothing spent): %s", text(res))
	}
	before := len(env.Upstream.Requests())
	res := callAgent(t, cs, "assistant", map[string]any{"message": "hello again"})
	if !res.IsError || !strings.Contains(text(res), `budget "daily" is spent`) {
		t.Fatalf("a call past the budget: isError %v %q; want a tool error naming the budget", res.IsError, text(res))
	}
	if got := len(env.Upstream.Requests()); got != before {
		t.Fatalf("the refused call reached the model")
	}
}

// TestMCPMetaTraceparent: a tools/call whose _meta carries a traceparent
// runs in that trace, its invoke_agent span the child of the caller's.
func TestMCPMetaTraceparent(t *testing.T) {
	t.Parallel()
	rcv := otlptest.NewReceiver(t)
	tel := rcv.Tracing(t)
	env := stacktest.New(t, stacktest.Options{Configure: func(c *config.Config) { c.Tracer = tel.TracerProvider() }})
	cs := connect(t, env, protocols[0], "", nil)
	const traceID, caller = "5bf92f3577b34da6a3ce929d0e0e4737", "01f067aa0ba902b8"
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "assistant", Arguments: map[string]any{"message": "hello"},
		Meta: sdk.Meta{"traceparent": "00-" + traceID + "-" + caller + "-01"}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %v", err, res)
	}
	run := rcv.WaitForName(t, "invoke_agent assistant")
	if run.TraceID() != traceID || run.ParentID() != caller {
		t.Fatalf("the run's span is in trace %s under %s; want the _meta's %s under %s", run.TraceID(), run.ParentID(), traceID, caller)
	}
}

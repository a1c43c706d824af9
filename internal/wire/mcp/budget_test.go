package mcp_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
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

package usage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/event"
)

func TestPricesLookup(t *testing.T) {
	p := NewPrices(map[string]Price{"ollama/*": {}, "openai/gpt-4o": {Input: 3, Output: 12}})
	cases := []struct {
		provider, model string
		ok              bool
		input           float64
	}{
		{"openai", "gpt-4o", true, 3},            // overridden
		{"openai", "gpt-4o-2024-08-06", true, 3}, // a dated snapshot takes its model's price
		{"openai", "gpt-4o-mini", true, 0.15},    // the longer name wins over its prefix
		{"openai", "gpt-4o-mini-2024-07-18", true, 0.15},
		{"anthropic", "claude-sonnet-4-5-20250929", true, 3},
		{"ollama", "llama3.2", true, 0},    // the provider's wildcard: free
		{"openai", "test-model", false, 0}, // unknown, not free
		{"anthropic", "gpt-4o", false, 0},  // another provider's model
	}
	for _, c := range cases {
		pr, ok := p.Lookup(c.provider, c.model)
		if ok != c.ok || pr.Input != c.input {
			t.Errorf("Lookup(%s, %s) = %+v, %v; want input %v, %v", c.provider, c.model, pr, ok, c.input, c.ok)
		}
	}
	if p.CostOf("openai", "test-model", event.Usage{InputTokens: 10}) != nil {
		t.Error("an unknown model's cost is not nil")
	}
}

func TestCost(t *testing.T) {
	pr := Price{Input: 2.5, Output: 10, CachedInput: cached(1.25)}
	// 1,000,000 input of which 400,000 cached, 100,000 output:
	// 600,000 × 2.5 + 400,000 × 1.25 + 100,000 × 10 per million = $1.5 + $0.5 + $1 = $3.
	if got := Cost(pr, event.Usage{InputTokens: 1_000_000, CachedInputTokens: 400_000, OutputTokens: 100_000}); got != 3_000_000_000 {
		t.Fatalf("Cost = %d nano-dollars; want 3e9", got)
	}
	if got := Cost(Price{Input: 0.15, Output: 0.6}, event.Usage{InputTokens: 7, OutputTokens: 3}); got != 2850 {
		t.Fatalf("a small call's cost = %d nano-dollars; want 2850 (7 × 150 + 3 × 600)", got)
	}
}

func TestBudgetBounds(t *testing.T) {
	now := time.Date(2026, 12, 31, 23, 30, 0, 0, time.FixedZone("CET", 3600))
	from, to := Budget{Period: PeriodDay}.Bounds(now)
	if !from.Equal(time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC)) || !to.Equal(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("day bounds %v – %v", from, to)
	}
	from, to = Budget{Period: PeriodMonth}.Bounds(now)
	if !from.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) || !to.Equal(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("month bounds %v – %v", from, to)
	}
	b := Budget{Name: "x", Scope: ScopeKey, Match: "ci", Tenant: "acme"}
	if !b.Applies("acme", "any", "ci") || b.Applies("acme", "any", "other") || b.Applies("globex", "any", "ci") {
		t.Fatal("a key budget applies to its key in its tenant only")
	}
	if b.NoticeID("acme", from) != b.NoticeID("acme", from) || b.NoticeID("acme", from) == b.NoticeID("acme", to) {
		t.Fatal("a notice id is the same within a period and differs across periods")
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	if f, err := LoadFile(dir); err != nil || len(f.Budgets) != 0 {
		t.Fatalf("no stackbone.json: %+v, %v", f, err)
	}
	bad := `{"budgets": [{"name": "a", "scope": "key", "period": "week"}, {"name": "a", "scope": "planet", "period": "day", "tokens": -1}],
	  "prices": {"gpt-4o": {"input": 1, "output": 1}}}`
	if err := os.WriteFile(filepath.Join(dir, "stackbone.json"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadFile(dir)
	for _, want := range []string{"budgets[0].match: missing", "budgets[0].period", "budgets[0]: a budget needs tokens, usd or both",
		"budgets[1].name", "budgets[1].scope", "must not be negative", "prices.gpt-4o"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadFile error %v; want it to say %q", err, want)
		}
	}
}

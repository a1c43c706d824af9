package agent

import "testing"

// TestContextWindow: a set contextWindow wins; otherwise common models have
// their known window, by provider-qualified or bare name; others none.
func TestContextWindow(t *testing.T) {
	for model, want := range map[string]int{
		"openai/gpt-4o": 128_000, "openai/gpt-4o-mini": 128_000, "gpt-4.1-mini": 1_047_576,
		"anthropic/claude-sonnet-4-20250514": 200_000, "anthropic/claude-3-5-haiku-latest": 200_000,
		"openai/test-model": 0, "scripted/demo": 0,
	} {
		if got := (&Spec{}).Window(model); got != want {
			t.Errorf("%s: window %d, want %d", model, got, want)
		}
	}
	if got := (&Spec{ContextWindow: 3000}).Window("openai/gpt-4o"); got != 3000 {
		t.Errorf("a set contextWindow: %d, want 3000", got)
	}
}

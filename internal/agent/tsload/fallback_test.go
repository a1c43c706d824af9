package tsload

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// TestModelFallbackList: model as a list is the first model plus fallbacks
// in order; an empty list or a bad entry is a load error at the call.
func TestModelFallbackList(t *testing.T) {
	head := "import { defineDeepAgent } from 'stackbone';\n"
	s := loadOne(t, map[string]string{"agents/a.ts": head +
		"export default defineDeepAgent({ name: 'a', model: ['openai/gpt-4o', 'anthropic/claude-sonnet-4-5', 'myproxy/vendor/m'] });\n"}, Options{})
	if s.Model != "openai/gpt-4o" || !slices.Equal(s.Fallbacks, []string{"anthropic/claude-sonnet-4-5", "myproxy/vendor/m"}) {
		t.Fatalf("model %q fallbacks %q", s.Model, s.Fallbacks)
	}
	s = loadOne(t, map[string]string{"agents/a.ts": head + "export default defineDeepAgent({ name: 'a', model: 'openai/x' });\n"}, Options{})
	if s.Model != "openai/x" || len(s.Fallbacks) != 0 {
		t.Fatalf("a single model: %q fallbacks %q", s.Model, s.Fallbacks)
	}
	for src, want := range map[string]string{
		"[] as any":               `agents/a.ts:2:32: agent "a": model must list at least one "provider/model"`,
		"['openai/x', 'gpt-4o']":  `agents/a.ts:2:32: agent "a": model[1]: model must be a "provider/model" string such as "openai/gpt-4o-mini", got "gpt-4o"`,
		"['openai/x', 42] as any": `agent "a": model[1]: model must be a "provider/model" string`,
	} {
		dir := writeProject(t, map[string]string{"agents/a.ts": head + "export default defineDeepAgent({ name: 'a', model: " + src + " });\n"})
		_, err := LoadDir(context.Background(), dir, Options{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("model %s: error = %v, want %q", src, err, want)
		}
	}
}

package studio_test

import (
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestChatReasoningFolded: the thinking of an Anthropic model (extended
// thinking on, from the mock upstream's thinking_delta stream) shows in the
// chat as a folded <details> above the answer, opened by a click.
func TestChatReasoningFolded(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Upstream: modeltest.Anthropic,
		Agents: func(env *stacktest.Env) []*agent.Spec {
			specs := stacktest.DefaultAgents(env, "anthropic/test-model")
			specs[0].ModelSettings.ReasoningEffort = "low"
			return specs
		}})
	p := newPage(t)
	openChat(p, env.URL, "assistant", "think-1")
	say(p, "hello")
	waitAnswer(p, "echo: hello")
	r := `#chat-log .chat-msg[data-role="reasoning"] details.reasoning`
	p.waitJS("the folded reasoning", `!!document.querySelector('`+r+`') && !document.querySelector('`+r+`').open`)
	p.click(r + " summary")
	if got := eval[string](p, `document.querySelector('`+r+` .md').textContent`); !strings.Contains(got, modeltest.ThinkingText) {
		t.Fatalf("the reasoning reads %q", got)
	}
	if !eval[bool](p, `document.querySelector('`+r+`').open`) {
		t.Fatal("the reasoning does not open")
	}
}

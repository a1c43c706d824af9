package server_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// modelSaw is the conversation of each model request whose last user
// message is prompt, as role:content lines.
func modelSaw(env *stacktest.Env, prompt string) [][]string {
	var out [][]string
	for _, r := range env.Upstream.Requests() {
		msgs := r.Request.Messages
		if len(msgs) == 0 || msgs[len(msgs)-1].Role != message.User || msgs[len(msgs)-1].Content != prompt {
			continue
		}
		var lines []string
		for _, m := range msgs {
			lines = append(lines, string(m.Role)+":"+m.Content)
		}
		out = append(out, lines)
	}
	return out
}

// TestChatCompletionsBranchesClients runs tests/clients/chat-branches.mjs:
// the openai Node SDK and the AI SDK's openai.chat() on a session, each
// sending its whole conversation. A regenerate (the conversation up to the
// second question again) asks the model again with exactly that
// conversation, not the discarded answer; an edit of the second question
// gives the model the first turn and the edited question only; the next
// turn goes on from the edit. The thread keeps every answer, on three
// branches, with the edit's line as its head.
func TestChatCompletionsBranchesClients(t *testing.T) {
	t.Parallel()
	node, dir := nodeFixture(t, "clients", filepath.Join("openai", "package.json"), filepath.Join("ai", "package.json"))
	env := stacktest.New(t, stacktest.Options{})
	runClientCases(t, node, dir, "chat-branches.mjs", 6, env.URL, "assistant", "br")
	for _, c := range []struct{ tag, session string }{{"sdk", "br-openai"}, {"aisdk", "br-aisdk"}} {
		q1, q2, q2e, q3 := c.tag+" branch first question", c.tag+" branch second question",
			c.tag+" branch second question, edited", c.tag+" branch after the edit"
		first := []string{"user:" + q1, "assistant:echo: " + q1}
		second := append(slices.Clone(first), "user:"+q2)
		if got := modelSaw(env, q2); len(got) != 2 || !slices.Equal(got[0], second) || !slices.Equal(got[1], second) {
			t.Errorf("%s: the second question and its regenerate: the model saw %q; want twice %q", c.tag, got, second)
		}
		edited := append(slices.Clone(first), "user:"+q2e)
		if got := modelSaw(env, q2e); len(got) != 1 || !slices.Equal(got[0], edited) {
			t.Errorf("%s: the edit: the model saw %q; want %q", c.tag, got, edited)
		}
		on := append(slices.Clone(edited), "assistant:echo: "+q2e, "user:"+q3)
		if got := modelSaw(env, q3); len(got) != 1 || !slices.Equal(got[0], on) {
			t.Errorf("%s: after the edit: the model saw %q; want %q", c.tag, got, on)
		}
		msgs, err := env.Store.Messages(context.Background(), "dev", c.session)
		if err != nil {
			t.Fatal(err)
		}
		var head []string
		for _, m := range msgs {
			head = append(head, string(m.Role)+":"+m.Content)
		}
		if want := append(slices.Clone(on), "assistant:echo: "+q3); !slices.Equal(head, want) {
			t.Errorf("%s: the thread's conversation is %q; want %q", c.tag, head, want)
		}
		bs, err := env.Store.Branches(context.Background(), "dev", c.session)
		if err != nil || len(bs) != 3 {
			t.Errorf("%s: branches %+v, %v; want 3 (the first line, the regenerate, the edit)", c.tag, bs, err)
		}
	}
}

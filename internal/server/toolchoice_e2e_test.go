package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/stackbone/stackbone/internal/stacktest"
)

// choices are the tool choices the model upstream received, in order.
func choices(env *stacktest.Env) []string {
	var out []string
	for _, r := range env.Upstream.Requests() {
		out = append(out, r.Request.ToolChoice)
	}
	return out
}

// TestRequiredToolChoiceOnlyOnFirstStep: a client's tool_choice "required"
// forces the turn's first model step only; the step after the server tool's
// result is "auto", so the model answers instead of calling tools until the
// step limit. The same holds for a turn resumed after an approval, whose
// first step after the decision follows the tool result.
func TestRequiredToolChoiceOnlyOnFirstStep(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	p := params(user("weather in Paris?"))
	p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
	res, err := client(env).Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Choices[0].Message.Content; !strings.HasSuffix(got, "Tool said: {\"city\":\"Paris\",\"temp_c\":21}") {
		t.Fatalf("answer %q", got)
	}
	if got := choices(env); len(got) != 2 || got[0] != "required" || got[1] != "auto" {
		t.Fatalf("upstream tool choices %q; want [required auto]", got)
	}

	// Approval: the resumed step (after the refund's result) is not forced.
	body := `{"model":"assistant","tool_choice":"required","messages":[{"role":"user","content":"refund please"}]}`
	call(t, "POST", env.URL+"/v1/chat/completions", body, "x-stackbone-session", "tc-refund")
	it := pendingOf(t, env, "tc-refund")
	if r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", ""); r.status != 200 {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	waitIdle(t, env, "tc-refund")
	if got := choices(env)[2:]; len(got) != 2 || got[0] != "required" || got[1] != "auto" {
		t.Fatalf("upstream tool choices of the approval turn %q; want [required auto]", got)
	}
}

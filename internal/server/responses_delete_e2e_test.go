package server_test

import (
	"context"
	"errors"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// TestResponsesDeleteRunningBackground: deleting a background response
// while its model call is under way cancels its run first, so the
// conversation takes a new turn at once (before, it answered 409 until the
// model call timed out, and the deleted response could not be cancelled).
func TestResponsesDeleteRunningBackground(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	release := env.Upstream.HoldOnce(script.When{LastUser: "slow"})
	defer release()
	c := client(env)
	p := ask("slow thinking")
	p.Background = openai.Bool(true)
	res, err := c.Responses.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	stacktest.WaitFor(t, "the model call to be held", func() bool { return env.Upstream.Count() == 1 })
	if err := c.Responses.Delete(context.Background(), res.ID); err != nil {
		t.Fatalf("delete a running response: %v", err)
	}
	var apiErr *openai.Error
	if _, err := c.Responses.Get(context.Background(), res.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("the deleted response still reads: %v", err)
	}
	stacktest.WaitFor(t, "the deleted response's run to end", func() bool {
		return env.Thread(t, "dev", res.Conversation.ID).Status == store.Failed
	})
	next := ask("and now?")
	next.Conversation = responses.ResponseNewParamsConversationUnion{OfString: openai.String(res.Conversation.ID)}
	if r, err := c.Responses.New(context.Background(), next); err != nil || r.OutputText() != "echo: and now?" {
		t.Fatalf("the conversation's next turn: %v %s", err, r.RawJSON())
	}
}

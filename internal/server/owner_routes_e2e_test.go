package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/wire/a2a"
)

// TestPerUserThreadsRestOfTheRoutes: the routes of a user's thread that
// TestPerUserThreads does not walk answer another user of the tenant 404
// (the wire's not found) and change nothing, through openai-go: a stored
// response's delete, cancel and input items; a conversation's update,
// delete, and one item's read and delete; and over A2A, cancelling or
// subscribing to her task. Alice still reads all of it after. On SQLite and
// PostgreSQL.
func TestPerUserThreadsRestOfTheRoutes(t *testing.T) {
	t.Parallel()
	onBothStores(t, testPerUserRestOfTheRoutes)
}

func testPerUserRestOfTheRoutes(t *testing.T, st store.Store) {
	s := newJWTStack(t, stacktest.Options{Store: st})
	env := s.env
	ctx := context.Background()
	client := func(tok string) *openai.Client {
		c := openai.NewClient(option.WithBaseURL(env.URL+"/v1"), option.WithAPIKey(tok), option.WithMaxRetries(0))
		return &c
	}
	aliceTok := s.token(t, "alice")
	alice, bob := client(aliceTok), client(s.token(t, "bob"))
	resp, err := alice.Responses.New(ctx, responses.ResponseNewParams{Model: "assistant",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("remember this")}})
	if err != nil {
		t.Fatal(err)
	}
	items, err := alice.Conversations.Items.List(ctx, resp.Conversation.ID, conversations.ItemListParams{})
	if err != nil || len(items.Data) == 0 {
		t.Fatalf("alice's conversation items: %v", err)
	}
	item := items.Data[0].ID
	convID := resp.Conversation.ID

	var oe *openai.Error
	notFound := func(what string, err error) {
		t.Helper()
		if !errors.As(err, &oe) || oe.StatusCode != 404 {
			t.Fatalf("bob: %s: want 404, got %v", what, err)
		}
	}
	_, err = bob.Responses.InputItems.List(ctx, resp.ID, responses.InputItemListParams{})
	notFound("input items of her response", err)
	_, err = bob.Responses.Cancel(ctx, resp.ID)
	notFound("cancel her response", err)
	notFound("delete her response", bob.Responses.Delete(ctx, resp.ID))
	_, err = bob.Conversations.Update(ctx, convID, conversations.ConversationUpdateParams{Metadata: map[string]string{"by": "bob"}})
	notFound("update her conversation", err)
	_, err = bob.Conversations.Items.Get(ctx, convID, item, conversations.ItemGetParams{})
	notFound("read an item of her conversation", err)
	_, err = bob.Conversations.Items.Delete(ctx, convID, item)
	notFound("delete an item of her conversation", err)
	_, err = bob.Conversations.Delete(ctx, convID)
	notFound("delete her conversation", err)

	// Over A2A: her task, cancelled or subscribed to by bob.
	_, rep := a2aCall(t, env, "assistant", "SendMessage", `{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hello from alice"}]}}`,
		"Authorization", "Bearer "+aliceTok)
	var sent struct {
		Task a2a.Task `json:"task"`
	}
	if rep.Error != nil || json.Unmarshal(rep.Result, &sent) != nil {
		t.Fatalf("alice's SendMessage: %+v %s", rep.Error, rep.Result)
	}
	for _, method := range []string{"CancelTask", "SubscribeToTask", "ListTaskPushNotificationConfigs"} {
		params := `{"id":"` + sent.Task.ID + `"}`
		if method == "ListTaskPushNotificationConfigs" {
			params = `{"taskId":"` + sent.Task.ID + `"}`
		}
		_, rep := a2aCall(t, env, "assistant", method, params, "Authorization", "Bearer "+s.token(t, "bob"), "Accept", "text/event-stream, application/json")
		if rep.Error == nil || rep.Error.Code != a2a.CodeTaskNotFound {
			t.Fatalf("bob's %s of alice's task: %+v %s", method, rep.Error, rep.Result)
		}
	}

	// Nothing changed: alice reads all of it.
	if got, err := alice.Responses.Get(ctx, resp.ID, responses.ResponseGetParams{}); err != nil || got.ID != resp.ID {
		t.Fatalf("alice reads her response after: %v", err)
	}
	c, err := alice.Conversations.Get(ctx, convID)
	if err != nil || strings.Contains(c.RawJSON(), "bob") {
		t.Fatalf("alice's conversation after: %v %s", err, c.RawJSON())
	}
	if _, err := alice.Conversations.Items.Get(ctx, convID, item, conversations.ItemGetParams{}); err != nil {
		t.Fatalf("alice reads her item after: %v", err)
	}
	if _, rep := a2aCall(t, env, "assistant", "GetTask", `{"id":"`+sent.Task.ID+`"}`, "Authorization", "Bearer "+aliceTok); rep.Error != nil {
		t.Fatalf("alice's GetTask after: %+v", rep.Error)
	}
}

package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// TestOwnedConversationsAndApproverReads: a conversation an end user
// creates with POST /v1/conversations is theirs before its first turn
// (another user of the tenant gets 404 reading it, adding to it or
// answering in it; its first turn makes a thread of theirs), through
// openai-go; with STACKBONE_APPROVERS_READ_THREADS an approver reads every
// thread of the tenant (and still starts no turn), without it none but
// their own. On SQLite and PostgreSQL.
func TestOwnedConversationsAndApproverReads(t *testing.T) {
	t.Parallel()
	onBothStores(t, testOwnedConversations)
	t.Run("approvers read threads", func(t *testing.T) {
		t.Parallel()
		for _, allow := range []bool{false, true} {
			s := newJWTStack(t, stacktest.Options{Configure: func(cfg *config.Config) { cfg.JWT.ApproversReadThreads = allow }})
			env := s.env
			alice, dave := s.token(t, "alice"), s.token(t, "dave")
			if r := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"hi"}]}`,
				"Authorization", "Bearer "+alice, "x-stackbone-session", "t-alice"); r.status != 200 {
				t.Fatalf("alice's turn: %d %s", r.status, r.body)
			}
			want := map[bool]int{false: 404, true: 200}[allow]
			for _, path := range []string{"/v1/threads/t-alice", "/v1/threads/t-alice/branches", "/v1/threads/t-alice/runs"} {
				if r := call(t, "GET", env.URL+path, "", "Authorization", "Bearer "+dave); r.status != want {
					t.Fatalf("allow=%v: the approver GET %s: %d, want %d: %s", allow, path, r.status, want, r.body)
				}
			}
			r := call(t, "GET", env.URL+"/v1/threads", "", "Authorization", "Bearer "+dave)
			if listed := r.status == 200 && strings.Contains(string(r.body), `"t-alice"`); listed != allow {
				t.Fatalf("allow=%v: the approver's thread list: %s", allow, r.body)
			}
			// Reading is not going on with it.
			if r := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"mine"}]}`,
				"Authorization", "Bearer "+dave, "x-stackbone-session", "t-alice"); r.status != 403 {
				t.Fatalf("allow=%v: the approver's turn: %d %s", allow, r.status, r.body)
			}
			// Other callers are as before.
			if r := call(t, "GET", env.URL+"/v1/threads/t-alice", "", "Authorization", "Bearer "+s.token(t, "bob")); r.status != 404 {
				t.Fatalf("allow=%v: bob reads alice's thread: %d", allow, r.status)
			}
		}
	})
}

func testOwnedConversations(t *testing.T, st store.Store) {
	s := newJWTStack(t, stacktest.Options{Store: st})
	env := s.env
	ctx := context.Background()
	client := func(tok string) *openai.Client {
		c := openai.NewClient(option.WithBaseURL(env.URL+"/v1"), option.WithAPIKey(tok), option.WithMaxRetries(0))
		return &c
	}
	alice, bob, carol := client(s.token(t, "alice")), client(s.token(t, "bob")), client(s.token(t, "carol"))
	conv, err := alice.Conversations.New(ctx, conversations.ConversationNewParams{})
	if err != nil {
		t.Fatal(err)
	}
	var oe *openai.Error
	notFound := func(what string, err error) {
		t.Helper()
		if !errors.As(err, &oe) || oe.StatusCode != 404 {
			t.Fatalf("%s: want 404, got %v", what, err)
		}
	}
	_, err = bob.Conversations.Get(ctx, conv.ID)
	notFound("bob reads alice's new conversation", err)
	_, err = bob.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: []responses.ResponseInputItemUnionParam{
		responses.ResponseInputItemParamOfMessage("sneaky", responses.EasyInputMessageRoleUser)}})
	notFound("bob adds to it", err)
	answer := func(c *openai.Client, text string) (*responses.Response, error) {
		return c.Responses.New(ctx, responses.ResponseNewParams{Model: "assistant",
			Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String(text)},
			Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)}})
	}
	_, err = answer(bob, "first!")
	notFound("bob answers in it", err)
	if th, err := env.Store.GetThread(ctx, "acme", conv.ID); err == nil {
		t.Fatalf("bob's refused turn made a thread: %+v", th)
	}
	if _, err := alice.Conversations.Get(ctx, conv.ID); err != nil {
		t.Fatalf("alice reads her conversation: %v", err)
	}
	if _, err := carol.Conversations.Get(ctx, conv.ID); err != nil {
		t.Fatalf("an admin reads it: %v", err)
	}
	if res, err := answer(alice, "hello"); err != nil || res.OutputText() != "echo: hello" {
		t.Fatalf("alice's first turn: %v", err)
	}
	if th := env.Thread(t, "acme", conv.ID); th.Owner != "alice" {
		t.Fatalf("the conversation's thread owner %q, want alice", th.Owner)
	}
	_, err = bob.Conversations.Get(ctx, conv.ID)
	notFound("bob reads it after its first turn", err)
	// A key's conversation is the tenant's, as before.
	app := client("sk-acme-admin-1")
	kc, err := app.Conversations.New(ctx, conversations.ConversationNewParams{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Conversations.Get(ctx, kc.ID); err != nil {
		t.Fatalf("bob reads the tenant's conversation: %v", err)
	}
}

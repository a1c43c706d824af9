package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/wire/a2a"
)

// TestStatelessDecisionsPerUser: the decision a stateless turn (no session)
// records for an approval-gated call is its end user's: they list and read
// it, another user of the tenant and a caller key neither list it nor read
// it (404 as for an unknown id), an approver and an admin see it; a key's
// record stays the tenant's. Through openai-go, on SQLite and PostgreSQL.
func TestStatelessDecisionsPerUser(t *testing.T) {
	t.Parallel()
	onBothStores(t, testStatelessDecisionsPerUser)
}

func testStatelessDecisionsPerUser(t *testing.T, st store.Store) {
	s := newJWTStack(t, stacktest.Options{Store: st,
		Keys: []config.Key{{Tenant: "acme", Secret: "sk-acme-caller-1", Role: config.RoleCaller, Label: "app"}}})
	env := s.env
	ctx := context.Background()
	alice, bob, carol, dave := s.token(t, "alice"), s.token(t, "bob"), s.token(t, "carol"), s.token(t, "dave")
	stateless := func(tok string) {
		t.Helper()
		c := openai.NewClient(option.WithBaseURL(env.URL+"/v1"), option.WithAPIKey(tok), option.WithMaxRetries(0))
		if _, err := c.Chat.Completions.New(ctx, params(user("refund without session"))); err != nil {
			t.Fatal(err)
		}
	}
	list := func(tok string) []store.Interrupt {
		t.Helper()
		r := call(t, "GET", env.URL+"/v1/hitl?status=rejected", "", "Authorization", "Bearer "+tok)
		var page struct{ Data []store.Interrupt }
		if r.status != 200 || json.Unmarshal(r.body, &page) != nil {
			t.Fatalf("list: %d %s", r.status, r.body)
		}
		return page.Data
	}
	stateless(alice)
	mine := list(alice)
	if len(mine) != 1 || mine[0].ThreadID != "" || mine[0].Owner != "alice" || mine[0].Decision == nil || mine[0].Decision.Via != store.ViaStateless {
		t.Fatalf("alice's stateless decision: %+v", mine)
	}
	id := mine[0].ID
	stateless("sk-acme-caller-1")
	keys := list("sk-acme-caller-1")
	if len(keys) != 1 || keys[0].ID == id || keys[0].Owner != "" {
		t.Fatalf("a caller key lists %+v, want its own record only", keys)
	}
	if got := list(alice); len(got) != 2 {
		t.Fatalf("alice lists %d, want hers and the tenant's (a key's)", len(got))
	}

	for who, tok := range map[string]string{"bob": bob, "a caller key": "sk-acme-caller-1"} {
		r := call(t, "GET", env.URL+"/v1/hitl/"+id, "", "Authorization", "Bearer "+tok)
		var body struct {
			Error struct{ Code string } `json:"error"`
		}
		if r.status != 404 || json.Unmarshal(r.body, &body) != nil || body.Error.Code != "not_found" {
			t.Fatalf("%s GET alice's stateless decision: %d %s", who, r.status, r.body)
		}
		for _, it := range list(tok) {
			if it.ID == id {
				t.Fatalf("%s lists alice's stateless decision", who)
			}
		}
	}
	if r := call(t, "GET", env.URL+"/v1/hitl/"+id, "", "Authorization", "Bearer "+alice); r.status != 200 {
		t.Fatalf("alice GET her decision: %d %s", r.status, r.body)
	}
	for who, tok := range map[string]string{"the approver dave": dave, "the admin carol": carol, "the admin key": "sk-acme-admin-1"} {
		if r := call(t, "GET", env.URL+"/v1/hitl/"+id, "", "Authorization", "Bearer "+tok); r.status != 200 {
			t.Fatalf("%s GET alice's stateless decision: %d %s", who, r.status, r.body)
		}
		if got := list(tok); len(got) != 2 {
			t.Fatalf("%s lists %d stateless decisions, want 2", who, len(got))
		}
	}
}

// TestEndUserCallerCannotDecideOwnThread: an end user whose token has the
// caller role may chat but not decide, also on their own thread: the
// decision route and an answer over A2A are 403 forbidden_role naming the
// access token's role and the roles that decide (approver or admin), and
// the decision stays pending; an approver then decides it.
func TestEndUserCallerCannotDecideOwnThread(t *testing.T) {
	t.Parallel()
	s := newJWTStack(t, stacktest.Options{})
	env := s.env
	bob := s.token(t, "bob") // role claim: caller
	it := pauseAs(t, env, bob, "t-bob")
	wantMsg := func(what, msg string) {
		t.Helper()
		for _, part := range []string{`This access token has role "caller"`, "not even on the user's own threads", "role approver or admin"} {
			if !strings.Contains(msg, part) {
				t.Fatalf("%s: the refusal %q does not say %q", what, msg, part)
			}
		}
	}
	r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "", "Authorization", "Bearer "+bob)
	forbiddenRole(t, "bob approves his own", r)
	var body struct {
		Error struct{ Message string } `json:"error"`
	}
	_ = json.Unmarshal(r.body, &body)
	wantMsg("hitl approve", body.Error.Message)

	// Over A2A: his task paused on the refund, answered with a decision.
	_, rep := a2aCall(t, env, "assistant", "SendMessage", `{"message":{"messageId":"a1","role":"ROLE_USER","parts":[{"text":"please refund my order"}]}}`,
		"Authorization", "Bearer "+bob)
	var sent struct {
		Task a2a.Task `json:"task"`
	}
	if rep.Error != nil || json.Unmarshal(rep.Result, &sent) != nil || sent.Task.Status.State != a2a.StateInputRequired {
		t.Fatalf("bob's A2A refund: %+v %s", rep.Error, rep.Result)
	}
	_, rep = a2aCall(t, env, "assistant", "SendMessage", `{"message":{"messageId":"a2","role":"ROLE_USER","taskId":"`+sent.Task.ID+
		`","parts":[{"data":{"decision":"approve"}}]}}`, "Authorization", "Bearer "+bob)
	if rep.Error == nil || rep.Error.Code != -32000 {
		t.Fatalf("bob answers his A2A approval: %+v %s", rep.Error, rep.Result)
	}
	wantMsg("a2a answer", rep.Error.Message)
	if got, _ := env.Store.GetInterrupt(context.Background(), "acme", it.ID); got.Status != store.Pending {
		t.Fatalf("a refused decide changed the decision: %+v", got)
	}
	if r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "", "Authorization", "Bearer "+s.token(t, "dave")); r.status != 200 {
		t.Fatalf("the approver decides: %d %s", r.status, r.body)
	}
	stacktest.WaitFor(t, "the approved refund to run", func() bool { return env.Calls.Get("refund") == 1 })
}

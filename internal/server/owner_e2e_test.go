package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	ant "github.com/anthropics/anthropic-sdk-go/v2"
	antopt "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
)

// TestPerUserThreads: a thread an end user starts is theirs. Another user
// of the tenant, and a caller key, get 404 for it on every route (read,
// continue on each wire, fork, branches, state, events, runs, run stream,
// queue, its decisions) and do not list it; an approver sees and decides
// its decisions (decidedBy: the approver's user) but not the conversation;
// an admin user sees everything. The tools of the thread see its user
// (ctx.user), also when a decision resumes the run. On SQLite and
// PostgreSQL.
func TestPerUserThreads(t *testing.T) {
	t.Parallel()
	drivers := map[string]func(t *testing.T) store.Store{
		"sqlite":   func(t *testing.T) store.Store { return nil },
		"postgres": func(t *testing.T) store.Store { return stacktest.Postgres(t, "peruser") },
	}
	for name, open := range drivers {
		t.Run(name, func(t *testing.T) { testPerUserThreads(t, open(t)) })
	}
}

func testPerUserThreads(t *testing.T, st store.Store) {
	var (
		mu    sync.Mutex
		users []string // ctx.user of each refund call
	)
	s := newJWTStack(t, stacktest.Options{Store: st,
		Keys: []config.Key{{Tenant: "acme", Secret: "sk-acme-caller-1", Role: config.RoleCaller, Label: "app"}},
		Agents: func(env *stacktest.Env) []*agent.Spec {
			specs := stacktest.DefaultAgents(env, "openai/test-model")
			for _, tl := range specs[0].Tools {
				if tl.Name == "refund" {
					run := tl.Execute
					tl.Execute = func(ctx context.Context, c tool.Call) (tool.Result, error) {
						mu.Lock()
						if c.User != nil {
							users = append(users, c.User.ID+" "+c.User.Label)
						} else {
							users = append(users, "none")
						}
						mu.Unlock()
						return run(ctx, c)
					}
				}
			}
			return specs
		}})
	env := s.env
	ctx := context.Background()
	alice, bob, carol, dave := s.token(t, "alice"), s.token(t, "bob"), s.token(t, "carol"), s.token(t, "dave")
	chat := func(tok string) *openai.Client {
		c := openai.NewClient(option.WithBaseURL(env.URL+"/v1"), option.WithAPIKey(tok), option.WithMaxRetries(0))
		return &c
	}

	// Alice starts a thread that pauses on a refund.
	it := pauseAs(t, env, alice, "t-alice")
	if th := env.Thread(t, "acme", "t-alice"); th.Owner != "alice" {
		t.Fatalf("owner %q, want alice", th.Owner)
	}
	// A thread a key starts is the tenant's, as before.
	if _, err := chat("sk-acme-caller-1").Chat.Completions.New(ctx, params(user("hello")), session("t-key")); err != nil {
		t.Fatal(err)
	}
	if th := env.Thread(t, "acme", "t-key"); th.Owner != "" {
		t.Fatalf("a key's thread has owner %q", th.Owner)
	}

	// And a stored response (a thread of her own too).
	resp, err := chat(alice).Responses.New(ctx, responses.ResponseNewParams{Model: "assistant",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("remember this")}})
	if err != nil {
		t.Fatal(err)
	}

	notFound := func(who, what string, r apiResp) {
		t.Helper()
		var body struct {
			Error struct{ Code, Type string } `json:"error"`
		}
		if r.status != 404 || json.Unmarshal(r.body, &body) != nil || body.Error.Code != "not_found" || strings.Contains(string(r.body), "alice@") || strings.Contains(string(r.body), `"owner"`) {
			t.Fatalf("%s: %s: want a 404 not_found that names no one, got %d %s", who, what, r.status, r.body)
		}
	}
	runID := env.Thread(t, "acme", "t-alice").RunID
	routes := []struct{ method, path, body string }{
		{"GET", "/v1/threads/t-alice", ""},
		{"GET", "/v1/threads/t-alice/branches", ""},
		{"GET", "/v1/threads/t-alice/state", ""},
		{"GET", "/v1/threads/t-alice/events?after=0", ""},
		{"GET", "/v1/threads/t-alice/runs", ""},
		{"GET", "/v1/threads/t-alice/runs/" + runID + "/stream", ""},
		{"GET", "/v1/threads/t-alice/queue", ""},
		{"POST", "/v1/threads/t-alice/fork", `{"threadId":"t-stolen"}`},
		{"POST", "/v1/threads/t-alice/head", `{"branch":0}`},
		{"POST", "/v1/threads/t-alice/cancel", ""},
		{"DELETE", "/v1/threads/t-alice/queue/run_x", ""},
		{"GET", "/v1/runs/" + runID, ""},
		{"GET", "/v1/hitl/" + it.ID, ""},
	}
	for who, tok := range map[string]string{"bob": bob, "a caller key": "sk-acme-caller-1"} {
		for _, r := range routes {
			notFound(who, r.method+" "+r.path, call(t, r.method, env.URL+r.path, r.body, "Authorization", "Bearer "+tok))
		}
		// Deciding: a caller may not decide at all (403 before the id
		// is looked at).
		for _, verb := range []string{"approve", "reject"} {
			forbiddenRole(t, who+" "+verb, call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/"+verb, "", "Authorization", "Bearer "+tok))
		}
		// Continuing it, on each wire.
		_, err := chat(tok).Chat.Completions.New(ctx, params(user("what did alice say?")), session("t-alice"))
		var oe *openai.Error
		if !errors.As(err, &oe) || oe.StatusCode != 404 {
			t.Fatalf("%s: chat on alice's thread: want 404, got %v", who, err)
		}
		ac := ant.NewClient(antopt.WithoutEnvironmentDefaults(), antopt.WithBaseURL(env.URL), antopt.WithAuthToken(tok), antopt.WithMaxRetries(0))
		_, err = ac.Messages.New(ctx, antParams(antUser("hi")), antSession("t-alice"))
		var ae *ant.Error
		if !errors.As(err, &ae) || ae.StatusCode != 404 {
			t.Fatalf("%s: messages on alice's thread: want 404, got %v", who, err)
		}
		agui := call(t, "POST", env.URL+"/v1/agents/assistant/agui",
			`{"threadId":"t-alice","runId":"r-x","messages":[{"id":"mx","role":"user","content":"hi"}],"tools":[],"context":[],"state":{},"forwardedProps":{}}`,
			"Authorization", "Bearer "+tok, "Accept", "text/event-stream")
		if !strings.Contains(string(agui.body), `"type":"RUN_ERROR"`) || !strings.Contains(string(agui.body), `"code":"not_found"`) ||
			strings.Contains(string(agui.body), "refund") {
			t.Fatalf("%s: agui on alice's thread: %d %s", who, agui.status, agui.body)
		}
		// Her stored response, and going on from it.
		notFound(who, "GET her response", call(t, "GET", env.URL+"/v1/responses/"+resp.ID, "", "Authorization", "Bearer "+tok))
		notFound(who, "GET her conversation", call(t, "GET", env.URL+"/v1/conversations/"+resp.Conversation.ID, "", "Authorization", "Bearer "+tok))
		notFound(who, "GET her conversation's items", call(t, "GET", env.URL+"/v1/conversations/"+resp.Conversation.ID+"/items", "", "Authorization", "Bearer "+tok))
		_, err = chat(tok).Responses.New(ctx, responses.ResponseNewParams{Model: "assistant", PreviousResponseID: openai.String(resp.ID),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("and then?")}})
		if !errors.As(err, &oe) || oe.StatusCode != 404 {
			t.Fatalf("%s: previous_response_id of alice's: want 404, got %v", who, err)
		}
		// Listing: alice's thread and decision are not there; the key's are.
		var threads struct{ Data []store.Thread }
		r := call(t, "GET", env.URL+"/v1/threads", "", "Authorization", "Bearer "+tok)
		_ = json.Unmarshal(r.body, &threads)
		if r.status != 200 || len(threads.Data) != 1 || threads.Data[0].ID != "t-key" {
			t.Fatalf("%s: threads listed: %d %s", who, r.status, r.body)
		}
		var decisions struct{ Data []store.Interrupt }
		r = call(t, "GET", env.URL+"/v1/hitl", "", "Authorization", "Bearer "+tok)
		_ = json.Unmarshal(r.body, &decisions)
		if r.status != 200 || len(decisions.Data) != 0 {
			t.Fatalf("%s: decisions listed: %d %s", who, r.status, r.body)
		}
	}
	if got, _ := env.Store.GetInterrupt(ctx, "acme", it.ID); got.Status != store.Pending {
		t.Fatalf("a refused decide changed the decision: %+v", got)
	}
	if m, _ := env.Store.Messages(ctx, "acme", "t-alice"); len(m) != 2 {
		t.Fatalf("alice's thread holds %d messages after the refusals, want 2", len(m))
	}
	if _, err := env.Store.GetThread(ctx, "acme", "t-stolen"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused fork made a thread: %v", err)
	}

	// Alice herself sees it all.
	for _, path := range []string{"/v1/threads/t-alice", "/v1/threads/t-alice/branches", "/v1/hitl/" + it.ID, "/v1/runs/" + runID,
		"/v1/responses/" + resp.ID, "/v1/conversations/" + resp.Conversation.ID} {
		if r := call(t, "GET", env.URL+path, "", "Authorization", "Bearer "+alice); r.status != 200 {
			t.Fatalf("alice GET %s: %d %s", path, r.status, r.body)
		}
	}
	var threads struct{ Data []store.Thread }
	r := call(t, "GET", env.URL+"/v1/threads", "", "Authorization", "Bearer "+alice)
	_ = json.Unmarshal(r.body, &threads)
	if len(threads.Data) != 3 {
		t.Fatalf("alice lists %d threads, want her two and the key's: %s", len(threads.Data), r.body)
	}
	// She is a caller: she may not decide (403 once she sees it).
	forbiddenRole(t, "alice approve", call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "", "Authorization", "Bearer "+alice))

	// The approver sees the decision, not the conversation, and decides.
	notFound("dave", "GET thread", call(t, "GET", env.URL+"/v1/threads/t-alice", "", "Authorization", "Bearer "+dave))
	var decisions struct{ Data []store.Interrupt }
	r = call(t, "GET", env.URL+"/v1/hitl", "", "Authorization", "Bearer "+dave)
	_ = json.Unmarshal(r.body, &decisions)
	if len(decisions.Data) != 1 || decisions.Data[0].ID != it.ID {
		t.Fatalf("dave's decisions: %s", r.body)
	}
	if r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "", "Authorization", "Bearer "+dave); r.status != 200 {
		t.Fatalf("dave approve: %d %s", r.status, r.body)
	}
	stacktest.WaitFor(t, "alice's thread to go idle", func() bool { return env.Thread(t, "acme", "t-alice").Status == store.Idle })
	got, _ := env.Store.GetInterrupt(ctx, "acme", it.ID)
	if got.Decision == nil || got.Decision.By != "dave" || got.Decision.Via != "api" {
		t.Fatalf("decision %+v: want decidedBy dave", got.Decision)
	}
	// The resumed run's refund saw alice, whoever decided.
	mu.Lock()
	if len(users) != 1 || users[0] != "alice alice@example.com" {
		t.Fatalf("ctx.user of the refund: %v", users)
	}
	mu.Unlock()

	// The admin user sees and forks alice's thread; the fork is carol's.
	for _, path := range []string{"/v1/threads/t-alice", "/v1/threads/t-alice/state", "/v1/runs/" + runID} {
		if r := call(t, "GET", env.URL+path, "", "Authorization", "Bearer "+carol); r.status != 200 {
			t.Fatalf("carol GET %s: %d %s", path, r.status, r.body)
		}
	}
	r = call(t, "GET", env.URL+"/v1/threads", "", "Authorization", "Bearer "+carol)
	threads.Data = nil
	_ = json.Unmarshal(r.body, &threads)
	if len(threads.Data) != 3 {
		t.Fatalf("carol lists %d threads: %s", len(threads.Data), r.body)
	}
	if r := call(t, "POST", env.URL+"/v1/threads/t-alice/fork", `{"threadId":"t-carol"}`, "Authorization", "Bearer "+carol); r.status != 200 && r.status != 201 {
		t.Fatalf("carol fork: %d %s", r.status, r.body)
	}
	if th := env.Thread(t, "acme", "t-carol"); th.Owner != "carol" {
		t.Fatalf("the fork's owner %q, want carol", th.Owner)
	}
	// Alice goes on with her thread; bob's own thread is his.
	if res, err := chat(alice).Chat.Completions.New(ctx, params(user("thanks")), session("t-alice")); err != nil || res.Choices[0].Message.Content != "echo: thanks" {
		t.Fatalf("alice goes on: %v", err)
	}
	if _, err := chat(bob).Chat.Completions.New(ctx, params(user("mine")), session("t-bob")); err != nil {
		t.Fatal(err)
	}
	notFound("alice", "bob's thread", call(t, "GET", env.URL+"/v1/threads/t-bob", "", "Authorization", "Bearer "+alice))
	// The tenant-wide reads are for admins among end users (Studio's live
	// changes carry only the threads the user sees:
	// studio.TestStudioLiveFeedOfAUser).
	for _, path := range []string{"/v1/usage", "/v1/webhooks/deliveries"} {
		forbiddenRole(t, "alice "+path, call(t, "GET", env.URL+path, "", "Authorization", "Bearer "+alice))
		if r := call(t, "GET", env.URL+path, "", "Authorization", "Bearer "+carol); r.status != 200 {
			t.Fatalf("carol GET %s: %d %s", path, r.status, r.body)
		}
		if r := call(t, "GET", env.URL+path, "", "Authorization", "Bearer sk-acme-caller-1"); r.status != 200 {
			t.Fatalf("a caller key GET %s: %d %s", path, r.status, r.body)
		}
	}
	// Another tenant's user sees none of it, as before.
	erin := s.token(t, "erin")
	notFound("erin", "alice's thread", call(t, "GET", env.URL+"/v1/threads/t-alice", "", "Authorization", "Bearer "+erin))
}

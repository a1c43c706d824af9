package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// roleKeys are one key of each role for tenant acme, the approver labelled.
var roleKeys = []config.Key{
	{Tenant: "acme", Secret: "sk-admin-0001", Role: config.RoleAdmin, Label: "acme"},
	{Tenant: "acme", Secret: "sk-caller-001", Role: config.RoleCaller, Label: "acme"},
	{Tenant: "acme", Secret: "sk-approver-1", Role: config.RoleApprover, Label: "alice"},
}

func forbiddenRole(t *testing.T, what string, r apiResp) {
	t.Helper()
	if r.status != 403 {
		t.Fatalf("%s: want 403, got %d %s", what, r.status, r.body)
	}
	var body struct {
		Error struct {
			Code, Type, Message string
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil || body.Error.Code != "forbidden_role" || body.Error.Type != "permission_error" || body.Error.Message == "" {
		t.Fatalf("%s: want an OpenAI error envelope with code forbidden_role, got %s", what, r.body)
	}
}

// pauseAs drives session sess into an approval pause with key and returns
// its pending decision.
func pauseAs(t *testing.T, env *stacktest.Env, key, sess string) store.Interrupt {
	t.Helper()
	c := openai.NewClient(option.WithBaseURL(env.URL+"/v1"), option.WithAPIKey(key), session(sess))
	res, err := c.Chat.Completions.New(context.Background(), params(user("please refund my order")))
	if err != nil {
		t.Fatal(err)
	}
	if res.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("want a pause, got %+v", res.Choices[0])
	}
	r := call(t, "GET", env.URL+"/v1/hitl?thread="+sess, "", "Authorization", "Bearer "+key)
	var page struct {
		Data []store.Interrupt `json:"data"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil || len(page.Data) != 1 {
		t.Fatalf("want one pending decision, got %d %s", r.status, r.body)
	}
	return page.Data[0]
}

func TestKeyRolesOnDecisions(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: roleKeys})
	it := pauseAs(t, env, "sk-caller-001", "roles-1")

	// The caller may list and read decisions, but not decide any of them.
	if r := call(t, "GET", env.URL+"/v1/hitl/"+it.ID, "", "Authorization", "Bearer sk-caller-001"); r.status != 200 {
		t.Fatalf("caller reading a decision: %d %s", r.status, r.body)
	}
	for _, verb := range []string{"approve", "reject", "retry", "skip"} {
		forbiddenRole(t, "caller "+verb, call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/"+verb, `{}`, "Authorization", "Bearer sk-caller-001"))
	}
	if got, _ := env.Store.GetInterrupt(t.Context(), "acme", it.ID); got.Status != store.Pending || env.Calls.Get("refund") != 0 {
		t.Fatalf("a refused decision changed something: %+v", got)
	}

	// The approver decides, and decidedBy is its label.
	r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "", "Authorization", "Bearer sk-approver-1")
	if r.status != 200 {
		t.Fatalf("approver approve: %d %s", r.status, r.body)
	}
	waitIdle := func(thread string) {
		stacktest.WaitFor(t, "thread to go idle", func() bool { return env.Thread(t, "acme", thread).Status == store.Idle })
	}
	waitIdle("roles-1")
	got, err := env.Store.GetInterrupt(t.Context(), "acme", it.ID)
	if err != nil || got.Status != store.Approved || got.Decision.By != "alice" || got.Decision.Via != "api" {
		t.Fatalf("decision %+v %v", got.Decision, err)
	}
	if env.Calls.Get("refund") != 1 {
		t.Fatalf("refund ran %d times", env.Calls.Get("refund"))
	}

	// An admin key (no role in its entry) still decides everything.
	it = pauseAs(t, env, "sk-admin-0001", "roles-2")
	if r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/reject", `{"message":"no"}`, "Authorization", "Bearer sk-admin-0001"); r.status != 200 {
		t.Fatalf("admin reject: %d %s", r.status, r.body)
	}
	waitIdle("roles-2")
	if got, _ := env.Store.GetInterrupt(t.Context(), "acme", it.ID); got.Status != store.Rejected || got.Decision.By != "acme" {
		t.Fatalf("admin decision %+v", got)
	}
}

func TestKeyRolesOnTurns(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: roleKeys})
	ctx := context.Background()
	approver := openai.NewClient(option.WithBaseURL(env.URL+"/v1"), option.WithAPIKey("sk-approver-1"), option.WithMaxRetries(0))
	var apiErr *openai.Error
	_, err := approver.Chat.Completions.New(ctx, params(user("hi")))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 403 || apiErr.Code != "forbidden_role" {
		t.Fatalf("approver chat: want 403 forbidden_role, got %v", err)
	}
	_, err = approver.Responses.New(ctx, responses.ResponseNewParams{Model: "assistant",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 403 || apiErr.Code != "forbidden_role" {
		t.Fatalf("approver responses: want 403 forbidden_role, got %v", err)
	}
	r := call(t, "POST", env.URL+"/v1/messages", `{"model":"assistant","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", "sk-approver-1")
	if r.status != 403 || !strings.Contains(string(r.body), `"forbidden_role"`) {
		t.Fatalf("approver messages: %d %s", r.status, r.body)
	}
	s := aguiPost(t, env, "assistant", aguiInput("roles-agui", "r1", "hi"), "Authorization", "Bearer sk-approver-1")
	forbiddenRole(t, "approver AG-UI turn", apiResp{status: s.status, body: []byte(s.body)})
	if env.Upstream.Count() != 0 {
		t.Fatal("a refused turn reached the model")
	}
	// The approver still lists decisions and reads threads of its tenant.
	if r := call(t, "GET", env.URL+"/v1/hitl", "", "Authorization", "Bearer sk-approver-1"); r.status != 200 {
		t.Fatalf("approver list: %d %s", r.status, r.body)
	}

	// Caller and admin keys start turns on every wire.
	for _, key := range []string{"sk-caller-001", "sk-admin-0001"} {
		c := openai.NewClient(option.WithBaseURL(env.URL+"/v1"), option.WithAPIKey(key))
		res, err := c.Chat.Completions.New(ctx, params(user("hi")))
		if err != nil || res.Choices[0].Message.Content != "echo: hi" {
			t.Fatalf("%s chat: %v", key, err)
		}
		if _, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "assistant",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}); err != nil {
			t.Fatalf("%s responses: %v", key, err)
		}
		if r := call(t, "GET", env.URL+"/v1/threads", "", "Authorization", "Bearer "+key); r.status != 200 {
			t.Fatalf("%s threads: %d", key, r.status)
		}
	}
}

func TestKeyRolesOnAGUIResume(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: roleKeys})
	paused := aguiPost(t, env, "assistant", aguiInput("roles-ag", "run-1", "refund my order"), "Authorization", "Bearer sk-caller-001")
	checkTerminal(t, paused)
	out, _ := paused.last()["outcome"].(map[string]any)
	if out["type"] != "interrupt" {
		t.Fatalf("want an interrupt, got %v", paused.last())
	}
	id := out["interrupts"].([]any)[0].(map[string]any)["id"].(string)
	body := fmt.Sprintf(`{"threadId":"roles-ag","runId":"run-2","messages":[],"tools":[],"context":[],"resume":[{"interruptId":%q,"status":"resolved","payload":{"approved":true}}]}`, id)
	// A resume decides: the caller's key is refused with a RUN_ERROR.
	e := checkRunError(t, aguiPost(t, env, "assistant", body, "Authorization", "Bearer sk-caller-001"), "forbidden_role")
	if !strings.Contains(e["message"].(string), "cannot decide") {
		t.Fatalf("message %q", e["message"])
	}
	if got, _ := env.Store.GetInterrupt(t.Context(), "acme", id); got.Status != store.Pending || env.Calls.Get("refund") != 0 {
		t.Fatalf("a refused resume decided: %+v", got)
	}
	// The approver's resume decides, recorded under its label.
	ok := aguiPost(t, env, "assistant", strings.Replace(body, "run-2", "run-3", 1), "Authorization", "Bearer sk-approver-1")
	checkTerminal(t, ok)
	got, err := env.Store.GetInterrupt(t.Context(), "acme", id)
	if err != nil || got.Status != store.Approved || got.Decision.By != "alice" || got.Decision.Via != "agui" {
		t.Fatalf("decision %+v %v", got.Decision, err)
	}
	if env.Calls.Get("refund") != 1 {
		t.Fatalf("refund ran %d times", env.Calls.Get("refund"))
	}
}

// TestCallerCannotDodgeApprovalWithoutSession: once keys have roles, a
// caller key's turn without a session does not run a tool that needs
// approval (the default becomes refuse): the model is told the call needs
// a human decision, and the refusal is audited by the caller's label. An
// operator who sets STACKBONE_STATELESS_APPROVAL=run explicitly gets the
// old behaviour.
func TestCallerCannotDodgeApprovalWithoutSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: roleKeys})
	caller := openai.NewClient(option.WithBaseURL(env.URL+"/v1"), option.WithAPIKey("sk-caller-001"))
	res, err := caller.Chat.Completions.New(ctx, params(user("refund without session")))
	if err != nil {
		t.Fatal(err)
	}
	if env.Calls.Get("refund") != 0 || !strings.Contains(res.Choices[0].Message.Content, "needs a human decision") {
		t.Fatalf("a caller's stateless refund ran %d times; answer %q", env.Calls.Get("refund"), res.Choices[0].Message.Content)
	}
	r := call(t, "GET", env.URL+"/v1/hitl?status=rejected", "", "Authorization", "Bearer sk-admin-0001")
	if r.status != 200 || !strings.Contains(string(r.body), `"decidedVia":"stateless"`) {
		t.Fatalf("the refusal is audited: %d %s", r.status, r.body)
	}
	// The Anthropic wire is refused the same way.
	r = call(t, "POST", env.URL+"/v1/messages", `{"model":"assistant","max_tokens":100,"messages":[{"role":"user","content":"refund without session"}]}`,
		"x-api-key", "sk-caller-001")
	if r.status != 200 || env.Calls.Get("refund") != 0 {
		t.Fatalf("anthropic stateless refund: %d %s (ran %d)", r.status, r.body, env.Calls.Get("refund"))
	}

	explicit := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: roleKeys,
		Configure: func(c *config.Config) { c.StatelessApproval = config.StatelessRun }})
	caller = openai.NewClient(option.WithBaseURL(explicit.URL+"/v1"), option.WithAPIKey("sk-caller-001"))
	if _, err := caller.Chat.Completions.New(ctx, params(user("refund without session"))); err != nil {
		t.Fatal(err)
	}
	if explicit.Calls.Get("refund") != 1 {
		t.Fatalf("with run set explicitly the stateless refund runs: ran %d times", explicit.Calls.Get("refund"))
	}
}

// TestApproverCannotCancelOrDeleteResponses: an approver key reads a stored
// response but may not cancel or delete it (403 forbidden_role, as the
// role table says: approvers read and decide); a caller key deletes it.
func TestApproverCannotCancelOrDeleteResponses(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: roleKeys})
	caller := openai.NewClient(option.WithBaseURL(env.URL+"/v1"), option.WithAPIKey("sk-caller-001"))
	res, err := caller.Responses.New(context.Background(), responses.ResponseNewParams{Model: "assistant",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	approver := []string{"Authorization", "Bearer sk-approver-1"}
	forbiddenRole(t, "approver cancel", call(t, "POST", env.URL+"/v1/responses/"+res.ID+"/cancel", "", approver...))
	forbiddenRole(t, "approver delete", call(t, "DELETE", env.URL+"/v1/responses/"+res.ID, "", approver...))
	if r := call(t, "GET", env.URL+"/v1/responses/"+res.ID, "", approver...); r.status != 200 {
		t.Fatalf("approver read after refused delete: %d %s", r.status, r.body)
	}
	if r := call(t, "DELETE", env.URL+"/v1/responses/"+res.ID, "", "Authorization", "Bearer sk-caller-001"); r.status != 200 {
		t.Fatalf("caller delete: %d %s", r.status, r.body)
	}
}

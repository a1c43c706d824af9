package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// decisions lists GET /v1/hitl?status=… as a client sees it.
func decisions(t *testing.T, env *stacktest.Env, status string) []store.Interrupt {
	t.Helper()
	r := call(t, "GET", env.URL+"/v1/hitl?status="+status, "")
	var page struct {
		Data []store.Interrupt `json:"data"`
	}
	if r.status != 200 || json.Unmarshal(r.body, &page) != nil {
		t.Fatalf("GET /v1/hitl?status=%s: %d %s", status, r.status, r.body)
	}
	return page.Data
}

// A stateless turn runs an approval-gated tool (the default policy), and
// the run is in the decisions audit as decidedVia "stateless".
func TestStatelessApprovalRunIsAudited(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	res, err := client(env).Chat.Completions.New(context.Background(), params(user("refund without session")))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Choices[0].Message.Content; !strings.HasPrefix(got, "Refund result:") || env.Calls.Get("refund") != 1 {
		t.Fatalf("content %q, refund ran %d times", got, env.Calls.Get("refund"))
	}
	// A tool without an approval rule leaves no decision.
	if _, err := client(env).Chat.Completions.New(context.Background(), params(user("weather please"))); err != nil {
		t.Fatal(err)
	}

	approved := decisions(t, env, "approved")
	if len(approved) != 1 {
		t.Fatalf("want one audit record, got %+v", approved)
	}
	it := approved[0]
	if it.Decision == nil || it.Decision.Via != "stateless" || it.Decision.By != "dev" || !it.Decision.Approved ||
		it.ThreadID != "" || it.Tool != "refund" || it.Agent != "assistant" || it.Description != "Refund order ord_42 for 19.99" ||
		!strings.Contains(string(it.Args), "ord_42") || it.Decision.At.IsZero() {
		t.Fatalf("audit record %+v %+v", it, it.Decision)
	}
	raw := call(t, "GET", env.URL+"/v1/hitl/"+it.ID, "")
	if raw.status != 200 || !strings.Contains(raw.String(), `"decidedVia":"stateless"`) || !strings.Contains(raw.String(), `"threadId":""`) {
		t.Fatalf("GET /v1/hitl/{id}: %d %s", raw.status, raw.body)
	}
	if p := decisions(t, env, "pending"); len(p) != 0 {
		t.Fatalf("a stateless run left a pending decision: %+v", p)
	}
	// Nobody can decide it again.
	if r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/reject", ""); r.status != 409 {
		t.Fatalf("deciding a stateless record: %d %s", r.status, r.body)
	}
}

// With STACKBONE_STATELESS_APPROVAL=refuse the tool does not run, the model
// gets a tool error it can tell the user about, and the refusal is audited.
// A durable turn still pauses as before.
func TestStatelessApprovalRefuse(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Configure: func(c *config.Config) { c.StatelessApproval = config.StatelessRefuse }})
	res, err := client(env).Chat.Completions.New(context.Background(), params(user("refund without session")))
	if err != nil {
		t.Fatal(err)
	}
	if env.Calls.Get("refund") != 0 {
		t.Fatalf("a refused call ran %d times", env.Calls.Get("refund"))
	}
	if got := res.Choices[0].Message.Content; !strings.Contains(got, "needs a human decision") {
		t.Fatalf("the answer does not carry the refusal: %q", got)
	}
	last, _ := env.Upstream.Last()
	var toolMsg *message.Message
	for i, m := range last.Request.Messages {
		if m.Role == message.Tool {
			toolMsg = &last.Request.Messages[i]
		}
	}
	if toolMsg == nil || !strings.Contains(toolMsg.Content, "needs a human decision") ||
		!strings.Contains(toolMsg.Content, "no session") {
		t.Fatalf("the model did not see the tool error: %+v", last.Request.Messages)
	}
	rejected := decisions(t, env, "rejected")
	if len(rejected) != 1 || rejected[0].Decision == nil || rejected[0].Decision.Via != "stateless" || rejected[0].Tool != "refund" ||
		rejected[0].ThreadID != "" {
		t.Fatalf("audit of the refusal %+v", rejected)
	}
	if a := decisions(t, env, "approved"); len(a) != 0 {
		t.Fatalf("a refusal was recorded as approved: %+v", a)
	}

	// An AG-UI run without a threadId is refused the same way.
	s := aguiPost(t, env, "assistant", aguiInput("", "run-sl", "refund my order"))
	checkTerminal(t, s)
	if tr := s.first("TOOL_CALL_RESULT"); tr == nil || !strings.Contains(fmt.Sprint(tr["content"]), "needs a human decision") || env.Calls.Get("refund") != 0 {
		t.Fatalf("AG-UI stateless refusal: %v (refund ran %d times)", s.types(), env.Calls.Get("refund"))
	}
	if r := decisions(t, env, "rejected"); len(r) != 2 || r[0].Decision.Via != "stateless" {
		t.Fatalf("AG-UI refusal audit: %+v", r)
	}

	// With a session the call pauses and runs once approved.
	pause(t, env, "refuse-durable", "refund please")
	it := pendingOf(t, env, "refuse-durable")
	if r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", ""); r.status != 200 {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	waitIdle(t, env, "refuse-durable")
	if env.Calls.Get("refund") != 1 {
		t.Fatalf("the approved call ran %d times", env.Calls.Get("refund"))
	}
}

// The x-stackbone-client header is a claim: it is recorded as claimedVia,
// and decidedVia stays what the server can prove.
func TestDecidedViaClaimIsNotProof(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	pause(t, env, "claim-1", "refund please")
	it := pendingOf(t, env, "claim-1")
	bad := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "", "x-stackbone-client", "cli\u202e; rm -rf")
	if bad.status != 400 || !strings.Contains(bad.String(), `"param":"x-stackbone-client"`) {
		t.Fatalf("a malformed claim: %d %s", bad.status, bad.body)
	}
	if got := pendingOf(t, env, "claim-1"); got.Status != store.Pending {
		t.Fatalf("a refused decision changed the call: %+v", got)
	}
	r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "", "x-stackbone-client", "cli")
	if r.status != 200 {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	got := call(t, "GET", env.URL+"/v1/hitl/"+it.ID, "")
	var decided store.Interrupt
	if err := json.Unmarshal(got.body, &decided); err != nil || decided.Decision == nil {
		t.Fatalf("GET: %s %v", got.body, err)
	}
	if d := decided.Decision; d.Via != "api" || d.ClaimedVia != "cli" || d.By != "dev" {
		t.Fatalf("decision %+v: want decidedVia api, claimedVia cli, decidedBy dev", d)
	}
	if !strings.Contains(got.String(), `"decidedVia":"api"`) || !strings.Contains(got.String(), `"claimedVia":"cli"`) {
		t.Fatalf("wire shape %s", got.body)
	}
}

// Edited arguments with a number no tool can read are a 400 on the HTTP API
// and a RUN_ERROR on an AG-UI resume; the decision stays pending.
func TestEditedArgsOutOfRangeNumber(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	pause(t, env, "huge-1", "refund please")
	it := pendingOf(t, env, "huge-1")
	for _, body := range []string{
		`{"editedArgs":{"orderId":"ord_42","amount":1e400}}`,
		`{"editedArgs":{"orderId":"ord_42","amount":-1E+999}}`,
	} {
		r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", body)
		var e struct {
			Error struct {
				Message string   `json:"message"`
				Type    string   `json:"type"`
				Param   string   `json:"param"`
				Details []string `json:"details"`
			} `json:"error"`
		}
		if r.status != 400 || json.Unmarshal(r.body, &e) != nil || e.Error.Type != "invalid_request_error" || e.Error.Param != "editedArgs" ||
			!strings.Contains(r.String(), "/amount") || !strings.Contains(r.String(), "out of range") {
			t.Fatalf("%s: %d %s", body, r.status, r.body)
		}
	}
	if got := pendingOf(t, env, "huge-1"); got.Status != store.Pending || env.Calls.Get("refund") != 0 {
		t.Fatalf("the decision changed: %+v, refund ran %d times", got, env.Calls.Get("refund"))
	}
	if env.Thread(t, "dev", "huge-1").Status != store.Waiting {
		t.Fatal("the thread left waiting")
	}

	// The AG-UI resume goes through the same check.
	_, ai := aguiInterrupt(t, env, "huge-agui", "refund my order")
	resume := fmt.Sprintf(`"resume":[{"interruptId":%q,"status":"resolved","payload":{"editedArgs":{"orderId":"ord_42","amount":1e400}}}]`, ai["id"])
	s := aguiPost(t, env, "assistant", `{"threadId":"huge-agui","runId":"run-2","state":{},"messages":[],"tools":[],"context":[],"forwardedProps":{},`+resume+`}`)
	runErr := s.first("RUN_ERROR")
	if runErr == nil || !strings.Contains(fmt.Sprint(runErr["message"]), "out of range") {
		t.Fatalf("AG-UI resume with 1e400: %v", s.events)
	}
	got, err := env.Store.GetInterrupt(t.Context(), "dev", ai["id"].(string))
	if err != nil || got.Status != store.Pending || env.Calls.Get("refund") != 0 {
		t.Fatalf("after the AG-UI resume: %+v %v, refund ran %d times", got, err, env.Calls.Get("refund"))
	}

	// A readable number still works.
	if r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", `{"editedArgs":{"orderId":"ord_42","amount":1e300}}`); r.status != 200 {
		t.Fatalf("a large but finite number: %d %s", r.status, r.body)
	}
	waitIdle(t, env, "huge-1")
	if env.Calls.Get("refund") != 1 {
		t.Fatalf("refund ran %d times", env.Calls.Get("refund"))
	}
}

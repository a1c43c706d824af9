package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// The two generations of the protocol /mcp serves: the stateless revision
// (server/discover, elicitation as an input-required result the client
// answers by calling again) and the session-based one (initialize,
// elicitation/create in the middle of the call).
var protocols = []string{"2026-07-28", "2025-11-25"}

// keyed adds an API key to every request.
type keyed struct {
	key  string
	next http.RoundTripper
}

func (k keyed) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return k.next.RoundTrip(r)
}

// connect opens a Go SDK client session on the stack's /mcp.
func connect(t *testing.T, env *stacktest.Env, version, key string, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: http.DefaultTransport}
	if key != "" {
		hc.Transport = keyed{key: key, next: http.DefaultTransport}
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "go-test", Version: "1.0.0"}, opts)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: env.URL + "/mcp", HTTPClient: hc},
		&sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect (%s): %v", version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		t.Fatalf("negotiated protocol %q, want %q", got, version)
	}
	return cs
}

func callAgent(t *testing.T, cs *sdk.ClientSession, agentName string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: agentName, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", agentName, err)
	}
	return res
}

// text is a result's text content, one part a line.
func text(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func TestMCPListsOneToolPerAgent(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	for _, v := range protocols {
		t.Run(v, func(t *testing.T) {
			cs := connect(t, env, v, "", nil)
			res, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			byName := map[string]*sdk.Tool{}
			for _, tl := range res.Tools {
				byName[tl.Name] = tl
			}
			if len(byName) != 2 || byName["assistant"] == nil || byName["other"] == nil {
				t.Fatalf("tools = %v, want assistant and other", res.Tools)
			}
			a := byName["assistant"]
			if !strings.HasPrefix(a.Description, "You are a test assistant.") || !strings.Contains(a.Description, "Stackbone agent assistant") {
				t.Errorf("description = %q", a.Description)
			}
			schema, _ := json.Marshal(a.InputSchema)
			for _, want := range []string{`"message"`, `"session"`, `"required":["message"]`} {
				if !strings.Contains(string(schema), want) {
					t.Errorf("input schema %s lacks %s", schema, want)
				}
			}
		})
	}
}

func TestMCPTextTurn(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	for _, v := range protocols {
		t.Run(v, func(t *testing.T) {
			cs := connect(t, env, v, "", nil)
			res := callAgent(t, cs, "other", map[string]any{"message": "hello there"})
			if res.IsError || text(res) != "echo: hello there" {
				t.Fatalf("result = %q (isError %v)", text(res), res.IsError)
			}
			// A turn with a server tool: the text of every step.
			res = callAgent(t, cs, "assistant", map[string]any{"message": "weather in Paris?"})
			if got := text(res); got != "Checking.\n\nTool said: {\"city\":\"Paris\",\"temp_c\":21}" {
				t.Fatalf("result = %q", got)
			}
		})
	}
}

func TestMCPBadArgumentsAndUnknownAgent(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	cs := connect(t, env, protocols[0], "", nil)
	res := callAgent(t, cs, "other", map[string]any{"session": "s"})
	if !res.IsError || !strings.Contains(text(res), "`message` is required") {
		t.Errorf("no message: %q (isError %v)", text(res), res.IsError)
	}
	res = callAgent(t, cs, "other", map[string]any{"message": "hi", "session": "bad\nid"})
	if !res.IsError || !strings.Contains(text(res), "invalid_id") {
		t.Errorf("bad session: %q (isError %v)", text(res), res.IsError)
	}
	_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "nobody", Arguments: map[string]any{"message": "hi"}})
	if err == nil || !strings.Contains(err.Error(), "nobody") {
		t.Errorf("unknown tool: %v", err)
	}
}

func TestMCPSessionIsDurable(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	for _, v := range protocols {
		t.Run(v, func(t *testing.T) {
			cs := connect(t, env, v, "", nil)
			session := "mcp-continuity-" + v
			callAgent(t, cs, "other", map[string]any{"message": "first", "session": session})
			res := callAgent(t, cs, "other", map[string]any{"message": "second", "session": session})
			if text(res) != "echo: second" {
				t.Fatalf("second = %q", text(res))
			}
			msgs, err := env.Store.Messages(context.Background(), "dev", session)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range msgs {
				got = append(got, string(m.Role)+":"+m.Content)
			}
			want := "user:first,assistant:echo: first,user:second,assistant:echo: second"
			if strings.Join(got, ",") != want {
				t.Fatalf("thread = %v, want %s", got, want)
			}
			// The model saw the earlier exchange on the second call.
			last, _ := env.Upstream.Last()
			if !strings.Contains(string(last.Body), "echo: first") {
				t.Errorf("the second call's model request lacks the history: %s", last.Body)
			}
		})
	}
}

// elicitations records the forms a client was asked and answers them.
type elicitations struct {
	mu     sync.Mutex
	forms  []*sdk.ElicitParams
	answer func(p *sdk.ElicitParams) *sdk.ElicitResult
}

func (e *elicitations) handler(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	e.mu.Lock()
	e.forms = append(e.forms, req.Params)
	e.mu.Unlock()
	return e.answer(req.Params), nil
}

func (e *elicitations) asked() []*sdk.ElicitParams {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*sdk.ElicitParams(nil), e.forms...)
}

// decisions lists a session's decisions, pending or decided.
func decisions(t *testing.T, env *stacktest.Env, tenant, session string) []store.Interrupt {
	t.Helper()
	var all []store.Interrupt
	for _, st := range []store.InterruptStatus{store.Pending, store.Approved, store.Rejected} {
		its, err := env.Store.ListInterrupts(context.Background(), tenant, store.InterruptFilter{ThreadID: session, Status: st, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, its...)
	}
	return all
}

func TestMCPApprovalElicitationAccepted(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	for _, v := range protocols {
		t.Run(v, func(t *testing.T) {
			el := &elicitations{answer: func(*sdk.ElicitParams) *sdk.ElicitResult {
				return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}
			}}
			cs := connect(t, env, v, "", &sdk.ClientOptions{ElicitationHandler: el.handler})
			before := env.Calls.Get("refund")
			session := "mcp-approve-" + v
			res := callAgent(t, cs, "assistant", map[string]any{"message": "refund my order", "session": session})
			if res.IsError || !strings.HasPrefix(text(res), `Refund result: {"refunded":19.99`) {
				t.Fatalf("result = %q (isError %v)", text(res), res.IsError)
			}
			if n := env.Calls.Get("refund") - before; n != 1 {
				t.Fatalf("refund ran %d times, want 1", n)
			}
			forms := el.asked()
			if len(forms) != 1 {
				t.Fatalf("asked %d forms, want 1", len(forms))
			}
			if !strings.Contains(forms[0].Message, "Refund order ord_42 for 19.99") {
				t.Errorf("form message = %q", forms[0].Message)
			}
			schema, _ := json.Marshal(forms[0].RequestedSchema)
			for _, want := range []string{`"enum":["approve","reject","edit"]`, `"arguments"`, `"message"`} {
				if !strings.Contains(string(schema), want) {
					t.Errorf("form schema %s lacks %s", schema, want)
				}
			}
			its := decisions(t, env, "dev", session)
			if len(its) != 1 || its[0].Status != store.Approved || its[0].Decision == nil || its[0].Decision.Via != "mcp" ||
				its[0].Decision.ClaimedVia != "go-test" {
				t.Fatalf("decisions = %+v", its)
			}
		})
	}
}

func TestMCPApprovalElicitationEdited(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	el := &elicitations{answer: func(*sdk.ElicitParams) *sdk.ElicitResult {
		return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "edit",
			"arguments": `{"orderId":"ord_42","amount":5}`}}
	}}
	cs := connect(t, env, protocols[0], "", &sdk.ClientOptions{ElicitationHandler: el.handler})
	res := callAgent(t, cs, "assistant", map[string]any{"message": "refund my order", "session": "mcp-edit"})
	if !strings.HasPrefix(text(res), `Refund result: {"refunded":5,`) {
		t.Fatalf("result = %q", text(res))
	}
}

func TestMCPApprovalElicitationDeclined(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	answers := map[string]*sdk.ElicitResult{
		"declined": {Action: "decline"},
		"rejected": {Action: "accept", Content: map[string]any{"decision": "reject", "message": "not this one"}},
	}
	for _, v := range protocols {
		for name, answer := range answers {
			t.Run(v+"/"+name, func(t *testing.T) {
				el := &elicitations{answer: func(*sdk.ElicitParams) *sdk.ElicitResult { return answer }}
				cs := connect(t, env, v, "", &sdk.ClientOptions{ElicitationHandler: el.handler})
				before := env.Calls.Get("refund")
				session := "mcp-" + name + "-" + v
				res := callAgent(t, cs, "assistant", map[string]any{"message": "refund my order", "session": session})
				if res.IsError || !strings.HasPrefix(text(res), "Refund result: ") || strings.Contains(text(res), "refunded") {
					t.Fatalf("result = %q (isError %v)", text(res), res.IsError)
				}
				if name == "rejected" && !strings.Contains(text(res), "not this one") {
					t.Errorf("the agent was not told the message: %q", text(res))
				}
				if env.Calls.Get("refund") != before {
					t.Fatal("refund ran")
				}
				its := decisions(t, env, "dev", session)
				if len(its) != 1 || its[0].Status != store.Rejected || its[0].Decision.Via != "mcp" {
					t.Fatalf("decisions = %+v", its)
				}
			})
		}
	}
}

// A form the user dismisses (cancel) leaves the decision pending: the call
// says what it waits for, and the next call asks again.
func TestMCPApprovalElicitationCancelledAsksAgain(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	action := "cancel"
	el := &elicitations{answer: func(*sdk.ElicitParams) *sdk.ElicitResult {
		if action == "cancel" {
			return &sdk.ElicitResult{Action: "cancel"}
		}
		return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}
	}}
	cs := connect(t, env, protocols[1], "", &sdk.ClientOptions{ElicitationHandler: el.handler})
	res := callAgent(t, cs, "assistant", map[string]any{"message": "refund my order", "session": "mcp-cancel"})
	if !strings.Contains(text(res), "Waiting on a human decision: Refund order ord_42 for 19.99") {
		t.Fatalf("first = %q", text(res))
	}
	action = "accept"
	res = callAgent(t, cs, "assistant", map[string]any{"message": "hello again", "session": "mcp-cancel"})
	got := text(res)
	if !strings.Contains(got, "Outcome of the earlier request") || !strings.Contains(got, `Refund result: {"refunded":19.99`) ||
		!strings.HasSuffix(got, "echo: hello again") {
		t.Fatalf("second = %q", got)
	}
	if len(el.asked()) != 2 || env.Calls.Get("refund") != 1 {
		t.Fatalf("asked %d forms, refund ran %d times", len(el.asked()), env.Calls.Get("refund"))
	}
}

// A client without elicitation gets a result that says the call waits on a
// human, with the decision's id and how to decide; after the decision the
// next call on the session reports the outcome.
func TestMCPApprovalWithoutElicitation(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	for _, v := range protocols {
		t.Run(v, func(t *testing.T) {
			cs := connect(t, env, v, "", nil)
			session := "mcp-wait-" + v
			before := env.Calls.Get("refund")
			res := callAgent(t, cs, "assistant", map[string]any{"message": "refund my order", "session": session})
			its := decisions(t, env, "dev", session)
			if len(its) != 1 || its[0].Status != store.Pending {
				t.Fatalf("decisions = %+v", its)
			}
			id := its[0].ID
			got := text(res)
			for _, want := range []string{"Waiting on a human decision: Refund order ord_42 for 19.99 (decision " + id + ")",
				"stackbone hitl approve " + id + " --yes", "/studio/", `with session "` + session + `"`} {
				if !strings.Contains(got, want) {
					t.Errorf("waiting result lacks %q:\n%s", want, got)
				}
			}
			sc, _ := json.Marshal(res.StructuredContent)
			if res.IsError || !strings.Contains(string(sc), `"id":"`+id+`"`) || !strings.Contains(string(sc), `"status":"waiting_for_decision"`) {
				t.Errorf("structured = %s (isError %v)", sc, res.IsError)
			}

			// Still pending: the next call says so (no 409), and its message
			// is not sent.
			res = callAgent(t, cs, "assistant", map[string]any{"message": "are you done?", "session": session})
			if res.IsError || !strings.Contains(text(res), "Your message was not sent") || !strings.Contains(text(res), id) {
				t.Fatalf("while pending = %q (isError %v)", text(res), res.IsError)
			}

			resp, err := http.Post(env.URL+"/v1/hitl/"+id+"/approve", "application/json", nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("approve: %d %s", resp.StatusCode, body)
			}

			res = callAgent(t, cs, "assistant", map[string]any{"message": "thanks", "session": session})
			got = text(res)
			if !strings.Contains(got, "Outcome of the earlier request") || !strings.Contains(got, `Refund result: {"refunded":19.99`) ||
				!strings.HasSuffix(got, "echo: thanks") {
				t.Fatalf("after the decision = %q", got)
			}
			if n := env.Calls.Get("refund") - before; n != 1 {
				t.Fatalf("refund ran %d times, want 1", n)
			}
			// Reported once: the call after that is a plain turn.
			res = callAgent(t, cs, "assistant", map[string]any{"message": "bye", "session": session})
			if text(res) != "echo: bye" {
				t.Fatalf("next = %q", text(res))
			}
		})
	}
}

// Without a session the turn is stateless: the server's stateless-approval
// policy applies (by default the call runs and is recorded in the audit).
func TestMCPStatelessCallFollowsStatelessApprovalPolicy(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	cs := connect(t, env, protocols[0], "", nil)
	res := callAgent(t, cs, "assistant", map[string]any{"message": "refund my order"})
	if !strings.HasPrefix(text(res), `Refund result: {"refunded":19.99`) || env.Calls.Get("refund") != 1 {
		t.Fatalf("result = %q, refund ran %d times", text(res), env.Calls.Get("refund"))
	}
	its, err := env.Store.ListInterrupts(context.Background(), "dev", store.InterruptFilter{Status: store.Approved, Limit: 10})
	if err != nil || len(its) != 1 || its[0].Decision.Via != "stateless" {
		t.Fatalf("audit = %+v, %v", its, err)
	}

	refusing := stacktest.New(t, stacktest.Options{Configure: func(c *config.Config) { c.StatelessApproval = config.StatelessRefuse }})
	cs = connect(t, refusing, protocols[1], "", nil)
	res = callAgent(t, cs, "assistant", map[string]any{"message": "refund my order"})
	if refusing.Calls.Get("refund") != 0 || !strings.HasPrefix(text(res), "Refund result: ") {
		t.Fatalf("refuse policy: result = %q, refund ran %d times", text(res), refusing.Calls.Get("refund"))
	}
}

func TestMCPProgressNotifications(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	for _, v := range protocols {
		t.Run(v, func(t *testing.T) {
			var mu sync.Mutex
			var notes []string
			cs := connect(t, env, v, "", &sdk.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
				mu.Lock()
				notes = append(notes, r.Params.Message)
				mu.Unlock()
			}})
			p := &sdk.CallToolParams{Name: "assistant", Arguments: map[string]any{"message": "weather in Paris?"}}
			p.SetProgressToken("tok-1")
			if _, err := cs.CallTool(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			stacktest.WaitFor(t, "progress notifications", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return strings.Join(notes, "|") == "Calling get_weather|get_weather returned"
			})
		})
	}
}

func TestMCPAuthAndTenants(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{Mode: config.Start,
		Keys: []config.Key{{Tenant: "acme", Secret: "sk-acme"}, {Tenant: "globex", Secret: "sk-globex"}}})
	req, _ := http.NewRequest("POST", env.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(string(body), `"code":"invalid_api_key"`) {
		t.Fatalf("without a key: %d %s", resp.StatusCode, body)
	}

	for _, v := range protocols {
		t.Run(v, func(t *testing.T) {
			acme := connect(t, env, v, "sk-acme", nil)
			globex := connect(t, env, v, "sk-globex", nil)
			session := "shared-name-" + v
			res := callAgent(t, acme, "assistant", map[string]any{"message": "refund my order", "session": session})
			if !strings.Contains(text(res), "Waiting on a human decision") {
				t.Fatalf("acme = %q", text(res))
			}
			// The same session name is another conversation for another
			// tenant: nothing waits there.
			res = callAgent(t, globex, "assistant", map[string]any{"message": "hello", "session": session})
			if text(res) != "echo: hello" {
				t.Fatalf("globex = %q", text(res))
			}
			if len(decisions(t, env, "globex", session)) != 0 || len(decisions(t, env, "acme", session)) != 1 {
				t.Fatal("decisions leaked between tenants")
			}
		})
	}
}

// A call the client cancels stops its run: a durable one ends failed (it
// does not go on in the background), a stateless one with its request.
func TestMCPCancelStopsTheRun(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	for _, v := range protocols {
		for _, session := range []string{"mcp-cancel-" + v, ""} {
			t.Run(v+"/session="+session, func(t *testing.T) {
				release := env.Upstream.HoldOnce(script.When{LastUser: "weather"})
				defer release()
				cs := connect(t, env, v, "", nil)
				held := env.Upstream.Count() + 1
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() {
					args := map[string]any{"message": "weather in Paris?"}
					if session != "" {
						args["session"] = session
					}
					_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "assistant", Arguments: args})
					done <- err
				}()
				stacktest.WaitFor(t, "the model call under way", func() bool { return env.Upstream.Count() >= held })
				cancel()
				if err := <-done; err == nil {
					t.Fatal("the cancelled call returned no error")
				}
				// The held model call ends only when the run stops.
				ended := make(chan struct{})
				go func() { env.Runner.Wait(); close(ended) }()
				select {
				case <-ended:
				case <-time.After(10 * time.Second):
					t.Fatal("the run went on after the client cancelled")
				}
				if session != "" {
					if th := env.Thread(t, "dev", session); th.Status != store.Failed {
						t.Fatalf("thread status = %s, want failed", th.Status)
					}
				}
				if env.Calls.Get("get_weather") != 0 {
					t.Fatal("the tool ran after the cancel")
				}
			})
		}
	}
}

// The tools are the server's agents as they are now: a reload that adds,
// changes or removes agents changes the list.
func TestMCPToolsFollowReloads(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	cs := connect(t, env, protocols[1], "", nil)
	model := env.Runner.Agents.Get("other").Model
	env.Runner.Agents.Replace([]*agent.Spec{
		{Name: "assistant", Model: model, Instructions: "\n  Changed instructions.\nMore."},
		{Name: "french", Model: model, Instructions: "Réponds en français.", Description: "Answers in French."},
	})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tl := range res.Tools {
		got = append(got, tl.Name+": "+strings.SplitN(tl.Description, "\n", 2)[0])
	}
	if want := "assistant: Changed instructions.|french: Answers in French."; strings.Join(got, "|") != want {
		t.Fatalf("tools = %q, want %q", got, want)
	}
	out := callAgent(t, cs, "french", map[string]any{"message": "bonjour"})
	if text(out) != "echo: bonjour" {
		t.Fatalf("french = %q", text(out))
	}
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "other", Arguments: map[string]any{"message": "hi"}}); err == nil {
		t.Fatal("a removed agent is still callable")
	}
}

// A client of the stateless revision that is asked for a decision and does
// not come back with an answer (the decision is made elsewhere) still gets
// the paused turn's outcome on its next call on the session.
func TestMCPUnansweredElicitationReportedNextCall(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	c := sdk.NewClient(&sdk.Implementation{Name: "go-test", Version: "1.0.0"}, &sdk.ClientOptions{
		MultiRoundTrip: &sdk.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			t.Error("the client was asked although it handles input requests itself")
			return nil, nil
		},
	})
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: env.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res := callAgent(t, cs, "assistant", map[string]any{"message": "refund my order", "session": "mcp-unanswered"})
	if !res.NeedsInput() || len(res.InputRequests) != 1 || res.RequestState == "" {
		t.Fatalf("result = %+v, want an input-required result", res)
	}
	its := decisions(t, env, "dev", "mcp-unanswered")
	if _, ok := res.InputRequests[its[0].ID].(*sdk.ElicitParams); !ok {
		t.Fatalf("input requests = %v, want one elicitation keyed by the decision id %s", res.InputRequests, its[0].ID)
	}
	resp, err := http.Post(env.URL+"/v1/hitl/"+its[0].ID+"/reject", "application/json", strings.NewReader(`{"message":"no"}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("reject: %v %v", resp, err)
	}
	resp.Body.Close()
	res = callAgent(t, cs, "assistant", map[string]any{"message": "so?", "session": "mcp-unanswered"})
	if got := text(res); !strings.Contains(got, "Outcome of the earlier request") || !strings.Contains(got, "Refund result: ") ||
		!strings.HasSuffix(got, "echo: so?") {
		t.Fatalf("next = %q", got)
	}
}

// A session is bound to the key that opened it, and a session's pending
// decision is not asked about in a call to another agent.
func TestMCPSessionBoundToKeyAndAgent(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{Mode: config.Start,
		Keys: []config.Key{{Tenant: "acme", Secret: "sk-acme"}, {Tenant: "globex", Secret: "sk-globex"}}})
	post := func(key, session, body string) *http.Response {
		req, _ := http.NewRequest("POST", env.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+key)
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	resp := post("sk-acme", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || id == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, id)
	}
	resp = post("sk-globex", id, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("another key on acme's session: %d, want 403", resp.StatusCode)
	}

	el := &elicitations{answer: func(*sdk.ElicitParams) *sdk.ElicitResult {
		return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}
	}}
	plain := connect(t, env, protocols[1], "sk-acme", nil)
	callAgent(t, plain, "assistant", map[string]any{"message": "refund my order", "session": "mcp-bound"})
	asking := connect(t, env, protocols[1], "sk-acme", &sdk.ClientOptions{ElicitationHandler: el.handler})
	res := callAgent(t, asking, "other", map[string]any{"message": "hi", "session": "mcp-bound"})
	if !res.IsError || !strings.Contains(text(res), "This session belongs to another agent.") || len(el.asked()) != 0 || env.Calls.Get("refund") != 0 {
		t.Fatalf("another agent on the session: %q (isError %v), asked %d forms", text(res), res.IsError, len(el.asked()))
	}
}

// A call streams for as long as its turn runs: the deadline the server
// gives a request body to arrive does not cut a long turn off.
func TestMCPLongTurnOutlivesBodyTimeout(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{Configure: func(c *config.Config) { c.BodyTimeout = 100 * time.Millisecond }})
	for _, v := range protocols {
		t.Run(v, func(t *testing.T) {
			cs := connect(t, env, v, "", nil)
			release := env.Upstream.HoldOnce(script.When{LastUser: "slow"})
			held := env.Upstream.Count() + 1
			done := make(chan *sdk.CallToolResult, 1)
			go func() { done <- callAgent(t, cs, "other", map[string]any{"message": "slow one"}) }()
			stacktest.WaitFor(t, "the model call under way", func() bool { return env.Upstream.Count() >= held })
			time.Sleep(400 * time.Millisecond)
			release()
			if res := <-done; text(res) != "echo: slow one" {
				t.Fatalf("result = %q (isError %v)", text(res), res.IsError)
			}
		})
	}
}

// A body over the server's limit is its 413, in the OpenAI envelope.
func TestMCPBodyLimit(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{MaxBodyBytes: 1024})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"other","arguments":{"message":"` + strings.Repeat("x", 2000) + `"}}}`
	req, _ := http.NewRequest("POST", env.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), `"code":"request_too_large"`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

// An earlier turn that failed after its decision is reported as its
// outcome, and the call's own message is still sent.
func TestMCPEarlierTurnFailureReported(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	cs := connect(t, env, protocols[0], "", nil)
	callAgent(t, cs, "assistant", map[string]any{"message": "refund my order", "session": "mcp-fail"})
	its := decisions(t, env, "dev", "mcp-fail")
	env.Upstream.FailNext(3, 500) // every attempt of the resumed turn's model call
	resp, err := http.Post(env.URL+"/v1/hitl/"+its[0].ID+"/approve", "application/json", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("approve: %v %v", resp, err)
	}
	resp.Body.Close()
	stacktest.WaitFor(t, "the resumed turn to fail", func() bool { return env.Thread(t, "dev", "mcp-fail").Status == store.Failed })
	res := callAgent(t, cs, "assistant", map[string]any{"message": "again", "session": "mcp-fail"})
	if got := text(res); res.IsError || !strings.Contains(got, "Outcome of the earlier request") || !strings.Contains(got, "Error (") ||
		!strings.HasSuffix(got, "echo: again") {
		t.Fatalf("next = %q (isError %v)", got, res.IsError)
	}
}

// Edited arguments the tool's schema refuses are not recorded: the call
// says why and waits, and the decision stays pending.
func TestMCPApprovalElicitationBadEdit(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	el := &elicitations{answer: func(*sdk.ElicitParams) *sdk.ElicitResult {
		return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "edit", "arguments": `{"orderId":5}`}}
	}}
	cs := connect(t, env, protocols[1], "", &sdk.ClientOptions{ElicitationHandler: el.handler})
	res := callAgent(t, cs, "assistant", map[string]any{"message": "refund my order", "session": "mcp-bad-edit"})
	its := decisions(t, env, "dev", "mcp-bad-edit")
	if got := text(res); !strings.Contains(got, "was not recorded: editedArgs do not match the tool's parameter schema") ||
		!strings.Contains(got, "Waiting on a human decision") || len(its) != 1 || its[0].Status != store.Pending {
		t.Fatalf("result = %q, decisions %+v", got, its)
	}
}

// Key roles on MCP: an approver key cannot call agents (a tool error with
// code forbidden_role); a caller key's call pauses and is never asked to
// decide, even by a client that answers elicitations.
func TestMCPKeyRoles(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: []config.Key{
		{Tenant: "acme", Secret: "sk-caller-001", Role: config.RoleCaller, Label: "acme"},
		{Tenant: "acme", Secret: "sk-approver-1", Role: config.RoleApprover, Label: "alice"}}})
	v := protocols[len(protocols)-1]
	approver := connect(t, env, v, "sk-approver-1", nil)
	res := callAgent(t, approver, "assistant", map[string]any{"message": "hello"})
	sc, _ := res.StructuredContent.(map[string]any)
	errObj, _ := sc["error"].(map[string]any)
	if !res.IsError || errObj["code"] != "forbidden_role" || !strings.Contains(text(res), "cannot start turns") {
		t.Fatalf("approver call = %q %v (isError %v)", text(res), res.StructuredContent, res.IsError)
	}
	if env.Upstream.Count() != 0 {
		t.Fatal("a refused call reached the model")
	}
	el := &elicitations{answer: func(*sdk.ElicitParams) *sdk.ElicitResult {
		return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}
	}}
	caller := connect(t, env, v, "sk-caller-001", &sdk.ClientOptions{ElicitationHandler: el.handler})
	res = callAgent(t, caller, "assistant", map[string]any{"message": "refund my order", "session": "mcp-roles"})
	if !strings.Contains(text(res), "Waiting on a human decision") || len(el.asked()) != 0 {
		t.Fatalf("caller call = %q, asked %d forms", text(res), len(el.asked()))
	}
	its := decisions(t, env, "acme", "mcp-roles")
	if len(its) != 1 || its[0].Status != store.Pending || env.Calls.Get("refund") != 0 {
		t.Fatalf("decisions = %+v", its)
	}
}

// A reload (stackbone dev's file watcher replaces the agents) tells a
// connected session-based client at once: notifications/tools/list_changed
// arrives without the client sending anything, and the list it then reads
// has the new agents.
func TestMCPReloadSendsToolsListChanged(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	changed := make(chan struct{}, 8)
	cs := connect(t, env, protocols[1], "", &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { changed <- struct{}{} }})
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	model := env.Runner.Agents.Get("other").Model
	env.Runner.Agents.Replace([]*agent.Spec{{Name: "french", Model: model, Instructions: "Réponds en français."}})
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/tools/list_changed after the reload")
	}
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(res.Tools) != 1 || res.Tools[0].Name != "french" {
		t.Fatalf("tools after the reload: %+v %v", res, err)
	}
}

// A session that waits on a decision another wire's turn left (nothing
// this handler remembers): the engine refuses the new turn, and the call
// says what the session waits on instead of sending its message.
func TestMCPSessionWaitingFromAnotherWire(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	req, _ := http.NewRequest("POST", env.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"assistant","messages":[{"role":"user","content":"refund my order"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-stackbone-session", "mcp-foreign")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("chat turn: %v %v", resp, err)
	}
	resp.Body.Close()
	env.Runner.Wait()
	its := decisions(t, env, "dev", "mcp-foreign")
	if len(its) != 1 || its[0].Status != store.Pending {
		t.Fatalf("decisions = %+v, want one pending", its)
	}
	cs := connect(t, env, protocols[0], "", nil)
	res := callAgent(t, cs, "assistant", map[string]any{"message": "are you done?", "session": "mcp-foreign"})
	if got := text(res); res.IsError || !strings.Contains(got, "Your message was not sent") || !strings.Contains(got, its[0].ID) {
		t.Fatalf("result = %q (isError %v)", got, res.IsError)
	}
	if env.Calls.Get("refund") != 0 {
		t.Fatal("the refund ran without a decision")
	}
}

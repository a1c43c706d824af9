package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/wire/a2a"
)

// rpcReply is a JSON-RPC response as the raw tests read it.
type rpcReply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *a2a.RPCError   `json:"error"`
}

// a2aCall posts one JSON-RPC request to an agent's A2A endpoint with the
// A2A-Version header (unless hdr sets it) and decodes the reply.
func a2aCall(t *testing.T, env *stacktest.Env, agentName, method, params string, hdr ...string) (int, rpcReply) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":` + params + `}`
	h := append([]string{"A2A-Version", "1.0"}, hdr...)
	r := call(t, "POST", env.URL+"/a2a/"+agentName, body, h...)
	var rep rpcReply
	if err := json.Unmarshal(r.body, &rep); err != nil {
		t.Fatalf("%s: reply is not JSON-RPC: %d %s", method, r.status, r.body)
	}
	return r.status, rep
}

// TestA2ARawJSONRPC: the JSON-RPC binding's envelope and errors as the
// spec gives them, with raw requests: the card, a blocking SendMessage
// whose task completes with the answer as an artifact, GetTask with
// historyLength, the contextId as a durable thread, and each error code
// (parse, invalid request, method not found, version, task not found,
// push notifications of an unknown task or to loopback, terminal task).
func TestA2ARawJSONRPC(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})

	r := call(t, "GET", env.URL+"/a2a/assistant/.well-known/agent-card.json", "")
	var card a2a.AgentCard
	if err := json.Unmarshal(r.body, &card); err != nil || r.status != http.StatusOK {
		t.Fatalf("card: %d %s", r.status, r.body)
	}
	if card.Name != "assistant" || len(card.SupportedInterfaces) != 2 || card.SupportedInterfaces[0].URL != env.URL+"/a2a/assistant" ||
		card.SupportedInterfaces[0].ProtocolBinding != "JSONRPC" || card.SupportedInterfaces[0].ProtocolVersion != "1.0" ||
		card.SupportedInterfaces[1].ProtocolBinding != "HTTP+JSON" || card.SupportedInterfaces[1].URL != env.URL+"/a2a/assistant" ||
		!card.Capabilities.Streaming || !card.Capabilities.PushNotifications || len(card.Skills) < 2 {
		t.Fatalf("card = %s", r.body)
	}
	if r := call(t, "GET", env.URL+"/.well-known/agent-card.json", ""); r.status != http.StatusNotFound || !strings.Contains(string(r.body), "/a2a/assistant/.well-known/agent-card.json") {
		t.Fatalf("root card with two agents: %d %s", r.status, r.body)
	}

	_, rep := a2aCall(t, env, "assistant", "SendMessage", `{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hello a2a"}]}}`)
	if rep.Error != nil {
		t.Fatalf("SendMessage: %+v", rep.Error)
	}
	var sent struct {
		Task a2a.Task `json:"task"`
	}
	if err := json.Unmarshal(rep.Result, &sent); err != nil {
		t.Fatal(err)
	}
	task := sent.Task
	if task.Status.State != a2a.StateCompleted || len(task.Artifacts) != 1 || *task.Artifacts[0].Parts[0].Text != "echo: hello a2a" ||
		task.ContextID == "" || string(rep.ID) != "7" {
		t.Fatalf("SendMessage result = %s", rep.Result)
	}
	if th := env.Thread(t, "dev", task.ContextID); th.Agent != "assistant" || th.RunID != task.ID {
		t.Fatalf("thread %+v; want the task's run on the assistant's thread", th)
	}

	// The same message again (a client's retry) is the same task, not a
	// second turn.
	calls := env.Upstream.Count()
	_, rep = a2aCall(t, env, "assistant", "SendMessage", `{"message":{"messageId":"m1","contextId":"`+task.ContextID+`","role":"ROLE_USER","parts":[{"text":"hello a2a"}]}}`)
	var again struct {
		Task a2a.Task `json:"task"`
	}
	if rep.Error != nil || json.Unmarshal(rep.Result, &again) != nil || again.Task.ID != task.ID || again.Task.Status.State != a2a.StateCompleted ||
		env.Upstream.Count() != calls {
		t.Fatalf("resent message: %s %+v (model calls %d → %d); want task %s again", rep.Result, rep.Error, calls, env.Upstream.Count(), task.ID)
	}

	_, rep = a2aCall(t, env, "assistant", "GetTask", `{"id":"`+task.ID+`","historyLength":0}`)
	var got a2a.Task
	if rep.Error != nil || json.Unmarshal(rep.Result, &got) != nil || got.Status.State != a2a.StateCompleted || got.History != nil ||
		*got.Artifacts[0].Parts[0].Text != "echo: hello a2a" {
		t.Fatalf("GetTask = %s %+v", rep.Result, rep.Error)
	}

	// returnImmediately: the task comes back working, and goes on.
	_, rep = a2aCall(t, env, "assistant", "SendMessage", `{"message":{"messageId":"m9","role":"ROLE_USER","parts":[{"text":"later"}]},"configuration":{"returnImmediately":true}}`)
	var early struct {
		Task a2a.Task `json:"task"`
	}
	if rep.Error != nil || json.Unmarshal(rep.Result, &early) != nil || early.Task.Status.State != a2a.StateWorking {
		t.Fatalf("SendMessage returnImmediately = %s %+v; want a working task", rep.Result, rep.Error)
	}
	stacktest.WaitFor(t, "the immediate task to complete", func() bool {
		_, rep := a2aCall(t, env, "assistant", "GetTask", `{"id":"`+early.Task.ID+`"}`)
		var got a2a.Task
		return rep.Error == nil && json.Unmarshal(rep.Result, &got) == nil && got.Status.State == a2a.StateCompleted &&
			*got.Artifacts[0].Parts[0].Text == "echo: later"
	})

	// Without a contextId: the latest task of each of the agent's threads,
	// the most recently updated first; another agent's are not listed.
	if _, rep := a2aCall(t, env, "other", "SendMessage", `{"message":{"messageId":"o1","role":"ROLE_USER","parts":[{"text":"elsewhere"}]}}`); rep.Error != nil {
		t.Fatalf("SendMessage to other: %+v", rep.Error)
	}
	_, rep = a2aCall(t, env, "assistant", "ListTasks", `{}`)
	var all a2a.ListTasksResponse
	if rep.Error != nil || json.Unmarshal(rep.Result, &all) != nil || len(all.Tasks) != 2 || all.Tasks[0].ID != early.Task.ID ||
		all.Tasks[1].ID != task.ID || all.Tasks[0].Artifacts != nil {
		t.Fatalf("ListTasks without a context = %s %+v; want the immediate task, then the first", rep.Result, rep.Error)
	}

	for _, c := range []struct {
		name, body string
		hdr        []string
		code       int
	}{
		{"parse", `{"jsonrpc":`, nil, a2a.CodeParseError},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]`, nil, a2a.CodeInvalidRequest},
		{"no method", `{"jsonrpc":"2.0","id":1}`, nil, a2a.CodeInvalidRequest},
		{"0.3 method", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}`, nil, a2a.CodeMethodNotFound},
		{"no version", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`, []string{"A2A-Version", ""}, a2a.CodeVersionNotSupported},
		{"bad params", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":5}}`, nil, a2a.CodeInvalidParams},
		{"unknown task", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"run_nope"}}`, nil, a2a.CodeTaskNotFound},
		{"push of an unknown task", `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"x","url":"https://x.example"}}`, nil, a2a.CodeTaskNotFound},
		{"push to loopback", `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"` + task.ID + `","url":"http://127.0.0.1:9/hook"}}`, nil, a2a.CodeInvalidParams},
		{"cancel done", `{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":"` + task.ID + `"}}`, nil, a2a.CodeTaskNotCancelable},
		{"subscribe done", `{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":"` + task.ID + `"}}`, nil, a2a.CodeUnsupportedOperation},
		{"message to done", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m2","role":"ROLE_USER","taskId":"` + task.ID + `","parts":[{"text":"more"}]}}}`, nil, a2a.CodeUnsupportedOperation},
		{"file", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m3","role":"ROLE_USER","parts":[{"url":"http://x/a.pdf","mediaType":"application/pdf"}]}}}`, nil, a2a.CodeContentTypeNotSupported},
	} {
		h := append([]string{"A2A-Version", "1.0"}, c.hdr...)
		r := call(t, "POST", env.URL+"/a2a/assistant", c.body, h...)
		var rep rpcReply
		if err := json.Unmarshal(r.body, &rep); err != nil || rep.Error == nil || rep.Error.Code != c.code || rep.JSONRPC != "2.0" {
			t.Errorf("%s: %d %s; want error %d", c.name, r.status, r.body, c.code)
		}
	}
}

// TestA2ARootCard: the root well-known path serves the one agent's card, or
// STACKBONE_A2A_DEFAULT_AGENT's among several.
func TestA2ARootCard(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Configure: func(cfg *config.Config) { cfg.A2ADefaultAgent = "other" }})
	r := call(t, "GET", env.URL+"/.well-known/agent-card.json", "")
	var card a2a.AgentCard
	if err := json.Unmarshal(r.body, &card); err != nil || r.status != http.StatusOK || card.Name != "other" ||
		card.SupportedInterfaces[0].URL != env.URL+"/a2a/other" {
		t.Fatalf("root card: %d %s", r.status, r.body)
	}
	one := stacktest.New(t, stacktest.Options{Agents: func(env *stacktest.Env) []*agent.Spec {
		return stacktest.DefaultAgents(env, "openai/test-model")[:1]
	}})
	r = call(t, "GET", one.URL+"/.well-known/agent-card.json", "")
	if err := json.Unmarshal(r.body, &card); err != nil || r.status != http.StatusOK || card.Name != "assistant" || card.SecuritySchemes != nil {
		t.Fatalf("root card of one agent (dev, no keys): %d %s", r.status, r.body)
	}
}

// TestA2ARawHTTPJSON: the HTTP+JSON binding's errors are a google.rpc.Status
// with the spec's HTTP status and an ErrorInfo of the A2A reason.
func TestA2ARawHTTPJSON(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	v := []string{"A2A-Version", "1.0"}
	for _, c := range []struct {
		method, path, body string
		status             int
		reason             string
	}{
		{"GET", "/a2a/assistant/tasks/run_nope", "", http.StatusNotFound, "TASK_NOT_FOUND"},
		{"POST", "/a2a/assistant/tasks/run_nope:cancel", "", http.StatusNotFound, "TASK_NOT_FOUND"},
		{"POST", "/a2a/assistant/tasks/x/pushNotificationConfigs", `{"url":"https://x.example"}`, http.StatusNotFound, "TASK_NOT_FOUND"},
		{"POST", "/a2a/assistant/message:send", `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"raw":"AAAA","mediaType":"application/pdf"}]}}`,
			http.StatusBadRequest, "CONTENT_TYPE_NOT_SUPPORTED"},
	} {
		r := call(t, c.method, env.URL+c.path, c.body, v...)
		var body struct {
			Error struct {
				Code    int    `json:"code"`
				Status  string `json:"status"`
				Message string `json:"message"`
				Details []struct {
					Type   string `json:"@type"`
					Reason string `json:"reason"`
					Domain string `json:"domain"`
				} `json:"details"`
			} `json:"error"`
		}
		if err := json.Unmarshal(r.body, &body); err != nil || r.status != c.status || body.Error.Code != c.status ||
			len(body.Error.Details) == 0 || body.Error.Details[0].Reason != c.reason || body.Error.Details[0].Domain != "a2a-protocol.org" {
			t.Errorf("%s %s: %d %s; want %d %s", c.method, c.path, r.status, r.body, c.status, c.reason)
		}
	}
	r := call(t, "POST", env.URL+"/a2a/assistant/message:send", `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"rest"}]}}`, v...)
	var sent struct {
		Task a2a.Task `json:"task"`
	}
	if err := json.Unmarshal(r.body, &sent); err != nil || r.status != http.StatusOK || sent.Task.Status.State != a2a.StateCompleted {
		t.Fatalf("message:send: %d %s", r.status, r.body)
	}
	r = call(t, "GET", env.URL+"/a2a/assistant/tasks/"+sent.Task.ID+"?historyLength=0", "", v...)
	var got a2a.Task
	if err := json.Unmarshal(r.body, &got); err != nil || r.status != http.StatusOK || got.ID != sent.Task.ID || got.History != nil {
		t.Fatalf("GET tasks/{id}: %d %s", r.status, r.body)
	}
}

// TestA2APerUserTasks: with end users' tokens, a task alice starts over
// A2A is on her thread: bob (a caller of the same tenant) gets
// TaskNotFound for it, does not list it, and cannot go on in its
// contextId; an admin key sees it.
func TestA2APerUserTasks(t *testing.T) {
	t.Parallel()
	s := newJWTStack(t, stacktest.Options{})
	env := s.env
	alice, bob := "Bearer "+s.token(t, "alice"), "Bearer "+s.token(t, "bob")
	// The card names the provider next to the keys.
	var card a2a.AgentCard
	if r := call(t, "GET", env.URL+"/a2a/assistant/.well-known/agent-card.json", ""); r.status != 200 || json.Unmarshal(r.body, &card) != nil ||
		card.SecuritySchemes["oidc"].OpenIDConnectSecurityScheme == nil ||
		card.SecuritySchemes["oidc"].OpenIDConnectSecurityScheme.OpenIDConnectURL != strings.TrimSuffix(s.oidc.Issuer, "/")+"/.well-known/openid-configuration" ||
		card.SecuritySchemes["bearer"].HTTPAuthSecurityScheme == nil || len(card.SecurityRequirements) != 2 {
		t.Fatalf("the card's security: %d %s", r.status, r.body)
	}
	_, rep := a2aCall(t, env, "assistant", "SendMessage", `{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hello from alice"}]}}`,
		"Authorization", alice)
	var sent struct {
		Task a2a.Task `json:"task"`
	}
	if rep.Error != nil || json.Unmarshal(rep.Result, &sent) != nil || sent.Task.Status.State != a2a.StateCompleted {
		t.Fatalf("alice's SendMessage: %+v %s", rep.Error, rep.Result)
	}
	task := sent.Task
	if th := env.Thread(t, "acme", task.ContextID); th.Owner != "alice" {
		t.Fatalf("the task's thread is owned by %q, want alice", th.Owner)
	}
	if _, rep := a2aCall(t, env, "assistant", "GetTask", `{"id":"`+task.ID+`"}`, "Authorization", bob); rep.Error == nil || rep.Error.Code != a2a.CodeTaskNotFound {
		t.Fatalf("bob's GetTask of alice's task: %+v %s", rep.Error, rep.Result)
	}
	for _, params := range []string{`{}`, `{"contextId":"` + task.ContextID + `"}`} {
		_, rep := a2aCall(t, env, "assistant", "ListTasks", params, "Authorization", bob)
		if rep.Error != nil || strings.Contains(string(rep.Result), task.ID) {
			t.Fatalf("bob's ListTasks %s: %+v %s", params, rep.Error, rep.Result)
		}
	}
	calls := env.Upstream.Count()
	_, rep = a2aCall(t, env, "assistant", "SendMessage", `{"message":{"messageId":"m2","role":"ROLE_USER","contextId":"`+task.ContextID+`","parts":[{"text":"bob was here"}]}}`,
		"Authorization", bob)
	if rep.Error == nil || env.Upstream.Count() != calls {
		t.Fatalf("bob going on in alice's context: %+v %s (%d model calls)", rep.Error, rep.Result, env.Upstream.Count()-calls)
	}
	if _, rep := a2aCall(t, env, "assistant", "GetTask", `{"id":"`+task.ID+`"}`, "Authorization", "Bearer sk-acme-admin-1"); rep.Error != nil {
		t.Fatalf("the admin's GetTask: %+v", rep.Error)
	}
	if _, rep := a2aCall(t, env, "assistant", "GetTask", `{"id":"`+task.ID+`"}`, "Authorization", alice); rep.Error != nil {
		t.Fatalf("alice's GetTask: %+v", rep.Error)
	}
}

package server_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/clock"
	"github.com/stackbone/stackbone/internal/wire/a2a"
)

// TestA2ABudgetRejected: a message whose turn a spent budget refuses
// before it starts is answered with a task in TASK_STATE_REJECTED (its
// status message naming the budget, its metadata the code, the retry
// headers saying not before the reset), on SendMessage and on the HTTP+JSON
// stream; nothing was stored (the context stays unknown, the task is not
// found) and the model was not called.
func TestA2ABudgetRejected(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Date(2026, 12, 2, 22, 0, 0, 0, time.UTC))
	env := budgetEnv(t, `[{"name": "daily", "scope": "tenant", "period": "day", "tokens": 5}]`, nil, fake)
	a2aResult(t, env, "SendMessage", `{"message":{"messageId":"b1","role":"ROLE_USER","parts":[{"text":"spend it"}]}}`, nil)
	before := len(env.Upstream.Requests())

	r := call(t, "POST", env.URL+"/a2a/assistant", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"b2",
		"contextId":"budget-ctx","role":"ROLE_USER","parts":[{"text":"one more"}]}}}`, "A2A-Version", "1.0")
	var rep struct {
		Result struct{ Task a2a.Task }
		Error  *a2a.RPCError
	}
	if err := json.Unmarshal(r.body, &rep); err != nil || rep.Error != nil {
		t.Fatalf("SendMessage past the budget: %d %s", r.status, r.body)
	}
	task := rep.Result.Task
	if task.Status.State != a2a.StateRejected || task.ContextID != "budget-ctx" || task.Status.Message == nil ||
		!strings.Contains(*task.Status.Message.Parts[0].Text, `"daily"`) || !strings.Contains(string(r.body), `"code":"budget_exceeded"`) {
		t.Fatalf("the refused task: %s", r.body)
	}
	if r.header.Get("x-should-retry") != "false" || r.header.Get("retry-after") != "7200" {
		t.Fatalf("retry headers: %q %q", r.header.Get("x-should-retry"), r.header.Get("retry-after"))
	}
	if _, rep := a2aCall(t, env, "assistant", "GetTask", `{"id":"`+task.ID+`"}`); rep.Error == nil || rep.Error.Code != a2a.CodeTaskNotFound {
		t.Fatalf("GetTask of the refused task: %+v", rep.Error)
	}
	if r := call(t, "GET", env.URL+"/v1/threads/budget-ctx", ""); r.status != 404 {
		t.Fatalf("the refused turn stored its thread: %d %s", r.status, r.body)
	}
	s := call(t, "POST", env.URL+"/a2a/assistant/message:stream", `{"message":{"messageId":"b3","role":"ROLE_USER","parts":[{"text":"streamed"}]}}`,
		"A2A-Version", "1.0")
	if s.status != 200 || strings.Count(string(s.body), "data:") != 1 || !strings.Contains(string(s.body), `"state":"TASK_STATE_REJECTED"`) {
		t.Fatalf("the refused stream: %d %s", s.status, s.body)
	}
	if got := len(env.Upstream.Requests()); got != before {
		t.Fatalf("refused turns reached the model: %d requests, want %d", got, before)
	}
}

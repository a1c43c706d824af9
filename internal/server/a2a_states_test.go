package server_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/clock"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
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

// TestA2AQueuedSubmitted: a follow-up queued behind a running turn
// (x-stackbone-multitask: enqueue) is a TASK_STATE_SUBMITTED task at once
// (returnImmediately), in GetTask and first in ListTasks; a push config
// registered for it hears WORKING and COMPLETED once it runs; CancelTask
// of another queued one takes it off the queue (CANCELED) and it never
// runs. SQLite and PostgreSQL.
func TestA2AQueuedSubmitted(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			recv := newPushReceiver(t)
			opts := stacktest.Options{Deliver: true, Configure: func(c *config.Config) {
				c.A2APushAllowPrivate, c.WebhookSecret = true, pushSecret
			}}
			if driver == "postgres" {
				opts.Store = stacktest.Postgres(t, "a2aqueued")
			}
			env := stacktest.New(t, opts)
			release := env.Upstream.HoldOnce(script.When{LastUser: "first"})
			t.Cleanup(release)
			send := func(id, text string, hdr ...string) a2a.Task {
				t.Helper()
				var out struct{ Task a2a.Task }
				a2aResult(t, env, "SendMessage", `{"message":{"messageId":"`+id+`","contextId":"q-ctx","role":"ROLE_USER","parts":[{"text":"`+text+`"}]},
					"configuration":{"returnImmediately":true}}`, &out, hdr...)
				return out.Task
			}
			first := send("q1", "first one")
			stacktest.WaitFor(t, "the first turn at the model", func() bool { return env.Upstream.Count() >= 1 })
			second := send("q2", "second one", "x-stackbone-multitask", "enqueue")
			third := send("q3", "third one", "x-stackbone-multitask", "enqueue")
			if first.Status.State != a2a.StateWorking || second.Status.State != a2a.StateSubmitted || third.Status.State != a2a.StateSubmitted ||
				second.ID == first.ID || second.ID == third.ID || second.ContextID != "q-ctx" {
				t.Fatalf("tasks: %+v / %+v / %+v", first.Status, second, third)
			}
			var got a2a.Task
			a2aResult(t, env, "GetTask", `{"id":"`+second.ID+`"}`, &got)
			if got.Status.State != a2a.StateSubmitted || got.ID != second.ID {
				t.Fatalf("GetTask of the queued task: %+v", got)
			}
			var list a2a.ListTasksResponse
			a2aResult(t, env, "ListTasks", `{"contextId":"q-ctx"}`, &list)
			if len(list.Tasks) != 3 || list.Tasks[0].ID != third.ID || list.Tasks[1].ID != second.ID || list.Tasks[2].ID != first.ID ||
				list.Tasks[0].Status.State != a2a.StateSubmitted {
				t.Fatalf("ListTasks: %+v", list)
			}
			var pc a2a.TaskPushNotificationConfig
			a2aResult(t, env, "CreateTaskPushNotificationConfig", `{"taskId":"`+second.ID+`","url":"`+recv.srv.URL+`/q","token":"tok-q"}`, &pc)
			var cancelled a2a.Task
			a2aResult(t, env, "CancelTask", `{"id":"`+third.ID+`"}`, &cancelled)
			if cancelled.Status.State != a2a.StateCanceled {
				t.Fatalf("CancelTask of a queued task: %+v", cancelled.Status)
			}
			release()
			stacktest.WaitFor(t, "the queued task to complete", func() bool {
				_, rep := a2aCall(t, env, "assistant", "GetTask", `{"id":"`+second.ID+`"}`)
				return rep.Error == nil && strings.Contains(string(rep.Result), `"TASK_STATE_COMPLETED"`)
			})
			stacktest.WaitFor(t, "WORKING and COMPLETED pushed for the queued task", func() bool {
				s := recv.states("/q", second.ID)
				return slices.Contains(s, a2a.StateWorking) && slices.Contains(s, a2a.StateCompleted)
			})
			if _, problems := recv.all(); len(problems) > 0 {
				t.Fatalf("the receiver refused: %v", problems)
			}
			if _, rep := a2aCall(t, env, "assistant", "GetTask", `{"id":"`+third.ID+`"}`); rep.Error == nil || rep.Error.Code != a2a.CodeTaskNotFound {
				t.Fatalf("the cancelled queued task: %+v %s", rep.Error, rep.Result)
			}
			for _, r := range env.Upstream.Requests() {
				if strings.Contains(string(r.Body), "third one") {
					t.Fatalf("the cancelled follow-up reached the model")
				}
			}
		})
	}
}

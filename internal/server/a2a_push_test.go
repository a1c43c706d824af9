package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/notify"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/wire/a2a"
)

const pushSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// pushed is one push notification a receiver took.
type pushed struct {
	path, token, auth string
	sr                a2a.StreamResponse
}

// pushReceiver is a client's webhook endpoint: it checks each request as a
// client would (POST, application/a2a+json, the Standard Webhooks signature
// over the exact body) and records the notifications; a request that fails
// a check is recorded as a problem and answered 400.
type pushReceiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	got      []pushed
	problems []string
}

func newPushReceiver(t *testing.T) *pushReceiver {
	t.Helper()
	key, err := config.WebhookKey(pushSecret)
	if err != nil {
		t.Fatal(err)
	}
	pr := &pushReceiver{}
	pr.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		pr.mu.Lock()
		defer pr.mu.Unlock()
		fail := func(why string) {
			pr.problems = append(pr.problems, r.URL.Path+": "+why)
			w.WriteHeader(http.StatusBadRequest)
		}
		ts, err := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
		switch {
		case r.Method != http.MethodPost:
			fail("method " + r.Method)
			return
		case r.Header.Get("Content-Type") != "application/a2a+json":
			fail("content type " + r.Header.Get("Content-Type"))
			return
		case err != nil || r.Header.Get("webhook-signature") != notify.Sign(key, r.Header.Get("webhook-id"), time.Unix(ts, 0), body):
			fail("bad signature")
			return
		}
		var sr a2a.StreamResponse
		if err := json.Unmarshal(body, &sr); err != nil || sr.StatusUpdate == nil {
			fail("body " + string(body))
			return
		}
		pr.got = append(pr.got, pushed{path: r.URL.Path, token: r.Header.Get(notify.PushTokenHeader), auth: r.Header.Get("Authorization"), sr: sr})
	}))
	t.Cleanup(pr.srv.Close)
	return pr
}

// states are the states notified to path for task, in arrival order.
func (pr *pushReceiver) states(path, task string) []a2a.TaskState {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var out []a2a.TaskState
	for _, p := range pr.got {
		if p.path == path && p.sr.StatusUpdate.TaskID == task {
			out = append(out, p.sr.StatusUpdate.Status.State)
		}
	}
	return out
}

func (pr *pushReceiver) all() ([]pushed, []string) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return slices.Clone(pr.got), slices.Clone(pr.problems)
}

var pushKeys = []config.Key{{Tenant: "acme", Secret: "sk-acme-admin", Role: config.RoleAdmin, Label: "acme-admin"},
	{Tenant: "acme", Secret: "sk-acme-caller", Role: config.RoleCaller, Label: "acme-caller"},
	{Tenant: "beta", Secret: "sk-beta-admin", Role: config.RoleAdmin, Label: "beta-admin"}}

func bearer(key string) []string { return []string{"Authorization", "Bearer " + key} }

// a2aResult is a2aCall's result decoded into v, failing on an error.
func a2aResult(t *testing.T, env *stacktest.Env, method, params string, v any, hdr ...string) {
	t.Helper()
	_, rep := a2aCall(t, env, "assistant", method, params, hdr...)
	if rep.Error != nil {
		t.Fatalf("%s: %+v", method, rep.Error)
	}
	if v != nil {
		if err := json.Unmarshal(rep.Result, v); err != nil {
			t.Fatalf("%s result %s: %v", method, rep.Result, err)
		}
	}
}

// TestA2APushNotifications: a caller key sends a message with a push
// config inline; its task pauses on the refund approval (INPUT_REQUIRED)
// and the receiver is told, with the config's token and Authorization and
// a valid signature; a second config registered over HTTP+JSON, get and
// list (no credentials echoed), another tenant gets TaskNotFound for every
// operation; an admin approves over A2A and both receivers hear WORKING
// then COMPLETED; delete is idempotent and stops the notifications. Both
// stores.
func TestA2APushNotifications(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			recv := newPushReceiver(t)
			opts := stacktest.Options{Mode: config.Start, Keys: pushKeys, Deliver: true, Configure: func(c *config.Config) {
				c.A2APushAllowPrivate = true
				c.WebhookSecret = pushSecret
			}}
			if driver == "postgres" {
				opts.Store = stacktest.Postgres(t, "a2apush")
			}
			env := stacktest.New(t, opts)
			caller, admin, other := bearer("sk-acme-caller"), bearer("sk-acme-admin"), bearer("sk-beta-admin")

			var sent struct{ Task a2a.Task }
			a2aResult(t, env, "SendMessage", `{"message":{"messageId":"p1","role":"ROLE_USER","parts":[{"text":"refund order 42"}]},
				"configuration":{"taskPushNotificationConfig":{"url":"`+recv.srv.URL+`/first","token":"tok-first",
				"authentication":{"scheme":"Bearer","credentials":"cred-first"}}}}`, &sent, caller...)
			task := sent.Task
			if task.Status.State != a2a.StateInputRequired {
				t.Fatalf("task %+v, want INPUT_REQUIRED", task)
			}
			stacktest.WaitFor(t, "the INPUT_REQUIRED notification", func() bool {
				return slices.Contains(recv.states("/first", task.ID), a2a.StateInputRequired)
			})

			// A second config, over HTTP+JSON.
			r := call(t, "POST", env.URL+"/a2a/assistant/tasks/"+task.ID+"/pushNotificationConfigs",
				`{"url":"`+recv.srv.URL+`/second","token":"tok-second"}`, append([]string{"A2A-Version", "1.0"}, caller...)...)
			var second a2a.TaskPushNotificationConfig
			if err := json.Unmarshal(r.body, &second); r.status != 200 || err != nil || second.ID == "" || second.TaskID != task.ID ||
				second.URL != recv.srv.URL+"/second" {
				t.Fatalf("create over HTTP+JSON: %d %s", r.status, r.body)
			}
			var list a2a.ListTaskPushNotificationConfigsResponse
			a2aResult(t, env, "ListTaskPushNotificationConfigs", `{"taskId":"`+task.ID+`"}`, &list, caller...)
			if len(list.Configs) != 2 || list.Configs[0].Token != "tok-first" || list.Configs[0].Authentication == nil ||
				list.Configs[0].Authentication.Scheme != "Bearer" || list.Configs[0].Authentication.Credentials != "" {
				t.Fatalf("list: %+v", list)
			}
			var got a2a.TaskPushNotificationConfig
			a2aResult(t, env, "GetTaskPushNotificationConfig", `{"taskId":"`+task.ID+`","id":"`+second.ID+`"}`, &got, caller...)
			if got.URL != second.URL || got.Token != "tok-second" {
				t.Fatalf("get: %+v", got)
			}
			r = call(t, "GET", env.URL+"/a2a/assistant/tasks/"+task.ID+"/pushNotificationConfigs/"+second.ID, "",
				append([]string{"A2A-Version", "1.0"}, caller...)...)
			if r.status != 200 || !strings.Contains(string(r.body), `"tok-second"`) {
				t.Fatalf("get over HTTP+JSON: %d %s", r.status, r.body)
			}

			// Another tenant: the task does not exist.
			for _, c := range [][2]string{{"GetTaskPushNotificationConfig", `{"taskId":"` + task.ID + `","id":"` + second.ID + `"}`},
				{"ListTaskPushNotificationConfigs", `{"taskId":"` + task.ID + `"}`},
				{"DeleteTaskPushNotificationConfig", `{"taskId":"` + task.ID + `","id":"` + second.ID + `"}`},
				{"CreateTaskPushNotificationConfig", `{"taskId":"` + task.ID + `","url":"` + recv.srv.URL + `/beta"}`}} {
				if _, rep := a2aCall(t, env, "assistant", c[0], c[1], other...); rep.Error == nil || rep.Error.Code != a2a.CodeTaskNotFound {
					t.Errorf("%s by another tenant: %+v", c[0], rep.Error)
				}
			}
			r = call(t, "GET", env.URL+"/a2a/assistant/tasks/"+task.ID+"/pushNotificationConfigs", "", append([]string{"A2A-Version", "1.0"}, other...)...)
			if r.status != http.StatusNotFound {
				t.Fatalf("list over HTTP+JSON by another tenant: %d %s", r.status, r.body)
			}

			// The admin approves over A2A: the task works, then completes.
			var resumed struct{ Task a2a.Task }
			a2aResult(t, env, "SendMessage", `{"message":{"messageId":"p2","role":"ROLE_USER","taskId":"`+task.ID+`",
				"parts":[{"data":{"decision":"approve"}}]}}`, &resumed, admin...)
			if resumed.Task.Status.State != a2a.StateCompleted {
				t.Fatalf("after the approval: %+v", resumed.Task)
			}
			for _, path := range []string{"/first", "/second"} {
				stacktest.WaitFor(t, "WORKING and COMPLETED at "+path, func() bool {
					s := recv.states(path, task.ID)
					return slices.Contains(s, a2a.StateWorking) && slices.Contains(s, a2a.StateCompleted)
				})
			}
			all, problems := recv.all()
			if len(problems) > 0 {
				t.Fatalf("the receiver refused: %v", problems)
			}
			for _, p := range all {
				want := map[string][2]string{"/first": {"tok-first", "Bearer cred-first"}, "/second": {"tok-second", ""}}[p.path]
				if p.token != want[0] || p.auth != want[1] || p.sr.StatusUpdate.ContextID != task.ContextID {
					t.Fatalf("notification to %s: token %q, auth %q, %+v", p.path, p.token, p.auth, p.sr.StatusUpdate)
				}
			}

			// Delete, twice; the list shows one.
			for range 2 {
				a2aResult(t, env, "DeleteTaskPushNotificationConfig", `{"taskId":"`+task.ID+`","id":"`+second.ID+`"}`, nil, caller...)
			}
			a2aResult(t, env, "ListTaskPushNotificationConfigs", `{"taskId":"`+task.ID+`"}`, &list, caller...)
			if len(list.Configs) != 1 {
				t.Fatalf("list after the delete: %+v", list)
			}
			r = call(t, "DELETE", env.URL+"/a2a/assistant/tasks/"+task.ID+"/pushNotificationConfigs/"+second.ID, "",
				append([]string{"A2A-Version", "1.0"}, caller...)...)
			if r.status != 200 {
				t.Fatalf("delete over HTTP+JSON: %d %s", r.status, r.body)
			}
		})
	}
}

// TestA2APushSSRF: without STACKBONE_A2A_PUSH_ALLOW_PRIVATE a URL to
// loopback (an address, or a name that resolves to it), a private or the
// metadata address is refused at registration with InvalidParams on
// JSON-RPC and a 400 on HTTP+JSON, and an inline config so refused starts
// nothing (the context's thread does not exist).
func TestA2APushSSRF(t *testing.T) {
	t.Parallel()
	recv := newPushReceiver(t)
	env := stacktest.New(t, stacktest.Options{})
	var sent struct{ Task a2a.Task }
	a2aResult(t, env, "SendMessage", `{"message":{"messageId":"s1","role":"ROLE_USER","parts":[{"text":"hello"}]}}`, &sent)
	port := recv.srv.URL[strings.LastIndex(recv.srv.URL, ":")+1:]
	for _, u := range []string{recv.srv.URL + "/hook", "http://localhost:" + port + "/hook", "http://10.0.0.8/hook",
		"http://169.254.169.254/latest/meta-data", "http://[::1]:" + port + "/"} {
		_, rep := a2aCall(t, env, "assistant", "CreateTaskPushNotificationConfig", `{"taskId":"`+sent.Task.ID+`","url":"`+u+`"}`)
		if rep.Error == nil || rep.Error.Code != a2a.CodeInvalidParams || !strings.Contains(rep.Error.Message, "refused") {
			t.Errorf("%s: %+v, want InvalidParams refused", u, rep.Error)
		}
	}
	_, rep := a2aCall(t, env, "assistant", "CreateTaskPushNotificationConfig", `{"taskId":"`+sent.Task.ID+`","url":"ftp://example.com/x"}`)
	if rep.Error == nil || rep.Error.Code != a2a.CodeInvalidParams {
		t.Errorf("an ftp URL: %+v", rep.Error)
	}
	r := call(t, "POST", env.URL+"/a2a/assistant/tasks/"+sent.Task.ID+"/pushNotificationConfigs", `{"url":"`+recv.srv.URL+`"}`, "A2A-Version", "1.0")
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "refused") {
		t.Errorf("HTTP+JSON: %d %s", r.status, r.body)
	}
	_, rep = a2aCall(t, env, "assistant", "SendMessage", `{"message":{"messageId":"s2","contextId":"ssrf-ctx","role":"ROLE_USER","parts":[{"text":"hello"}]},
		"configuration":{"taskPushNotificationConfig":{"url":"`+recv.srv.URL+`/inline"}}}`)
	if rep.Error == nil || rep.Error.Code != a2a.CodeInvalidParams {
		t.Fatalf("an inline loopback config: %+v", rep.Error)
	}
	if r := call(t, "GET", env.URL+"/v1/threads/ssrf-ctx", ""); r.status != http.StatusNotFound {
		t.Fatalf("the refused message started a thread: %d %s", r.status, r.body)
	}
	var list a2a.ListTaskPushNotificationConfigsResponse
	a2aResult(t, env, "ListTaskPushNotificationConfigs", `{"taskId":"`+sent.Task.ID+`"}`, &list)
	if len(list.Configs) != 0 {
		t.Fatalf("configs stored: %+v", list)
	}
}

// TestA2APushSurvivesRestart: a notification queued by a process that
// never delivered it (no dispatcher ran there) is delivered by the next
// process on the same database: the outbox row, not memory, holds it.
// PostgreSQL (a second process is a replica of the schema).
func TestA2APushSurvivesRestart(t *testing.T) {
	t.Parallel()
	recv := newPushReceiver(t)
	pg := stacktest.Postgres(t, "a2apushrestart")
	cfg := func(c *config.Config) { c.A2APushAllowPrivate = true; c.WebhookSecret = pushSecret }
	first := stacktest.New(t, stacktest.Options{Store: pg, Configure: cfg})
	var sent struct{ Task a2a.Task }
	a2aResult(t, first, "SendMessage", `{"message":{"messageId":"r1","role":"ROLE_USER","parts":[{"text":"hello"}]},
		"configuration":{"taskPushNotificationConfig":{"url":"`+recv.srv.URL+`/hook","token":"tok-r"}}}`, &sent)
	if sent.Task.Status.State != a2a.StateCompleted {
		t.Fatalf("task %+v", sent.Task)
	}
	if got, _ := recv.all(); len(got) != 0 {
		t.Fatalf("delivered without a dispatcher: %+v", got)
	}
	stacktest.New(t, stacktest.Options{Store: stacktest.PostgresReplica(t, pg), Configure: cfg, Deliver: true})
	stacktest.WaitFor(t, "the COMPLETED notification from the next process", func() bool {
		return slices.Contains(recv.states("/hook", sent.Task.ID), a2a.StateCompleted)
	})
	if _, problems := recv.all(); len(problems) > 0 {
		t.Fatalf("the receiver refused: %v", problems)
	}
}

// TestA2APushPerUser: a task in an end user's thread is theirs: alice
// registers (authentication in the 0.3 spelling, its credentials not sent
// back), gets and lists push configs for her task; bob, a user of the
// same tenant, gets TaskNotFound for each operation; an admin token sees
// them.
func TestA2APushPerUser(t *testing.T) {
	t.Parallel()
	s := newJWTStack(t, stacktest.Options{})
	env := s.env
	alice, bob, carol := bearer(s.token(t, "alice")), bearer(s.token(t, "bob")), bearer(s.token(t, "carol"))
	var sent struct{ Task a2a.Task }
	a2aResult(t, env, "SendMessage", `{"message":{"messageId":"u1","role":"ROLE_USER","parts":[{"text":"hello mine"}]}}`, &sent, alice...)
	var pc a2a.TaskPushNotificationConfig
	// The authentication in the 0.3 spelling (the 1.0 specification's example).
	a2aResult(t, env, "CreateTaskPushNotificationConfig", `{"taskId":"`+sent.Task.ID+`","url":"https://93.184.216.34/alice","token":"tok-a",
		"authentication":{"schemes":["Basic"],"credentials":"YTpi"}}`, &pc, alice...)
	if pc.Authentication == nil || pc.Authentication.Scheme != "Basic" || pc.Authentication.Credentials != "" {
		t.Fatalf("the created config: %+v", pc)
	}
	for _, c := range [][2]string{{"CreateTaskPushNotificationConfig", `{"taskId":"` + sent.Task.ID + `","url":"https://93.184.216.34/bob"}`},
		{"GetTaskPushNotificationConfig", `{"taskId":"` + sent.Task.ID + `","id":"` + pc.ID + `"}`},
		{"ListTaskPushNotificationConfigs", `{"taskId":"` + sent.Task.ID + `"}`},
		{"DeleteTaskPushNotificationConfig", `{"taskId":"` + sent.Task.ID + `","id":"` + pc.ID + `"}`}} {
		if _, rep := a2aCall(t, env, "assistant", c[0], c[1], bob...); rep.Error == nil || rep.Error.Code != a2a.CodeTaskNotFound {
			t.Errorf("%s by another user: %+v", c[0], rep.Error)
		}
	}
	var list a2a.ListTaskPushNotificationConfigsResponse
	a2aResult(t, env, "ListTaskPushNotificationConfigs", `{"taskId":"`+sent.Task.ID+`"}`, &list, carol...)
	if len(list.Configs) != 1 || list.Configs[0].ID != pc.ID {
		t.Fatalf("the admin's list: %+v", list)
	}
}

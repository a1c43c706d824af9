package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/server"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/testwait"
)

// cancelDrivers are the stores the cancel tests run on.
var cancelDrivers = map[string]func(t *testing.T) store.Store{
	"sqlite":   func(*testing.T) store.Store { return nil },
	"postgres": func(t *testing.T) store.Store { return stacktest.Postgres(t, "cancel_api") },
}

// cancelKeys are the keys of the cancel tests: acme's admin and approver,
// and another tenant.
var cancelKeys = []config.Key{
	{Tenant: "acme", Secret: "sk-acme-admin-1", Role: config.RoleAdmin, Label: "acme"},
	{Tenant: "acme", Secret: "sk-acme-apprv-1", Role: config.RoleApprover, Label: "alice"},
	{Tenant: "acme", Secret: "sk-acme-callr-1", Role: config.RoleCaller, Label: "app"},
	{Tenant: "beta", Secret: "sk-beta-admin-1", Role: config.RoleAdmin, Label: "beta"},
}

var (
	acmeAdmin    = []string{"Authorization", "Bearer sk-acme-admin-1"}
	acmeApprover = []string{"Authorization", "Bearer sk-acme-apprv-1"}
	acmeCaller   = []string{"Authorization", "Bearer sk-acme-callr-1"}
	betaAdmin    = []string{"Authorization", "Bearer sk-beta-admin-1"}
)

// streamPost sends a streaming turn and reads its body to the end in the
// background: the returned channel gets the whole body once the server
// ends the stream. The response's headers are checked first (200).
func streamPost(t *testing.T, url, body string, hdr ...string) <-chan string {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	out := make(chan string, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- "error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		out <- fmt.Sprintf("%d\n%s", resp.StatusCode, b)
	}()
	return out
}

// threadCancel posts POST /v1/threads/{id}/cancel and decodes its answer.
func threadCancel(t *testing.T, env *stacktest.Env, id string, hdr ...string) (apiResp, server.ThreadCancel) {
	t.Helper()
	r := call(t, "POST", env.URL+"/v1/threads/"+id+"/cancel", "", hdr...)
	var c server.ThreadCancel
	if r.status == http.StatusOK {
		if err := json.Unmarshal(r.body, &c); err != nil {
			t.Fatalf("cancel answer: %v %s", err, r.body)
		}
	}
	return r, c
}

// TestThreadCancelRoute: POST /v1/threads/{id}/cancel on a durable chat
// turn held at the model: an approver key is refused (403) and another
// tenant is told the thread does not exist (404), both leaving the run
// alone; the caller's cancel answers cancelled once the thread no longer
// runs, the streaming client's response ends there (an error chunk, code
// cancelled), and a new message on
// the thread right after is answered (no 409, no lease wait). Cancelling
// again, or an idle thread, answers cancelled false; an unknown thread is
// 404. SQLite and PostgreSQL.
func TestThreadCancelRoute(t *testing.T) {
	t.Parallel()
	for driver, open := range cancelDrivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			env := stacktest.New(t, stacktest.Options{Store: open(t), Mode: config.Start, Keys: cancelKeys})
			release := env.Upstream.HoldOnce(script.When{LastUser: "slow"})
			t.Cleanup(release)
			session := []string{acmeAdmin[0], acmeAdmin[1], "x-stackbone-session", "stop-me"}

			streamed := streamPost(t, env.URL+"/v1/chat/completions",
				`{"model":"assistant","stream":true,"messages":[{"role":"user","content":"slow please"}]}`, session...)
			stacktest.WaitFor(t, "the model call to be held", func() bool { return env.Upstream.Count() == 1 })
			stacktest.WaitFor(t, "the thread to run", func() bool {
				th, err := env.Store.GetThread(t.Context(), "acme", "stop-me")
				return err == nil && th.Status == store.Running
			})

			if r, _ := threadCancel(t, env, "stop-me", acmeApprover...); r.status != http.StatusForbidden ||
				errorOf(t, r.body)["code"] != "forbidden_role" {
				t.Fatalf("approver cancel: %d %s", r.status, r.body)
			}
			if r, _ := threadCancel(t, env, "stop-me", betaAdmin...); r.status != http.StatusNotFound ||
				errorOf(t, r.body)["code"] != "not_found" {
				t.Fatalf("another tenant's cancel: %d %s", r.status, r.body)
			}
			if th := env.Thread(t, "acme", "stop-me"); th.Status != store.Running {
				t.Fatalf("a refused cancel stopped the run: thread %s", th.Status)
			}

			r, c := threadCancel(t, env, "stop-me", acmeAdmin...)
			if r.status != http.StatusOK || c.Object != "thread.cancel" || c.ID != "stop-me" || !c.Cancelled ||
				c.Status == store.Running || c.Status == "" {
				t.Fatalf("cancel: %d %s", r.status, r.body)
			}
			if th := env.Thread(t, "acme", "stop-me"); th.Status != c.Status {
				t.Fatalf("thread %s after the cancel answered %s", th.Status, c.Status)
			}
			body := testwait.Recv(t, streamed, "the streaming client's response to end")
			if !strings.HasPrefix(body, "200\n") || !strings.Contains(body, `"code":"cancelled"`) || strings.Contains(body, `"finish_reason":"stop"`) {
				t.Fatalf("the cancelled stream:\n%s", body)
			}

			next := call(t, "POST", env.URL+"/v1/chat/completions",
				`{"model":"assistant","messages":[{"role":"user","content":"right after"}]}`, session...)
			if next.status != http.StatusOK || !strings.Contains(string(next.body), "echo: right after") {
				t.Fatalf("the next message: %d %s", next.status, next.body)
			}
			if n := env.Upstream.Count(); n != 2 {
				t.Fatalf("the upstream got %d calls, want the cancelled one and the next", n)
			}

			// Idempotent: nothing runs now (a caller key may cancel too).
			r, again := threadCancel(t, env, "stop-me", acmeCaller...)
			if r.status != http.StatusOK || again.Cancelled || again.Status != store.Idle {
				t.Fatalf("cancel of the idle thread: %d %s", r.status, r.body)
			}
			if r, _ := threadCancel(t, env, "no-such-thread", acmeAdmin...); r.status != http.StatusNotFound {
				t.Fatalf("cancel of an unknown thread: %d %s", r.status, r.body)
			}
			if r := call(t, "POST", env.URL+"/v1/threads/stop-me/cancel", `{"force":true}`, acmeAdmin...); r.status != http.StatusBadRequest {
				t.Fatalf("cancel with an unknown field: %d %s", r.status, r.body)
			}
		})
	}
}

// sseEvents reads a Responses stream's events as they come: each event's
// data on the returned channel, which is closed when the stream ends.
func sseEvents(t *testing.T, url, body string, hdr ...string) <-chan map[string]any {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	out := make(chan map[string]any, 64)
	go func() {
		defer close(out)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			var e map[string]any
			if ok && json.Unmarshal([]byte(data), &e) == nil {
				out <- e
			}
		}
	}()
	return out
}

// TestResponsesForegroundStreamCancel: a foreground (not background)
// Responses stream held at the model is cancelled by its id from another
// request: the cancel answers the response cancelled, the stream its client
// still reads ends with it cancelled, GET reads it cancelled, and the
// conversation takes the next turn at once. Cancelling it again answers
// it as it is. SQLite and PostgreSQL.
func TestResponsesForegroundStreamCancel(t *testing.T) {
	t.Parallel()
	for driver, open := range cancelDrivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			env := stacktest.New(t, stacktest.Options{Store: open(t), Mode: config.Start, Keys: cancelKeys})
			release := env.Upstream.HoldOnce(script.When{LastUser: "slow"})
			t.Cleanup(release)

			events := sseEvents(t, env.URL+"/v1/responses", `{"model":"assistant","stream":true,"input":"slow please"}`, acmeAdmin...)
			created := testwait.Recv(t, events, "response.created")
			resp, _ := created["response"].(map[string]any)
			id, _ := resp["id"].(string)
			if created["type"] != "response.created" || id == "" {
				t.Fatalf("first event: %v", created)
			}
			stacktest.WaitFor(t, "the model call to be held", func() bool { return env.Upstream.Count() == 1 })

			if r := call(t, "POST", env.URL+"/v1/responses/"+id+"/cancel", "", betaAdmin...); r.status != http.StatusNotFound {
				t.Fatalf("another tenant's cancel: %d %s", r.status, r.body)
			}
			r := call(t, "POST", env.URL+"/v1/responses/"+id+"/cancel", "", acmeAdmin...)
			var cancelled struct{ ID, Status string }
			if r.status != http.StatusOK || json.Unmarshal(r.body, &cancelled) != nil || cancelled.ID != id || cancelled.Status != "cancelled" {
				t.Fatalf("cancel: %d %s", r.status, r.body)
			}
			var last map[string]any
			for e := range events {
				last = e
			}
			end, _ := last["response"].(map[string]any)
			if last["type"] != "response.failed" || end["status"] != "cancelled" {
				t.Fatalf("the stream's last event: %v", last)
			}
			got := call(t, "GET", env.URL+"/v1/responses/"+id, "", acmeAdmin...)
			var read struct{ Status string }
			if got.status != http.StatusOK || json.Unmarshal(got.body, &read) != nil || read.Status != "cancelled" {
				t.Fatalf("GET after the cancel: %d %s", got.status, got.body)
			}
			if again := call(t, "POST", env.URL+"/v1/responses/"+id+"/cancel", "", acmeAdmin...); again.status != http.StatusOK ||
				!strings.Contains(string(again.body), `"status":"cancelled"`) {
				t.Fatalf("cancel again: %d %s", again.status, again.body)
			}

			next := call(t, "POST", env.URL+"/v1/responses",
				fmt.Sprintf(`{"model":"assistant","input":"right after","previous_response_id":%q}`, id), acmeAdmin...)
			if next.status != http.StatusOK || !strings.Contains(string(next.body), "echo: right after") {
				t.Fatalf("the next turn: %d %s", next.status, next.body)
			}
			if n := env.Upstream.Count(); n != 2 {
				t.Fatalf("the upstream got %d calls, want the cancelled one and the next", n)
			}
		})
	}
}

// TestThreadCancelRouteWaiting: POST /v1/threads/{id}/cancel on a thread
// whose turn waits on an approval: refused for an approver key (403) and
// another tenant (404), changing nothing; the caller's cancel answers
// cancelled true and status idle, the decision is closed (decided by the
// canceller, via cancel) and approving it afterwards is refused, the tool
// never ran, and the next message is answered with the model seeing the
// call's cancelled result. SQLite and PostgreSQL.
func TestThreadCancelRouteWaiting(t *testing.T) {
	t.Parallel()
	for driver, open := range cancelDrivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			env := stacktest.New(t, stacktest.Options{Store: open(t), Mode: config.Start, Keys: cancelKeys})
			session := []string{acmeAdmin[0], acmeAdmin[1], "x-stackbone-session", "wait-me"}
			if r := call(t, "POST", env.URL+"/v1/chat/completions",
				`{"model":"assistant","messages":[{"role":"user","content":"refund please"}]}`, session...); r.status != http.StatusOK {
				t.Fatalf("the pausing turn: %d %s", r.status, r.body)
			}
			its, err := env.Store.ListInterrupts(t.Context(), "acme", store.InterruptFilter{ThreadID: "wait-me"})
			if err != nil || len(its) != 1 || env.Thread(t, "acme", "wait-me").Status != store.Waiting {
				t.Fatalf("want the thread waiting on one decision: %v %v", its, err)
			}
			calls := env.Upstream.Count()

			if r, _ := threadCancel(t, env, "wait-me", acmeApprover...); r.status != http.StatusForbidden {
				t.Fatalf("approver cancel: %d %s", r.status, r.body)
			}
			if r, _ := threadCancel(t, env, "wait-me", betaAdmin...); r.status != http.StatusNotFound {
				t.Fatalf("another tenant's cancel: %d %s", r.status, r.body)
			}
			if th := env.Thread(t, "acme", "wait-me"); th.Status != store.Waiting {
				t.Fatalf("a refused cancel changed the thread: %s", th.Status)
			}

			r, c := threadCancel(t, env, "wait-me", acmeCaller...)
			if r.status != http.StatusOK || !c.Cancelled || c.Status != store.Idle {
				t.Fatalf("cancel of the waiting thread: %d %s", r.status, r.body)
			}
			it, err := env.Store.GetInterrupt(t.Context(), "acme", its[0].ID)
			if err != nil || it.Status != store.Rejected || it.Decision == nil || it.Decision.Via != store.ViaCancel || it.Decision.By != "app" {
				t.Fatalf("the decision after the cancel: %+v %v", it, err)
			}
			if r := call(t, "POST", env.URL+"/v1/hitl/"+its[0].ID+"/approve", "", acmeAdmin...); r.status != http.StatusConflict {
				t.Fatalf("approving the cancelled decision: %d %s", r.status, r.body)
			}
			if n := env.Calls.Get("refund"); n != 0 {
				t.Fatalf("refund ran %d times", n)
			}
			if n := env.Upstream.Count(); n != calls {
				t.Fatalf("the cancel called the model: %d requests, had %d", n, calls)
			}
			if r, again := threadCancel(t, env, "wait-me", acmeCaller...); r.status != http.StatusOK || again.Cancelled {
				t.Fatalf("cancel again: %d %s", r.status, r.body)
			}

			next := call(t, "POST", env.URL+"/v1/chat/completions",
				`{"model":"assistant","messages":[{"role":"user","content":"right after"}]}`, session...)
			if next.status != http.StatusOK || !strings.Contains(string(next.body), "echo: right after") {
				t.Fatalf("the next message: %d %s", next.status, next.body)
			}
			last, _ := env.Upstream.Last()
			seen := false
			for _, m := range last.Request.Messages {
				seen = seen || (m.ToolCallID == its[0].ToolCallID && m.Content == engine.CancelledCallResult)
			}
			if !seen {
				t.Fatalf("the next turn's model input lacks the cancelled call's result: %+v", last.Request.Messages)
			}
		})
	}
}

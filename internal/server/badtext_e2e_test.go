package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// TestBadTextIs400OnBothDrivers: a NUL byte or invalid UTF-8 in a path id,
// a query filter, an AG-UI run id or a client tool schema is a 400 (or the
// AG-UI RUN_ERROR invalid_request) in the wire's envelope on SQLite and
// PostgreSQL alike, never a 500, and stores nothing.
func TestBadTextIs400OnBothDrivers(t *testing.T) {
	t.Parallel()
	drivers := map[string]func(t *testing.T) store.Store{
		"sqlite":   func(t *testing.T) store.Store { return nil },
		"postgres": func(t *testing.T) store.Store { return stacktest.Postgres(t, "badtext") },
	}
	for name, open := range drivers {
		t.Run(name, func(t *testing.T) {
			env := stacktest.New(t, stacktest.Options{Store: open(t)})
			if r := call(t, "POST", env.URL+"/v1/chat/completions",
				`{"model":"assistant","messages":[{"role":"user","content":"hello"}]}`, "x-stackbone-session", "good"); r.status != 200 {
				t.Fatalf("good turn: %d %s", r.status, r.body)
			}
			for _, bad := range []string{"%00", "%ff", "a%00b", "%c3%28"} {
				for _, path := range []string{
					"/v1/threads/" + bad,
					"/v1/threads/" + bad + "/events",
					"/v1/hitl/" + bad,
					"/v1/threads?agent=" + bad,
					"/v1/hitl?thread=" + bad,
					"/v1/hitl?agent=" + bad,
				} {
					r := call(t, "GET", env.URL+path, "")
					if r.status != 400 || !strings.Contains(string(r.body), `"type":"invalid_request_error"`) {
						t.Errorf("GET %s: %d %s", path, r.status, r.body)
					}
				}
				for _, verb := range []string{"approve", "reject"} {
					r := call(t, "POST", env.URL+"/v1/hitl/"+bad+"/"+verb, `{}`)
					if r.status != 400 {
						t.Errorf("POST /v1/hitl/%s/%s: %d %s", bad, verb, r.status, r.body)
					}
				}
			}
			// A durable turn whose client tool schema holds invalid UTF-8.
			body := "{\"model\":\"assistant\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[{\"type\":\"function\"," +
				"\"function\":{\"name\":\"pick\",\"parameters\":{\"type\":\"object\",\"description\":\"\xff\"}}}]}"
			if r := call(t, "POST", env.URL+"/v1/chat/completions", body, "x-stackbone-session", "schema"); r.status != 400 {
				t.Errorf("client tool schema with invalid UTF-8: %d %s", r.status, r.body)
			}
			// AG-UI: a run id, a thread id, an interrupt id with a NUL byte.
			if s := aguiPost(t, env, "assistant", aguiInput("agui-wait", "r0", "refund please")); !strings.Contains(s.body, "refund") {
				t.Fatalf("pause: %s", s.body)
			}
			for what, body := range map[string]string{
				"run id":    strings.Replace(aguiInput("agui-bad", "RUN", "hi"), `"RUN"`, `"r\u0000"`, 1),
				"thread id": strings.Replace(aguiInput("THREAD", "r1", "hi"), `"THREAD"`, `"t\u0000"`, 1),
				"interrupt id": strings.Replace(aguiInput("agui-wait", "r2", "hi", `"resume":[{"interruptId":"INT","status":"resolved","payload":{"approved":true}}]`),
					`"INT"`, `"i\u0000"`, 1),
			} {
				s := aguiPost(t, env, "assistant", body)
				// The wire's id check (invalid_id) answers before the store would.
				if len(s.events) == 0 || s.events[len(s.events)-1]["type"] != "RUN_ERROR" || s.events[len(s.events)-1]["code"] != "invalid_id" {
					t.Errorf("AG-UI %s with NUL: %d %s", what, s.status, s.body)
				}
			}
			ths, err := env.Store.ListThreads(context.Background(), "dev", store.ThreadFilter{})
			if err != nil || len(ths) != 2 || ths[0].ID != "agui-wait" || ths[0].Status != store.Waiting || ths[1].ID != "good" {
				t.Fatalf("threads after refused requests: %+v %v", ths, err)
			}
			if strings.Contains(env.Logs.String(), "level=ERROR") {
				t.Fatalf("a bad value was logged as a server error:\n%s", env.Logs.String())
			}
		})
	}
}

package server_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// TestAGUIThreadIDsCheckedLikeSessions sends AG-UI requests whose threadId,
// runId, interruptId or message id is 1 MB long or holds NUL or a U+202E
// bidi override, on SQLite and PostgreSQL: each is a RUN_ERROR naming the
// field (invalid_id) before anything is stored or the model is called, and
// the OpenAI and Anthropic wires refuse the same id as a session key with
// the same check.
func TestAGUIThreadIDsCheckedLikeSessions(t *testing.T) {
	t.Parallel()
	drivers := map[string]func(t *testing.T) store.Store{
		"sqlite":   func(*testing.T) store.Store { return nil },
		"postgres": func(t *testing.T) store.Store { return stacktest.Postgres(t, "agui_ids") },
	}
	bad := map[string]string{
		"1MB":    strings.Repeat("t", 1<<20),
		"NUL":    "thread\x00one",
		"U+202E": "thread\u202Etxt.exe",
	}
	for driver, open := range drivers {
		t.Run(driver, func(t *testing.T) {
			env := stacktest.New(t, stacktest.Options{Store: open(t)})
			for name, id := range bad {
				msg := func(id string) string {
					b, _ := json.Marshal(map[string]any{"id": id, "role": "user", "content": "hi"})
					return string(b)
				}
				bodies := map[string]string{
					"threadId":       fmt.Sprintf(`{"threadId":%s,"runId":"r1","messages":[%s]}`, aguiJSON(id), msg("m1")),
					"runId":          fmt.Sprintf(`{"threadId":"th-ok","runId":%s,"messages":[%s]}`, aguiJSON(id), msg("m1")),
					"messages[0].id": fmt.Sprintf(`{"threadId":"th-ok","runId":"r1","messages":[%s]}`, msg(id)),
					"resume[0].interruptId": fmt.Sprintf(`{"threadId":"th-ok","runId":"r1","messages":[],"resume":[{"interruptId":%s,"status":"resolved","payload":{"approved":true}}]}`,
						aguiJSON(id)),
				}
				for param, body := range bodies {
					t.Run(name+"/"+param, func(t *testing.T) {
						e := checkRunError(t, aguiPost(t, env, "assistant", body), "invalid_id")
						m := e["message"].(string)
						if !strings.HasPrefix(m, "`"+param+"` ") || !strings.Contains(m, "at most 256 bytes") {
							t.Fatalf("message %q does not name %s and the rule", m, param)
						}
						if len(m) > 400 {
							t.Fatalf("the error echoes the id: %d bytes", len(m))
						}
					})
				}
			}
			if strings.Contains(env.Logs.String(), strings.Repeat("t", 1000)) {
				t.Error("the 1 MB id reached the log")
			}
			threads, err := env.Store.ListThreads(t.Context(), "dev", store.ThreadFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if len(threads) != 0 {
				t.Fatalf("refused requests stored %d thread(s), e.g. %.40q", len(threads), threads[0].ID)
			}
			if env.Upstream.Count() != 0 {
				t.Fatal("a refused request reached the model")
			}

			// The same check guards the session key of the other wires.
			r := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"hi"}]}`,
				"x-stackbone-session", bad["U+202E"])
			if r.status != 400 || !strings.Contains(string(r.body), "invalid_id") || !strings.Contains(string(r.body), "x-stackbone-session") {
				t.Fatalf("session key with U+202E: %d %s", r.status, r.body)
			}
			r = call(t, "POST", env.URL+"/v1/messages", `{"model":"assistant","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`,
				"x-stackbone-session", bad["U+202E"], "anthropic-version", "2023-06-01")
			if r.status != 400 || !strings.Contains(string(r.body), `"type":"invalid_request_error"`) || !strings.Contains(string(r.body), "x-stackbone-session") {
				t.Fatalf("Anthropic session key with U+202E: %d %s", r.status, r.body)
			}
			// A good id still works.
			checkTerminal(t, aguiPost(t, env, "assistant", aguiInput("th-good", "run-good", "hi")))
			if th := env.Thread(t, "dev", "th-good"); th.ID != "th-good" {
				t.Fatalf("thread %+v", th)
			}
		})
	}
}

// TestAGUIOverLimitBodyIs413 checks that a body over the limit is an HTTP
// 413 on the AG-UI route, as on the other wires (not a 200 stream holding a
// RUN_ERROR), and stores nothing.
func TestAGUIOverLimitBodyIs413(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{MaxBodyBytes: 2048})
	body := aguiInput("th-big", "r1", strings.Repeat("x", 4096))
	s := aguiPost(t, env, "assistant", body)
	if s.status != 413 {
		t.Fatalf("want 413, got %d %s: %s", s.status, s.header.Get("Content-Type"), s.body)
	}
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(s.body), &e); err != nil || e.Error.Code != "request_too_large" || !strings.Contains(e.Error.Message, "2048") {
		t.Fatalf("body %s (%v)", s.body, err)
	}
	chat := call(t, "POST", env.URL+"/v1/chat/completions",
		`{"model":"assistant","messages":[{"role":"user","content":"`+strings.Repeat("x", 4096)+`"}]}`)
	if chat.status != s.status {
		t.Fatalf("the OpenAI wire answers %d, AG-UI %d", chat.status, s.status)
	}
	if _, err := env.Store.GetThread(t.Context(), "dev", "th-big"); err == nil {
		t.Fatal("an over-limit request created a thread")
	}
	// Under the limit the route still streams.
	checkTerminal(t, aguiPost(t, env, "assistant", aguiInput("th-small", "r1", "hi")))
}

// TestThreadsListRefusesUnknownStatus checks that GET /v1/threads answers
// 400 for a status that does not exist, like GET /v1/hitl, and still
// filters by a real one.
func TestThreadsListRefusesUnknownStatus(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	checkTerminal(t, aguiPost(t, env, "assistant", aguiInput("th-1", "r1", "hi")))
	for _, path := range []string{"/v1/threads?status=bogus", "/v1/hitl?status=bogus"} {
		r := call(t, "GET", env.URL+path, "")
		if r.status != 400 || !strings.Contains(string(r.body), `"param":"status"`) {
			t.Errorf("GET %s: %d %s", path, r.status, r.body)
		}
	}
	for status, want := range map[string]int{"idle": 1, "waiting": 0, "": 1} {
		r := call(t, "GET", env.URL+"/v1/threads?status="+status, "")
		var page struct {
			Data []store.Thread `json:"data"`
		}
		if err := json.Unmarshal(r.body, &page); r.status != 200 || err != nil || len(page.Data) != want {
			t.Errorf("GET /v1/threads?status=%s: %d %s", status, r.status, r.body)
		}
	}
}

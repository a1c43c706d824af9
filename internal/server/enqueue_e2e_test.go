package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/testwait"
)

// queued is how many turns wait in a thread's queue.
func queued(t *testing.T, env *stacktest.Env, thread string) int {
	t.Helper()
	qs, err := env.Store.Queue(context.Background(), "dev", thread)
	if err != nil {
		t.Fatal(err)
	}
	return len(qs)
}

// busyThread answers "hi" on session, then starts a turn whose model call
// is held until release, and returns once that call is under way: running
// gets the held turn's answer; before is the model call count before it.
func busyThread(t *testing.T, env *stacktest.Env, session string) (release func(), running <-chan apiResp, before int) {
	t.Helper()
	if r := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"hi"}]}`,
		"x-stackbone-session", session); r.status != 200 {
		t.Fatalf("first turn: %d %s", r.status, r.body)
	}
	release = env.Upstream.HoldOnce(script.When{LastUser: "long story"})
	t.Cleanup(release)
	before = env.Upstream.Count()
	c := make(chan apiResp, 1)
	go func() {
		c <- call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"tell me a long story"}]}`,
			"x-stackbone-session", session)
	}()
	testwait.Until(t, "the long story's model call", func() bool { return env.Upstream.Count() > before })
	return release, c, before
}

// TestEnqueueRunsFollowUpsInOrder: three follow-ups sent with
// x-stackbone-multitask: enqueue while a turn runs wait, each request open,
// and run after it, in the order sent, each once: every request gets its
// own answer, the model sees each one after the answers before it, and the
// thread holds the five turns in order.
func TestEnqueueRunsFollowUpsInOrder(t *testing.T) {
	for driver, open := range branchDrivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			env := stacktest.New(t, stacktest.Options{Store: open(t)})
			const session = "eq-order"
			release, running, before := busyThread(t, env, session)

			answers := make([]chan apiResp, 3)
			for i := range answers {
				answers[i] = make(chan apiResp, 1)
				body := fmt.Sprintf(`{"model":"assistant","stream":%v,"messages":[{"role":"user","content":"follow-up %d"}]}`, i == 1, i+1)
				go func() {
					answers[i] <- call(t, "POST", env.URL+"/v1/chat/completions", body, "x-stackbone-session", session, "x-stackbone-multitask", "enqueue")
				}()
				testwait.Until(t, "follow-up to be queued", func() bool { return queued(t, env, session) == i+1 })
			}
			if n := env.Upstream.Count(); n != before+1 {
				t.Fatalf("queued follow-ups called the model: %d calls, want 1", n-before)
			}
			release()
			if r := testwait.Recv(t, running, "the long story"); r.status != 200 || !strings.Contains(string(r.body), "echo: tell me a long story") {
				t.Fatalf("the running turn: %d %s", r.status, r.body)
			}
			for i, c := range answers {
				r := testwait.Recv(t, c, "a follow-up's answer")
				if want := fmt.Sprintf("echo: follow-up %d", i+1); r.status != 200 || !strings.Contains(string(r.body), want) {
					t.Fatalf("follow-up %d: %d %s; want %q", i+1, r.status, r.body, want)
				}
			}
			if n := env.Upstream.Count(); n != before+4 {
				t.Fatalf("%d model calls for four turns", n-before)
			}
			want := []string{"user:hi", "assistant:echo: hi", "user:tell me a long story", "assistant:echo: tell me a long story",
				"user:follow-up 1", "assistant:echo: follow-up 1", "user:follow-up 2", "assistant:echo: follow-up 2",
				"user:follow-up 3", "assistant:echo: follow-up 3"}
			if got := headLines(t, env, session); !slices.Equal(got, want) {
				t.Fatalf("thread:\n%q\nwant\n%q", got, want)
			}
			if got := modelSaw(env, "follow-up 3"); len(got) != 1 || !slices.Equal(got[0], want[:len(want)-1]) {
				t.Fatalf("the model saw %q for the last follow-up", got)
			}
			if n := queued(t, env, session); n != 0 {
				t.Fatalf("%d turns left in the queue", n)
			}
			// An idle thread runs an enqueue follow-up at once.
			if r := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"at once"}]}`,
				"x-stackbone-session", session, "x-stackbone-multitask", "enqueue"); r.status != http.StatusOK || !strings.Contains(string(r.body), "echo: at once") {
				t.Fatalf("enqueue on an idle thread: %d %s", r.status, r.body)
			}
		})
	}
}

// TestQueueAPI: GET /v1/threads/{id}/queue lists a queued follow-up, DELETE
// removes it before it runs (its request ends cancelled, the model never
// sees it), and a second DELETE, or an unknown thread, is a 404.
func TestQueueAPI(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	const session = "eq-api"
	release, running, before := busyThread(t, env, session)
	waiting := make(chan apiResp, 1)
	go func() {
		waiting <- call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"never mind"}]}`,
			"x-stackbone-session", session, "x-stackbone-multitask", "enqueue")
	}()
	testwait.Until(t, "the follow-up to be queued", func() bool { return queued(t, env, session) == 1 })
	r := call(t, "GET", env.URL+"/v1/threads/"+session+"/queue", "")
	var list struct {
		Data []struct {
			ID       string `json:"id"`
			Position int    `json:"position"`
			Messages []struct{ Role, Content string }
		} `json:"data"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil || r.status != 200 || len(list.Data) != 1 ||
		list.Data[0].Position != 1 || len(list.Data[0].Messages) != 1 || list.Data[0].Messages[0].Content != "never mind" {
		t.Fatalf("GET queue: %d %s", r.status, r.body)
	}
	id := list.Data[0].ID
	if r := call(t, "DELETE", env.URL+"/v1/threads/"+session+"/queue/"+id, ""); r.status != 200 || !strings.Contains(string(r.body), `"deleted":true`) {
		t.Fatalf("DELETE queued: %d %s", r.status, r.body)
	}
	if r := testwait.Recv(t, waiting, "the removed follow-up's answer"); r.status == 200 && !strings.Contains(string(r.body), "cancelled") ||
		strings.Contains(string(r.body), "echo: never mind") {
		t.Fatalf("the removed follow-up's request: %d %s; want it ended cancelled", r.status, r.body)
	}
	if r := call(t, "DELETE", env.URL+"/v1/threads/"+session+"/queue/"+id, ""); r.status != http.StatusNotFound {
		t.Fatalf("DELETE again: %d %s; want 404", r.status, r.body)
	}
	if r := call(t, "GET", env.URL+"/v1/threads/nope/queue", ""); r.status != http.StatusNotFound {
		t.Fatalf("GET queue of an unknown thread: %d %s; want 404", r.status, r.body)
	}
	release()
	testwait.Recv(t, running, "the long story")
	waitIdle(t, env, session)
	if got := modelSaw(env, "never mind"); len(got) != 0 {
		t.Fatalf("the model saw the removed follow-up: %q", got)
	}
	if n := env.Upstream.Count(); n != before+1 {
		t.Fatalf("%d model calls, want 1", n-before)
	}
}

// TestEnqueueBehindApproval: a thread paused on a decision (a refund that
// needs approval) keeps enqueue follow-ups waiting, each request open,
// while a follow-up without the strategy still gets 409 approval_pending.
// Once the refund is approved over the API (POST /v1/hitl/{id}/approve),
// the paused turn resumes and ends (the refund runs once, its answer is
// stored), and only then do the queued follow-ups run, in order, each
// once, each with the answers before it in front of the model.
func TestEnqueueBehindApproval(t *testing.T) {
	for driver, open := range branchDrivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			env := stacktest.New(t, stacktest.Options{Store: open(t)})
			const session = "eq-approval"
			r := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"please refund my order"}]}`,
				"x-stackbone-session", session)
			if r.status != 200 || !strings.Contains(string(r.body), `"tool_calls"`) {
				t.Fatalf("the refund turn: %d %s; want it paused on the call", r.status, r.body)
			}
			it := pendingOf(t, env, session)
			before := env.Upstream.Count()

			answers := make([]chan apiResp, 2)
			for i := range answers {
				answers[i] = make(chan apiResp, 1)
				body := fmt.Sprintf(`{"model":"assistant","stream":%v,"messages":[{"role":"user","content":"follow-up %d"}]}`, i == 1, i+1)
				go func() {
					answers[i] <- call(t, "POST", env.URL+"/v1/chat/completions", body, "x-stackbone-session", session, "x-stackbone-multitask", "enqueue")
				}()
				testwait.Until(t, "the follow-up to be queued", func() bool { return queued(t, env, session) == i+1 })
			}
			r = call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"not queued"}]}`,
				"x-stackbone-session", session)
			if r.status != http.StatusConflict || !strings.Contains(string(r.body), "approval_pending") {
				t.Fatalf("a follow-up without enqueue: %d %s; want 409 approval_pending", r.status, r.body)
			}
			for i, c := range answers {
				select {
				case a := <-c:
					t.Fatalf("follow-up %d was answered before the decision: %d %s", i+1, a.status, a.body)
				default:
				}
			}
			if n := env.Upstream.Count(); n != before {
				t.Fatalf("%d model calls before the decision", n-before)
			}
			if env.Calls.Get("refund") != 0 {
				t.Fatal("the refund ran before its approval")
			}

			if r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", ""); r.status != 200 {
				t.Fatalf("approve: %d %s", r.status, r.body)
			}
			for i, c := range answers {
				a := testwait.Recv(t, c, "a queued follow-up's answer")
				if want := fmt.Sprintf("echo: follow-up %d", i+1); a.status != 200 || !strings.Contains(string(a.body), want) {
					t.Fatalf("follow-up %d: %d %s; want %q", i+1, a.status, a.body, want)
				}
			}
			waitIdle(t, env, session)
			if n := env.Calls.Get("refund"); n != 1 {
				t.Fatalf("the refund ran %d times; want once", n)
			}
			if n := env.Upstream.Count(); n != before+3 {
				t.Fatalf("%d model calls after the decision; want 3 (the resumed turn, two follow-ups)", n-before)
			}
			lines := headLines(t, env, session)
			if len(lines) != 8 || lines[0] != "user:please refund my order" || lines[1] != "assistant:" || !strings.HasPrefix(lines[2], `tool:{"refunded":19.99`) ||
				!strings.HasPrefix(lines[3], "assistant:Refund result: ") ||
				!slices.Equal(lines[4:], []string{"user:follow-up 1", "assistant:echo: follow-up 1", "user:follow-up 2", "assistant:echo: follow-up 2"}) {
				t.Fatalf("thread:\n%q\nwant the refund turn resumed to its answer, then the follow-ups in order", lines)
			}
			if got := modelSaw(env, "follow-up 1"); len(got) != 1 || !slices.Equal(got[0], lines[:5]) {
				t.Fatalf("the first follow-up's model saw %q; want the resumed turn's answer before it", got)
			}
			if got := modelSaw(env, "not queued"); len(got) != 0 {
				t.Fatalf("the refused follow-up reached the model: %q", got)
			}
			if n := queued(t, env, session); n != 0 {
				t.Fatalf("%d turns left in the queue", n)
			}
		})
	}
}

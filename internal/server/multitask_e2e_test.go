package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/testwait"
)

// followStream starts a streamed Chat Completions turn on session and keeps
// reading it (its client stays connected) until the turn's stream ends;
// the returned channel gets what it read.
func followStream(t *testing.T, env *stacktest.Env, session, body string) <-chan string {
	t.Helper()
	req, _ := http.NewRequest("POST", env.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-stackbone-session", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(resp.Body)
	first, err := rd.ReadString('\n')
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the running turn: %d %v", resp.StatusCode, err)
	}
	out := make(chan string, 1)
	go func() {
		defer resp.Body.Close()
		rest, _ := io.ReadAll(rd)
		out <- first + string(rest)
	}()
	return out
}

// TestDoubleTextStrategies: a follow-up sent while a turn runs, its client
// still reading, on Chat Completions (x-stackbone-multitask), AG-UI
// (forwardedProps.multitask) and Responses (metadata.multitask):
//   - reject (the default): 409 run_in_progress, nothing changes;
//   - interrupt: the running turn is cancelled (its stream ends cancelled)
//     and the follow-up is answered with the first question still in front
//     of the model;
//   - rollback: the running turn is cancelled and its messages dropped: the
//     model sees the follow-up without the first question, which stays on
//     the thread's earlier branch.
func TestDoubleTextStrategies(t *testing.T) {
	for driver, open := range branchDrivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			env := stacktest.New(t, stacktest.Options{Store: open(t)})
			t.Cleanup(env.Upstream.Stall(script.When{LastUser: "long story"}))
			start := func(session string) <-chan string {
				if r := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"hi"}]}`,
					"x-stackbone-session", session); r.status != 200 {
					t.Fatalf("first turn: %d %s", r.status, r.body)
				}
				return followStream(t, env, session, `{"model":"assistant","stream":true,"messages":[{"role":"user","content":"tell me a long story"}]}`)
			}
			followUp := `{"model":"assistant","messages":[{"role":"user","content":"and a joke"}]}`

			// reject
			running := start("mt-reject")
			r := call(t, "POST", env.URL+"/v1/chat/completions", followUp, "x-stackbone-session", "mt-reject")
			if r.status != http.StatusConflict || !strings.Contains(string(r.body), "run_in_progress") {
				t.Fatalf("reject: %d %s", r.status, r.body)
			}

			// interrupt
			running = start("mt-interrupt")
			r = call(t, "POST", env.URL+"/v1/chat/completions", followUp, "x-stackbone-session", "mt-interrupt", "x-stackbone-multitask", "interrupt")
			if r.status != 200 || !strings.Contains(string(r.body), "echo: and a joke") {
				t.Fatalf("interrupt: %d %s", r.status, r.body)
			}
			if got := <-running; !strings.Contains(got, "cancelled") {
				t.Fatalf("interrupt: the running turn's stream ended with %q; want cancelled", got)
			}
			want := []string{"user:hi", "assistant:echo: hi", "user:tell me a long story", "user:and a joke"}
			if got := modelSaw(env, "and a joke"); len(got) != 1 || !slices.Equal(got[0], want) {
				t.Fatalf("interrupt: the model saw %q; want %q", got, want)
			}

			// rollback
			running = start("mt-rollback")
			r = call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"a joke instead"}]}`,
				"x-stackbone-session", "mt-rollback", "x-stackbone-multitask", "rollback")
			if r.status != 200 || !strings.Contains(string(r.body), "echo: a joke instead") {
				t.Fatalf("rollback: %d %s", r.status, r.body)
			}
			<-running
			want = []string{"user:hi", "assistant:echo: hi", "user:a joke instead"}
			if got := modelSaw(env, "a joke instead"); len(got) != 1 || !slices.Equal(got[0], want) {
				t.Fatalf("rollback: the model saw %q; want %q", got, want)
			}
			bs, err := env.Store.Branches(context.Background(), "dev", "mt-rollback")
			if err != nil || len(bs) != 2 {
				t.Fatalf("rollback: branches %+v, %v; want the rolled-back line kept beside the head", bs, err)
			}

			// AG-UI forwardedProps and Responses metadata choose it too.
			running = start("mt-agui")
			s := aguiPost(t, env, "assistant", `{"threadId":"mt-agui","runId":"r9","messages":[{"id":"j1","role":"user","content":"and a joke"}],"forwardedProps":{"multitask":"interrupt"}}`)
			if !aguiText(s, "echo: and a joke") {
				t.Fatalf("AG-UI interrupt: %d %s", s.status, s.body)
			}
			<-running
			running = start("mt-resp")
			r = call(t, "POST", env.URL+"/v1/responses", `{"model":"assistant","input":"and a joke","metadata":{"multitask":"interrupt"}}`,
				"x-stackbone-session", "mt-resp")
			if r.status != 200 || !strings.Contains(string(r.body), "echo: and a joke") {
				t.Fatalf("Responses interrupt: %d %s", r.status, r.body)
			}
			<-running

			// An unknown strategy is a 400 that changes nothing.
			for _, v := range []string{"later", "queue"} {
				r = call(t, "POST", env.URL+"/v1/chat/completions", followUp, "x-stackbone-session", "mt-reject", "x-stackbone-multitask", v)
				if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "multitask") {
					t.Fatalf("multitask %s: %d %s", v, r.status, r.body)
				}
			}
		})
	}
}

// aguiText reports whether an AG-UI stream finished with text as its
// answer.
func aguiText(s aguiStream, text string) bool {
	got, finished := "", false
	for _, e := range s.events {
		switch e["type"] {
		case "TEXT_MESSAGE_CONTENT":
			got += e["delta"].(string)
		case "RUN_FINISHED":
			finished = true
		}
	}
	return s.status == 200 && finished && got == text
}

// TestDoubleTextLaggingClient: an AG-UI client sends its follow-up with
// the messages it holds while the running turn goes on, named by id, and
// its view lags the thread (it has the turn's tool call, not yet the tool's
// result). The follow-up neither repeats nor branches: with enqueue it runs
// after the turn's answer, with that answer in front of the model; with
// interrupt it goes on after the cut answer. The thread keeps one branch,
// and the tool ran once per turn.
func TestDoubleTextLaggingClient(t *testing.T) {
	for driver, open := range branchDrivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			env := stacktest.New(t, stacktest.Options{Store: open(t), Script: multitaskScript})
			afterTool := func(id string) script.When {
				return script.When{LastUser: id + " weather report", LastTool: "get_weather"}
			}
			// run starts thread id's first run and returns once its model
			// call after the tool is held (or cut), with the run's stream
			// to come and the id of its assistant message.
			run := func(id string) (<-chan aguiStream, string) {
				before := env.Upstream.Count()
				c := make(chan aguiStream, 1)
				go func() {
					c <- aguiPost(t, env, "assistant", fmt.Sprintf(`{"threadId":%q,"runId":"r1","messages":[{"id":"u1","role":"user","content":"%s weather report"}]}`, id, id))
				}()
				testwait.Until(t, "the model call after the tool", func() bool { return env.Upstream.Count() == before+2 })
				msgs, err := env.Store.Messages(context.Background(), "dev", id)
				if err != nil || len(msgs) != 3 || len(msgs[1].ToolCalls) != 1 {
					t.Fatalf("the running turn holds %+v (%v); want the question, the tool call and its result", msgs, err)
				}
				return c, msgs[1].ID
			}
			followUp := func(id, strategy, callMsg string) string {
				return fmt.Sprintf(`{"threadId":%q,"runId":"r2","messages":[{"id":"u1","role":"user","content":"%s weather report"},`+
					`{"id":%q,"role":"assistant","content":"Checking."},{"id":"u2","role":"user","content":"%s and a joke"}],"forwardedProps":{"multitask":%q}}`,
					id, id, callMsg, id, strategy)
			}
			full := `Tool said: {"city":"Paris","temp_c":21}, sunny all morning, clouds after noon, a light wind from the west.`

			release := env.Upstream.HoldOnce(afterTool("lag-eq"))
			t.Cleanup(release)
			first, callMsg := run("lag-eq")
			second := make(chan aguiStream, 1)
			go func() { second <- aguiPost(t, env, "assistant", followUp("lag-eq", "enqueue", callMsg)) }()
			testwait.Until(t, "the follow-up to be queued", func() bool { return queued(t, env, "lag-eq") == 1 })
			release()
			if s := testwait.Recv(t, first, "the first run"); !aguiText(s, "Checking."+full) {
				t.Fatalf("enqueue: the first run: %d %s", s.status, s.body)
			}
			if s := testwait.Recv(t, second, "the queued run"); !aguiText(s, "echo: lag-eq and a joke") {
				t.Fatalf("enqueue: the queued run: %d %s", s.status, s.body)
			}
			want := []string{"user:lag-eq weather report", "assistant:Checking.", `tool:{"city":"Paris","temp_c":21}`, "assistant:" + full,
				"user:lag-eq and a joke", "assistant:echo: lag-eq and a joke"}
			if got := headLines(t, env, "lag-eq"); !slices.Equal(got, want) {
				t.Fatalf("enqueue: the thread holds\n%q\nwant\n%q", got, want)
			}
			if got := modelSaw(env, "lag-eq and a joke"); len(got) != 1 || !slices.Equal(got[0], want[:5]) {
				t.Fatalf("enqueue: the model saw %q", got)
			}
			if bs, _ := branchesOf(t, env, "lag-eq"); len(bs) != 1 {
				t.Fatalf("enqueue: %d branches; want 1", len(bs))
			}

			env.Upstream.BreakOnce(afterTool("lag-int"), 1, modeltest.Stall)
			first, callMsg = run("lag-int")
			if s := aguiPost(t, env, "assistant", followUp("lag-int", "interrupt", callMsg)); !aguiText(s, "echo: lag-int and a joke") {
				t.Fatalf("interrupt: the follow-up: %d %s", s.status, s.body)
			}
			testwait.Recv(t, first, "the interrupted run")
			got := headLines(t, env, "lag-int")
			if len(got) != 6 || !slices.Equal(got[:3], []string{"user:lag-int weather report", "assistant:Checking.", `tool:{"city":"Paris","temp_c":21}`}) ||
				!strings.HasPrefix(got[3], "assistant:Tool") || !strings.HasPrefix("assistant:"+full, got[3]) || got[3] == "assistant:"+full ||
				got[4] != "user:lag-int and a joke" {
				t.Fatalf("interrupt: the thread holds %q; want the question, the tool step, the cut answer, then the follow-up", got)
			}
			if saw := modelSaw(env, "lag-int and a joke"); len(saw) != 1 || !slices.Equal(saw[0], got[:5]) {
				t.Fatalf("interrupt: the model saw %q", saw)
			}
			if bs, _ := branchesOf(t, env, "lag-int"); len(bs) != 1 {
				t.Fatalf("interrupt: %d branches; want 1", len(bs))
			}
			if n := env.Calls.Get("get_weather"); n != 2 {
				t.Fatalf("get_weather ran %d times for two turns", n)
			}
		})
	}
}

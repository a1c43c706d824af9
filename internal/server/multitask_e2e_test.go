package server_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
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

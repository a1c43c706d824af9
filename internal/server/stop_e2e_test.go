package server_test

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/testwait"
)

// abortStream starts a streamed Chat Completions turn on session, waits
// until its first chunk arrived (the turn runs, its model call held), then
// hangs up, as a chat UI's Stop button does.
func abortStream(t *testing.T, env *stacktest.Env, session, body string) {
	t.Helper()
	abortStreamAfter(t, env, session, body, "")
}

// abortStreamAfter is abortStream, hanging up once a line of the stream
// holds seen ("": its first line).
func abortStreamAfter(t *testing.T, env *stacktest.Env, session, body, seen string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", env.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-stackbone-session", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("the turn to stop: %d", resp.StatusCode)
	}
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("the turn to stop did not send %q: %v", seen, err)
		}
		if strings.Contains(line, seen) {
			break
		}
	}
	cancel()
	resp.Body.Close()
}

// TestStopThenNewMessage: a client stops a streaming turn (it hangs up)
// and sends its next message at once. The new message is answered, not
// refused with 409 run_in_progress and not after the lease: the abandoned
// turn is cancelled (its held model call ends) and the thread goes on.
func TestStopThenNewMessage(t *testing.T) {
	for driver, open := range branchDrivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			env := stacktest.New(t, stacktest.Options{Store: open(t)})
			release := env.Upstream.HoldOnce(script.When{LastUser: "long story"})
			defer release()
			abortStream(t, env, "stop", `{"model":"assistant","stream":true,"messages":[{"role":"user","content":"tell me a long story"}]}`)
			r := call(t, "POST", env.URL+"/v1/chat/completions",
				`{"model":"assistant","messages":[{"role":"user","content":"tell me a long story"},{"role":"assistant","content":""},{"role":"user","content":"never mind: hi"}]}`,
				"x-stackbone-session", "stop")
			if r.status != 200 || !strings.Contains(string(r.body), "echo: never mind: hi") {
				t.Fatalf("the message after the stop: %d %s", r.status, r.body)
			}
			runs, err := env.Store.ListRuns(context.Background(), "dev", "stop")
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != 2 || runs[0].Status != "cancelled" {
				t.Fatalf("runs %+v; want the stopped one cancelled, then the answer", runs)
			}
		})
	}
}

// TestAbandonedTurnRetryAttaches: a client that loses its connection
// mid-turn and sends the same request again (an SDK's retry) gets the
// turn's answer: the dropped connection does not stop the turn, and the
// retry is not a new message that would.
func TestAbandonedTurnRetryAttaches(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	release := env.Upstream.HoldOnce(script.When{LastUser: "long story"})
	body := `{"model":"assistant","stream":true,"messages":[{"role":"user","content":"tell me a long story"}]}`
	abortStream(t, env, "drop", body)
	testwait.Until(t, "the dropped turn to be recorded as abandoned", func() bool {
		th, err := env.Store.GetThread(context.Background(), "dev", "drop")
		return err == nil && th.Abandoned
	})
	done := make(chan apiResp, 1)
	go func() {
		done <- call(t, "POST", env.URL+"/v1/chat/completions", strings.Replace(body, `"stream":true`, `"stream":false`, 1), "x-stackbone-session", "drop")
	}()
	testwait.Until(t, "the retry to attach", func() bool {
		th, err := env.Store.GetThread(context.Background(), "dev", "drop")
		return err == nil && !th.Abandoned
	})
	release()
	r := testwait.Recv(t, done, "the retry's answer")
	if r.status != 200 || !strings.Contains(string(r.body), "echo: tell me a long story") {
		t.Fatalf("the retry: %d %s", r.status, r.body)
	}
	if n := env.Upstream.Count(); n != 1 {
		t.Fatalf("%d model calls; want the first attempt's only", n)
	}
	th, err := env.Store.GetThread(context.Background(), "dev", "drop")
	if err != nil || th.Status != store.Idle {
		t.Fatalf("thread %+v, %v; want idle", th, err)
	}
}

// TestCancelOnDisconnect: with STACKBONE_ON_DISCONNECT=cancel a turn whose
// client hangs up is cancelled at once, with no new message.
func TestCancelOnDisconnect(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{Configure: func(cfg *config.Config) { cfg.OnDisconnect = config.OnDisconnectCancel }})
	release := env.Upstream.HoldOnce(script.When{LastUser: "long story"})
	defer release()
	abortStream(t, env, "gone", `{"model":"assistant","stream":true,"messages":[{"role":"user","content":"tell me a long story"}]}`)
	testwait.Until(t, "the turn to be cancelled", func() bool {
		th, err := env.Store.GetThread(context.Background(), "dev", "gone")
		return err == nil && th.Status != store.Running
	})
	runs, err := env.Store.ListRuns(context.Background(), "dev", "gone")
	if err != nil || len(runs) != 1 || runs[0].Status != "cancelled" {
		t.Fatalf("runs %+v, %v; want the one cancelled", runs, err)
	}
}

// TestStopThenNewMessageOnAnotherReplica: the stopped turn runs on replica
// A; the next message comes through replica B (two processes' worth of
// stacks on one PostgreSQL, or one SQLite stack). B stops A's abandoned
// turn through the store and answers at once.
func TestStopThenNewMessageOnAnotherReplica(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			a, b := stacktest.Replicas(t, driver == "postgres", stacktest.Options{})
			release := a.Upstream.Stall(script.When{LastUser: "long story"})
			t.Cleanup(release)
			abortStream(t, a, "stop-rep", `{"model":"assistant","stream":true,"messages":[{"role":"user","content":"tell me a long story"}]}`)
			r := call(t, "POST", b.URL+"/v1/chat/completions",
				`{"model":"assistant","messages":[{"role":"user","content":"tell me a long story"},{"role":"assistant","content":""},{"role":"user","content":"never mind: hi"}]}`,
				"x-stackbone-session", "stop-rep")
			if r.status != 200 || !strings.Contains(string(r.body), "echo: never mind: hi") {
				t.Fatalf("the message after the stop, through B: %d %s", r.status, r.body)
			}
		})
	}
}

// TestStopKeepsWhatWasSeen: a turn stopped while its answer streamed keeps
// the text the client had seen, as the thread's answer marked cancelled,
// so the next turn's model sees what the user saw.
func TestStopKeepsWhatWasSeen(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	env.Upstream.BreakOnce(script.When{LastUser: "long story"}, 1, modeltest.Stall)
	abortStreamAfter(t, env, "seen", `{"model":"assistant","stream":true,"messages":[{"role":"user","content":"tell me a long story"}]}`, `"content":"e`)
	r := call(t, "POST", env.URL+"/v1/chat/completions",
		`{"model":"assistant","messages":[{"role":"user","content":"tell me a long story"},{"role":"assistant","content":"ec"},{"role":"user","content":"go on"}]}`,
		"x-stackbone-session", "seen")
	if r.status != 200 {
		t.Fatalf("the message after the stop: %d %s", r.status, r.body)
	}
	msgs, err := env.Store.Messages(context.Background(), "dev", "seen")
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 4 || msgs[1].Role != "assistant" || !msgs[1].Cancelled || msgs[1].Content == "" ||
		!strings.HasPrefix("echo: tell me a long story", msgs[1].Content) {
		t.Fatalf("thread %+v; want the question, the cut answer (cancelled), the next question, its answer", msgs)
	}
	seen := modelSaw(env, "go on")
	if len(seen) != 1 || len(seen[0]) != 3 || seen[0][1] != "assistant:"+msgs[1].Content {
		t.Fatalf("the next turn's model saw %q; want the cut answer before the next question", seen)
	}
}

// TestAGUIReloadReattaches: an AG-UI page reloaded mid-turn (its stream
// dropped) runs the agent again on the thread with no message: it gets the
// running turn from its first event and follows it live to its end. The
// reconnect neither stops the abandoned turn nor starts another; the model
// is asked once.
func TestAGUIReloadReattaches(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	release := env.Upstream.HoldOnce(script.When{LastUser: "long story"})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", env.URL+"/v1/agents/assistant/agui", strings.NewReader(
		`{"threadId":"reload","runId":"r1","messages":[{"id":"u1","role":"user","content":"tell me a long story"}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatalf("the first run sent nothing: %v", err)
	}
	cancel() // the page reloads
	resp.Body.Close()
	testwait.Until(t, "the dropped turn to be recorded as abandoned", func() bool {
		th, err := env.Store.GetThread(context.Background(), "dev", "reload")
		return err == nil && th.Abandoned
	})
	done := make(chan aguiStream, 1)
	go func() { done <- aguiPost(t, env, "assistant", `{"threadId":"reload","runId":"r2","messages":[]}`) }()
	testwait.Until(t, "the reloaded page to attach", func() bool {
		th, err := env.Store.GetThread(context.Background(), "dev", "reload")
		return err == nil && !th.Abandoned
	})
	release()
	s := testwait.Recv(t, done, "the reloaded page's stream")
	var types []string
	text := ""
	for _, e := range s.events {
		types = append(types, e["type"].(string))
		if e["type"] == "TEXT_MESSAGE_CONTENT" {
			text += e["delta"].(string)
		}
	}
	if s.status != 200 || len(types) == 0 || types[0] != "RUN_STARTED" || types[len(types)-1] != "RUN_FINISHED" ||
		text != "echo: tell me a long story" {
		t.Fatalf("the reloaded page got %d %v (text %q); want the running turn to its end", s.status, types, text)
	}
	if !slices.Contains(types, "MESSAGES_SNAPSHOT") || !slices.Contains(types, "STATE_SNAPSHOT") {
		t.Fatalf("the reloaded page got %v; want the state and messages snapshots", types)
	}
	if n := env.Upstream.Count(); n != 1 {
		t.Fatalf("%d model calls; want 1", n)
	}
}

// TestAGUICancelledOutcome: an AG-UI run stopped through the API ends, for
// an @ag-ui/client 1.0 client, with RUN_FINISHED outcome "cancelled"; a
// 0.0.x client, which does not know that outcome, gets RUN_ERROR code
// cancelled.
func TestAGUICancelledOutcome(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	t.Cleanup(env.Upstream.Stall(script.When{LastUser: "long story"}))
	for _, c := range []struct{ thread, version, last string }{{"ag-v1", `,"protocolVersion":"1.0.0"`, "RUN_FINISHED"}, {"ag-v0", "", "RUN_ERROR"}} {
		done := make(chan aguiStream, 1)
		go func() {
			done <- aguiPost(t, env, "assistant", `{"threadId":"`+c.thread+`","runId":"r1","messages":[{"id":"u1","role":"user","content":"tell me a long story"}]`+c.version+`}`)
		}()
		testwait.Until(t, "the run to start", func() bool {
			th, err := env.Store.GetThread(context.Background(), "dev", c.thread)
			return err == nil && th.Status == store.Running
		})
		if r := call(t, "POST", env.URL+"/v1/threads/"+c.thread+"/cancel", ""); r.status != 200 {
			t.Fatalf("cancel: %d %s", r.status, r.body)
		}
		s := testwait.Recv(t, done, "the stopped run's stream")
		last := s.events[len(s.events)-1]
		switch {
		case last["type"] != c.last:
			t.Fatalf("%s: the stream ended with %v; want %s", c.thread, last, c.last)
		case c.last == "RUN_FINISHED" && last["outcome"].(map[string]any)["type"] != "cancelled":
			t.Fatalf("%s: outcome %v; want cancelled", c.thread, last["outcome"])
		case c.last == "RUN_ERROR" && last["code"] != "cancelled":
			t.Fatalf("%s: error %v; want code cancelled", c.thread, last)
		}
	}
}

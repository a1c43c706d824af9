package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/testwait"
)

// enqueueToHangUp sends text on session with x-stackbone-multitask:
// enqueue; hangUp closes its connection, and left gets the request's end
// (its error: nil only if it was answered).
func enqueueToHangUp(env *stacktest.Env, session, text string) (hangUp func(), left <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	c := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", env.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"assistant","messages":[{"role":"user","content":"`+text+`"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-stackbone-session", session)
		req.Header.Set("x-stackbone-multitask", "enqueue")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		c <- err
	}()
	return cancel, c
}

// TestQueuedClientLeaves: a follow-up waits in the queue and its client
// hangs up before its turn (Stop on a queued message, or a dropped
// connection: they look the same). The queued turn still runs once, as
// any turn whose client left does, but it runs abandoned: a new message
// sent while it runs stops it and is answered at once, with no 409 and no
// lease wait, as after Stop on a running turn.
func TestQueuedClientLeaves(t *testing.T) {
	for driver, open := range branchDrivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			env := stacktest.New(t, stacktest.Options{Store: open(t)})
			const session = "eq-leave"
			release, running, before := busyThread(t, env, session)
			stall := env.Upstream.Stall(script.When{LastUser: "queued story"})
			t.Cleanup(stall)

			hangUp, left := enqueueToHangUp(env, session, "a queued story")
			testwait.Until(t, "the follow-up to be queued", func() bool { return queued(t, env, session) == 1 })
			qs, err := env.Store.Queue(context.Background(), "dev", session)
			if err != nil || len(qs) != 1 {
				t.Fatalf("queue %+v, %v", qs, err)
			}
			id := qs[0].ID
			hangUp()
			if err := testwait.Recv(t, left, "the queued request to end"); err == nil {
				t.Fatal("the hung-up request got an answer")
			}
			release()
			testwait.Recv(t, running, "the long story")
			testwait.Until(t, "the queued turn to run, abandoned", func() bool {
				th := env.Thread(t, "dev", session)
				return th.RunID == id && th.Abandoned && env.Upstream.Count() == before+2
			})
			r := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"hello again"}]}`,
				"x-stackbone-session", session)
			if r.status != http.StatusOK || !strings.Contains(string(r.body), "echo: hello again") {
				t.Fatalf("the next message: %d %s; want it answered at once", r.status, r.body)
			}
			runs, err := env.Store.ListRuns(context.Background(), "dev", session)
			if err != nil {
				t.Fatal(err)
			}
			status := map[string]string{}
			for _, run := range runs {
				status[run.ID] = run.Status
			}
			if status[id] != "cancelled" {
				t.Fatalf("the queued turn's run is %q; want cancelled (runs %+v)", status[id], runs)
			}
			if n := env.Upstream.Count(); n != before+3 {
				t.Fatalf("%d model calls, want 3", n-before)
			}
		})
	}
}

// TestQueuedClientLeavesCancel: with STACKBONE_ON_DISCONNECT=cancel a
// queued follow-up whose client hangs up leaves the queue: it never runs
// and the model never sees it.
func TestQueuedClientLeavesCancel(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{Configure: func(cfg *config.Config) { cfg.OnDisconnect = config.OnDisconnectCancel }})
	const session = "eq-leave-cancel"
	release, running, before := busyThread(t, env, session)
	hangUp, left := enqueueToHangUp(env, session, "forget it")
	testwait.Until(t, "the follow-up to be queued", func() bool { return queued(t, env, session) == 1 })
	hangUp()
	testwait.Recv(t, left, "the queued request to end")
	testwait.Until(t, "the follow-up to leave the queue", func() bool { return queued(t, env, session) == 0 })
	release()
	testwait.Recv(t, running, "the long story")
	waitIdle(t, env, session)
	if got := modelSaw(env, "forget it"); len(got) != 0 {
		t.Fatalf("the model saw the hung-up follow-up: %q", got)
	}
	if n := env.Upstream.Count(); n != before+1 {
		t.Fatalf("%d model calls, want 1", n-before)
	}
}

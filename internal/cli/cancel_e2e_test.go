package cli_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/testwait"
)

// TestThreadsCancel: `threads cancel` stops a durable turn held at the
// model and says so: the streaming client's response ends and the thread
// no longer runs; cancelling again says nothing was running, --json prints
// the API's answer, and an unknown thread's error reaches the user.
func TestThreadsCancel(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	release := env.Upstream.HoldOnce(script.When{LastUser: "slow"})
	t.Cleanup(release)

	req, _ := http.NewRequest("POST", env.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"assistant","stream":true,"messages":[{"role":"user","content":"slow please"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-stackbone-session", "busy")
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	stacktest.WaitFor(t, "the turn to run at the model", func() bool {
		th, err := env.Store.GetThread(t.Context(), "dev", "busy")
		return env.Upstream.Count() == 1 && err == nil && th.Status == store.Running
	})

	r := run(t, nil, "threads", "cancel", "busy", "--url", env.URL)
	if r.code != 0 || !strings.Contains(r.stdout, "thread busy: turn cancelled (status ") {
		t.Fatalf("threads cancel: %d %s %s", r.code, r.stdout, r.stderr)
	}
	testwait.Recv(t, ended, "the streaming client's response to end")
	th := env.Thread(t, "dev", "busy")
	if th.Status == store.Running {
		t.Fatalf("the thread still runs after the cancel")
	}

	if r = run(t, nil, "threads", "cancel", "busy", "--url", env.URL); r.code != 0 ||
		strings.TrimSpace(r.stdout) != "thread busy: nothing was running (status "+string(th.Status)+")" {
		t.Fatalf("threads cancel again: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = run(t, nil, "threads", "cancel", "busy", "--json", "--url", env.URL)
	var res struct {
		Object    string `json:"object"`
		ID        string `json:"id"`
		Cancelled *bool  `json:"cancelled"`
		Status    string `json:"status"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil || res.Object != "thread.cancel" || res.ID != "busy" ||
		res.Cancelled == nil || *res.Cancelled || res.Status != string(th.Status) {
		t.Fatalf("threads cancel --json: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r = run(t, nil, "threads", "cancel", "nope", "--url", env.URL); r.code == 0 || !strings.Contains(r.stderr, `"nope"`) {
		t.Fatalf("threads cancel of an unknown thread: %d %q", r.code, r.stderr)
	}
	if n := env.Upstream.Count(); n != 1 {
		t.Fatalf("the upstream got %d calls, want the one cancelled", n)
	}
}

package studio_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/studio"
	"github.com/stackbone/stackbone/internal/testwait"
)

// startHeld starts a durable streaming turn of agent "assistant" on
// session whose model call the upstream holds (until the run is cancelled
// or the test ends), and waits until the thread runs it. The returned
// channel is closed when the client's response has ended. key is the API
// key ("" in dev mode).
func startHeld(t *testing.T, env *stacktest.Env, key, tenant, session string) <-chan struct{} {
	t.Helper()
	release := env.Upstream.HoldOnce(script.When{LastUser: "slow"})
	t.Cleanup(release)
	req, _ := http.NewRequest("POST", env.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"assistant","stream":true,"messages":[{"role":"user","content":"slow please"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-stackbone-session", session)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		if res, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}()
	stacktest.WaitFor(t, "the turn to run at the model", func() bool {
		th, err := env.Store.GetThread(t.Context(), tenant, session)
		return err == nil && th.Status == store.Running
	})
	return ended
}

// TestThreadStop: a thread page offers Stop while its turn runs; clicking
// it ends the turn (the streaming client's response ends, the thread no
// longer runs), the page leaves "running" and the button goes away.
func TestThreadStop(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	ended := startHeld(t, env, "", "dev", "busy")

	p := newPage(t)
	p.open(env.URL + "/studio/#/threads/busy")
	p.waitText("#thread-meta", "running")
	p.waitJS("the Stop button", `!document.querySelector('#thread-stop').hidden`)
	p.click(`#thread-stop button[data-action="stop"]`)
	p.waitJS("the page to leave running", `document.querySelector('#thread-stop').hidden &&
		!document.querySelector('#thread-meta .badge.status-running') && !!document.querySelector('#thread-meta .badge[class*="status-"]')`)
	testwait.Recv(t, ended, "the streaming client's response to end")
	if th := env.Thread(t, "dev", "busy"); th.Status == store.Running {
		t.Fatalf("the thread still runs after Stop")
	}
	if eval[bool](p, `!document.querySelector('#thread-stop-error').hidden`) {
		t.Fatalf("Stop showed an error: %s", eval[string](p, `document.querySelector('#thread-stop-error').textContent`))
	}
	if n := env.Upstream.Count(); n != 1 {
		t.Fatalf("the upstream got %d calls, want the one stopped", n)
	}
}

// TestThreadStopForApprover: an approver key cannot start turns, so a
// running thread's page offers it no Stop.
func TestThreadStopForApprover(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: []config.Key{opsKey, aliceKey}})
	startHeld(t, env, opsKey.Secret, "acme", "busy")
	p := newPage(t)
	signIn(p, env.URL, aliceKey)
	p.open(env.URL + "/studio/#/threads/busy")
	p.waitText("#thread-meta", "running")
	if eval[bool](p, `!document.querySelector('#thread-stop').hidden`) {
		t.Fatal("an approver is offered Stop")
	}
	if th := env.Thread(t, "acme", "busy"); th.Status != store.Running {
		t.Fatalf("the thread is %s, want still running", th.Status)
	}
}

// TestThreadStopRefusedShowsWhy: when the cancel route refuses, the page
// shows the API's own message and the thread goes on running. The refusal
// is the server's CSRF check (the page's token replaced by a wrong one on
// the way out): a real answer of the real route.
func TestThreadStopRefusedShowsWhy(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: []config.Key{opsKey, aliceKey}})
	startHeld(t, env, opsKey.Secret, "acme", "busy")
	cookie, _ := login(t, env, opsKey.Secret)
	r := do(t, "POST", env.URL+"/v1/threads/busy/cancel", "", "Cookie", "stackbone_studio="+cookie.Value, studio.CSRFHeader, "not-the-token")
	var refusal struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal(r.body, &refusal); r.status != http.StatusForbidden || err != nil || refusal.Error.Code != "csrf_failed" {
		t.Fatalf("a cancel with a wrong CSRF token: %d %s", r.status, r)
	}
	p := newPage(t)
	signIn(p, env.URL, opsKey)
	p.open(env.URL + "/studio/#/threads/busy")
	p.waitJS("the Stop button", `!document.querySelector('#thread-stop').hidden`)
	eval[bool](p, `(() => {
		const real = window.fetch;
		window.fetch = (url, init) => {
			if (String(url).endsWith('/cancel') && init?.headers) init = { ...init, headers: { ...init.headers, 'x-csrf-token': 'not-the-token' } };
			return real(url, init);
		};
		return true;
	})()`)
	p.click(`#thread-stop button[data-action="stop"]`)
	p.waitJS("the refusal", `!document.querySelector('#thread-stop-error').hidden`)
	if msg := eval[string](p, `document.querySelector('#thread-stop-error').textContent`); msg != "Could not stop the turn: "+refusal.Error.Message {
		t.Fatalf("the refusal reads %q; the API said %q", msg, refusal.Error.Message)
	}
	if th := env.Thread(t, "acme", "busy"); th.Status != store.Running {
		t.Fatalf("a refused Stop changed the thread: %s", th.Status)
	}
	if eval[bool](p, `document.querySelector('#thread-stop').hidden`) {
		t.Fatal("Stop went away though the thread still runs")
	}
}

// TestThreadQueue: a follow-up sent with x-stackbone-multitask: enqueue
// while a turn runs shows on the thread page under "Queued messages";
// Remove takes it off the queue: its request ends cancelled, the list
// empties, and the model never sees it.
func TestThreadQueue(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	startHeld(t, env, "", "dev", "queued")
	waiting := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest("POST", env.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"assistant","messages":[{"role":"user","content":"and one more thing"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-stackbone-session", "queued")
		req.Header.Set("x-stackbone-multitask", "enqueue")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			waiting <- err.Error()
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		waiting <- string(b)
	}()

	p := newPage(t)
	p.open(env.URL + "/studio/#/threads/queued")
	p.waitText("#thread-queue", "and one more thing")
	if n := eval[int](p, `document.querySelectorAll('#queue-list li').length`); n != 1 {
		t.Fatalf("the queue shows %d messages, want 1", n)
	}
	p.click(`#queue-list button[data-action="unqueue"]`)
	p.waitJS("the queue to empty", `document.querySelector('#thread-queue').hidden`)
	if body := testwait.Recv(t, waiting, "the removed follow-up's request"); !strings.Contains(body, "cancelled") || strings.Contains(body, "echo:") {
		t.Fatalf("the removed follow-up's request got %s; want it cancelled", body)
	}
	if qs, err := env.Store.Queue(t.Context(), "dev", "queued"); err != nil || len(qs) != 0 {
		t.Fatalf("queue after Remove: %+v, %v", qs, err)
	}
	for _, r := range env.Upstream.Requests() {
		if m := r.Request.Messages; len(m) > 0 && strings.Contains(m[len(m)-1].Content, "one more thing") {
			t.Fatalf("the model saw the removed follow-up")
		}
	}
}

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

// TestThreadsQueue: while a turn is held at the model, a follow-up sent
// with x-stackbone-multitask: enqueue shows in `threads queue` (and its
// --json); `threads unqueue` removes it, its request ends cancelled and
// the model never sees it; removing it again, or a thread that does not
// exist, is an error the user reads.
func TestThreadsQueue(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	release := env.Upstream.HoldOnce(script.When{LastUser: "slow"})
	t.Cleanup(release)
	post := func(text string, hdr ...string) <-chan string {
		req, _ := http.NewRequest("POST", env.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"assistant","messages":[{"role":"user","content":"`+text+`"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-stackbone-session", "busy")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		out := make(chan string, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				out <- err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			out <- string(b)
		}()
		return out
	}
	running := post("slow please")
	stacktest.WaitFor(t, "the turn to run at the model", func() bool {
		th, err := env.Store.GetThread(t.Context(), "dev", "busy")
		return env.Upstream.Count() == 1 && err == nil && th.Status == store.Running
	})
	if r := run(t, nil, "threads", "queue", "busy", "--url", env.URL); r.code != 0 || strings.TrimSpace(r.stdout) != "thread busy: no follow-up waits" {
		t.Fatalf("threads queue, empty: %d %s %s", r.code, r.stdout, r.stderr)
	}
	waiting := post("one more thing", "x-stackbone-multitask", "enqueue")
	stacktest.WaitFor(t, "the follow-up to be queued", func() bool {
		qs, err := env.Store.Queue(t.Context(), "dev", "busy")
		return err == nil && len(qs) == 1
	})

	r := run(t, nil, "threads", "queue", "busy", "--url", env.URL)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "1  run_") || !strings.Contains(r.stdout, `"one more thing"`) {
		t.Fatalf("threads queue: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = run(t, nil, "threads", "queue", "busy", "--json", "--url", env.URL)
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID       string `json:"id"`
			Position int    `json:"position"`
		} `json:"data"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil || list.Object != "list" || len(list.Data) != 1 || list.Data[0].Position != 1 {
		t.Fatalf("threads queue --json: %d %s %s", r.code, r.stdout, r.stderr)
	}
	id := list.Data[0].ID

	if r = run(t, nil, "threads", "unqueue", "busy", id, "--url", env.URL); r.code != 0 || !strings.Contains(r.stdout, id) {
		t.Fatalf("threads unqueue: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if body := testwait.Recv(t, waiting, "the removed follow-up's request"); !strings.Contains(body, "cancelled") || strings.Contains(body, "echo:") {
		t.Fatalf("the removed follow-up's request got %s; want it cancelled", body)
	}
	if r = run(t, nil, "threads", "unqueue", "busy", id, "--url", env.URL); r.code == 0 || !strings.Contains(r.stderr, id) {
		t.Fatalf("threads unqueue again: %d %q; want an error naming the run", r.code, r.stderr)
	}
	if r = run(t, nil, "threads", "queue", "nope", "--url", env.URL); r.code == 0 || !strings.Contains(r.stderr, `"nope"`) {
		t.Fatalf("threads queue of an unknown thread: %d %q", r.code, r.stderr)
	}
	release()
	if body := testwait.Recv(t, running, "the held turn"); !strings.Contains(body, "echo: slow please") {
		t.Fatalf("the held turn: %s", body)
	}
	if n := env.Upstream.Count(); n != 1 {
		t.Fatalf("the upstream got %d calls, want only the held turn's", n)
	}
}

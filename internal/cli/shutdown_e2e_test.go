package cli_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/store/sqlite"
)

// shopDir writes a project whose agent `shop` refunds orders through a tool
// that needs approval and POSTs to sideURL (its side effect).
func shopDir(t *testing.T, sideURL string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	agentTS := fmt.Sprintf(`import { defineDeepAgent, tool } from 'stackbone';
export default defineDeepAgent({
  name: 'shop',
  model: 'openai/test-model',
  instructions: 'You refund orders.',
  tools: {
    refund: tool({
      description: 'Refund an order',
      parameters: { type: 'object', properties: { orderId: { type: 'string' }, amount: { type: 'number' } }, required: ['orderId', 'amount'] },
      needsApproval: true,
      async execute(args, ctx) {
        const res = await ctx.fetch(%q + '/refund?key=' + ctx.toolCallId, { method: 'POST', body: JSON.stringify(args) });
        return { refunded: args.amount, status: res.status };
      },
    }),
  },
});
`, sideURL)
	if err := os.WriteFile(filepath.Join(dir, "agents", "shop.ts"), []byte(agentTS), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pauseShop sends the `shop` agent a refund on session and returns the id
// of the one pending decision it paused on.
func pauseShop(t *testing.T, base, session string) string {
	t.Helper()
	post(t, base, "", session, "refund order o1")
	var page struct {
		Data []store.Interrupt `json:"data"`
	}
	getJSON(t, base+"/v1/hitl", &page)
	if len(page.Data) != 1 {
		t.Fatalf("want one pending decision, got %+v", page.Data)
	}
	return page.Data[0].ID
}

// stop sends SIGTERM and waits for the process to exit, returning its exit
// code and how long it took.
func (p *proc) stop(t *testing.T, within time.Duration) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = p.Cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(within):
		t.Fatalf("the server did not exit within %s of SIGTERM", within)
	}
	return p.Cmd.ProcessState.ExitCode(), time.Since(start)
}

// storedThread reads a thread and its events straight from a stopped
// server's SQLite file.
func storedThread(t *testing.T, dir, id string) (*store.Thread, []event.Event) {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(dir, ".stackbone", "stackbone.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	th, err := s.GetThread(context.Background(), "dev", id)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(context.Background(), "dev", id, 0, store.MaxLimit)
	if err != nil {
		t.Fatal(err)
	}
	return th, evs
}

// TestSIGTERMDuringRecoveredRunLeavesItResumable kills a server after a
// decision (the resumed turn is cut off), lets a second process recover the
// run, and stops that one with SIGTERM while the recovered run waits on the
// model, with a grace period too short for it. The run is released, not
// failed: a third start finishes it, and the tool ran once.
func TestSIGTERMDuringRecoveredRunLeavesItResumable(t *testing.T) {
	var sideEffects atomic.Int64
	side := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sideEffects.Add(1)
		fmt.Fprint(w, `{"ok":true}`)
	}))
	defer side.Close()
	// The answer after the tool result takes 1.5 s: the window in which
	// each process is stopped.
	sc := script.MustParse(`[
	 {"when":{"lastTool":"refund"},"reply":{"text":"Refund finished.","delayMs":1500}},
	 {"when":{"lastUser":"refund"},"reply":{"toolCalls":[{"name":"refund","arguments":{"orderId":"o1","amount":5}}]}},
	 {"reply":{"text":"echo: {{lastUser}}"}}
	]`)
	mock := modeltest.Handler(modeltest.OpenAI, sc)
	up := httptest.NewServer(mock)
	defer up.Close()
	dir := shopDir(t, side.URL)
	env := []string{"OPENAI_BASE_URL=" + up.URL + "/v1", "OPENAI_API_KEY=sk-test"}
	args := []string{"dev", "--dir", dir, "--addr", "127.0.0.1:0", "--shutdown-timeout", "100ms"}

	a := startServer(t, env, args...)
	id := pauseShop(t, a.URL(), "recovered")
	if r := run(t, nil, "hitl", "approve", id, "--yes", "--url", a.URL()); r.code != 0 {
		t.Fatalf("approve: %s", r.stderr)
	}
	waitUntil(t, "the tool to run and the model to be called", 10*time.Second, func() bool {
		return sideEffects.Load() == 1 && mock.Count() == 2
	})
	a.Kill(t)

	// B recovers the run; SIGTERM arrives while its model call is under way.
	b := startServer(t, env, args...)
	waitUntil(t, "B to recover the run and call the model", 10*time.Second, func() bool { return mock.Count() == 3 })
	code, took := b.stop(t, 10*time.Second)
	if code != 0 {
		t.Fatalf("B exited with %d after SIGTERM", code)
	}
	if took >= 1500*time.Millisecond {
		t.Fatalf("B took %s to stop: it waited for the model instead of the 100ms grace period", took)
	}
	th, evs := storedThread(t, dir, "recovered")
	if th.Status == store.Failed || th.LastError != "" {
		t.Fatalf("SIGTERM marked the recovered run failed: %+v", th)
	}
	if th.Status != store.Running || !th.LeaseUntil.IsZero() {
		t.Fatalf("the stopped run must be left running with its lease released: %+v", th)
	}
	for _, e := range evs {
		if e.Type == event.RunError {
			t.Fatalf("a RunError was stored for the stopped run: %+v", e)
		}
	}

	// C finishes the turn from its last stored step.
	c := startServer(t, env, args...)
	var got struct {
		Status   string `json:"status"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	waitUntil(t, "the run to finish after the restart", 20*time.Second, func() bool {
		getJSON(t, c.URL()+"/v1/threads/recovered", &got)
		return got.Status == "idle" || got.Status == "failed"
	})
	if got.Status != "idle" {
		t.Fatalf("thread %s after the restart", got.Status)
	}
	if last := got.Messages[len(got.Messages)-1]; last.Role != "assistant" || last.Content != "Refund finished." {
		t.Fatalf("last message %+v", last)
	}
	if n := sideEffects.Load(); n != 1 {
		t.Fatalf("the tool ran %d times; want exactly once", n)
	}
	if n := mock.Count(); n != 4 {
		t.Fatalf("upstream saw %d requests; want 4 (A's, B's cut-off call, C's)", n)
	}
}

// TestShutdownLetsRunsInFlightFinish stops a server with SIGTERM while a
// durable turn (whose client already hung up, so no response holds the
// server open) and a stateless turn wait on the model: both finish within
// the grace period, the stateless one answering in full, the durable one
// stored; the process then exits cleanly and nothing is left to run at the
// next start.
func TestShutdownLetsRunsInFlightFinish(t *testing.T) {
	sc := script.MustParse(`[
	 {"when":{"lastUser":"slower"},"reply":{"text":"Done slowly.","delayMs":1500}},
	 {"when":{"lastUser":"slow"},"reply":{"text":"Done slowly.","delayMs":500}},
	 {"reply":{"text":"echo: {{lastUser}}"}}
	]`)
	mock := modeltest.Handler(modeltest.OpenAI, sc)
	up := httptest.NewServer(mock)
	defer up.Close()
	dir := shopDir(t, "http://127.0.0.1:1")
	env := []string{"OPENAI_BASE_URL=" + up.URL + "/v1", "OPENAI_API_KEY=sk-test"}
	args := []string{"dev", "--dir", dir, "--addr", "127.0.0.1:0", "--shutdown-timeout", "20s"}
	a := startServer(t, env, args...)

	type answer struct {
		code int
		body string
		err  error
	}
	ask := func(ctx context.Context, session, text string) <-chan answer {
		out := make(chan answer, 1)
		go func() {
			req, _ := http.NewRequestWithContext(ctx, "POST", a.URL()+"/v1/chat/completions",
				strings.NewReader(`{"model":"shop","messages":[{"role":"user","content":"`+text+`"}]}`))
			req.Header.Set("Content-Type", "application/json")
			if session != "" {
				req.Header.Set("x-stackbone-session", session)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				out <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			out <- answer{code: resp.StatusCode, body: string(b), err: err}
		}()
		return out
	}
	hangUp, cancel := context.WithCancel(context.Background())
	// The durable run outlasts the stateless request.
	durable, stateless := ask(hangUp, "graceful", "slower"), ask(context.Background(), "", "slow")
	waitUntil(t, "both turns to call the model", 10*time.Second, func() bool { return mock.Count() == 2 })
	cancel()
	<-durable // the durable turn's client is gone; its run goes on
	code, _ := a.stop(t, 15*time.Second)
	if code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	if got := <-stateless; got.err != nil || got.code != 200 || !strings.Contains(got.body, "Done slowly.") {
		t.Fatalf("stateless turn during shutdown: %d %q %v", got.code, got.body, got.err)
	}
	th, evs := storedThread(t, dir, "graceful")
	if th.Status != store.Idle {
		t.Fatalf("the durable turn's thread after shutdown: %+v", th)
	}
	if last := evs[len(evs)-1]; last.Type != event.RunFinished {
		t.Fatalf("the durable turn's last stored event: %+v", last)
	}
	b := startServer(t, env, args...)
	getJSON(t, b.URL()+"/healthz", nil)
	if n := mock.Count(); n != 2 {
		t.Fatalf("upstream saw %d requests; want 2 (nothing re-run after the restart)", n)
	}
}

package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/testwait"
)

// proc is a stackbone server running as its own process.
type proc struct{ *stacktest.Process }

// startServer runs `stackbone <args>` and waits for its listening address.
func startServer(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return &proc{stacktest.StartProcess(t, binary, env, 30*time.Second, args...)}
}

func getJSON(t *testing.T, url string, out any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		_ = json.Unmarshal(b, out)
	}
	return resp.StatusCode
}

func waitUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	if !testwait.Poll(ctx, cond) {
		t.Fatalf("timed out waiting %s for %s", d, what)
	}
}

// every returns a function that reports true the first time it is called
// and then once d has passed since it last did: for a poll that repeats an
// action (a file written again until a watcher sees it) at a pace of its
// own, not the poll's.
func every(d time.Duration) func() bool {
	var last time.Time
	return func() bool {
		if now := time.Now(); last.IsZero() || now.Sub(last) >= d {
			last = now
			return true
		}
		return false
	}
}

// TestCrashAfterDecisionResumesOnRestart stops the server hard after a
// decision and before the resumed turn ends, starts it again, and checks the
// turn completes and the tool ran once.
func TestCrashAfterDecisionResumesOnRestart(t *testing.T) {
	t.Parallel()
	// The tool's side effect is a POST to this counter, keyed by toolCallId.
	var sideEffects atomic.Int64
	side := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sideEffects.Add(1)
		fmt.Fprint(w, `{"ok":true}`)
	}))
	defer side.Close()
	// The upstream holds the first answer after the tool result until its
	// caller goes away: the window in which the process is killed.
	sc := script.MustParse(`[
	 {"when":{"lastTool":"refund"},"reply":{"text":"Refund finished."}},
	 {"when":{"lastUser":"refund"},"reply":{"toolCalls":[{"name":"refund","arguments":{"orderId":"o1","amount":5}}]}},
	 {"reply":{"text":"echo: {{lastUser}}"}}
	]`)
	mock := modeltest.Handler(modeltest.OpenAI, sc)
	mock.HoldOnce(script.When{LastTool: "refund"})
	up := httptest.NewServer(mock)
	defer up.Close()

	dir := shopDir(t, side.URL)
	env := []string{"OPENAI_BASE_URL=" + up.URL + "/v1", "OPENAI_API_KEY=sk-test"}
	args := []string{"dev", "--dir", dir, "--addr", "127.0.0.1:0"}

	a := startServer(t, env, args...)
	id := pauseShop(t, a.URL(), "crashy")
	r := run(t, nil, "hitl", "approve", id, "--yes", "--url", a.URL())
	if r.code != 0 {
		t.Fatalf("approve: %s", r.stderr)
	}
	// Wait until the tool ran and the slow model call is under way, then
	// kill the process before the turn ends.
	waitUntil(t, "the tool to run and the model to be called", 10*time.Second, func() bool {
		return sideEffects.Load() == 1 && mock.Count() == 2
	})
	a.Kill(t)

	b := startServer(t, env, args...)
	var th struct {
		Status   string `json:"status"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	waitUntil(t, "the resumed turn to finish after restart", 20*time.Second, func() bool {
		getJSON(t, b.URL()+"/v1/threads/crashy", &th)
		return th.Status == "idle"
	})
	last := th.Messages[len(th.Messages)-1]
	if last.Role != "assistant" || last.Content != "Refund finished." {
		t.Fatalf("last message %+v", last)
	}
	if n := sideEffects.Load(); n != 1 {
		t.Fatalf("the tool ran %d times; want exactly once", n)
	}
	tools := 0
	for _, m := range th.Messages {
		if m.Role == "tool" {
			tools++
		}
	}
	if tools != 1 {
		t.Fatalf("stored %d tool results", tools)
	}
	// The restarted process finished the turn: it asked the model again.
	if mock.Count() != 3 {
		t.Fatalf("upstream saw %d requests; want 3 (the killed call and the resumed one)", mock.Count())
	}
	// What the runs recorded survived the kill with the steps they were
	// written with: the tool call once, and a model step for each answer
	// that was stored (the killed call's answer never was).
	var runs struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	getJSON(t, b.URL()+"/v1/threads/crashy/runs", &runs)
	refunds, models := 0, 0
	for _, r := range runs.Data {
		var d struct {
			Steps []struct{ Kind, Name, Outcome string } `json:"steps"`
		}
		getJSON(t, b.URL()+"/v1/runs/"+r.ID, &d)
		for _, st := range d.Steps {
			switch {
			case st.Kind == "tool" && st.Name == "refund":
				refunds++
			case st.Kind == "model" && st.Outcome == "ok":
				models++
			}
		}
	}
	if refunds != 1 || models != 2 {
		t.Fatalf("the runs recorded %d refund calls and %d model answers; want 1 and 2 (the call, and the answer after restart)", refunds, models)
	}
}

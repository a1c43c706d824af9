package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestClientHangUpIsNotAServerError: a client that hangs up in the middle
// of a stateless turn (streamed or not) is a normal event: logged at info,
// never at error, counted as turn outcome "client_closed" and, when the
// request had no response yet, as HTTP status 499, never as a 500.
func TestClientHangUpIsNotAServerError(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Script: `[{"reply": {"text": "too late", "delayMs": 30000}}]`})
	for i, stream := range []bool{true, false} {
		ctx, cancel := context.WithCancel(context.Background())
		body := `{"model":"assistant","stream":` + map[bool]string{true: "true", false: "false"}[stream] +
			`,"messages":[{"role":"user","content":"hi"}]}`
		req, _ := http.NewRequestWithContext(ctx, "POST", env.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body) // until the hang-up
				resp.Body.Close()
			}
		}()
		// Hang up once the turn is waiting on the model.
		stacktest.WaitFor(t, "the model call", func() bool { return env.Upstream.Count() == i+1 })
		cancel()
		<-done
		stacktest.WaitFor(t, "the turn to end", func() bool {
			return strings.Contains(call(t, "GET", env.URL+"/metrics", "").String(),
				fmt.Sprintf(`stackbone_turn_duration_seconds_count{agent="assistant",outcome="client_closed"} %d`, i+1))
		})
	}
	m := call(t, "GET", env.URL+"/metrics", "").String()
	if !strings.Contains(m, `stackbone_http_requests_total{route="POST /v1/chat/completions",status="499"}`) ||
		strings.Contains(m, `status="500"`) || strings.Contains(m, `outcome="error"`) {
		t.Fatalf("metrics:\n%s", grepLines(m, "stackbone_"))
	}
	logs := env.Logs.String()
	if strings.Contains(logs, "level=ERROR") || strings.Contains(logs, "run failed") {
		t.Fatalf("a client hang-up was logged as an error:\n%s", logs)
	}
	if !strings.Contains(logs, `level=INFO msg="run ended: the client closed the connection"`) {
		t.Fatalf("no info line for the hang-up:\n%s", logs)
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

package server_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestStreamSendsEventsWhileModelWorks: every streaming wire sends the
// client what the turn has produced so far while the run waits on the
// model: the first step's text arrives while the second model call (after
// the tool) is stalled, and the rest follows once the model answers.
func TestStreamSendsEventsWhileModelWorks(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	for _, c := range []struct{ name, path, body string }{
		{"openai", "/v1/chat/completions", `{"model":"assistant","stream":true,"messages":[{"role":"user","content":"weather please"}]}`},
		{"anthropic", "/v1/messages", `{"model":"assistant","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"weather please"}]}`},
		{"agui", "/v1/agents/assistant/agui", `{"threadId":"flush-agui","runId":"run-1","messages":[{"id":"m1","role":"user","content":"weather please"}],"tools":[],"context":[],"state":{},"forwardedProps":{}}`},
		{"responses", "/v1/responses", `{"model":"assistant","stream":true,"input":"weather please"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			release := env.Upstream.Stall(script.When{LastTool: "get_weather"})
			defer release()
			// A guard against a stream that never shows the text, not a
			// speed requirement.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", env.URL+c.path, strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("anthropic-version", "2023-06-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			br := bufio.NewReader(resp.Body)
			var seen strings.Builder
			for !strings.Contains(seen.String(), "Checking.") {
				line, err := br.ReadString('\n')
				seen.WriteString(line)
				if err != nil {
					t.Fatalf("the first step's text did not arrive while the model was busy (%v); got:\n%s", err, seen.String())
				}
			}
			release()
			rest, err := io.ReadAll(br)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(rest), "Tool said") {
				t.Fatalf("the answer after the tool did not follow:\n%s", rest)
			}
		})
	}
}

package server_test

import (
	"path/filepath"
	"testing"

	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestVercelAISDKRetryRunsToolOnce runs tests/clients/retry.mjs: the Vercel
// AI SDK's generateText with its default retries (it retries every 5xx,
// x-should-retry notwithstanding) on a stateless turn whose upstream
// answers 400 after the server tool ran. The SDK tries three times; the
// tool must run once, and each retry asks the model only for the failed step.
func TestVercelAISDKRetryRunsToolOnce(t *testing.T) {
	t.Parallel()
	node, dir := nodeFixture(t, "clients", filepath.Join("ai", "package.json"))
	env := stacktest.New(t, stacktest.Options{Script: failAfterToolScript})

	var out struct {
		OK       bool   `json:"ok"`
		Error    string `json:"error"`
		Reason   string `json:"reason"`
		Attempts int    `json:"attempts"`
		Statuses []int  `json:"statuses"`
	}
	if err := runNodeScript(t, node, dir, "retry.mjs", &out, env.URL); err != nil {
		t.Fatal(err)
	}
	if out.OK || out.Attempts != 3 {
		t.Fatalf("want the SDK to give up after 3 attempts on the failing upstream, got %+v", out)
	}
	for _, s := range out.Statuses {
		if s != 502 {
			t.Fatalf("every attempt must be a 502, got %v", out.Statuses)
		}
	}
	if n := env.Calls.Get("get_weather"); n != 1 {
		t.Fatalf("the SDK's retries ran the tool %d times, want once", n)
	}
	// One request for the tool step, then one per attempt for the step
	// after it, each continuing from the recorded tool result.
	reqs := env.Upstream.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model requests, want 4 (the tool step once, the failing step per attempt)", len(reqs))
	}
	for _, r := range reqs[1:] {
		msgs := r.Request.Messages
		if len(msgs) != 3 || len(msgs[1].ToolCalls) != 1 || msgs[2].ToolName != "get_weather" {
			t.Fatalf("a retry asked the model for the completed step again: %+v", msgs)
		}
	}
}

// TestVercelAISDKRetryOnSessionRunsToolOnce is TestVercelAISDKRetryRunsToolOnce
// on a durable session, on SQLite and PostgreSQL: each of the SDK's retries
// of the failed turn continues it from its stored steps, so the tool runs
// once and the user's message is stored once.
func TestVercelAISDKRetryOnSessionRunsToolOnce(t *testing.T) {
	t.Parallel()
	node, dir := nodeFixture(t, "clients", filepath.Join("ai", "package.json"))
	for _, st := range bothStores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			env := stacktest.New(t, stacktest.Options{Script: failAfterToolScript, Store: st.open(t)})
			var out struct {
				OK       bool  `json:"ok"`
				Attempts int   `json:"attempts"`
				Statuses []int `json:"statuses"`
			}
			if err := runNodeScript(t, node, dir, "retry.mjs", &out, env.URL, "aisdk-session"); err != nil {
				t.Fatal(err)
			}
			if out.OK || out.Attempts != 3 {
				t.Fatalf("want the SDK to give up after 3 attempts on the failing upstream, got %+v", out)
			}
			if n := env.Calls.Get("get_weather"); n != 1 {
				t.Fatalf("the SDK's retries ran the tool %d times, want once", n)
			}
			if n := users(t, env, "aisdk-session"); n != 1 {
				t.Fatalf("the SDK's retries stored the user's message %d times, want once", n)
			}
			reqs := env.Upstream.Requests()
			if len(reqs) != 4 {
				t.Fatalf("%d model requests, want 4 (the tool step once, the failing step per attempt)", len(reqs))
			}
			for _, r := range reqs[1:] {
				if msgs := r.Request.Messages; len(msgs) != 3 || msgs[2].ToolName != "get_weather" {
					t.Fatalf("a retry asked the model for the completed step again: %+v", msgs)
				}
			}
		})
	}
}

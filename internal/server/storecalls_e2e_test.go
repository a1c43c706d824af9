package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store/sqlite"
)

// TestStoreCallsPerRequest counts the store calls each kind of request
// makes through the real server (a counting wrapper around SQLite), by the
// package that makes them: the engine's are the turn's own work, a wire's
// are what it reads to re-derive what the engine knew. The counts are in
// BENCHMARKS.md ("Store calls per request"); run with -v to see them:
//
//	go test -count=1 -run TestStoreCallsPerRequest -v ./internal/server/
func TestStoreCallsPerRequest(t *testing.T) {
	// Budgets per request kind, as measured after the wires stopped
	// re-deriving what the engine knew (BENCHMARKS.md has the counts
	// before): engine calls, and every other caller's (wires, server).
	budgets := map[string]struct{ engine, wire int }{
		"chat completions, durable tool turn":         {6, 0},
		"responses create (new conversation)":         {6, 5},
		"responses retry (same Idempotency-Key)":      {3, 7},
		"responses previous_response_id continuation": {5, 6},
		"AG-UI run (pauses for approval)":             {4, 0},
		"AG-UI resume (approve)":                      {13, 0},
		"MCP tools/call hello (2026-07-28)":           {4, 0},
		// The engine's count of the elicitation calls varies by one or two
		// with timing: its follower reads the event log again when a
		// notification and a poll cross (18–21 measured).
		"MCP tools/call refund my order (2026-07-28)": {22, 1},
		"MCP tools/call refund my order (2025-11-25)": {22, 0},
	}
	st, err := sqlite.Open(context.Background(), t.TempDir()+"/counted.db", nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := stacktest.NewCountingStore(st)
	env := stacktest.New(t, stacktest.Options{Store: cs})

	type measured struct {
		kind   string
		counts stacktest.Counts
	}
	var all []measured
	// measure runs one request and waits until every run it started (in
	// the background too) ended, then checks its calls against its
	// budget: at most engine calls by the engine (the turn's own work,
	// which varies a little with how often a follower reads the log as
	// the run goes on) and at most wire calls by anything else (the wires
	// and the server).
	measure := func(kind string, do func()) stacktest.Counts {
		t.Helper()
		env.Runner.Wait()
		cs.Reset()
		do()
		env.Runner.Wait()
		c := cs.Counts()
		all = append(all, measured{kind, c})
		t.Logf("%s: %d store calls\n%s", kind, c.Total(), c)
		b, ok := budgets[kind]
		if !ok {
			t.Fatalf("no budget for %q", kind)
		}
		if eng, rest := c.Total("engine"), c.Total()-c.Total("engine"); eng > b.engine || rest > b.wire {
			t.Errorf("%s: %d engine and %d other store calls, budget %d and %d:\n%s", kind, eng, rest, b.engine, b.wire, c)
		}
		return c
	}
	post := func(path, body string, hdr ...string) apiResp {
		t.Helper()
		r := call(t, "POST", env.URL+path, body, hdr...)
		if r.status != http.StatusOK {
			t.Fatalf("POST %s: %d %s", path, r.status, r.body)
		}
		return r
	}

	measure("chat completions, durable tool turn", func() {
		post("/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"weather in Paris"}]}`,
			"x-stackbone-session", "sc-chat")
	})

	var first struct{ ID string }
	resp := `{"model":"assistant","input":"weather in Paris"}`
	measure("responses create (new conversation)", func() {
		r := post("/v1/responses", resp, "Idempotency-Key", "sc-key-1")
		if err := json.Unmarshal(r.body, &first); err != nil || first.ID == "" {
			t.Fatalf("response %s", r.body)
		}
	})
	measure("responses retry (same Idempotency-Key)", func() {
		var again struct{ ID string }
		r := post("/v1/responses", resp, "Idempotency-Key", "sc-key-1")
		if err := json.Unmarshal(r.body, &again); err != nil || again.ID != first.ID {
			t.Fatalf("retry answered %s, want response %s", r.body, first.ID)
		}
	})
	measure("responses previous_response_id continuation", func() {
		post("/v1/responses", fmt.Sprintf(`{"model":"assistant","input":"hello again","previous_response_id":%q}`, first.ID))
	})

	agui := func(body string) aguiStream {
		t.Helper()
		s := aguiPost(t, env, "assistant", body)
		if s.status != http.StatusOK {
			t.Fatalf("agui: %d %s", s.status, s.body)
		}
		return s
	}
	var interruptID string
	measure("AG-UI run (pauses for approval)", func() {
		s := agui(`{"threadId":"sc-agui","runId":"r1","state":{},"messages":[{"id":"u1","role":"user","content":"refund my order"}],"tools":[],"context":[],"forwardedProps":{}}`)
		if !strings.Contains(s.body, `"interrupt"`) {
			t.Fatalf("agui run did not pause: %s", s.body)
		}
	})
	interruptID = pendingOf(t, env, "sc-agui").ID
	measure("AG-UI resume (approve)", func() {
		s := agui(fmt.Sprintf(`{"threadId":"sc-agui","runId":"r2","state":{},"messages":[],"tools":[],"context":[],"forwardedProps":{},"resume":[{"interruptId":%q,"status":"resolved","payload":{"approved":true}}]}`, interruptID))
		if !strings.Contains(s.body, "Refund result") {
			t.Fatalf("agui resume: %s", s.body)
		}
	})

	mcpCall := func(version, session, msg string) *sdk.CallToolResult {
		t.Helper()
		c := sdk.NewClient(&sdk.Implementation{Name: "go-test", Version: "1.0.0"}, &sdk.ClientOptions{
			ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
				return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, nil
			}})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		conn, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: env.URL + "/mcp"}, &sdk.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer conn.Close()
		var res *sdk.CallToolResult
		measure(fmt.Sprintf("MCP tools/call %s (%s)", msg, version), func() {
			res, err = conn.CallTool(ctx, &sdk.CallToolParams{Name: "assistant", Arguments: map[string]any{"message": msg, "session": session}})
			if err != nil || res.IsError {
				t.Fatalf("call: %v %+v", err, res)
			}
		})
		return res
	}
	mcpCall("2026-07-28", "sc-mcp-plain", "hello")
	mcpCall("2026-07-28", "sc-mcp-elicit", "refund my order")
	mcpCall("2025-11-25", "sc-mcp-elicit-session", "refund my order")

	// The MCP elicitation call makes at most the engine's calls plus one
	// (the session's pending decisions, read when the client comes back
	// with its answers): the pause, what is left of it, replay and "retry
	// or new turn" come from the engine.
	for _, m := range all {
		if strings.HasPrefix(m.kind, "MCP tools/call refund") && m.counts.Total() > m.counts.Total("engine")+1 {
			t.Errorf("%s: %d store calls, the engine's %d: want at most one more\n%s", m.kind, m.counts.Total(), m.counts.Total("engine"), m.counts)
		}
	}

	var b strings.Builder
	b.WriteString("| request | total | engine | wires and server |\n|---|---:|---:|---:|\n")
	for _, m := range all {
		fmt.Fprintf(&b, "| %s | %d | %d | %d |\n", m.kind, m.counts.Total(), m.counts.Total("engine"),
			m.counts.Total()-m.counts.Total("engine"))
	}
	t.Logf("store calls per request:\n%s", b.String())
}

package cli_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// heldLedger is the side-effect server of a refund tool: it records every call
// it receives by the toolCallId the tool sends, and holds the first one
// until released (the window in which the test partitions the caller).
type heldLedger struct {
	mu      sync.Mutex
	calls   map[string]int
	arrived chan struct{} // closed when the first call arrives
	release chan struct{} // closing it answers the first call
	first   bool
	once    sync.Once
}

// free answers the held first call.
func (l *heldLedger) free() { l.once.Do(func() { close(l.release) }) }

func newHeldLedger() *heldLedger {
	return &heldLedger{calls: map[string]int{}, arrived: make(chan struct{}), release: make(chan struct{})}
}

func (l *heldLedger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	l.calls[r.URL.Query().Get("call")]++
	hold := !l.first
	l.first = true
	l.mu.Unlock()
	if hold {
		close(l.arrived)
		select {
		case <-l.release:
		case <-r.Context().Done():
			return
		}
	}
	fmt.Fprint(w, `{"ok":true}`)
}

func (l *heldLedger) snapshot() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, v := range l.calls {
		out[k] = v
	}
	return out
}

// TestPartitionedReplicaDoesNotRepeatATool cuts replica A off from
// PostgreSQL while its refund tool is under way, so A's lease lapses and
// replica B takes the run over; then the partition heals. The refund (not
// idempotent) must not run a second time: B either finds the call in doubt
// and asks a human (a pending decision with reason "in_doubt"), or the
// turn ends with the one result. The user message is stored once, the
// model is asked for the tool call once, and no turn is answered twice.
func TestPartitionedReplicaDoesNotRepeatATool(t *testing.T) {
	t.Parallel()
	st := stacktest.Postgres(t, "partition")
	direct, _ := url.Parse(stacktest.PostgresURL())
	q := direct.Query()
	q.Set("search_path", st.Schema())
	direct.RawQuery = q.Encode()
	px := stacktest.NewProxy(t, direct.Host)
	viaProxy := *direct
	viaProxy.Host = px.Addr()

	led := newHeldLedger()
	side := httptest.NewServer(led)
	defer side.Close()
	defer led.free() // never leave A's call held
	mock := modeltest.Handler(modeltest.OpenAI, script.MustParse(`[
	 {"when":{"lastTool":"refund"},"reply":{"text":"Refund finished."}},
	 {"when":{"lastUser":"refund"},"reply":{"toolCalls":[{"name":"refund","arguments":{"orderId":"o1","amount":5}}]}},
	 {"reply":{"text":"echo: {{lastUser}}"}}
	]`))
	up := httptest.NewServer(mock)
	defer up.Close()

	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	agentTS := fmt.Sprintf(`import { defineDeepAgent, tool } from 'stackbone';
export default defineDeepAgent({
  name: 'pay',
  model: 'openai/test-model',
  instructions: 'You refund orders.',
  tools: {
    refund: tool({
      description: 'Refund an order',
      parameters: { type: 'object', properties: { orderId: { type: 'string' }, amount: { type: 'number' } }, required: ['orderId', 'amount'] },
      async execute(args, ctx) {
        await ctx.fetch(%q + '/refund?call=' + ctx.toolCallId, { method: 'POST', body: JSON.stringify(args) });
        return { refunded: args.amount };
      },
    }),
  },
});
`, side.URL)
	if err := os.WriteFile(filepath.Join(dir, "agents", "pay.ts"), []byte(agentTS), 0o644); err != nil {
		t.Fatal(err)
	}
	const key = "acme-secret-key"
	env := []string{"OPENAI_BASE_URL=" + up.URL + "/v1", "OPENAI_API_KEY=sk-test", "STACKBONE_API_KEYS=acme:" + key,
		"STACKBONE_LEASE=1s"}
	args := []string{"start", "--dir", dir, "--addr", "127.0.0.1:0"}
	a := startServer(t, append(env, "STACKBONE_DB="+viaProxy.String()), args...)
	b := startServer(t, append(env, "STACKBONE_DB="+direct.String()), args...)

	// The turn goes to A, whose refund call is held by the ledger.
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		req, _ := http.NewRequest("POST", a.URL()+"/v1/chat/completions",
			strings.NewReader(`{"model":"pay","messages":[{"role":"user","content":"refund order o1"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("x-stackbone-session", "p1")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-led.arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("A never ran the refund")
	}

	// A loses its database mid-call: its lease lapses and B takes over.
	px.Partition()
	type pending struct {
		ID         string `json:"id"`
		ToolCallID string `json:"toolCallId"`
		Reason     string `json:"reason"`
	}
	var th struct {
		Status   string `json:"status"`
		Messages []struct {
			Role       string            `json:"role"`
			Content    string            `json:"content"`
			ToolCalls  []json.RawMessage `json:"toolCalls"`
			ToolCallID string            `json:"toolCallId"`
		} `json:"messages"`
		Pending []pending `json:"pending"`
	}
	thread := func() {
		req, _ := http.NewRequest("GET", b.URL()+"/v1/threads/p1", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		decodeJSON(t, resp, &th)
	}
	// A cannot write any more: whatever moves the thread on is B's doing.
	waitUntil(t, "B to take the run over and settle it", 20*time.Second, func() bool {
		thread()
		return th.Status != "running"
	})

	// Heal: A's refund returns and A tries to record it, too late.
	led.free()
	px.Heal()
	select {
	case <-answered:
	case <-time.After(20 * time.Second):
		t.Fatal("A's turn did not end after the partition healed")
	}
	thread()

	calls := led.snapshot()
	var toolCallID string
	for _, m := range th.Messages {
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			var tc struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(m.ToolCalls[0], &tc)
			toolCallID = tc.ID
		}
	}
	total := 0
	for _, n := range calls {
		total += n
	}
	if total != 1 || calls[toolCallID] != 1 {
		t.Errorf("the refund ran %d times (by toolCallId: %v, the thread's call %q); a refund must run once", total, calls, toolCallID)
	}
	users, answers, results := 0, 0, 0
	for _, m := range th.Messages {
		switch {
		case m.Role == "user":
			users++
		case m.Role == "tool":
			results++
		case m.Role == "assistant" && len(m.ToolCalls) == 0:
			answers++
		}
	}
	inDoubt := len(th.Pending) == 1 && th.Pending[0].Reason == "in_doubt" && th.Pending[0].ToolCallID == toolCallID
	switch {
	case users != 1:
		t.Errorf("the user message is stored %d times", users)
	case inDoubt && (results != 0 || answers != 0):
		t.Errorf("a call in doubt yet %d results and %d answers are stored", results, answers)
	case !inDoubt && (th.Status != "idle" || results != 1 || answers != 1):
		t.Errorf("want the call in doubt (a pending in_doubt decision) or the turn finished with one result and one answer; "+
			"status %q, pending %+v, %d results, %d answers", th.Status, th.Pending, results, answers)
	}
	asked := 0
	for _, r := range mock.Requests() {
		if msgs := r.Request.Messages; len(msgs) > 0 && msgs[len(msgs)-1].Role == "user" {
			asked++
		}
	}
	if asked != 1 {
		t.Errorf("the model was asked for the tool call %d times; want once", asked)
	}
	if n := mock.Count(); n > 2 {
		t.Errorf("the model was called %d times; want at most 2 (the call, and the answer after the one result)", n)
	}
}

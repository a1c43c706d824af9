package cli_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/store"
)

// a2aPair is two stackbone processes: A's agent shop lists B's agent
// research under a2aAgents; B's delete_record needs approval and posts
// its side effect to a counter.
type a2aPair struct {
	sideEffects      atomic.Int64
	mockA, mockB     *modeltest.Mock
	dirA, dirB       string
	envA, envB       []string
	a, b             *proc
	releaseB         func()
	upA, upB, sideUp *httptest.Server
	// proxy, when started (holdFirstSend), stands between A and B.
	proxy *httptest.Server
}

const a2aKillScriptA = `[
 {"when": {"lastTool": "task"}, "reply": {"text": "Research said: {{lastTool}}"}},
 {"when": {"lastUser": "first"}, "reply": {"toolCalls": [{"name": "task", "arguments": {"description": "please delete r1", "subagent_type": "research"}}]}},
 {"when": {"lastUser": "second"}, "reply": {"toolCalls": [{"name": "task", "arguments": {"description": "summarize", "subagent_type": "research"}}]}},
 {"reply": {"text": "echo: {{lastUser}}"}}
]`

const a2aKillScriptB = `[
 {"when": {"lastTool": "delete_record"}, "reply": {"text": "Deleted: {{lastTool}}"}},
 {"when": {"lastUser": "delete"}, "reply": {"toolCalls": [{"name": "delete_record", "arguments": {"id": "r1"}}]}},
 {"reply": {"text": "research echo: {{lastUser}}"}}
]`

// holdingProxy is a proxy to B that serves B's card as its own (so A
// sends its messages through it) and, while hold is set, takes the first
// message A sends without forwarding it, holding the request until A goes
// away: a message that may or may not have arrived.
func holdingProxy(t *testing.T, bURL string, hold *atomic.Bool, held chan<- struct{}) *httptest.Server {
	t.Helper()
	var self string
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && hold.CompareAndSwap(true, false) {
			_, _ = io.Copy(io.Discard, r.Body) // read whole, so the server notices the caller going away
			held <- struct{}{}
			select {
			case <-r.Context().Done():
			case <-done:
			}
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, bURL+r.URL.RequestURI(), r.Body)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			if k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(resp.StatusCode)
		if strings.HasSuffix(r.URL.Path, "agent-card.json") {
			b, _ := io.ReadAll(resp.Body)
			_, _ = w.Write([]byte(strings.ReplaceAll(string(b), bURL, self)))
			return
		}
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				_, _ = w.Write(buf[:n])
				w.(http.Flusher).Flush()
			}
			if err != nil {
				return
			}
		}
	}))
	self = srv.URL
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) })
	return srv
}

func newA2APair(t *testing.T) *a2aPair { return newA2APairVia(t, nil, nil) }

// newA2APairVia is newA2APair with A speaking to B through holdingProxy
// when hold is set.
func newA2APairVia(t *testing.T, hold *atomic.Bool, held chan<- struct{}) *a2aPair {
	t.Helper()
	p := &a2aPair{}
	p.sideUp = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.sideEffects.Add(1)
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(p.sideUp.Close)
	p.mockA = modeltest.Handler(modeltest.OpenAI, script.MustParse(a2aKillScriptA))
	p.mockB = modeltest.Handler(modeltest.OpenAI, script.MustParse(a2aKillScriptB))
	p.upA, p.upB = httptest.NewServer(p.mockA), httptest.NewServer(p.mockB)
	t.Cleanup(p.upA.Close)
	t.Cleanup(p.upB.Close)

	p.dirB = t.TempDir()
	writeAgent(t, p.dirB, "research.ts", fmt.Sprintf(`import { defineDeepAgent, tool } from 'stackbone';
export default defineDeepAgent({
  name: 'research',
  model: 'openai/test-model',
  description: 'Finds and deletes records.',
  tools: {
    delete_record: tool({
      description: 'Delete a record',
      parameters: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] },
      needsApproval: { description: (a) => 'Delete record ' + a.id, allowedDecisions: ['approve', 'reject'] },
      async execute(args, ctx) {
        await ctx.fetch(%q + '/delete?key=' + ctx.toolCallId, { method: 'POST', body: JSON.stringify(args) });
        return { deleted: args.id };
      },
    }),
  },
});
`, p.sideUp.URL))
	p.envB = []string{"OPENAI_BASE_URL=" + p.upB.URL + "/v1", "OPENAI_API_KEY=sk-test"}
	p.envA = []string{"OPENAI_BASE_URL=" + p.upA.URL + "/v1", "OPENAI_API_KEY=sk-test", "RESEARCH_KEY=rk-kill-secret"}
	p.b = startServer(t, p.envB, "dev", "--dir", p.dirB, "--addr", "127.0.0.1:0")
	remote := p.b.URL()
	if hold != nil {
		p.proxy = holdingProxy(t, p.b.URL(), hold, held)
		remote = p.proxy.URL
	}
	p.dirA = t.TempDir()
	writeAgent(t, p.dirA, "shop.ts", `import { defineDeepAgent } from 'stackbone';
export default defineDeepAgent({
  name: 'shop',
  model: 'openai/test-model',
  a2aAgents: { research: { url: '`+remote+`/a2a/research', headers: { Authorization: 'Bearer ${RESEARCH_KEY}' } } },
});
`)
	p.a = startServer(t, p.envA, "dev", "--dir", p.dirA, "--addr", "127.0.0.1:0")
	return p
}

func writeAgent(t *testing.T, dir, name, src string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agents", name), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

type a2aThreadView struct {
	Status   string `json:"status"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

func (v a2aThreadView) last() string {
	if len(v.Messages) == 0 {
		return ""
	}
	return v.Messages[len(v.Messages)-1].Content
}

// pendingOn waits for the one pending decision of a thread.
func pendingOn(t *testing.T, base, thread string) store.Interrupt {
	t.Helper()
	var it store.Interrupt
	waitUntil(t, "a pending decision on "+thread, 20*time.Second, func() bool {
		var page struct {
			Data []store.Interrupt `json:"data"`
		}
		getJSON(t, base+"/v1/hitl?thread="+thread, &page)
		if len(page.Data) != 1 {
			return false
		}
		it = page.Data[0]
		return true
	})
	return it
}

// TestA2AKillDelegatorMidTask: A (the delegating process) is killed -9
// after its approval reached B and while B's task still runs (B's model
// call after the tool is held). On restart A re-attaches to the remote
// task by its recorded id (SubscribeToTask) instead of sending again: B's
// tool ran once, B has one turn of it, and A's turn ends with B's answer.
func TestA2AKillDelegatorMidTask(t *testing.T) {
	t.Parallel()
	p := newA2APair(t)
	release := p.mockB.HoldOnce(script.When{LastTool: "delete_record"})
	defer release()

	post(t, p.a.URL(), "", "k1", "first job")
	it := pendingOn(t, p.a.URL(), "k1")
	if it.Tool != "research/delete_record" || it.Description != "Delete record r1 (remote A2A agent research)" {
		t.Fatalf("pending decision on A %+v", it)
	}
	if r := run(t, nil, "hitl", "approve", it.ID, "--yes", "--url", p.a.URL()); r.code != 0 {
		t.Fatalf("approve: %s", r.stderr)
	}
	waitUntil(t, "B's tool to run and its next model call to be held", 20*time.Second, func() bool {
		return p.sideEffects.Load() == 1 && p.mockB.Count() == 2
	})
	p.a.Kill(t)

	a2 := startServer(t, p.envA, "dev", "--dir", p.dirA, "--addr", "127.0.0.1:0")
	waitUntil(t, "A to re-attach to B's task", 20*time.Second, func() bool {
		return strings.Contains(a2.Logs.String(), "A2A delegation re-attaches to its remote task")
	})
	release()
	var th a2aThreadView
	waitUntil(t, "A's turn to finish after the restart", 30*time.Second, func() bool {
		getJSON(t, a2.URL()+"/v1/threads/k1", &th)
		return th.Status == "idle"
	})
	if got := th.last(); got != `Research said: Deleted: {"deleted":"r1"}` {
		t.Fatalf("A's last message %q", got)
	}
	if n := p.sideEffects.Load(); n != 1 {
		t.Fatalf("B's tool ran %d times; want once", n)
	}
	var threads struct {
		Data []store.Thread `json:"data"`
	}
	getJSON(t, p.b.URL()+"/v1/threads", &threads)
	if len(threads.Data) != 1 {
		t.Fatalf("B has %d threads; want the one remote context", len(threads.Data))
	}
	var bt a2aThreadView
	getJSON(t, p.b.URL()+"/v1/threads/"+threads.Data[0].ID, &bt)
	users := 0
	for _, m := range bt.Messages {
		if m.Role == "user" {
			users++
		}
	}
	if users != 1 {
		t.Fatalf("B's thread has %d user turns; want 1 (nothing sent twice): %+v", users, bt.Messages)
	}
	for _, logs := range []string{a2.Logs.String(), p.a.Logs.String()} {
		if strings.Contains(logs, "rk-kill-secret") {
			t.Fatal("A's log shows the remote key")
		}
	}
}

// TestA2AKillRemoteMidTask: B (the remote) is killed -9 while its task
// runs. A's delegation fails cleanly: the task call is a tool error the
// model sees, A's turn ends and its thread takes new turns.
func TestA2AKillRemoteMidTask(t *testing.T) {
	t.Parallel()
	p := newA2APair(t)
	p.mockB.HoldOnce(script.When{LastUser: "summarize"})

	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequest("POST", p.a.URL()+"/v1/chat/completions",
			strings.NewReader(`{"model":"shop","messages":[{"role":"user","content":"second job"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-stackbone-session", "k2")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
		}
	}()
	waitUntil(t, "B's model call to be held", 20*time.Second, func() bool { return p.mockB.Count() == 1 })
	p.b.Kill(t)
	<-done
	var th a2aThreadView
	waitUntil(t, "A's turn to end", 30*time.Second, func() bool {
		getJSON(t, p.a.URL()+"/v1/threads/k2", &th)
		return th.Status == "idle"
	})
	if got := th.last(); !strings.HasPrefix(got, "Research said: Error: A2A agent research") {
		t.Fatalf("A's last message %q; want the delegation's error", got)
	}
	if code, body := post(t, p.a.URL(), "", "k2", "anything else"); code != 200 || !strings.Contains(body, "echo: anything else") {
		t.Fatalf("A's thread after the failed delegation: %d %s", code, body)
	}
}

// TestA2AKillBeforeTheRemoteAnswers: A is killed -9 after it recorded a
// message to B and sent it, before B named a task for it (a proxy took the
// message and held it). On restart the delegation is in doubt (an in_doubt
// decision on the task call, nothing sent again on its own); retry sends
// the message again, with the same messageId, and B runs it once.
func TestA2AKillBeforeTheRemoteAnswers(t *testing.T) {
	t.Parallel()
	var hold atomic.Bool
	hold.Store(true)
	held := make(chan struct{}, 1)
	p := newA2APairVia(t, &hold, held)

	go func() {
		req, _ := http.NewRequest("POST", p.a.URL()+"/v1/chat/completions",
			strings.NewReader(`{"model":"shop","messages":[{"role":"user","content":"second job"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-stackbone-session", "k3")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
		}
	}()
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("A's message never reached the proxy")
	}
	p.a.Kill(t)

	a2 := startServer(t, p.envA, "dev", "--dir", p.dirA, "--addr", "127.0.0.1:0")
	it := pendingOn(t, a2.URL(), "k3")
	if it.Reason != store.ReasonInDoubt || it.Tool != "task" || !strings.Contains(it.Description, "may or may not have arrived") {
		t.Fatalf("pending decision after the restart %+v", it)
	}
	var threads struct {
		Data []store.Thread `json:"data"`
	}
	getJSON(t, p.b.URL()+"/v1/threads", &threads)
	if len(threads.Data) != 0 {
		t.Fatalf("B has %d threads before the retry; want none", len(threads.Data))
	}
	if r := run(t, nil, "hitl", "retry", it.ID, "--yes", "--url", a2.URL()); r.code != 0 {
		t.Fatalf("retry: %s", r.stderr)
	}
	var th a2aThreadView
	waitUntil(t, "A's turn to finish after the retry", 30*time.Second, func() bool {
		getJSON(t, a2.URL()+"/v1/threads/k3", &th)
		return th.Status == "idle"
	})
	if got := th.last(); got != "Research said: research echo: summarize" {
		t.Fatalf("A's last message %q", got)
	}
	getJSON(t, p.b.URL()+"/v1/threads", &threads)
	if len(threads.Data) != 1 {
		t.Fatalf("B has %d threads; want 1", len(threads.Data))
	}
	var bt a2aThreadView
	getJSON(t, p.b.URL()+"/v1/threads/"+threads.Data[0].ID, &bt)
	if len(bt.Messages) != 2 || bt.Messages[0].Content != "summarize" {
		t.Fatalf("B's thread %+v; want the one message and its answer", bt.Messages)
	}
}

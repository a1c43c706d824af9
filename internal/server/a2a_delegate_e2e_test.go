package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/agent/tsload"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
)

// researchKey is stack B's API key: stack A sends it from its agent file's
// a2aAgents headers (${RESEARCH_KEY}); it must show nowhere on A.
const researchKey = "rk-Secret-9f8e7d6c5b4a"

// researchScript drives stack B's research agent: "delete …" calls the
// approval-gated delete_record, anything else is echoed.
const researchScript = `[
 {"when": {"lastTool": "delete_record"}, "reply": {"text": "Deleted: {{lastTool}}"}},
 {"when": {"lastUser": "delete"}, "reply": {"toolCalls": [{"name": "delete_record", "arguments": {"id": "r1"}}]}},
 {"reply": {"text": "research echo: {{lastUser}}"}}
]`

// bossScript drives stack A's agent: "first" and "second" hand work to the
// remote research agent through task.
const bossScript = `[
 {"when": {"lastTool": "task"}, "reply": {"text": "Research said: {{lastTool}}"}},
 {"when": {"lastUser": "first"}, "reply": {"toolCalls": [{"name": "task", "arguments": {"description": "please delete r1", "subagent_type": "research"}}]}},
 {"when": {"lastUser": "second"}, "reply": {"toolCalls": [{"name": "task", "arguments": {"description": "what did you do", "subagent_type": "research"}}]}},
 {"when": {"lastUser": "nowhere"}, "reply": {"toolCalls": [{"name": "task", "arguments": {"description": "hello", "subagent_type": "ghost"}}]}},
 {"reply": {"text": "echo: {{lastUser}}"}}
]`

// researchStack is stack B: a research agent whose delete_record needs
// approval, behind an API key.
func researchStack(t *testing.T, st store.Store) *stacktest.Env {
	t.Helper()
	return stacktest.New(t, stacktest.Options{Script: researchScript, Mode: config.Start, Store: st,
		Keys: []config.Key{{Tenant: "t1", Secret: researchKey}},
		Agents: func(env *stacktest.Env) []*agent.Spec {
			del := &tool.Tool{Name: "delete_record", Description: "Delete a record",
				Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
				Approval: &tool.Approval{AllowedDecisions: []tool.Decision{tool.Approve, tool.Reject, tool.Edit},
					Description: func(_ context.Context, args json.RawMessage) (string, error) {
						var a struct{ ID string }
						_ = json.Unmarshal(args, &a)
						return "Delete record " + a.ID, nil
					}},
				Execute: func(_ context.Context, c tool.Call) (tool.Result, error) {
					env.Calls.Add("delete_record", c.Args)
					return tool.Result{Content: fmt.Sprintf(`{"deleted":%s}`, c.Args)}, nil
				}}
			return []*agent.Spec{{Name: "research", Model: "openai/test-model", Instructions: "You research.",
				Description: "Finds and deletes records.", Tools: []*tool.Tool{del}}}
		}})
}

// bossStack is stack A: an agent file listing B's research agent under
// a2aAgents, its key from ${RESEARCH_KEY}.
func bossStack(t *testing.T, remoteURL string, st store.Store) *stacktest.Env {
	t.Helper()
	return delegatingStack(t, `research: { url: '`+remoteURL+`', headers: { Authorization: 'Bearer ${RESEARCH_KEY}' } }`, bossScript, st)
}

// delegatingStack is a stack whose agent file (agent "assistant") lists
// a2aAgents, ${RESEARCH_KEY} being researchKey.
func delegatingStack(t *testing.T, a2aAgents, script string, st store.Store) *stacktest.Env {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	src := `import { defineDeepAgent } from 'stackbone';
export default defineDeepAgent({
  name: 'assistant',
  model: 'openai/test-model',
  instructions: 'Delegate research.',
  a2aAgents: {
    ` + a2aAgents + `,
  },
});
`
	file := filepath.Join(dir, "agents", "assistant.ts")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	lookup := func(k string) (string, bool) {
		if k == "RESEARCH_KEY" {
			return researchKey, true
		}
		return "", false
	}
	return stacktest.New(t, stacktest.Options{Script: script, Store: st, Agents: func(*stacktest.Env) []*agent.Spec {
		spec, err := tsload.LoadFile(context.Background(), dir, file, tsload.Options{LookupEnv: lookup})
		if err != nil {
			t.Fatalf("load the agent file: %v", err)
		}
		return []*agent.Spec{spec}
	}})
}

// threadText is a thread's GET /v1/threads/{id} body.
func threadText(t *testing.T, env *stacktest.Env, id string, hdr ...string) string {
	t.Helper()
	r := call(t, "GET", env.URL+"/v1/threads/"+id, "", hdr...)
	if r.status != 200 {
		t.Fatalf("GET thread %s: %d %s", id, r.status, r.body)
	}
	return string(r.body)
}

// TestA2ADelegationApproval: stack A's agent hands work to stack B's agent
// over A2A (task → research). B's tool needs approval: the approval shows
// on A's thread (GET /v1/hitl, 409 approval_pending on A's chat wire),
// nothing runs on B until it is approved on A; then B's tool runs once and
// its answer is the task's result. A second delegation in the same A
// thread continues the same remote conversation (one B thread holding both
// turns). A rejection on A reaches B's model with its message, and B's tool
// does not run. The key in A's agent file shows nowhere on A.
func TestA2ADelegationApproval(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			var stA, stB store.Store
			if driver == "postgres" {
				stA, stB = stacktest.Postgres(t, "a2a_deleg_a"), stacktest.Postgres(t, "a2a_deleg_b")
			}
			b := researchStack(t, stB)
			a := bossStack(t, b.URL+"/a2a/research", stA)
			keyB := []string{"Authorization", "Bearer " + researchKey}

			// The agent as A shows it: the remote agent, its header by name only.
			info := call(t, "GET", a.URL+"/v1/agents/assistant", "")
			if info.status != 200 || !strings.Contains(string(info.body), `"a2aAgents":[{"name":"research"`) ||
				!strings.Contains(string(info.body), `"headers":["Authorization"]`) {
				t.Fatalf("GET /v1/agents/assistant: %d %s", info.status, info.body)
			}
			// The task tool describes research from its card.
			if !strings.Contains(string(info.body), "research: Finds and deletes records.") {
				t.Fatalf("task tool does not describe research from its card: %s", info.body)
			}

			// 1. The remote approval pauses A's turn.
			res := askMCP(t, a, "boss-1", "first job")
			if ch := res.Choices[0]; ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 || ch.Message.ToolCalls[0].Function.Name != "task" {
				t.Fatalf("want a paused task call, got %+v", ch)
			}
			it := pendingOf(t, a, "boss-1")
			if it.Subagent != "research" || it.Tool != "research/delete_record" || !strings.Contains(it.Description, "Delete record r1") ||
				!strings.Contains(string(it.Args), `"r1"`) {
				t.Fatalf("pending decision on A %+v", it)
			}
			if n := b.Calls.Get("delete_record"); n != 0 {
				t.Fatalf("delete_record ran %d times on B before approval", n)
			}
			raw := call(t, "POST", a.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"hello?"}]}`, "x-stackbone-session", "boss-1")
			if raw.status != 409 || !strings.Contains(string(raw.body), `"code":"approval_pending"`) {
				t.Fatalf("A's next turn while the remote waits: %d %s", raw.status, raw.body)
			}
			if r := call(t, "POST", a.URL+"/v1/hitl/"+it.ID+"/approve", ""); r.status != 200 {
				t.Fatalf("approve on A: %d %s", r.status, r.body)
			}
			waitIdle(t, a, "boss-1")
			if n := b.Calls.Get("delete_record"); n != 1 {
				t.Fatalf("delete_record ran %d times on B; want 1", n)
			}
			if view := threadText(t, a, "boss-1"); !strings.Contains(view, `Research said: Deleted: {\"deleted\":{\"id\":\"r1\"}}`) {
				t.Fatalf("A's thread lacks the remote answer: %s", view)
			}

			// 2. A second delegation in the same thread: the same remote
			// conversation.
			if got := askMCP(t, a, "boss-1", "second job").Choices[0].Message.Content; got != "Research said: research echo: what did you do" {
				t.Fatalf("second delegation %q", got)
			}
			threads := call(t, "GET", b.URL+"/v1/threads", "", keyB...)
			var page struct {
				Data []store.Thread `json:"data"`
			}
			if err := json.Unmarshal(threads.body, &page); err != nil || len(page.Data) != 1 {
				t.Fatalf("B's threads: want one (one remote contextId), got %d %s", threads.status, threads.body)
			}
			bt := threadText(t, b, page.Data[0].ID, keyB...)
			if !strings.Contains(bt, "please delete r1") || !strings.Contains(bt, "what did you do") {
				t.Fatalf("B's thread %s lacks both turns: %s", page.Data[0].ID, bt)
			}
			if !strings.Contains(threadText(t, a, "boss-1"), `"contextId":"`+page.Data[0].ID+`"`) {
				t.Fatalf("A's thread does not record the remote contextId %s", page.Data[0].ID)
			}

			// 3. Rejected on A: B's tool does not run, B's model hears why.
			askMCP(t, a, "boss-2", "first job")
			it = pendingOf(t, a, "boss-2")
			if r := call(t, "POST", a.URL+"/v1/hitl/"+it.ID+"/reject", `{"message":"not this one"}`); r.status != 200 {
				t.Fatalf("reject on A: %d %s", r.status, r.body)
			}
			waitIdle(t, a, "boss-2")
			if n := b.Calls.Get("delete_record"); n != 1 {
				t.Fatalf("delete_record ran %d times on B after a rejection; want still 1", n)
			}
			if view := threadText(t, a, "boss-2"); !strings.Contains(view, "Research said: Deleted: The user rejected this tool call. Reviewer's message: not this one") {
				t.Fatalf("A's thread lacks the rejection's outcome: %s", view)
			}

			// 4. Over AG-UI: the remote's decision is the run's interrupt
			// (the remote agent's step bracketed), and a resume with edited
			// arguments runs B's tool with them.
			paused, pit := aguiInterrupt(t, a, "boss-4", "first job")
			meta, _ := pit["metadata"].(map[string]any)["stackbone"].(map[string]any)
			if meta["subagent"] != "research" || meta["tool"] != "research/delete_record" || paused.first("STEP_STARTED")["stepName"] != "research" {
				t.Fatalf("AG-UI interrupt %v; events %v", pit, paused.types())
			}
			resume := fmt.Sprintf(`"resume":[{"interruptId":%q,"status":"resolved","payload":{"approved":true,"editedArgs":{"id":"r9"}}}]`, pit["id"])
			resumed := aguiPost(t, a, "assistant", `{"threadId":"boss-4","runId":"run-2","state":{},"messages":[],"tools":[],"context":[],"forwardedProps":{},`+resume+`}`)
			checkTerminal(t, resumed)
			if got := resumed.text(); !strings.Contains(got, `Research said: Deleted: {"deleted":{"id":"r9"}}`) {
				t.Fatalf("AG-UI resumed run %q (%v)", got, resumed.types())
			}
			streamed := false // the remote's answer streams into the research step
			for _, e := range resumed.all("TEXT_MESSAGE_CONTENT") {
				streamed = streamed || (e["subagentRunId"] != nil && strings.HasPrefix(e["delta"].(string), "Deleted: "))
			}
			if !streamed {
				t.Fatalf("the remote's text did not stream into its step: %v", resumed.all("TEXT_MESSAGE_CONTENT"))
			}
			if args := b.Calls.Args("delete_record"); len(args) != 2 || string(args[1]) != `{"id":"r9"}` {
				t.Fatalf("B's delete_record calls %s; want a second one with the edited arguments", args)
			}

			// 5. An unknown subagent is a tool error naming the remote one too.
			if got := askMCP(t, a, "boss-3", "nowhere").Choices[0].Message.Content; !strings.Contains(got, "research") {
				t.Fatalf("unknown subagent %q", got)
			}

			// The key shows nowhere on A.
			for what, s := range map[string]string{"agent info": string(call(t, "GET", a.URL+"/v1/agents/assistant", "").body),
				"thread": threadText(t, a, "boss-1"), "logs": a.Logs.String()} {
				if strings.Contains(s, researchKey) {
					t.Errorf("A's %s shows the remote key:\n%s", what, s)
				}
			}
		})
	}
}

// paymentsScript drives an agent delegating to tests/a2a/remote-server.mjs.
const paymentsScript = `[
 {"when": {"lastTool": "task"}, "reply": {"text": "Payments said: {{lastTool}}"}},
 {"when": {"lastUser": "wire"}, "reply": {"toolCalls": [{"name": "task", "arguments": {"description": "wire 100 EUR to ACME", "subagent_type": "payments"}}]}},
 {"when": {"lastUser": "hello"}, "reply": {"toolCalls": [{"name": "task", "arguments": {"description": "hello", "subagent_type": "payments"}}]}},
 {"reply": {"text": "echo: {{lastUser}}"}}
]`

// startRemoteA2A runs tests/a2a/remote-server.mjs (an agent on the
// official @a2a-js/sdk server) until the test ends; it returns its base URL
// and the file its side effects are written to.
func startRemoteA2A(t *testing.T, key string) (url, calls string) {
	t.Helper()
	node, dir := nodeFixture(t, "a2a", "@a2a-js/sdk/package.json")
	calls = filepath.Join(t.TempDir(), "calls.jsonl")
	cmd := exec.Command(node, filepath.Join(dir, "remote-server.mjs"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "A2A_CALLS_FILE="+calls, "A2A_REQUIRE_KEY="+key)
	port := startNodeServer(t, cmd, "the A2A fixture")
	return fmt.Sprintf("http://127.0.0.1:%d", port), calls
}

// sideEffects counts the lines of a fixture's calls file.
func sideEffects(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// TestA2ADelegationToSDKServer: the remote is not Stackbone but an agent on
// the official @a2a-js/sdk server, found by A2A discovery under its base
// URL. Its plain-text INPUT_REQUIRED question is a pending decision on our
// thread; approved here, the remote's wire runs once and its answer is the
// task's result; rejected, it does not run and hears the reviewer's
// message. Later delegations in the thread continue the remote's context
// (its turn counter goes on), and its streamed artifact chunks arrive whole.
func TestA2ADelegationToSDKServer(t *testing.T) {
	t.Parallel()
	remote, calls := startRemoteA2A(t, researchKey)
	env := delegatingStack(t, `payments: { url: '`+remote+`', headers: { Authorization: 'Bearer ${RESEARCH_KEY}' } }`, paymentsScript, nil)

	if info := string(call(t, "GET", env.URL+"/v1/agents/assistant", "").body); !strings.Contains(info,
		"payments: Moves money between accounts. Skills: Wire transfers (Sends money after a human approves.).") {
		t.Fatalf("the task tool does not describe payments from its card: %s", info)
	}
	res := askMCP(t, env, "pay-1", "wire it")
	if res.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("want a paused task call, got %+v", res.Choices[0])
	}
	it := pendingOf(t, env, "pay-1")
	if it.Tool != "payments" || it.Subagent != "payments" || !strings.Contains(it.Description, "Wire 100 EUR to ACME? Answer approve or reject.") {
		t.Fatalf("pending decision %+v", it)
	}
	if n := sideEffects(t, calls); n != 0 {
		t.Fatalf("the remote wired %d times before approval", n)
	}
	if r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", ""); r.status != 200 {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	waitIdle(t, env, "pay-1")
	if n := sideEffects(t, calls); n != 1 {
		t.Fatalf("the remote wired %d times; want 1", n)
	}
	if view := threadText(t, env, "pay-1"); !strings.Contains(view, "Payments said: Wired 100 EUR.") {
		t.Fatalf("thread lacks the remote's answer: %s", view)
	}
	var ctxID string
	for i, want := range []string{"1", "2"} {
		got := askMCP(t, env, "pay-1", "hello "+want).Choices[0].Message.Content
		if !strings.HasPrefix(got, "Payments said: payments turn "+want+" of context ") {
			t.Fatalf("delegation %d: %q\n%s", i+1, got, threadText(t, env, "pay-1"))
		}
		c := strings.TrimPrefix(got, "Payments said: payments turn "+want+" of context ")
		if ctxID != "" && c != ctxID {
			t.Fatalf("the second delegation used context %s, the first %s", c, ctxID)
		}
		ctxID = c
	}
	if !strings.Contains(threadText(t, env, "pay-1"), `"contextId":"`+ctxID+`"`) {
		t.Fatalf("the wire's task ran in another context than %s", ctxID)
	}

	askMCP(t, env, "pay-2", "wire it")
	it = pendingOf(t, env, "pay-2")
	if r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/reject", `{"message":"not today"}`); r.status != 200 {
		t.Fatalf("reject: %d %s", r.status, r.body)
	}
	waitIdle(t, env, "pay-2")
	if n := sideEffects(t, calls); n != 1 {
		t.Fatalf("the remote wired %d times after a rejection; want still 1", n)
	}
	if view := threadText(t, env, "pay-2"); !strings.Contains(view, "Payments said: Not wired: not today") {
		t.Fatalf("thread lacks the rejection's outcome: %s", view)
	}
}

// TestA2ADelegationCardUnavailable: a remote agent whose card cannot be
// read is described as such to the model, and a delegation to it is a tool
// error the model sees (naming the card's URL), not a failed turn.
func TestA2ADelegationCardUnavailable(t *testing.T) {
	t.Parallel()
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL
	dead.Close()
	a := delegatingStack(t, `ghost: { url: '`+url+`/a2a/ghost' }`, bossScript, nil)
	if info := string(call(t, "GET", a.URL+"/v1/agents/assistant", "").body); !strings.Contains(info, "ghost: A remote A2A agent (its agent card could not be read just now).") {
		t.Fatalf("task tool description: %s", info)
	}
	got := askMCP(t, a, "ghost-1", "nowhere").Choices[0].Message.Content
	if !strings.HasPrefix(got, "Research said: Error: A2A agent ghost: cannot read its agent card at "+url+"/a2a/ghost/.well-known/agent-card.json") {
		t.Fatalf("delegation to an unreachable agent: %q", got)
	}
	if th := waitIdle(t, a, "ghost-1"); th.Status != store.Idle {
		t.Fatalf("thread %+v", th)
	}
}

// TestA2ADelegationCancel: a Stop of A's turn while B works on the
// delegated task cancels B's task too (CancelTask), instead of leaving B
// working for a call nobody waits for.
func TestA2ADelegationCancel(t *testing.T) {
	t.Parallel()
	b := researchStack(t, nil)
	a := bossStack(t, b.URL+"/a2a/research", nil)
	keyB := []string{"Authorization", "Bearer " + researchKey}
	release := b.Upstream.HoldOnce(script.When{LastUser: "what did you do"})
	t.Cleanup(release)

	streamed := streamPost(t, a.URL+"/v1/chat/completions",
		`{"model":"assistant","stream":true,"messages":[{"role":"user","content":"second job"}]}`, "x-stackbone-session", "stop-1")
	stacktest.WaitFor(t, "B's model call to be held", func() bool { return b.Upstream.Count() == 1 })
	var page struct {
		Data []store.Thread `json:"data"`
	}
	stacktest.WaitFor(t, "B's thread to run", func() bool {
		r := call(t, "GET", b.URL+"/v1/threads", "", keyB...)
		return json.Unmarshal(r.body, &page) == nil && len(page.Data) == 1 && page.Data[0].Status == store.Running
	})
	if r, c := threadCancel(t, a, "stop-1"); r.status != http.StatusOK || !c.Cancelled {
		t.Fatalf("cancel on A: %d %s", r.status, r.body)
	}
	<-streamed
	stacktest.WaitFor(t, "B's task to stop", func() bool {
		return b.Thread(t, "t1", page.Data[0].ID).Status != store.Running
	})
	if !strings.Contains(a.Logs.String(), "its remote A2A task is cancelled too") {
		t.Fatal("A did not log the remote cancel")
	}
}

// TestA2ADelegationCancelWaiting: cancelling A's turn while it waits on a
// decision B's delegated task asks (B's task INPUT_REQUIRED) ends A's turn
// and sends CancelTask to B, which ends B's waiting task too: both threads
// idle, the decisions closed on both sides, B's tool never run.
func TestA2ADelegationCancelWaiting(t *testing.T) {
	t.Parallel()
	b := researchStack(t, nil)
	a := bossStack(t, b.URL+"/a2a/research", nil)
	keyB := []string{"Authorization", "Bearer " + researchKey}
	askMCP(t, a, "wait-1", "first job")
	it := pendingOf(t, a, "wait-1")
	var page struct {
		Data []store.Thread `json:"data"`
	}
	if r := call(t, "GET", b.URL+"/v1/threads", "", keyB...); json.Unmarshal(r.body, &page) != nil || len(page.Data) != 1 ||
		page.Data[0].Status != store.Waiting {
		t.Fatalf("B's thread: want one waiting: %d %s", r.status, r.body)
	}
	if r, c := threadCancel(t, a, "wait-1"); r.status != http.StatusOK || !c.Cancelled || c.Status != store.Idle {
		t.Fatalf("cancel on A: %d %s", r.status, r.body)
	}
	if got, err := a.Store.GetInterrupt(t.Context(), "dev", it.ID); err != nil || got.Status != store.Rejected || got.Decision.Via != store.ViaCancel {
		t.Fatalf("A's decision after the cancel: %+v %v", got, err)
	}
	if th := b.Thread(t, "t1", page.Data[0].ID); th.Status != store.Idle {
		t.Fatalf("B's task after A's cancel: thread %s", th.Status)
	}
	if its, err := b.Store.ListInterrupts(t.Context(), "t1", store.InterruptFilter{ThreadID: page.Data[0].ID}); err != nil || len(its) != 0 {
		t.Fatalf("B's pending decisions after the cancel: %v %v", its, err)
	}
	if n := b.Calls.Get("delete_record"); n != 0 {
		t.Fatalf("delete_record ran %d times on B", n)
	}
	if !strings.Contains(a.Logs.String(), "cancelled waiting turn: its remote A2A task is cancelled too") {
		t.Fatal("A did not log the remote cancel")
	}
}

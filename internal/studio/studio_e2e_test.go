package studio_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
)

func TestInboxApproveRunsToolAndThreadShowsResumedTurn(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	pause(t, env, "", "refund-b1", "please refund my order")
	it := onePending(t, env, "", "refund-b1")

	p := newPage(t)
	p.open(env.URL + "/studio/")
	p.waitText(card(it.ID)+" .desc", "Refund order ord_42 for 19.99")
	p.waitText(card(it.ID)+" h3", "refund")
	p.waitText(card(it.ID)+" pre.json", `"orderId": "ord_42"`)
	p.waitText(card(it.ID)+" .meta", "assistant")
	p.waitText(card(it.ID)+" a.thread-link", "refund-b1")
	p.waitText("#inbox-count", "1")
	if env.Calls.Get("refund") != 0 {
		t.Fatal("the tool ran before approval")
	}

	p.click(card(it.ID) + ` button[data-action="approve"]`)
	waitIdle(t, env, "dev", "refund-b1")
	if n := env.Calls.Get("refund"); n != 1 {
		t.Fatalf("refund ran %d times, want 1", n)
	}
	p.waitJS("the card to leave the inbox", `!document.querySelector(`+js(card(it.ID))+`)`)
	p.waitText("#inbox-empty:not([hidden])", "No pending decisions")
	// The open dev Studio has no session to prove itself: it is a claim.
	if d := decision(t, env, "dev", it.ID); d.Status != store.Approved || d.Decision.Via != "api" || d.Decision.ClaimedVia != "studio" {
		t.Fatalf("decision %+v %+v", d, d.Decision)
	}

	// The thread view shows the resumed turn, the tool result and the timeline.
	p.click(`#nav a[data-nav="threads"]`)
	p.waitText(`tr[data-thread="refund-b1"]`, "idle")
	p.click(`tr[data-thread="refund-b1"] a`)
	p.waitText("#messages", "Refund result:")
	p.waitText("#messages .role-tool", `"refunded": 19.99`)
	p.waitText("#timeline", "run finished")
	p.waitText("#timeline", "tool result")
	p.waitText("#thread-meta", "idle")
}

func TestInboxRejectWithMessage(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	pause(t, env, "", "refund-b2", "please refund my order")
	it := onePending(t, env, "", "refund-b2")

	p := newPage(t)
	p.open(env.URL + "/studio/#/inbox")
	// Keyboard only: Enter on the focused button opens the panel.
	p.do(chromedp.Focus(chromedp.CSS(card(it.ID)+` button[data-action="reject"]`)), chromedp.KeyEvent("\r"))
	p.waitJS("the message field to take focus", `document.activeElement && document.activeElement.name === 'message'`)
	p.do(chromedp.SendKeys(chromedp.CSS(card(it.ID)+` textarea[name="message"]`), "Customer already refunded"))
	p.click(card(it.ID) + ` button[data-action="confirm-reject"]`)
	waitIdle(t, env, "dev", "refund-b2")
	p.waitJS("the card to leave the inbox", `!document.querySelector(`+js(card(it.ID))+`)`)
	if env.Calls.Get("refund") != 0 {
		t.Fatal("a rejected tool ran")
	}
	d := decision(t, env, "dev", it.ID)
	if d.Status != store.Rejected || d.Decision == nil || d.Decision.Message != "Customer already refunded" || d.Decision.Via != "api" || d.Decision.ClaimedVia != "studio" {
		t.Fatalf("decision %+v %+v", d, d.Decision)
	}
	msgs, _ := env.Store.Messages(context.Background(), "dev", "refund-b2")
	found := false
	for _, m := range msgs {
		found = found || (m.IsError && strings.Contains(m.Content, "Customer already refunded"))
	}
	if !found {
		t.Fatal("the model was not told the reviewer's message")
	}
}

func TestInboxEditIsCheckedAgainstTheSchemaInThePage(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	pause(t, env, "", "refund-b3", "please refund my order")
	it := onePending(t, env, "", "refund-b3")

	p := newPage(t)
	p.open(env.URL + "/studio/")
	// Count what the page sends from now on.
	eval[bool](p, `(() => { window.__posts = []; const f = window.fetch; window.fetch = (u, o) => { if (o && o.method && o.method !== 'GET') window.__posts.push(String(u)); return f(u, o); }; return true; })()`)
	p.click(card(it.ID) + ` button[data-action="edit"]`)
	editor := card(it.ID) + ` textarea[name="editedArgs"]`
	p.waitJS("the editor prefilled with the arguments", `document.querySelector(`+js(editor)+`).value.includes('"amount": 19.99')`)
	p.do(chromedp.SetValue(chromedp.CSS(editor), `{"orderId": "ord_42", "amount": "lots"}`))
	p.click(card(it.ID) + ` button[data-action="confirm-edit"]`)
	p.waitText(card(it.ID)+` [role="alert"]`, "amount: must be a number, not a string")
	if n := eval[int](p, `window.__posts.length`); n != 0 {
		t.Fatalf("the page sent %d requests for invalid arguments", n)
	}
	if eval[string](p, `document.querySelector(`+js(editor)+`).getAttribute('aria-invalid')`) != "true" {
		t.Fatal("the editor is not marked invalid")
	}
	// A missing required field is named too.
	p.do(chromedp.SetValue(chromedp.CSS(editor), `{"amount": 5}`))
	p.click(card(it.ID) + ` button[data-action="confirm-edit"]`)
	p.waitText(card(it.ID)+` [role="alert"]`, "orderId: is required")
	if d := decision(t, env, "dev", it.ID); d.Status != store.Pending || env.Thread(t, "dev", "refund-b3").Status != store.Waiting {
		t.Fatalf("an invalid edit changed the decision: %+v", d)
	}

	// Valid edits are sent and the tool runs with them.
	p.do(chromedp.SetValue(chromedp.CSS(editor), `{"orderId": "ord_42", "amount": 5}`))
	p.click(card(it.ID) + ` button[data-action="confirm-edit"]`)
	waitIdle(t, env, "dev", "refund-b3")
	args := env.Calls.Args("refund")
	if len(args) != 1 || !strings.Contains(string(args[0]), `"amount":5`) {
		t.Fatalf("refund ran with %s", args)
	}
	if n := eval[int](p, `window.__posts.length`); n != 1 {
		t.Fatalf("the page sent %d requests, want 1", n)
	}
}

func TestInboxIsLive(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	p := newPage(t)
	p.open(env.URL + "/studio/")
	p.waitText("#inbox-empty:not([hidden])", "No pending decisions")
	p.waitText("#live", "Live")
	eval[bool](p, `(window.__sameDocument = true)`)

	// A new pause appears without a reload.
	pause(t, env, "", "live-b1", "please refund my order")
	it := onePending(t, env, "", "live-b1")
	p.waitText(card(it.ID)+" .desc", "Refund order ord_42 for 19.99")

	// A pause without a description shows none and offers no edit.
	pause(t, env, "", "live-b2", "delete the file")
	del := onePending(t, env, "", "live-b2")
	p.waitText(card(del.ID)+" .desc", "No description.")
	if eval[bool](p, `!!document.querySelector(`+js(card(del.ID)+` button[data-action="edit"]`)+`)`) {
		t.Fatal("edit offered where it is not allowed")
	}
	// Newest first.
	p.waitJS("newest first", `document.querySelector('#inbox-list > article').dataset.id === `+js(del.ID))

	// A decision made elsewhere (the CLI, over the API) disappears live.
	if r := do(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "", "x-stackbone-client", "cli"); r.status != 200 {
		t.Fatalf("cli approve: %d %s", r.status, r)
	}
	p.waitJS("the decided card to disappear", `!document.querySelector(`+js(card(it.ID))+`)`)
	p.waitText("#inbox-count", "1")
	if !eval[bool](p, `window.__sameDocument === true`) {
		t.Fatal("the page reloaded")
	}
	if d := decision(t, env, "dev", it.ID); d.Decision.Via != "api" || d.Decision.ClaimedVia != "cli" {
		t.Fatalf("decidedVia %q, claimedVia %q", d.Decision.Via, d.Decision.ClaimedVia)
	}
}

func TestSignInRequiredInStartMode(t *testing.T) {
	t.Parallel()
	env := startEnv(t)
	pause(t, env, acme.Secret, "acme-b1", "please refund my order")
	it := onePending(t, env, acme.Secret, "acme-b1")

	p := newPage(t)
	p.open(env.URL + "/studio/")
	p.waitText("#signin-h", "Sign in")
	if eval[bool](p, `!!document.querySelector('#inbox-list') || document.querySelector('#nav').offsetParent !== null`) {
		t.Fatal("the inbox or the navigation shows before sign-in")
	}
	p.do(chromedp.SendKeys(chromedp.CSS("#apikey"), "sk-wrong-0123456789"))
	p.click(`#signin-form button[type="submit"]`)
	p.waitText("#signin-error", "not valid")

	p.do(chromedp.Clear(chromedp.CSS("#apikey")), chromedp.SendKeys(chromedp.CSS("#apikey"), acme.Secret))
	p.click(`#signin-form button[type="submit"]`)
	p.waitText(card(it.ID)+" .desc", "Refund order ord_42 for 19.99")
	p.waitText("#tenant", "acme")
	p.waitText("#live", "Live") // the live feed accepts the session cookie
	if eval[bool](p, `document.cookie.includes('stackbone_studio')`) {
		t.Fatal("the session cookie is readable by scripts")
	}

	// A cookie-authenticated POST without the CSRF token is refused.
	status := eval[int](p, `fetch('/v1/hitl/`+it.ID+`/approve', {method: 'POST', credentials: 'same-origin'}).then(r => r.status)`)
	if status != 403 {
		t.Fatalf("cookie POST without CSRF token: %d", status)
	}
	if d := decision(t, env, "acme", it.ID); d.Status != store.Pending {
		t.Fatal("a request without CSRF token decided")
	}

	// Signing out shows the sign-in page again.
	p.click("#logout")
	p.waitText("#signin-h", "Sign in")
	if r := eval[int](p, `fetch('/v1/hitl').then(r => r.status)`); r != 401 {
		t.Fatalf("after sign-out the API answers %d", r)
	}
}

func TestAgentsPage(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	p := newPage(t)
	p.open(env.URL + "/studio/#/agents")
	p.waitText(`[data-agent="assistant"] dd`, "openai/test-model")
	p.waitText(`[data-agent="assistant"] tr[data-tool="refund"]`, "needs approval")
	p.waitText(`[data-agent="assistant"] tr[data-tool="refund"]`, "approve · reject · edit")
	p.waitText(`[data-agent="assistant"] tr[data-tool="delete_file"]`, "approve · reject")
	p.waitText(`[data-agent="assistant"] tr[data-tool="get_weather"]`, "runs without approval")
	p.waitText(`[data-agent="assistant"] .statekeys`, "draft")
	p.waitText(`[data-agent="other"]`, "Another agent.")
}

// TestAgentsPageMCPServerDown: an agent whose MCP server does not answer
// still loads, and its card says the server is down and why.
func TestAgentsPageMCPServerDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	_ = ln.Close() // nothing listens there
	env := stacktest.New(t, stacktest.Options{Agents: func(*stacktest.Env) []*agent.Spec {
		return []*agent.Spec{{Name: "withmcp", Model: "openai/test-model", MCPServers: []agent.MCPServer{{Name: "github", URL: url}}}}
	}})
	p := newPage(t)
	p.open(env.URL + "/studio/#/agents")
	p.waitText(`[data-agent="withmcp"] [data-mcp="github"]`, "down")
	p.waitText(`[data-agent="withmcp"] [data-mcp="github"]`, "http; 0 tools")
	p.waitText(`[data-agent="withmcp"] [data-mcp="github"]`, "connect")
}

func TestThreadViewStreamsAndFilters(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	chat(t, env, "draft-b1", "draft something")
	p := newPage(t)
	p.open(env.URL + "/studio/#/threads/draft-b1")
	p.waitText("#messages", "Draft saved.")
	p.waitText("#state", `"v1"`)
	p.waitText("#timeline", "state delta")

	// A new turn arrives live in the open view.
	chat(t, env, "draft-b1", "hello again")
	p.waitText("#messages", "echo: hello again")

	// The list filters by status and agent.
	pause(t, env, "", "wait-b1", "please refund my order")
	p.open(env.URL + "/studio/#/threads?status=waiting")
	p.waitText(`tr[data-thread="wait-b1"]`, "waiting for approval")
	p.waitJS("idle threads filtered out", `!document.querySelector('tr[data-thread="draft-b1"]')`)
	p.open(env.URL + "/studio/#/threads?agent=other")
	p.waitText(".empty:not([hidden])", "No threads match")
}

// TestScreenshots writes the README screenshots (docs/studio-*.png). Run it
// with STACKBONE_SCREENSHOTS=1.
func TestScreenshots(t *testing.T) {
	t.Parallel()
	if os.Getenv("STACKBONE_SCREENSHOTS") != "1" {
		t.Skip("set STACKBONE_SCREENSHOTS=1 to write docs/studio-*.png")
	}
	env := stacktest.New(t, stacktest.Options{})
	chat(t, env, "support-7", "what is the weather in Paris?")
	chat(t, env, "support-7", "draft a reply")
	pause(t, env, "", "support-7", "please refund my order")
	pause(t, env, "", "ops-12", "delete the file")
	p := newPage(t)
	p.open(env.URL + "/studio/")
	p.waitText("#inbox-list", "Refund order ord_42 for 19.99")
	p.waitText("#inbox-list", "delete_file")
	p.waitText("#live", "Live")
	shot(t, p, "studio-inbox.png")
	p.open(env.URL + "/studio/#/threads/support-7")
	p.waitText("#messages", "Draft saved.")
	p.waitText("#thread-pending", "Refund order ord_42")
	p.waitText("#events-status", "live")
	shot(t, p, "studio-thread.png")
}

func shot(t *testing.T, p *page, name string) {
	t.Helper()
	// Fonts loaded and no animation (the toast's) under way.
	p.waitJS("fonts and animations to settle", `document.fonts.status === 'loaded' && document.getAnimations().every((a) => a.playState !== 'running')`)
	ctx, cancel := context.WithTimeout(p.ctx, 15*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join("..", "..", "docs", name)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", out)
}

// The inbox's recent decisions show the audit: a stateless turn's call (no
// thread; the server's policy ran it) live, and an API decision with the
// client's claim apart from what the server proved.
func TestInboxHistoryShowsStatelessRunsAndClaims(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	pause(t, env, "", "hist-1", "please refund my order")
	it := onePending(t, env, "", "hist-1")
	if r := do(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/reject", `{"message":"not this one"}`, "x-stackbone-client", "cli"); r.status != 200 {
		t.Fatalf("reject: %d %s", r.status, r)
	}
	p := newPage(t)
	p.open(env.URL + "/studio/")
	p.waitText("#live", "Live")
	row := fmt.Sprintf(`#history-list li[data-id=%s]`, js(it.ID))
	p.waitText(row, "rejected")
	p.waitText(row+" a.thread-link", "hist-1")
	p.waitText(row+" .via", "via api (client says cli)")
	p.waitText(row, "by dev")

	// A stateless turn (no session) appears without a reload.
	chat(t, env, "", "refund without a session")
	p.waitText(`#history-list li.stateless`, "no session: a stateless turn")
	p.waitText(`#history-list li.stateless`, "ran")
	p.waitText(`#history-list li.stateless .via`, "via stateless")
	p.waitText(`#history-list li.stateless .desc`, "Refund order ord_42 for 19.99")
	if eval[bool](p, `!!document.querySelector('#history-list li.stateless a.thread-link')`) {
		t.Fatal("a stateless record links to a thread")
	}
	if eval[string](p, `document.querySelector('#history-list li').dataset.via`) != "stateless" {
		t.Fatal("the newest decision is not first")
	}
}

// doubt leaves an approved refund of session in doubt as a crash does: a
// process (here the test, through the store) claimed the decided thread,
// marked the call started and died without its result; the server's
// recovery then finds the call in doubt. It returns the in-doubt decision.
func doubt(t *testing.T, env *stacktest.Env, session string) store.Interrupt {
	t.Helper()
	pause(t, env, "", session, "please refund my order")
	it := onePending(t, env, "", session)
	ctx := t.Context()
	if _, err := env.Store.Decide(ctx, "dev", it.ID, store.Decision{Approved: true, Via: "api", By: "dev"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := env.Store.Claim(ctx, store.Claim{Tenant: "dev", ThreadID: session, RunID: "run_dead", Owner: "dead",
		Now: now, LeaseUntil: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := env.Store.Checkpoint(ctx, store.Checkpoint{Tenant: "dev", ThreadID: session, RunID: "run_dead",
		Started: []string{it.ToolCallID}}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Runner.Recover(ctx, now.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	var got store.Interrupt
	stacktest.WaitFor(t, "the call of "+session+" to be in doubt", func() bool {
		p := pending(t, env, "", session)
		if len(p) == 1 && p[0].Reason == store.ReasonInDoubt {
			got = p[0]
			return true
		}
		return false
	})
	return got
}

// TestInboxInDoubtRetryAndSkip: a call that may already have run before a
// crash shows in the inbox with its reason and Retry / Skip instead of
// Approve / Reject; Retry runs it again, Skip (with a message) does not,
// and the message is the call's result.
func TestInboxInDoubtRetryAndSkip(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	skipIt := doubt(t, env, "doubt-s1")
	retryIt := doubt(t, env, "doubt-s2")

	p := newPage(t)
	p.open(env.URL + "/studio/#/inbox")
	for _, it := range []store.Interrupt{skipIt, retryIt} {
		p.waitText(card(it.ID)+" .meta", "in doubt")
		p.waitText(card(it.ID)+" .desc", "This call may already have run: refund(")
		for _, gone := range []string{"approve", "reject", "edit"} {
			if eval[bool](p, `!!document.querySelector(`+js(card(it.ID)+` button[data-action="`+gone+`"]`)+`)`) {
				t.Fatalf("an in-doubt call offers %s", gone)
			}
		}
	}
	p.waitText("#inbox-count", "2")

	p.click(card(skipIt.ID) + ` button[data-action="skip"]`)
	p.do(chromedp.SendKeys(chromedp.CSS(card(skipIt.ID)+` textarea[name="message"]`), "Checked the bank: it went out."))
	p.click(card(skipIt.ID) + ` button[data-action="confirm-skip"]`)
	waitIdle(t, env, "dev", "doubt-s1")
	p.waitJS("the skipped card to leave the inbox", `!document.querySelector(`+js(card(skipIt.ID))+`)`)
	if n := env.Calls.Get("refund"); n != 0 {
		t.Fatalf("skip ran the refund (%d calls)", n)
	}
	if d := decision(t, env, "dev", skipIt.ID); d.Status != store.Rejected || d.Decision.Kind != "skip" || d.Decision.ClaimedVia != "studio" {
		t.Fatalf("skip decision %+v %+v", d, d.Decision)
	}
	msgs, _ := env.Store.Messages(context.Background(), "dev", "doubt-s1")
	found := false
	for _, m := range msgs {
		found = found || (m.ToolCallID == skipIt.ToolCallID && m.Content == "Checked the bank: it went out.")
	}
	if !found {
		t.Fatal("the reviewer's message is not the skipped call's result")
	}

	p.click(card(retryIt.ID) + ` button[data-action="retry"]`)
	waitIdle(t, env, "dev", "doubt-s2")
	if n := env.Calls.Get("refund"); n != 1 {
		t.Fatalf("retry ran the refund %d times, want 1", n)
	}
	p.waitText("#inbox-empty:not([hidden])", "No pending decisions")
	p.waitText(`.history-item[data-id="`+retryIt.ID+`"]`, "retried")
	p.waitText(`.history-item[data-id="`+skipIt.ID+`"]`, "skipped")
}

// TestInboxAnswersAQuestion: a question a running tool asks (an MCP
// server's elicitation) shows as a question; an answer that does not match
// its schema is caught in the page and nothing is sent; a valid answer goes
// back to the waiting call and the turn finishes with it.
func TestInboxAnswersAQuestion(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{
		Script: `[{"when": {"lastTool": "confirm"}, "reply": {"text": "Result: {{lastTool}}"}},
		          {"reply": {"toolCalls": [{"name": "confirm", "arguments": {}}]}}]`,
		Agents: func(env *stacktest.Env) []*agent.Spec {
			confirm := &tool.Tool{Name: "confirm", Description: "Ask before acting", Timeout: time.Minute,
				Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
					a, err := c.Ask(ctx, tool.Question{Message: "Why delete the record?", Schema: json.RawMessage(
						`{"type":"object","properties":{"reason":{"type":"string","minLength":3}},"required":["reason"]}`)})
					if err != nil {
						return tool.Result{}, err
					}
					return tool.Result{Content: fmt.Sprintf("accepted=%v %s", a.Accepted, a.Content)}, nil
				}}
			return []*agent.Spec{{Name: "asker", Model: "openai/test-model", Instructions: "Help.", Tools: []*tool.Tool{confirm}}}
		}})
	done := make(chan resp, 1)
	go func() {
		done <- do(t, "POST", env.URL+"/v1/chat/completions", `{"model":"asker","messages":[{"role":"user","content":"delete it"}]}`,
			"x-stackbone-session", "ask-1")
	}()
	var it store.Interrupt
	stacktest.WaitFor(t, "the question to be pending", func() bool {
		p := pending(t, env, "", "ask-1")
		if len(p) == 1 {
			it = p[0]
		}
		return len(p) == 1
	})

	p := newPage(t)
	p.open(env.URL + "/studio/#/inbox")
	p.waitText(card(it.ID)+" .meta", "question")
	p.waitText(card(it.ID)+" .desc", "Why delete the record?")
	if eval[bool](p, `!!document.querySelector(`+js(card(it.ID)+` button[data-action="approve"]`)+`)`) {
		t.Fatal("a question offers a plain Approve")
	}
	p.click(card(it.ID) + ` button[data-action="edit"]`)
	p.do(chromedp.SetValue(chromedp.CSS(card(it.ID)+` textarea[name="editedArgs"]`), `{"reason": "x"}`))
	p.click(card(it.ID) + ` button[data-action="confirm-edit"]`)
	p.waitText(card(it.ID)+" .error", "reason")
	if d := decision(t, env, "dev", it.ID); d.Status != store.Pending {
		t.Fatalf("an invalid answer was sent: %+v", d)
	}
	p.do(chromedp.SetValue(chromedp.CSS(card(it.ID)+` textarea[name="editedArgs"]`), `{"reason": "duplicate entry"}`))
	p.click(card(it.ID) + ` button[data-action="confirm-edit"]`)
	r := <-done
	if r.status != 200 || !strings.Contains(r.String(), `Result: accepted=true {\"reason\":\"duplicate entry\"}`) {
		t.Fatalf("the turn after the answer: %d %s", r.status, r)
	}
	if d := decision(t, env, "dev", it.ID); d.Status != store.Approved || d.Decision.ClaimedVia != "studio" {
		t.Fatalf("answer decision %+v %+v", d, d.Decision)
	}
}

// TestAgentsPageA2AAgents: the agent page lists an agent's remote A2A
// agents with their URL and header names, never a header's value.
func TestAgentsPageA2AAgents(t *testing.T) {
	t.Parallel()
	const secret = "rk-studio-9a8b7c6d5e"
	env := stacktest.New(t, stacktest.Options{Agents: func(*stacktest.Env) []*agent.Spec {
		return []*agent.Spec{{Name: "boss", Model: "openai/test-model", Secrets: []string{"Bearer " + secret},
			A2AAgents: []agent.A2AAgent{{Name: "research", URL: "http://127.0.0.1:1/a2a/research",
				Headers: map[string]string{"Authorization": "Bearer " + secret}, Description: "Finds records."}}}}
	}})
	p := newPage(t)
	p.open(env.URL + "/studio/#/agents")
	p.waitText(`[data-agent="boss"] [data-a2a="research"]`, "http://127.0.0.1:1/a2a/research")
	p.waitText(`[data-agent="boss"] [data-a2a="research"]`, "Finds records.")
	p.waitText(`[data-agent="boss"] [data-a2a="research"]`, "headers: Authorization; values hidden")
	if r := do(t, "GET", env.URL+"/studio/api/agents", ""); r.status != 200 || !strings.Contains(string(r.body), `"headers":["Authorization"]`) || strings.Contains(string(r.body), secret) {
		t.Fatalf("Studio's agent JSON: %d %s", r.status, r.body)
	}
}

package studio_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/studio"
	"github.com/stackbone/stackbone/internal/testwait"
	"github.com/stackbone/stackbone/internal/tool"
)

// chatScript is stacktest.DefaultScript with the playground's turns in
// front: the page's frontend tools (get_time, confirm), a subagent's work
// (task), todos and files, an answer in Markdown, and a long answer that
// streams slowly (for Stop and reload).
func chatScript() string {
	return `[
 {"when": {"lastTool": "get_time"}, "reply": {"text": "Time said: {{lastTool}}"}},
 {"when": {"lastTool": "confirm"}, "reply": {"text": "Confirm said: {{lastTool}}"}},
 {"when": {"lastTool": "task"}, "reply": {"text": "Summary: {{lastTool}}"}},
 {"when": {"lastUser": "research", "afterTool": false}, "reply": {"text": "Delegating.", "toolCalls": [{"name": "task", "arguments": {"description": "dig up facts about Paris", "subagent_type": "general-purpose"}}]}},
 {"when": {"lastUser": "dig up facts", "afterTool": false}, "reply": {"text": "Looking it up.", "toolCalls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}},
 {"when": {"lastTool": "edit_file", "lastUser": "plan and take notes"}, "reply": {"text": "Notes are up to date."}},
 {"when": {"lastTool": "write_file", "lastUser": "plan and take notes"}, "reply": {"toolCalls": [{"name": "edit_file", "arguments": {"file_path": "/notes/plan.md", "old_string": "step one", "new_string": "step one done"}}]}},
 {"when": {"lastUser": "plan and take notes", "afterTool": false}, "reply": {"toolCalls": [
   {"name": "write_todos", "arguments": {"todos": [{"content": "Write the plan", "status": "completed"}, {"content": "Review it", "status": "pending"}]}},
   {"name": "write_file", "arguments": {"file_path": "/notes/plan.md", "content": "step one\nstep two"}}]}},
 {"when": {"lastUser": "two refunds", "afterTool": false}, "reply": {"toolCalls": [{"name": "refund", "arguments": {"orderId": "ord_1", "amount": 1}}, {"name": "refund", "arguments": {"orderId": "ord_2", "amount": 2}}]}},
 {"when": {"lastUser": "what time"}, "reply": {"toolCalls": [{"name": "get_time", "arguments": {}}]}},
 {"when": {"lastUser": "are you sure"}, "reply": {"toolCalls": [{"name": "confirm", "arguments": {"question": "Really go ahead?"}}]}},
 {"when": {"lastUser": "markdown"}, "reply": {"text": "Here is **bold**, *italic* and ` + "`code`" + `.\n\n- first\n- second\n\n<img src=x onerror=alert(1)> [safe](https://example.com) [unsafe](javascript:alert(1))"}},
 {"when": {"lastUser": "what can you do"}, "reply": {"text": "I can help with orders. For example:\n\n- check the **weather** for a delivery\n- save a reply as a ` + "`draft`" + `\n- *refund* an order (you approve it first)"}},
 {"when": {"lastUser": "long story"}, "reply": {"text": "Once upon a time there was a very long story that went on and on, one word at a time, so slowly that a reader could stop it well before its end, and then there was more of it, and more, and more still, until at last the end came.", "chunkDelayMs": 120}},` +
		strings.TrimPrefix(stacktest.DefaultScript, "[")
}

// chatEnv is a dev-mode stack on chatScript.
func chatEnv(t *testing.T) *stacktest.Env {
	return stacktest.New(t, stacktest.Options{Script: chatScript()})
}

// openChat opens the playground of agent on thread and waits until it has
// loaded.
func openChat(p *page, base, agent, thread string) {
	p.t.Helper()
	p.open(base + "/studio/#/chat/" + agent + "?thread=" + thread)
	p.waitJS("the chat to load", `document.querySelector('#main').dataset.chatReady === 'true'`)
}

// say types text into the composer and sends it with Enter.
func say(p *page, text string) {
	p.t.Helper()
	p.waitJS("the composer to take a message", `!document.querySelector('#chat-send').disabled && document.querySelector('#chat-stop').hidden`)
	p.do(chromedp.Focus(chromedp.CSS("#chat-input")))
	p.do(chromedp.SendKeys(chromedp.CSS("#chat-input"), text))
	p.do(chromedp.SendKeys(chromedp.CSS("#chat-input"), "\r"))
}

// waitAnswer waits until an answer of the agent holds text and the turn
// is over.
func waitAnswer(p *page, text string) {
	p.t.Helper()
	p.waitText(`#chat-log .chat-msg[data-role="assistant"] .md`, text)
	p.waitJS("the turn to end", `document.querySelector('#chat-log').getAttribute('aria-busy') === 'false'`)
}

// TestChatStreamsAnswer: the Agents page's Chat button opens the
// playground on a new thread; a message sent with Enter streams back over
// AG-UI (the official client, same origin) and lands in the thread; the
// answer's Markdown is rendered as elements, with raw HTML and a
// javascript: link shown as text; a server tool shows as a card with its
// arguments, result and duration; each answer links to its run inspector.
func TestChatStreamsAnswer(t *testing.T) {
	t.Parallel()
	env := chatEnv(t)
	p := newPage(t)
	p.open(env.URL + "/studio/#/agents")
	p.click(`.agent-card[data-agent="assistant"] a[data-action="chat"]`)
	p.waitJS("the chat to load", `document.querySelector('#main').dataset.chatReady === 'true'`)
	thread := eval[string](p, `new URLSearchParams(location.hash.split('?')[1]).get('thread') || ''`)
	if !strings.HasPrefix(thread, "chat-") {
		t.Fatalf("the playground's URL names thread %q", thread)
	}
	if got := eval[string](p, `document.activeElement.id`); got != "chat-input" {
		t.Fatalf("focus is on %q, want the composer", got)
	}

	say(p, "hello there")
	waitAnswer(p, "echo: hello there")
	p.waitText(`#chat-log .chat-msg[data-role="user"]`, "hello there")
	if th := env.Thread(t, "dev", thread); th.Agent != "assistant" {
		t.Fatalf("the thread is %+v", th)
	}

	say(p, "markdown please")
	waitAnswer(p, "Here is")
	md := `[...document.querySelectorAll('#chat-log .chat-msg[data-role="assistant"] .md')].pop()`
	if got := eval[string](p, md+`.querySelector('strong')?.textContent`); got != "bold" {
		t.Fatalf("bold renders as %q", got)
	}
	if got := eval[string](p, md+`.querySelector('em')?.textContent + '|' + `+md+`.querySelector('code')?.textContent`); got != "italic|code" {
		t.Fatalf("italic and code render as %q", got)
	}
	if n := eval[int](p, md+`.querySelectorAll('ul > li').length`); n != 2 {
		t.Fatalf("the list has %d items", n)
	}
	if n := eval[int](p, `document.querySelectorAll('#chat-log img, #chat-log script, #chat-log a[href^="javascript"]').length`); n != 0 {
		t.Fatalf("%d unsafe elements made it into the page", n)
	}
	if got := eval[string](p, md+`.querySelector('a')?.href`); got != "https://example.com/" {
		t.Fatalf("the safe link is %q", got)
	}
	if !eval[bool](p, md+`.textContent.includes('<img src=x onerror=alert(1)>') && `+md+`.textContent.includes('unsafe')`) {
		t.Fatal("the raw HTML is not shown as text")
	}

	say(p, "what is the weather in Paris?")
	waitAnswer(p, "Tool said:")
	tool := `#chat-log .chat-tool[data-tool="get_weather"]`
	p.waitJS("the tool card done", `document.querySelector('`+tool+`')?.dataset.status === 'done'`)
	p.click(tool + ` summary`)
	if got := eval[string](p, `document.querySelector('`+tool+` .tool-args').textContent`); !strings.Contains(got, `"city": "Paris"`) {
		t.Fatalf("the card's arguments read %q", got)
	}
	if got := eval[string](p, `document.querySelector('`+tool+` .tool-result').textContent`); !strings.Contains(got, `"temp_c": 21`) {
		t.Fatalf("the card's result reads %q", got)
	}
	if got := eval[string](p, `document.querySelector('`+tool+` .tool-dur').textContent`); !strings.HasSuffix(got, "ms") && !strings.HasSuffix(got, " s") {
		t.Fatalf("the card's duration reads %q", got)
	}
	if env.Calls.Get("get_weather") != 1 {
		t.Fatalf("get_weather ran %d times", env.Calls.Get("get_weather"))
	}
	// The answer links to its run in the run inspector.
	href := eval[string](p, `[...document.querySelectorAll('#chat-log a.trace-link')].pop()?.getAttribute('href') || ''`)
	runID := strings.TrimPrefix(href, "#/threads/"+thread+"?run=")
	if runID == href || runID == "" {
		t.Fatalf("the trace link is %q", href)
	}
	if r := do(t, "GET", env.URL+"/v1/runs/"+runID, ""); r.status != 200 {
		t.Fatalf("the linked run %s: %d %s", runID, r.status, r)
	}
}

// chatShot takes a screenshot of the screen, as a person sees it, scrolled
// to the end of the conversation (where the composer and the newest turn
// are), and writes it to docs/name when STACKBONE_SCREENSHOTS=1 (the
// README's pictures).
func chatShot(t *testing.T, p *page, name string) {
	t.Helper()
	eval[bool](p, `(document.querySelector('#status').classList.remove('show'), window.scrollTo(0, document.documentElement.scrollHeight), document.querySelector('#chat-form').scrollIntoView({ block: 'end' }), true)`)
	p.waitJS("fonts and animations to settle", `document.fonts.status === 'loaded' && document.getAnimations().every((a) => a.playState !== 'running')`)
	ctx, cancel := context.WithTimeout(p.ctx, 15*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if os.Getenv("STACKBONE_SCREENSHOTS") == "1" {
		if err := os.WriteFile(filepath.Join("..", "..", "docs", name), buf, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote docs/%s", name)
	}
}

// TestChatLayout: a conversation with a tool card, a state change and a
// paused refund reads at 1280 px in light mode and on a phone's width in
// dark mode: nothing wider than the screen, one column on the phone, the
// composer in reach. With STACKBONE_SCREENSHOTS=1 it writes
// docs/studio-chat.png and docs/studio-chat-phone.png.
func TestChatLayout(t *testing.T) {
	t.Parallel()
	env := chatEnv(t)
	p := newPage(t)
	p.do(chromedp.EmulateViewport(1280, 1240))
	openChat(p, env.URL, "assistant", "support-7")
	say(p, "what can you do?")
	waitAnswer(p, "I can help with orders")
	say(p, "what is the weather in Paris?")
	waitAnswer(p, "Tool said:")
	say(p, "save a draft")
	waitAnswer(p, "Draft saved.")
	chatPause(p)
	eval[bool](p, `(document.querySelector('#chat-log .chat-tool[data-tool="get_weather"] details').open = true)`)
	noOverflow := `document.documentElement.scrollWidth <= window.innerWidth + 1`
	if !eval[bool](p, noOverflow) {
		t.Fatalf("the page is %d px wide at 1280", eval[int](p, `document.documentElement.scrollWidth`))
	}
	if n := eval[int](p, `getComputedStyle(document.querySelector('.chat-grid')).gridTemplateColumns.split(' ').length`); n != 2 {
		t.Fatalf("the chat has %d columns at 1280 px, want the chat and the state side by side", n)
	}
	chatShot(t, p, "studio-chat.png")

	p.do(chromedp.EmulateViewport(390, 1100))
	p.do(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return err
	}))
	p.waitJS("dark colours", `getComputedStyle(document.body).backgroundColor !== 'rgb(246, 247, 249)'`)
	if !eval[bool](p, noOverflow) {
		t.Fatalf("the page is %d px wide on a 390 px screen: %s", eval[int](p, `document.documentElement.scrollWidth`),
			eval[string](p, `[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > window.innerWidth + 1).slice(0, 8).map(e => e.tagName + '.' + e.className + '#' + e.id + ' ' + Math.round(e.getBoundingClientRect().right)).join(', ')`))
	}
	if n := eval[int](p, `getComputedStyle(document.querySelector('.chat-grid')).gridTemplateColumns.split(' ').length`); n != 1 {
		t.Fatalf("the chat has %d columns on a phone", n)
	}
	chatShot(t, p, "studio-chat-phone.png")
}

// chatPause sends the refund request and waits for its card.
func chatPause(p *page) string {
	p.t.Helper()
	say(p, "please refund my order")
	p.waitJS("the approval card", `!!document.querySelector('#chat-log article.chat-decision[data-tool="refund"]:not(.decided)')`)
	p.waitJS("the turn to end", `document.querySelector('#chat-log').getAttribute('aria-busy') === 'false'`)
	return eval[string](p, `document.querySelector('#chat-log article.chat-decision:not(.decided)').dataset.id`)
}

// TestChatApprovals: a paused call is a card in the conversation with its
// description and arguments; approving it inline resumes the run over
// AG-UI (resume array) and the tool runs once; rejecting with a message
// gives the model that message; editing through the form rendered from
// the responseSchema runs the tool with the edited arguments.
func TestChatApprovals(t *testing.T) {
	t.Parallel()
	env := chatEnv(t)
	p := newPage(t)

	openChat(p, env.URL, "assistant", "appr-1")
	id := chatPause(p)
	c := `#chat-log article.chat-decision[data-id="` + id + `"]`
	p.waitText(c+" .desc", "Refund order ord_42 for 19.99")
	p.waitText(c+" pre.json", `"orderId": "ord_42"`)
	p.waitText(`#chat-log .chat-tool[data-tool="refund"] .tool-status`, "waiting for a decision")
	p.click(c + ` button[data-action="approve"]`)
	if got := eval[string](p, `document.activeElement?.id || ''`); got != "chat-input" {
		t.Fatalf("after the decision, focus is on %q, want the composer", got)
	}
	waitAnswer(p, "Refund result:")
	p.waitText(c+" .verdict", "Approved")
	if n := env.Calls.Get("refund"); n != 1 {
		t.Fatalf("refund ran %d times, want once", n)
	}
	// The decided card stays under its call, above the answer.
	if got := eval[string](p, `document.querySelector('`+c+`').previousElementSibling?.dataset.tool + '|' + document.querySelector('`+c+`').nextElementSibling?.dataset.role`); got != "refund|assistant" {
		t.Fatalf("the decided card sits between %s", got)
	}
	if it := decision(t, env, "dev", id); it.Status != store.Approved || it.Decision == nil || it.Decision.Via != "agui" {
		t.Fatalf("the decision is %+v", it)
	}

	openChat(p, env.URL, "assistant", "appr-2")
	id = chatPause(p)
	c = `#chat-log article.chat-decision[data-id="` + id + `"]`
	p.click(c + ` button[data-action="reject"]`)
	p.waitJS("the message box focused", `document.activeElement?.name === 'message'`)
	p.do(chromedp.SendKeys(chromedp.CSS(c+" textarea[name=message]"), "wrong order, do not refund"))
	p.click(c + ` button[data-action="confirm-reject"]`)
	waitAnswer(p, "Refund result:")
	if n := env.Calls.Get("refund"); n != 1 {
		t.Fatalf("refund ran %d times after a rejection, want still once", n)
	}
	reqs := env.Upstream.Requests()
	last := reqs[len(reqs)-1].Request.Messages
	if m := last[len(last)-1]; m.Role != "tool" || !strings.Contains(m.Content, "wrong order, do not refund") {
		t.Fatalf("the model saw %+v, want the rejection message", m)
	}

	openChat(p, env.URL, "assistant", "appr-3")
	id = chatPause(p)
	c = `#chat-log article.chat-decision[data-id="` + id + `"]`
	p.click(c + ` button[data-action="edit"]`)
	if got := eval[string](p, `document.querySelector('`+c+` input[data-field="orderId"]').value`); got != "ord_42" {
		t.Fatalf("the form's orderId is %q", got)
	}
	// A value the schema refuses is caught in the page.
	setValue(p, c+` input[data-field="amount"]`, "")
	p.click(c + ` button[data-action="confirm-edit"]`)
	p.waitText(c+" .error", "amount: is required")
	if got := eval[string](p, `document.activeElement?.dataset.field || ''`); got != "amount" {
		t.Fatalf("focus is on %q after the refusal, want the amount field", got)
	}
	setValue(p, c+` input[data-field="orderId"]`, "ord_43")
	setValue(p, c+` input[data-field="amount"]`, "5")
	p.click(c + ` button[data-action="confirm-edit"]`)
	waitAnswer(p, "Refund result:")
	args := env.Calls.Args("refund")
	if len(args) != 2 {
		t.Fatalf("refund ran %d times, want twice in all", len(args))
	}
	var got struct {
		OrderID string  `json:"orderId"`
		Amount  float64 `json:"amount"`
	}
	if err := json.Unmarshal(args[1], &got); err != nil || got.OrderID != "ord_43" || got.Amount != 5 {
		t.Fatalf("refund ran with %s, want the edited arguments", args[1])
	}
	p.waitText(c+" .verdict", "Approved with edits")

	// Two paused calls: the resume goes once both are decided, and covers
	// both (the AG-UI contract).
	openChat(p, env.URL, "assistant", "appr-4")
	say(p, "two refunds please")
	p.waitJS("two cards", `document.querySelectorAll('#chat-log article.chat-decision:not(.decided)').length === 2`)
	p.waitJS("the turn to end", `document.querySelector('#chat-log').getAttribute('aria-busy') === 'false'`)
	ids := eval[[]string](p, `[...document.querySelectorAll('#chat-log article.chat-decision')].map(e => e.dataset.id)`)
	c1 := `#chat-log article.chat-decision[data-id="` + ids[0] + `"]`
	c2 := `#chat-log article.chat-decision[data-id="` + ids[1] + `"]`
	p.click(c1 + ` button[data-action="approve"]`)
	p.waitText(c1+" .verdict", "once the other 1 paused call is decided")
	if got := eval[string](p, `document.activeElement?.closest('article')?.dataset.id || ''`); got != ids[1] {
		t.Fatalf("after the first decision, focus is in %q, want the other paused call", got)
	}
	if n := env.Calls.Get("refund"); n != 2 {
		t.Fatalf("refund ran before both calls were decided: %d", n)
	}
	p.click(c2 + ` button[data-action="reject"]`)
	p.click(c2 + ` button[data-action="confirm-reject"]`)
	waitAnswer(p, "Refund result:")
	if n := env.Calls.Get("refund"); n != 3 {
		t.Fatalf("refund ran %d times in all, want 3 (the second of the pair rejected)", n)
	}
	if a := env.Calls.Args("refund"); !strings.Contains(string(a[2]), "ord_1") {
		t.Fatalf("the approved call ran with %s", a[2])
	}
}

// TestChatDecisionElsewhere: a decision made through the API while the
// chat shows the paused call appears in the chat live (the card says so)
// and the page follows the resumed turn to its answer.
func TestChatDecisionElsewhere(t *testing.T) {
	t.Parallel()
	env := chatEnv(t)
	p := newPage(t)
	openChat(p, env.URL, "assistant", "far-1")
	id := chatPause(p)
	if r := do(t, "POST", env.URL+"/v1/hitl/"+id+"/approve", ""); r.status != 200 {
		t.Fatalf("approve: %d %s", r.status, r)
	}
	c := `#chat-log article.chat-decision[data-id="` + id + `"]`
	p.waitText(c+" .verdict", "Approved elsewhere")
	waitAnswer(p, "Refund result:")
	if n := env.Calls.Get("refund"); n != 1 {
		t.Fatalf("refund ran %d times", n)
	}
	if n := eval[int](p, `document.querySelectorAll('`+c+` button').length`); n != 0 {
		t.Fatalf("the decided card still offers %d buttons", n)
	}

	// The thread page's Chat button opens the playground on the thread,
	// with its conversation as stored.
	p.open(env.URL + "/studio/#/threads/far-1")
	p.click(`#thread-chat a[data-action="chat"]`)
	p.waitJS("the chat to load", `document.querySelector('#main').dataset.chatReady === 'true'`)
	if got := eval[string](p, `location.hash`); got != "#/chat/assistant?thread=far-1" {
		t.Fatalf("the Chat button opened %q", got)
	}
	p.waitText(`#chat-log .chat-msg[data-role="user"]`, "please refund my order")
	p.waitText(`#chat-log .chat-msg[data-role="assistant"]`, "Refund result:")
	p.waitText(`#chat-log .chat-tool[data-tool="refund"] .tool-result`, "refunded")
	say(p, "thanks")
	waitAnswer(p, "echo: thanks")

	// The thread picker starts a new thread and goes back to this one.
	p.waitJS("the picker to list the thread", `[...document.querySelectorAll('#chat-thread-pick option')].some(o => o.value === 'far-1')`)
	pick := func(v string) {
		eval[bool](p, `(() => { const s = document.querySelector('#chat-thread-pick'); s.value = `+js(v)+`; s.dispatchEvent(new Event('change')); return true; })()`)
	}
	pick("")
	p.waitJS("a new, empty thread", `location.hash.startsWith('#/chat/assistant?thread=chat-') && document.querySelector('#main').dataset.chatReady === 'true' && !document.querySelector('#chat-log > *')`)
	pick("far-1")
	p.waitText(`#chat-log .chat-msg[data-role="assistant"]`, "echo: thanks")
}

// TestChatFrontendTools: the playground declares get_time and confirm in
// RunAgentInput.tools; the model's get_time call is answered by the page at
// once and confirm opens a modal dialog; each result goes back to the
// model as a tool message and the model answers with it.
func TestChatFrontendTools(t *testing.T) {
	t.Parallel()
	env := chatEnv(t)
	p := newPage(t)
	openChat(p, env.URL, "assistant", "ft-1")
	say(p, "what time is it?")
	waitAnswer(p, "Time said:")
	p.waitText(`#chat-log .chat-tool[data-tool="get_time"] .tool-status`, "answered by the page")
	reqs := env.Upstream.Requests()
	first := reqs[len(reqs)-2].Request
	var declared []string
	for _, tl := range first.Tools {
		declared = append(declared, tl.Name)
	}
	if !strings.Contains(strings.Join(declared, ","), "get_time") || !strings.Contains(strings.Join(declared, ","), "confirm") {
		t.Fatalf("the model was offered %v, want the page's tools", declared)
	}
	last := reqs[len(reqs)-1].Request.Messages
	if m := last[len(last)-1]; m.Role != "tool" || !strings.Contains(m.Content, `"now"`) || !strings.Contains(m.Content, `"timeZone"`) {
		t.Fatalf("the model got %+v for get_time", m)
	}

	say(p, "are you sure?")
	p.waitJS("the confirm dialog", `document.querySelector('dialog#chat-confirm')?.open === true`)
	p.waitText("#chat-confirm-q", "Really go ahead?")
	if got := eval[string](p, `document.activeElement?.dataset.action || ''`); got != "confirm-yes" {
		t.Fatalf("focus is on %q in the dialog", got)
	}
	// A keyboard click with no key pressed in the dialog (the Enter that
	// sent the message, arriving late) does not answer it.
	eval[bool](p, `(document.querySelector('#chat-confirm button[data-action="confirm-yes"]').click(), true)`)
	if !eval[bool](p, `document.querySelector('dialog#chat-confirm')?.open === true`) {
		t.Fatal("a keyboard click from outside the dialog answered it")
	}
	p.click(`#chat-confirm button[data-action="confirm-yes"]`)
	waitAnswer(p, `Confirm said: {"confirmed":true}`)
	if eval[bool](p, `!!document.querySelector('dialog#chat-confirm')`) {
		t.Fatal("the dialog stayed")
	}
}

// TestChatState: the shared state is drawn beside the chat and follows the
// run's STATE_SNAPSHOT/STATE_DELTA (the changed path named and marked); an
// editableState key set in the side panel is sent as state with the next
// message, and the server's thread holds it.
func TestChatState(t *testing.T) {
	t.Parallel()
	env := chatEnv(t)
	p := newPage(t)
	openChat(p, env.URL, "assistant", "st-1")
	say(p, "save a draft")
	waitAnswer(p, "Draft saved.")
	p.waitText(`#chat-state li[data-path="/draft"]`, `"v1"`)
	p.waitText("#chat-state-changes", "/draft")
	p.waitJS("the key form to show the value", `document.querySelector('#es-draft')?.value === 'v1'`)
	setValue(p, "#es-draft", "written in the chat")
	p.click(`#chat-editable form[data-key="draft"] button[data-action="set-state"]`)
	p.waitText(`#chat-editable form[data-key="draft"] .saved`, "sent with your next message")
	say(p, "hello")
	waitAnswer(p, "echo: hello")
	th := env.Thread(t, "dev", "st-1")
	var st map[string]any
	if err := json.Unmarshal(th.State, &st); err != nil || st["draft"] != "written in the chat" {
		t.Fatalf("the thread's state is %s, want the draft written in the chat", th.State)
	}
	p.waitText(`#chat-state li[data-path="/draft"]`, `"written in the chat"`)
}

// TestChatStop: Stop (or Esc) in the middle of a streaming answer aborts
// the client's run and cancels the turn on the server; what streamed stays,
// and a message sent right after is answered at once.
func TestChatStop(t *testing.T) {
	t.Parallel()
	env := chatEnv(t)
	p := newPage(t)
	openChat(p, env.URL, "assistant", "stop-1")
	say(p, "tell me a long story")
	p.waitText(`#chat-log .chat-msg[data-role="assistant"] .md`, "Once upon")
	p.click("#chat-stop")
	p.waitJS("the run to stop", `document.querySelector('#chat-stop').hidden`)
	p.waitText(`#chat-log .chat-note[data-kind="cancelled"]`, "stopped")
	stacktest.WaitFor(t, "the thread to stop running", func() bool {
		return env.Thread(t, "dev", "stop-1").Status != store.Running
	})
	if eval[bool](p, `[...document.querySelectorAll('#chat-log .chat-msg[data-role="assistant"] .md')].some(e => e.textContent.includes('the end came'))`) {
		t.Fatal("the whole story streamed: nothing was stopped")
	}
	say(p, "hello again")
	waitAnswer(p, "echo: hello again")
	if eval[bool](p, `!document.querySelector('#chat-error').hidden`) {
		t.Fatalf("the chat shows an error: %s", eval[string](p, `document.querySelector('#chat-error').textContent`))
	}
	if n := eval[int](p, `document.querySelectorAll('#chat-log .chat-note[data-kind="error"]').length`); n != 0 {
		t.Fatalf("the chat shows %d run errors: %s", n, eval[string](p, `[...document.querySelectorAll('#chat-log .chat-note[data-kind="error"]')].map(e => e.textContent).join(' | ')`))
	}
}

var bobKey = config.Key{Tenant: "acme", Secret: "sk-acme-bob-0123456789ab", Role: config.RoleCaller, Label: "bob"}

// TestChatRoles: in start mode, a caller's session chats but is offered no
// decision on the paused call; an approver's session on the same thread
// cannot send a message but approves the call inline, and the resumed turn
// answers in its chat.
func TestChatRoles(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Script: chatScript(), Mode: config.Start, Keys: []config.Key{opsKey, aliceKey, bobKey}})
	p := newPage(t)
	signIn(p, env.URL, bobKey)
	openChat(p, env.URL, "assistant", "roles-1")
	say(p, "hello")
	waitAnswer(p, "echo: hello")
	id := chatPause(p)
	c := `#chat-log article.chat-decision[data-id="` + id + `"]`
	p.waitText(c+` [data-role="caller"]`, "cannot decide")
	if n := eval[int](p, `document.querySelectorAll('`+c+` button').length`); n != 0 {
		t.Fatalf("a caller is offered %d decision buttons", n)
	}

	a := newPage(t)
	signIn(a, env.URL, aliceKey)
	openChat(a, env.URL, "assistant", "roles-1")
	if !eval[bool](a, `document.querySelector('#chat-input').disabled && document.querySelector('#chat-send').disabled`) {
		t.Fatal("an approver may type a message")
	}
	a.waitText("#chat-help", "role approver")
	a.click(c + ` button[data-action="approve"]`)
	waitAnswer(a, "Refund result:")
	if n := env.Calls.Get("refund"); n != 1 {
		t.Fatalf("refund ran %d times", n)
	}
	if it := decision(t, env, "acme", id); it.Decision == nil || !strings.Contains(it.Decision.By, "alice") {
		t.Fatalf("the decision is %+v, want alice's", it.Decision)
	}
	// The caller's open chat learns of it too.
	p.waitText(c+" .verdict", "by alice")
}

// setValue sets a form field's value as typing would (an input event).
func setValue(p *page, sel, value string) {
	p.t.Helper()
	if !eval[bool](p, `(() => { const el = document.querySelector(`+js(sel)+`); if (!el) return false; el.value = `+js(value)+`; el.dispatchEvent(new Event('input', { bubbles: true })); return true; })()`) {
		p.t.Fatalf("no field %s", sel)
	}
}

// lastUserTexts is what the model's last request held as user messages.
func lastUserTexts(env *stacktest.Env) []string {
	reqs := env.Upstream.Requests()
	var out []string
	for _, m := range reqs[len(reqs)-1].Request.Messages {
		if m.Role == "user" {
			out = append(out, m.Content)
		}
	}
	return out
}

// TestChatEditRegenerate: Regenerate on an answer asks the model again
// with the conversation up to its question (and not the old answer); Edit
// on a question sends the edited text instead of the old one; each makes a
// branch of the thread, which the page counts.
func TestChatEditRegenerate(t *testing.T) {
	t.Parallel()
	env := chatEnv(t)
	p := newPage(t)
	openChat(p, env.URL, "assistant", "br-1")
	say(p, "first question")
	waitAnswer(p, "echo: first question")
	say(p, "second question")
	waitAnswer(p, "echo: second question")
	calls := env.Upstream.Count()

	// The second answer's Regenerate (by its text: :last-of-type would
	// name the log's last item, whatever its role).
	p.waitJS("the second answer's Regenerate", `(() => {
		const a = [...document.querySelectorAll('#chat-log .chat-msg[data-role="assistant"]')].find((el) => el.textContent.includes('echo: second question'));
		const b = a?.querySelector('button[data-action="regenerate"]');
		if (!b || b.closest('[hidden]')) return false;
		b.click();
		return true;
	})()`)
	p.waitJS("a new model call", `document.querySelector('#chat-log').getAttribute('aria-busy') === 'false' && document.querySelectorAll('#chat-log .chat-msg[data-role="assistant"]').length === 2`)
	stacktest.WaitFor(t, "the regenerated answer's model call", func() bool { return env.Upstream.Count() == calls+1 })
	if got := lastUserTexts(env); strings.Join(got, "|") != "first question|second question" {
		t.Fatalf("the regenerate sent the user messages %q", got)
	}
	reqs := env.Upstream.Requests()
	for _, m := range reqs[len(reqs)-1].Request.Messages {
		if m.Role == "assistant" && strings.Contains(m.Content, "second question") {
			t.Fatalf("the regenerate showed the model its old answer: %+v", m)
		}
	}
	p.waitText("#chat-branches", "2 branches")

	first := `#chat-log .chat-msg[data-role="user"]`
	p.click(first + ` button[data-action="edit-message"]`)
	p.waitJS("the edit box focused", `document.activeElement?.name === 'edit'`)
	setValue(p, first+` textarea[name="edit"]`, "an edited question")
	p.click(first + ` button[data-action="send-edit"]`)
	waitAnswer(p, "echo: an edited question")
	if got := lastUserTexts(env); strings.Join(got, "|") != "an edited question" {
		t.Fatalf("the edit sent the user messages %q", got)
	}
	if n := eval[int](p, `document.querySelectorAll('#chat-log .chat-msg').length`); n != 2 {
		t.Fatalf("the chat shows %d messages after the edit, want the edited question and its answer", n)
	}
	p.waitText("#chat-branches", "3 branches")

	// The branch switcher makes the first line the head again: the chat
	// shows it and goes on from it.
	eval[bool](p, `(() => { const s = document.querySelector('#chat-branch'); s.value = '0'; s.dispatchEvent(new Event('change')); return true; })()`)
	p.waitJS("branch 0's conversation", `[...document.querySelectorAll('#chat-log .chat-msg[data-role="user"]')].map(e => e.querySelector('.md').textContent).join('|') === 'first question|second question'`)
	p.waitJS("branch 0 as the head", `document.querySelector('#chat-branch')?.value === '0'`)
	say(p, "third question")
	waitAnswer(p, "echo: third question")
	if got := lastUserTexts(env); strings.Join(got, "|") != "first question|second question|third question" {
		t.Fatalf("on branch 0 the model saw %q", got)
	}
	eval[bool](p, `(() => { const s = document.querySelector('#chat-branch'); s.value = '2'; s.dispatchEvent(new Event('change')); return true; })()`)
	p.waitJS("branch 2's conversation", `[...document.querySelectorAll('#chat-log .chat-msg[data-role="user"]')].map(e => e.querySelector('.md').textContent).join('|') === 'an edited question'`)

	// Fork: the conversation up to the answer goes to a new thread, where
	// the chat goes on.
	p.click(`#chat-log .chat-msg[data-role="assistant"] button[data-action="fork"]`)
	p.waitJS("the fork's chat", `!location.hash.includes('thread=br-1') && document.querySelector('#main').dataset.chatReady === 'true' && document.querySelectorAll('#chat-log .chat-msg').length === 2`)
	p.waitText(`#chat-log .chat-msg[data-role="assistant"]`, "echo: an edited question")
	say(p, "after the fork")
	waitAnswer(p, "echo: after the fork")
	if got := lastUserTexts(env); strings.Join(got, "|") != "an edited question|after the fork" {
		t.Fatalf("the fork's model saw %q", got)
	}
}

// TestChatReloadMidRun: a page reloaded while the turn streams reattaches
// to it (an AG-UI run with no new message) and shows it to its end.
func TestChatReloadMidRun(t *testing.T) {
	t.Parallel()
	env := chatEnv(t)
	p := newPage(t)
	openChat(p, env.URL, "assistant", "reload-1")
	say(p, "tell me a long story")
	p.waitText(`#chat-log .chat-msg[data-role="assistant"] .md`, "Once upon")
	p.do(chromedp.Reload())
	p.waitJS("the chat to load", `document.documentElement.dataset.ready === 'true' && document.querySelector('#main').dataset.chatReady === 'true'`)
	p.waitText(`#chat-log .chat-msg[data-role="user"]`, "tell me a long story")
	waitAnswer(p, "the end came")
	if n := env.Upstream.Count(); n != 1 {
		t.Fatalf("the model was called %d times; the reattach must not start another turn", n)
	}
	if th := env.Thread(t, "dev", "reload-1"); th.Status != store.Idle {
		t.Fatalf("the thread is %s", th.Status)
	}
}

// TestChatSubagentTodosFiles: a subagent's work (its SUBAGENT_* and STEP_*
// brackets) is grouped under its name, with its own tool calls inside;
// the built-in todos show as a checklist and the virtual files as a list
// with a viewer, following the state deltas.
func TestChatSubagentTodosFiles(t *testing.T) {
	t.Parallel()
	env := chatEnv(t)
	p := newPage(t)
	openChat(p, env.URL, "assistant", "sub-1")
	say(p, "research Paris for me")
	waitAnswer(p, "Summary:")
	g := `#chat-log .chat-subagent`
	p.waitText(g+" .sub-name", "general-purpose")
	p.waitText(g+" .sub-status", "finished")
	if n := eval[int](p, `document.querySelectorAll('`+g+` .sub-log .chat-tool[data-tool="get_weather"]').length`); n != 1 {
		t.Fatalf("the subagent's group holds %d get_weather cards", n)
	}
	if n := eval[int](p, `document.querySelectorAll('#chat-log > .chat-tool[data-tool="get_weather"]').length`); n != 0 {
		t.Fatal("the subagent's tool call shows outside its group")
	}
	p.waitText(g+" .sub-log", "Looking it up.")

	say(p, "plan and take notes")
	waitAnswer(p, "Notes are up to date.")
	p.waitJS("the todos", `document.querySelectorAll('#chat-todos li').length === 2`)
	if got := eval[string](p, `[...document.querySelectorAll('#chat-todos li input')].map(c => c.checked).join(',')`); got != "true,false" {
		t.Fatalf("the todos' checks read %s", got)
	}
	p.waitText(`#chat-files li[data-file="/notes/plan.md"] .file-view`, "step one done")
}

// TestChatRunError: a run that fails shows the RUN_ERROR as the wire gives
// it: the same message and code a plain AG-UI client reads.
func TestChatRunError(t *testing.T) {
	t.Parallel()
	env := chatEnv(t)
	env.Upstream.FailNext(1, 400)
	r := do(t, "POST", env.URL+"/v1/agents/assistant/agui", `{"threadId":"err-0","messages":[{"id":"m1","role":"user","content":"hello"}]}`)
	var wire struct {
		Type, Message, Code string
	}
	for _, line := range strings.Split(r.String(), "\n") {
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"RUN_ERROR"`) {
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &wire); err != nil {
				t.Fatal(err)
			}
		}
	}
	if wire.Type != "RUN_ERROR" || wire.Message == "" {
		t.Fatalf("no RUN_ERROR on the wire: %s", r)
	}

	env.Upstream.FailNext(1, 400)
	p := newPage(t)
	openChat(p, env.URL, "assistant", "err-1")
	say(p, "hello")
	n := `#chat-log .chat-note[data-kind="error"]`
	p.waitText(n+" .note-text", wire.Message)
	if got := eval[string](p, `document.querySelector('`+n+` code')?.textContent || ''`); got != wire.Code {
		t.Fatalf("the chat shows code %q, the wire says %q", got, wire.Code)
	}
	if got := eval[string](p, `document.querySelector('`+n+` .note-text').textContent`); got != wire.Message {
		t.Fatalf("the chat shows %q, the wire says %q", got, wire.Message)
	}
	// The next message goes through.
	say(p, "hello again")
	waitAnswer(p, "echo: hello again")
}

// TestChatInDoubt: Stop while a tool runs leaves its call in doubt (it
// may have run); the chat shows the stored decision with Retry and Skip,
// and skipping it with a message resumes the turn over AG-UI.
func TestChatInDoubt(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 4)
	env := stacktest.New(t, stacktest.Options{
		Script: `[{"when": {"lastTool": "slow_lookup"}, "reply": {"text": "Lookup said: {{lastTool}}"}},
		 {"when": {"lastUser": "look it up"}, "reply": {"toolCalls": [{"name": "slow_lookup", "arguments": {"q": "x"}}]}},` +
			strings.TrimPrefix(stacktest.DefaultScript, "["),
		Agents: func(env *stacktest.Env) []*agent.Spec {
			specs := stacktest.DefaultAgents(env, "openai/test-model")
			specs[0].Tools = append(specs[0].Tools, &tool.Tool{
				Name: "slow_lookup", Description: "A lookup that takes as long as it is let",
				Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`),
				Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
					env.Calls.Add("slow_lookup", c.Args)
					started <- struct{}{}
					<-ctx.Done()
					return tool.Result{}, ctx.Err()
				},
			})
			return specs
		},
	})
	p := newPage(t)
	openChat(p, env.URL, "assistant", "doubt-1")
	say(p, "look it up")
	testwait.Recv(t, started, "the tool to start")
	p.waitText(`#chat-log .chat-tool[data-tool="slow_lookup"] .tool-status`, "running")
	p.do(chromedp.KeyEvent(kb.Escape))
	c := `#chat-log article.chat-decision[data-tool="slow_lookup"]`
	p.waitJS("the in-doubt card", `!!document.querySelector('`+c+` button[data-action="skip"]') && !!document.querySelector('`+c+` button[data-action="retry"]')`)
	p.waitText(c+" h3", "In doubt")
	// The stopped run has ended on the page (its note shown, Stop gone), so
	// nothing moves the focus while the skip is written.
	p.waitJS("the stop to settle", `!!document.querySelector('#chat-log .chat-note[data-kind="cancelled"]') && document.querySelector('#chat-stop').hidden &&
		document.querySelector('#chat-log').getAttribute('aria-busy') === 'false'`)
	p.click(c + ` button[data-action="skip"]`)
	p.waitJS("the skip form", `!document.querySelector('`+c+` form.reject-form').hidden`)
	setValue(p, c+" textarea[name=message]", "it did not run")
	p.click(c + ` button[data-action="confirm-skip"]`)
	waitAnswer(p, "Lookup said:")
	if n := env.Calls.Get("slow_lookup"); n != 1 {
		t.Fatalf("slow_lookup ran %d times; a skip must not run it again", n)
	}
	reqs := env.Upstream.Requests()
	last := reqs[len(reqs)-1].Request.Messages
	if m := last[len(last)-1]; m.Role != "tool" || !strings.Contains(m.Content, "it did not run") {
		t.Fatalf("the model saw %+v, want the skip's message", m)
	}
}

// TestChatQuestion: a question a running tool asks arrives in the stream
// (CUSTOM stackbone.question) and shows as a form from its schema; an
// answer the schema refuses is caught in the page; a valid one reaches the
// waiting call, and the same stream goes on to the answer.
func TestChatQuestion(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{
		Script: `[{"when": {"lastTool": "ask_reason"}, "reply": {"text": "Result: {{lastTool}}"}},
		          {"reply": {"toolCalls": [{"name": "ask_reason", "arguments": {}}]}}]`,
		Agents: func(env *stacktest.Env) []*agent.Spec {
			ask := &tool.Tool{Name: "ask_reason", Description: "Ask before acting", Timeout: time.Minute,
				Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
					a, err := c.Ask(ctx, tool.Question{Message: "Why delete the record?", Schema: json.RawMessage(
						`{"type":"object","properties":{"reason":{"type":"string","minLength":3}},"required":["reason"]}`)})
					if err != nil {
						return tool.Result{}, err
					}
					return tool.Result{Content: fmt.Sprintf("accepted=%v %s", a.Accepted, a.Content)}, nil
				}}
			return []*agent.Spec{{Name: "asker", Model: "openai/test-model", Instructions: "Help.", Tools: []*tool.Tool{ask}}}
		}})
	p := newPage(t)
	openChat(p, env.URL, "asker", "q-1")
	say(p, "delete it")
	c := `#chat-log article.chat-question[data-tool="ask_reason"]`
	p.waitText(c+" .desc", "Why delete the record?")
	if !eval[bool](p, `document.querySelector('#chat-log').getAttribute('aria-busy') === 'true'`) {
		t.Fatal("the run does not wait for the answer")
	}
	setValue(p, c+` input[data-field="reason"]`, "x")
	p.click(c + ` button[data-action="answer"]`)
	p.waitText(c+" .error", "reason: must be at least 3 characters long")
	setValue(p, c+` input[data-field="reason"]`, "duplicate entry")
	p.click(c + ` button[data-action="answer"]`)
	waitAnswer(p, `Result: accepted=true {"reason":"duplicate entry"}`)
	p.waitText(c+" .verdict", "Answered")
}

// TestChatAGUISessionCSRF: the AG-UI route takes the Studio session the
// playground runs under (the one authentication path, Server.Authenticate
// with Studio's CookieAuth): with its CSRF token a run streams under the
// key's tenant; without it, or with another token, the request is refused
// before any run; a caller's session may not resume (decide).
func TestChatAGUISessionCSRF(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: []config.Key{opsKey, bobKey}})
	cookie, info := login(t, env, bobKey.Secret)
	url := env.URL + "/v1/agents/assistant/agui"
	body := `{"threadId":"csrf-1","messages":[{"id":"u1","role":"user","content":"hello"}]}`
	ck := "stackbone_studio=" + cookie.Value
	for _, c := range []struct{ name, token string }{{"no token", ""}, {"another token", "not-the-token"}} {
		hdr := []string{"Cookie", ck}
		if c.token != "" {
			hdr = append(hdr, studio.CSRFHeader, c.token)
		}
		r := do(t, "POST", url, body, hdr...)
		if r.status != http.StatusForbidden || !strings.Contains(r.String(), "csrf_failed") {
			t.Fatalf("%s: %d %s", c.name, r.status, r)
		}
	}
	if _, err := env.Store.GetThread(t.Context(), "acme", "csrf-1"); err == nil {
		t.Fatal("a refused request started a thread")
	}
	r := do(t, "POST", url, body, "Cookie", ck, studio.CSRFHeader, info.CSRF)
	if r.status != 200 || !strings.Contains(r.String(), `"RUN_FINISHED"`) || !strings.Contains(r.String(), "echo: hello") {
		t.Fatalf("with the session's token: %d %s", r.status, r)
	}
	if th := env.Thread(t, "acme", "csrf-1"); th.Agent != "assistant" {
		t.Fatalf("the thread is %+v", th)
	}
	r = do(t, "POST", url, `{"threadId":"csrf-1","resume":[{"interruptId":"int_x","status":"resolved","payload":{"approved":true}}]}`,
		"Cookie", ck, studio.CSRFHeader, info.CSRF)
	if !strings.Contains(r.String(), `"RUN_ERROR"`) || !strings.Contains(r.String(), "forbidden_role") {
		t.Fatalf("a caller's resume: %d %s", r.status, r)
	}
}

// TestChatDecisionReachesInbox: the reverse way: a call approved in the
// chat leaves the open Approvals inbox at once and shows in its recent
// decisions as decided over AG-UI.
func TestChatDecisionReachesInbox(t *testing.T) {
	t.Parallel()
	env := chatEnv(t)
	p := newPage(t)
	openChat(p, env.URL, "assistant", "rev-1")
	id := chatPause(p)
	inbox := newPage(t)
	inbox.open(env.URL + "/studio/#/inbox")
	inbox.waitJS("the call in the inbox", `!!document.querySelector(`+js(card(id))+`)`)
	p.click(`#chat-log article.chat-decision[data-id="` + id + `"] button[data-action="approve"]`)
	waitAnswer(p, "Refund result:")
	inbox.waitJS("the call to leave the inbox", `!document.querySelector(`+js(card(id))+`)`)
	inbox.waitText(`.history-item[data-id="`+id+`"] .via`, "via agui")
}

// TestChatApprovalClearsInboxBadge: the nav's count of pending approvals
// goes to 1 when the chat's call pauses, and is already gone when the
// answer of the call approved inline shows (the quick start's screenshot
// had the answer beside "Approvals 1"), without a reload.
func TestChatApprovalClearsInboxBadge(t *testing.T) {
	t.Parallel()
	env := chatEnv(t)
	p := newPage(t)
	openChat(p, env.URL, "assistant", "badge-1")
	id := chatPause(p)
	p.waitJS("the badge to count the paused call", `(() => { const b = document.querySelector('#inbox-count'); return !b.hidden && b.textContent.startsWith('1'); })()`)
	// What the badge says at the moment the answer first shows.
	eval[bool](p, `(() => {
		const seen = () => [...document.querySelectorAll('#chat-log .chat-msg[data-role="assistant"] .md')].some((e) => e.textContent.includes('Refund result'));
		new MutationObserver((_, o) => {
			if (!seen()) return;
			const b = document.querySelector('#inbox-count');
			window.badgeAtAnswer = b.hidden ? 'hidden' : b.textContent;
			o.disconnect();
		}).observe(document.querySelector('#chat-log'), { subtree: true, childList: true, characterData: true });
		return true;
	})()`)
	p.click(`#chat-log article.chat-decision[data-id="` + id + `"] button[data-action="approve"]`)
	waitAnswer(p, "Refund result:")
	if got := eval[string](p, `window.badgeAtAnswer || ''`); got != "hidden" {
		t.Fatalf("when the approved call's answer showed, the Approvals badge said %q, want it gone", got)
	}
	p.waitJS("the badge to stay clear", `document.querySelector('#inbox-count').hidden`)
}

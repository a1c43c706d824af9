package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/server"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// summarizeScript answers the summary request (recognised by its
// instruction) with a fixed summary, anything else with "noted".
const summarizeScript = `[
 {"when": {"system": "Summarise this conversation so far"}, "reply": {"text": "Facts: the user sent long numbered turns."}},
 {"reply": {"text": "noted"}}
]`

// summarizeAgent has the window of contextAgent (about two 2000-byte turns
// fit) and the summarize policy.
func summarizeAgent(*stacktest.Env) []*agent.Spec {
	return []*agent.Spec{{Name: "assistant", Model: "openai/test-model", Instructions: "Be brief.",
		NoTodos: true, NoFiles: true, ContextWindow: 1450, ContextPolicy: agent.ContextSummarize,
		ModelSettings: model.Settings{MaxTokens: 100}}}
}

// TestContextSummarize: under contextPolicy summarize, a durable thread
// that outgrows the window has its older turns summarised by one extra call
// of the agent's model (the upstream gets those turns and the summary
// instruction); the summary is stored in the thread, marked, and the next
// model calls get [system prompt, summary, recent turns]. A later turn that
// still fits reuses the stored summary (no new summary call); when the
// recent turns outgrow the window again, the earlier summary and the turns
// after it are summarised anew. GET /v1/threads/{id} keeps every message.
func TestContextSummarize(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Script: summarizeScript, Agents: summarizeAgent})
	c := client(env, session("sum"))
	for _, text := range []string{"turn 1", "turn 2", "turn 3", "turn 4", "turn 5"} {
		res, err := c.Chat.Completions.New(context.Background(), params(user(text+" "+strings.Repeat("x", 2000))))
		if err != nil || res.Choices[0].Message.Content != "noted" {
			t.Fatalf("turn %q: %v", text, err)
		}
	}
	view := call(t, "GET", env.URL+"/v1/threads/sum", "")
	var th server.ThreadView
	if err := json.Unmarshal(view.body, &th); err != nil || view.status != 200 {
		t.Fatalf("thread: %d %s", view.status, view.body)
	}
	// u1 a1 u2 a2 u3 S1 a3 u4 a4 u5 S2 a5: nothing deleted, two summaries.
	st := th.Messages
	if len(st) != 12 {
		t.Fatalf("stored %d messages: %+v", len(st), brief(st))
	}
	const summary = "Facts: the user sent long numbered turns."
	for _, s := range []struct {
		i    int
		upTo message.Message
	}{{5, st[3]}, {10, st[8]}} {
		m := st[s.i]
		if m.Role != message.System || m.Content != summary || m.Summarizes != s.upTo.ID {
			t.Fatalf("stored message %d is not the summary up to %s: %s", s.i, s.upTo.ID, brief(st))
		}
	}
	for i, m := range st {
		if i != 5 && i != 10 && m.Summarizes != "" {
			t.Fatalf("message %d marked as a summary: %+v", i, m)
		}
	}
	if !strings.HasPrefix(st[9].Content, "turn 5 ") || st[11].Content != "noted" {
		t.Fatalf("stored history: %+v", brief(st))
	}

	reqs := env.Upstream.Requests()
	if len(reqs) != 7 {
		t.Fatalf("want 7 model calls (5 answers, 2 summaries), got %d", len(reqs))
	}
	isSummary := func(r model.Request) bool { return r.System == engine.SummaryInstruction }
	// The summary calls: the old turns as a transcript, nothing newer.
	transcript := func(i int, has, hasNot []string) {
		t.Helper()
		r := reqs[i].Request
		if !isSummary(r) || len(r.Messages) != 1 || r.Messages[0].Role != message.User {
			t.Fatalf("call %d is not a summary call: %+v", i+1, sent(r.Messages))
		}
		for _, s := range has {
			if !strings.Contains(r.Messages[0].Content, s) {
				t.Fatalf("summary call %d lacks %q", i+1, s)
			}
		}
		for _, s := range hasNot {
			if strings.Contains(r.Messages[0].Content, s) {
				t.Fatalf("summary call %d has %q", i+1, s)
			}
		}
	}
	transcript(2, []string{"user: turn 1 ", "assistant: noted", "user: turn 2 "}, []string{"turn 3", "Earlier summary"})
	transcript(5, []string{"Earlier summary:\n" + summary, "user: turn 3 ", "user: turn 4 "}, []string{"turn 1", "turn 2", "turn 5"})
	// The answers: the system prompt, then the summary (when there is one;
	// the mock upstream's decoder joins the system messages into one system
	// text) and only the recent turns.
	want := []struct {
		call       int
		summarised bool
		msgs       []message.Message
	}{
		{0, false, st[0:1]},                 // u1
		{1, false, st[0:3]},                 // u1 a1 u2
		{3, true, st[4:5]},                  // S1 u3: u1..a2 summarised
		{4, true, sentOf(st[4:5], st[6:8])}, // S1 u3 a3 u4: the stored summary reused
		{6, true, st[9:10]},                 // S2 u5: S1 and u3..a4 summarised anew
	}
	for _, w := range want {
		r := reqs[w.call].Request
		sys := "Be brief."
		if w.summarised {
			sys += "\n" + engine.SummaryHeader + summary
		}
		if r.System != sys {
			t.Fatalf("call %d: system %q, want %q", w.call+1, r.System, sys)
		}
		if got, want := sent(r.Messages), sent(w.msgs); !reflect.DeepEqual(got, want) {
			t.Fatalf("call %d sent %d messages:%s\nwant %d:%s", w.call+1, len(got), brief(got), len(want), brief(want))
		}
	}
}

// brief lists messages as role, id, start of content, summary mark.
func brief(msgs []message.Message) string {
	var b strings.Builder
	for i, m := range msgs {
		c := m.Content
		if len(c) > 12 {
			c = c[:12]
		}
		fmt.Fprintf(&b, "\n%d %s %s %q summarizes=%q", i, m.Role, m.ID, c, m.Summarizes)
	}
	return b.String()
}

// sentOf joins message lists.
func sentOf(parts ...[]message.Message) []message.Message {
	var out []message.Message
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestContextSummarizeFallsBackToTrim: when the summary call fails the turn
// is still answered, with what trim would send, and no summary is stored; a
// stateless turn (no thread to store a summary in) trims without a summary
// call.
func TestContextSummarizeFallsBackToTrim(t *testing.T) {
	t.Parallel()
	const failing = `[
 {"when": {"system": "Summarise this conversation so far"}, "reply": {"error": {"status": 400, "message": "no summaries today"}}},
 {"reply": {"text": "noted"}}
]`
	env := stacktest.New(t, stacktest.Options{Script: failing, Agents: summarizeAgent})
	c := client(env, session("fails"))
	long := func(text string) string { return text + " " + strings.Repeat("x", 2000) }
	for _, text := range []string{"turn 1", "turn 2", "turn 3"} {
		res, err := c.Chat.Completions.New(context.Background(), params(user(long(text))))
		if err != nil || res.Choices[0].Message.Content != "noted" {
			t.Fatalf("turn %q: %v", text, err)
		}
	}
	view := call(t, "GET", env.URL+"/v1/threads/fails", "")
	var th server.ThreadView
	if err := json.Unmarshal(view.body, &th); err != nil || view.status != 200 {
		t.Fatalf("thread: %d %s", view.status, view.body)
	}
	st := th.Messages
	if len(st) != 6 {
		t.Fatalf("stored: %s", brief(st))
	}
	for _, m := range st {
		if m.Summarizes != "" || m.Role == message.System {
			t.Fatalf("a summary was stored: %s", brief(st))
		}
	}
	reqs := env.Upstream.Requests()
	if len(reqs) != 4 || reqs[2].Request.System != engine.SummaryInstruction {
		t.Fatalf("want answer, answer, failed summary, answer; got %d calls", len(reqs))
	}
	last := reqs[3].Request
	if last.System != "Be brief." || !reflect.DeepEqual(sent(last.Messages), sent(st[2:5])) {
		t.Fatalf("the turn after the failed summary sent %s (system %q), want u2 a2 u3", brief(last.Messages), last.System)
	}

	// Stateless: the whole history comes with the request; it is trimmed.
	res, err := client(env).Chat.Completions.New(context.Background(), params(
		user(long("s1")), openai.AssistantMessage("noted"), user(long("s2")), openai.AssistantMessage("noted"), user(long("s3"))))
	if err != nil || res.Choices[0].Message.Content != "noted" {
		t.Fatalf("stateless turn: %v", err)
	}
	reqs = env.Upstream.Requests()
	if len(reqs) != 5 {
		t.Fatalf("the stateless turn made %d model calls, want 1", len(reqs)-4)
	}
	got := reqs[4].Request.Messages
	if len(got) != 3 || !strings.HasPrefix(got[0].Content, "s2 ") || !strings.HasPrefix(got[2].Content, "s3 ") {
		t.Fatalf("the stateless turn sent %s", brief(got))
	}
}

// TestContextSummaryNotInAGUISnapshot: an AG-UI client rebuilding its view
// from MESSAGES_SNAPSHOT sees the conversation's turns, not the stored
// context summary.
func TestContextSummaryNotInAGUISnapshot(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Script: summarizeScript, Agents: summarizeAgent})
	var s aguiStream
	for i := 1; i <= 4; i++ {
		run := fmt.Sprintf("r%d", i)
		s = aguiPost(t, env, "assistant", aguiInput("ag", run, fmt.Sprintf("turn %d %s", i, strings.Repeat("x", 2000))))
		if s.status != 200 || s.text() != "noted" {
			t.Fatalf("turn %d: %d %q", i, s.status, s.text())
		}
	}
	if n := len(env.Upstream.Requests()); n != 5 {
		t.Fatalf("want 4 answers and 1 summary call, got %d calls", n)
	}
	snap := s.first("MESSAGES_SNAPSHOT")
	if snap == nil {
		t.Fatalf("turn 4 on an existing thread sent no MESSAGES_SNAPSHOT")
	}
	msgs := snap["messages"].([]any)
	for _, m := range msgs {
		if w := m.(map[string]any); w["role"] == "system" || strings.Contains(fmt.Sprint(w["content"]), "Facts:") {
			t.Fatalf("the snapshot shows the summary: %v", w)
		}
	}
	if len(msgs) < 6 || msgs[0].(map[string]any)["id"] != "u-r1" {
		t.Fatalf("the snapshot lost turns: %d messages, first %v", len(msgs), msgs[0])
	}
}

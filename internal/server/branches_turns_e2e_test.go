package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	ant "github.com/anthropics/anthropic-sdk-go/v2"
	antopt "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// headLines is the thread's head conversation as role:content lines.
func headLines(t *testing.T, env *stacktest.Env, thread string) []string {
	t.Helper()
	msgs, err := env.Store.Messages(context.Background(), "dev", thread)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Role)+":"+m.Content)
	}
	return out
}

// branchesOf is the thread's branches and its head branch.
func branchesOf(t *testing.T, env *stacktest.Env, thread string) ([]store.Branch, int64) {
	t.Helper()
	bs, err := env.Store.Branches(context.Background(), "dev", thread)
	if err != nil {
		t.Fatal(err)
	}
	return bs, env.Thread(t, "dev", thread).HeadBranch
}

// TestAnthropicSessionRegenerateAndEdit: the official Go SDK on a session
// (x-stackbone-session), on an agent whose model is an Anthropic one,
// sending its whole conversation as Messages clients do. A regenerate of
// the last answer (the conversation up to the last question again, under a
// new Idempotency-Key: a new user action) asks the model again with exactly
// that conversation, not the answer it replaces; an edit of an earlier
// question gives the model the turns before it and the edited question
// only. The thread keeps every answer, on three branches, with the edit's
// line as its head.
func TestAnthropicSessionRegenerateAndEdit(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Upstream: modeltest.Anthropic})
	const sess = "ant-branches"
	c := antClient(env, antSession(sess), antopt.WithMaxRetries(0))
	action := 0
	ask := func(msgs ...ant.MessageParam) *ant.Message {
		t.Helper()
		action++
		res, err := c.Messages.New(context.Background(), antParams(msgs...),
			antopt.WithHeader("Idempotency-Key", fmt.Sprintf("ant-branches-%d", action)))
		if err != nil {
			t.Fatalf("action %d: %v", action, err)
		}
		return res
	}
	const q1, q2, q2e = "branch first question", "branch second question", "branch second question, edited"
	a1 := ask(antUser(q1))
	a2 := ask(antUser(q1), a1.ToParam(), antUser(q2))
	if got := blocksOf(a2); got != "text:echo: "+q2 {
		t.Fatalf("second answer %q", got)
	}
	// Regenerate: the conversation up to the second question again.
	if got := blocksOf(ask(antUser(q1), a1.ToParam(), antUser(q2))); got != "text:echo: "+q2 {
		t.Fatalf("regenerated answer %q", got)
	}
	// Edit the second question.
	if got := blocksOf(ask(antUser(q1), a1.ToParam(), antUser(q2e))); got != "text:echo: "+q2e {
		t.Fatalf("edited answer %q", got)
	}

	first := []string{"user:" + q1, "assistant:echo: " + q1}
	second := append(slices.Clone(first), "user:"+q2)
	if got := modelSaw(env, q2); len(got) != 2 || !slices.Equal(got[0], second) || !slices.Equal(got[1], second) {
		t.Errorf("the second question and its regenerate: the model saw %q; want twice %q", got, second)
	}
	edited := append(slices.Clone(first), "user:"+q2e)
	if got := modelSaw(env, q2e); len(got) != 1 || !slices.Equal(got[0], edited) {
		t.Errorf("the edit: the model saw %q; want %q", got, edited)
	}
	if n := env.Upstream.Count(); n != 4 {
		t.Errorf("%d model calls; want 4 (one per action)", n)
	}
	if got, want := headLines(t, env, sess), append(slices.Clone(edited), "assistant:echo: "+q2e); !slices.Equal(got, want) {
		t.Errorf("the thread's conversation is %q; want %q", got, want)
	}
	bs, head := branchesOf(t, env, sess)
	if len(bs) != 3 || head != bs[2].ID || bs[1].ForkSeq != 3 || bs[2].ForkSeq != 2 {
		t.Errorf("branches %+v, head %d; want 3 (the first line, the regenerate from the second question, the edit from the first answer), the edit's the head", bs, head)
	}
	// The next message goes on from the edit.
	res := ask(antUser(q1), a1.ToParam(), antUser(q2e), ant.NewAssistantMessage(ant.NewTextBlock("echo: "+q2e)), antUser("and then"))
	if got := blocksOf(res); got != "text:echo: and then" {
		t.Fatalf("after the edit %q", got)
	}
	if got := modelSaw(env, "and then"); len(got) != 1 || !slices.Equal(got[0], append(slices.Clone(edited), "assistant:echo: "+q2e, "user:and then")) {
		t.Errorf("after the edit: the model saw %q", got)
	}
	if bs, _ := branchesOf(t, env, sess); len(bs) != 3 {
		t.Errorf("a turn after the edit made a branch: %+v", bs)
	}
}

// TestBranchRefusedWhileDecisionPending: a thread paused on an approval
// (refund) refuses a request that would branch it, on each wire in its own
// error format: a Chat Completions session request that edits an earlier
// user message, and a Responses request continuing an older response. The
// refusal changes nothing: no branch, no message, no model call; the
// decision is still pending, and approving it finishes the turn on the
// original line.
func TestBranchRefusedWhileDecisionPending(t *testing.T) {
	t.Parallel()
	t.Run("chat", func(t *testing.T) {
		t.Parallel()
		env := stacktest.New(t, stacktest.Options{})
		const sess = "pending-edit"
		post := func(msgs string) apiResp {
			return call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":`+msgs+`}`, "x-stackbone-session", sess)
		}
		if r := post(`[{"role":"user","content":"hello"}]`); r.status != 200 {
			t.Fatalf("first turn: %d %s", r.status, r.body)
		}
		pause(t, env, sess, "refund my order please")
		it := pendingOf(t, env, sess)
		before, calls := headLines(t, env, sess), env.Upstream.Count()

		// An edit of the second question, an edit of the first, and a
		// regenerate of the paused turn: each would go on from before the
		// pause, on a branch.
		for _, msgs := range []string{
			`[{"role":"user","content":"hello"},{"role":"assistant","content":"echo: hello"},{"role":"user","content":"something else"}]`,
			`[{"role":"user","content":"hello, edited"},{"role":"assistant","content":"echo: hello"},{"role":"user","content":"refund my order please"}]`,
			`[{"role":"user","content":"hello"},{"role":"assistant","content":"echo: hello"},{"role":"user","content":"refund my order please"}]`,
		} {
			r := post(msgs)
			want := `{"error":{"message":"This conversation is waiting on a human decision. Resolve it before sending a new message.","type":"invalid_request_error","code":"approval_pending"}}`
			if r.status != http.StatusConflict || string(r.body) != want {
				t.Errorf("%s: %d %s; want 409 %s", msgs, r.status, r.body, want)
			}
		}
		wantUnchanged(t, env, sess, before, calls, it)
		approveOnLine(t, env, sess, it, append(before, "tool:", "assistant:Refund result: "))
	})

	t.Run("responses", func(t *testing.T) {
		t.Parallel()
		env := stacktest.New(t, stacktest.Options{})
		next := func(prev, input string) (apiResp, string) {
			body := fmt.Sprintf(`{"model":"assistant","input":%q}`, input)
			if prev != "" {
				body = fmt.Sprintf(`{"model":"assistant","input":%q,"previous_response_id":%q}`, input, prev)
			}
			r := call(t, "POST", env.URL+"/v1/responses", body)
			var m struct {
				ID           string `json:"id"`
				Conversation struct {
					ID string `json:"id"`
				} `json:"conversation"`
			}
			_ = json.Unmarshal(r.body, &m)
			return r, m.ID
		}
		r, r1 := next("", "hello")
		if r.status != 200 {
			t.Fatalf("first response: %d %s", r.status, r.body)
		}
		r, r2 := next(r1, "refund my order please")
		if r.status != 200 {
			t.Fatalf("refund response: %d %s", r.status, r.body)
		}
		rec, err := env.Store.GetResponse(context.Background(), "dev", r2)
		if err != nil {
			t.Fatal(err)
		}
		thread := rec.ThreadID
		it := pendingOf(t, env, thread)
		before, calls := headLines(t, env, thread), env.Upstream.Count()

		r, _ = next(r1, "something else")
		var e struct {
			Error struct {
				Message, Type, Code string
				Param               *string
			}
		}
		if err := json.Unmarshal(r.body, &e); err != nil || r.status != http.StatusConflict || e.Error.Code != "approval_pending" || e.Error.Type != "invalid_request_error" {
			t.Errorf("continuing r1 while r2 waits: %d %s; want 409 approval_pending", r.status, r.body)
		}
		wantUnchanged(t, env, thread, before, calls, it)
		approveOnLine(t, env, thread, it, append(before, "tool:", "assistant:Refund result: "))
		// Once decided, continuing r1 branches as ever.
		if r, _ = next(r1, "something else"); r.status != 200 {
			t.Fatalf("continuing r1 after the decision: %d %s", r.status, r.body)
		}
		if got := headLines(t, env, thread); !slices.Equal(got, []string{"user:hello", "assistant:echo: hello", "user:something else", "assistant:echo: something else"}) {
			t.Errorf("after continuing r1: the head is %q", got)
		}
		if bs, _ := branchesOf(t, env, thread); len(bs) != 2 {
			t.Errorf("branches %+v; want 2", bs)
		}
	})
}

// wantUnchanged checks a refused request left the thread as it was: the
// same conversation on one line, no model call, the decision pending.
func wantUnchanged(t *testing.T, env *stacktest.Env, thread string, before []string, calls int, it store.Interrupt) {
	t.Helper()
	if got := headLines(t, env, thread); !slices.Equal(got, before) {
		t.Errorf("after the refusals the conversation is %q; want %q", got, before)
	}
	if bs, head := branchesOf(t, env, thread); len(bs) != 1 || head != 0 {
		t.Errorf("after the refusals: branches %+v, head %d; want the first line only", bs, head)
	}
	if n := env.Upstream.Count(); n != calls {
		t.Errorf("a refused request reached the model (%d calls)", n-calls)
	}
	if got := pendingOf(t, env, thread); got.ID != it.ID || got.Status != store.Pending {
		t.Errorf("the decision after the refusals: %+v; want %s still pending", got, it.ID)
	}
}

// approveOnLine approves the pending decision and checks the turn
// finishes on the thread's original line: want are its lines, each a
// prefix of the stored one.
func approveOnLine(t *testing.T, env *stacktest.Env, thread string, it store.Interrupt, want []string) {
	t.Helper()
	if r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", ""); r.status != 200 {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	waitIdle(t, env, thread)
	got := headLines(t, env, thread)
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = len(got[i]) >= len(want[i]) && got[i][:len(want[i])] == want[i]
	}
	if !ok {
		t.Errorf("after approving: the conversation is %q; want %q", got, want)
	}
	if bs, head := branchesOf(t, env, thread); len(bs) != 1 || head != 0 {
		t.Errorf("after approving: branches %+v, head %d; want the first line only", bs, head)
	}
	if n := env.Calls.Get("refund"); n != 1 {
		t.Errorf("refund ran %d times; want once", n)
	}
}

// TestResponsesBranchRetryAttaches: a request continuing an older response
// (a branch) whose first attempt is still under way (its model call held)
// is sent again by the client with the same body: the retry attaches to the
// first attempt. Both get the same response, the model is asked once, and
// the thread has one new branch. On SQLite and PostgreSQL.
func TestResponsesBranchRetryAttaches(t *testing.T) {
	for _, key := range []string{"", "branch-retry-key"} {
		name := "no key"
		if key != "" {
			name = "Idempotency-Key"
		}
		t.Run("sqlite/"+name, func(t *testing.T) { testBranchRetryAttaches(t, stacktest.New(t, stacktest.Options{}), key) })
		t.Run("postgres/"+name, func(t *testing.T) {
			testBranchRetryAttaches(t, stacktest.New(t, stacktest.Options{Store: stacktest.Postgres(t, "branchretry")}), key)
		})
	}
}

// testBranchRetryAttaches is TestResponsesBranchRetryAttaches on env, the
// branching request and its retries sent with key as their
// Idempotency-Key ("": none).
func testBranchRetryAttaches(t *testing.T, env *stacktest.Env, key string) {
	next := func(prev, input string) (int, string, string) {
		t.Helper()
		body := fmt.Sprintf(`{"model":"assistant","input":%q}`, input)
		var hdr []string
		if prev != "" {
			body = fmt.Sprintf(`{"model":"assistant","input":%q,"previous_response_id":%q}`, input, prev)
			if key != "" && input == "other branch" {
				hdr = []string{"Idempotency-Key", key}
			}
		}
		r := call(t, "POST", env.URL+"/v1/responses", body, hdr...)
		var m struct {
			ID     string `json:"id"`
			Output []struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"output"`
		}
		_ = json.Unmarshal(r.body, &m)
		var text strings.Builder
		for _, o := range m.Output {
			for _, c := range o.Content {
				text.WriteString(c.Text)
			}
		}
		return r.status, m.ID, text.String()
	}
	_, r1, _ := next("", "hello")
	_, r2, _ := next(r1, "second")
	rec, err := env.Store.GetResponse(context.Background(), "dev", r2)
	if err != nil {
		t.Fatal(err)
	}
	thread := rec.ThreadID
	calls := env.Upstream.Count()

	release := env.Upstream.HoldOnce(script.When{LastUser: "other branch"})
	type answer struct {
		status   int
		id, text string
	}
	firstDone := make(chan answer, 1)
	go func() {
		s, id, text := next(r1, "other branch")
		firstDone <- answer{s, id, text}
	}()
	stacktest.WaitFor(t, "the first attempt's model call", func() bool { return env.Upstream.Count() == calls+1 })
	retryDone := make(chan answer, 1)
	go func() {
		s, id, text := next(r1, "other branch")
		retryDone <- answer{s, id, text}
	}()
	// The retry is attached (it follows the first attempt's events)
	// before the model answers: the thread is still running its turn.
	stacktest.WaitFor(t, "the retry to attach", func() bool {
		return strings.Contains(env.Logs.String(), "retried turn attaches to its first attempt")
	})
	release()
	first, retry := <-firstDone, <-retryDone
	if first.status != 200 || retry.status != 200 || first.id == "" || retry.id != first.id || first.text != "echo: other branch" || retry.text != first.text {
		t.Fatalf("first attempt %+v, retry %+v; want one response answered to both", first, retry)
	}
	if n := env.Upstream.Count() - calls; n != 1 {
		t.Fatalf("%d model calls for the branching turn and its retry; want 1", n)
	}
	if got := headLines(t, env, thread); !slices.Equal(got, []string{"user:hello", "assistant:echo: hello", "user:other branch", "assistant:echo: other branch"}) {
		t.Errorf("the head is %q", got)
	}
	if bs, head := branchesOf(t, env, thread); len(bs) != 2 || head != bs[1].ID {
		t.Errorf("branches %+v, head %d; want 2, the new one the head", bs, head)
	}
	// Once answered, the same body again (a client that lost the answer)
	// still gets that response, and no new branch.
	if s, id, text := next(r1, "other branch"); s != 200 || id != first.id || text != first.text {
		t.Errorf("a retry after the answer: %d %s %q; want %s", s, id, text, first.id)
	}
	if n := env.Upstream.Count() - calls; n != 1 {
		t.Errorf("%d model calls after the late retry; want 1", n)
	}
	if bs, _ := branchesOf(t, env, thread); len(bs) != 2 {
		t.Errorf("branches after the late retry %+v; want 2", bs)
	}
}

package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/cli"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/store/sqlite"
	"github.com/stackbone/stackbone/internal/testwait"
)

// waitHeader asks a durable turn's request to wait in-band for decisions.
var waitHeader = option.WithHeader("x-stackbone-approval", "wait")

// chatResult is what a chat completion request in the background got.
type chatResult struct {
	content, finish string
	calls           int
	err             error
	took            time.Duration
}

// chatAsync sends a chat completion (streamed or not) with the openai SDK in
// the background; the channel gets what the SDK returned once the request
// ends.
func chatAsync(env *stacktest.Env, stream bool, prompt string, opts ...option.RequestOption) <-chan chatResult {
	out := make(chan chatResult, 1)
	c := client(env, opts...)
	go func() {
		start := time.Now()
		var r chatResult
		if stream {
			s := c.Chat.Completions.NewStreaming(context.Background(), params(user(prompt)))
			var acc openai.ChatCompletionAccumulator
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			r.err = s.Err()
			if r.err == nil && len(acc.Choices) > 0 {
				r.content, r.finish, r.calls = acc.Choices[0].Message.Content, acc.Choices[0].FinishReason, len(acc.Choices[0].Message.ToolCalls)
			}
		} else {
			res, err := c.Chat.Completions.New(context.Background(), params(user(prompt)))
			r.err = err
			if err == nil {
				r.content, r.finish, r.calls = res.Choices[0].Message.Content, res.Choices[0].FinishReason, len(res.Choices[0].Message.ToolCalls)
			}
		}
		r.took = time.Since(start)
		out <- r
	}()
	return out
}

// pendingSoon waits for the thread's one pending decision.
func pendingSoon(t *testing.T, env *stacktest.Env, thread string) store.Interrupt {
	t.Helper()
	var its []store.Interrupt
	testwait.Until(t, "a pending decision on "+thread, func() bool {
		var err error
		its, err = env.Store.ListInterrupts(context.Background(), "dev", store.InterruptFilter{ThreadID: thread, Status: store.Pending})
		return err == nil && len(its) == 1
	})
	return its[0]
}

// stillOpen fails t when the request already ended: it must wait for the
// decision.
func stillOpen(t *testing.T, res <-chan chatResult) {
	t.Helper()
	select {
	case r := <-res:
		t.Fatalf("the request ended while its turn waits on a decision: %+v", r)
	default:
	}
}

// hitlCLI runs `stackbone hitl ARGS --yes --url URL` in process.
func hitlCLI(t *testing.T, url string, args ...string) {
	t.Helper()
	var out, errb bytes.Buffer
	args = append(append([]string{"hitl"}, args...), "--yes", "--url", url)
	if code := cli.Execute(context.Background(), cli.Options{}, args, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("stackbone %s: exit %d: %s %s", strings.Join(args, " "), code, out.String(), errb.String())
	}
}

// TestApprovalWaitChatCompletions: with x-stackbone-approval: wait, a
// durable turn that pauses on the refund approval keeps its request open
// (JSON and SSE, through the openai SDK) while the decision is made out of
// band, from the API or the CLI, and the same response ends with the
// resumed turn's answer: finish_reason stop, no tool call, the tool run
// once, and the thread free for the next message. On PostgreSQL the request
// waits on one replica while the decision is made on the other, which runs
// the resume.
func TestApprovalWaitChatCompletions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		stream   bool
		postgres bool
		cli      bool
	}{
		{name: "json", stream: false},
		{name: "stream", stream: true, cli: true},
		{name: "stream-postgres-replicas", stream: true, postgres: true, cli: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, b := stacktest.Replicas(t, tc.postgres, stacktest.Options{KeepAliveInterval: 20 * time.Millisecond})
			sess := "wait-" + tc.name
			res := chatAsync(a, tc.stream, "please refund my order", session(sess), waitHeader)
			it := pendingSoon(t, a, sess)
			// Once the pause has ended (the thread waits), the deciding
			// replica runs the resume.
			stacktest.WaitFor(t, "the pause's end", func() bool { return a.Thread(t, "dev", sess).Status == store.Waiting })
			stillOpen(t, res)
			decided := time.Now()
			if tc.cli {
				hitlCLI(t, b.URL, "approve", it.ID)
			} else if r := call(t, "POST", b.URL+"/v1/hitl/"+it.ID+"/approve", ""); r.status != 200 {
				t.Fatalf("approve: %d %s", r.status, r.body)
			}
			r := testwait.Recv(t, res, "the waiting request's answer")
			t.Logf("%s: decision -> answer %s", tc.name, time.Since(decided).Round(time.Millisecond))
			if r.err != nil {
				t.Fatal(r.err)
			}
			if !strings.Contains(r.content, "Refund result: ") || !strings.Contains(r.content, `"refunded":19.99`) || r.finish != "stop" || r.calls != 0 {
				t.Fatalf("the waiting request got %+v; want the resumed turn's answer", r)
			}
			if strings.Contains(r.content, "Waiting for approval") {
				t.Fatalf("a request that waited shows the waiting note: %q", r.content)
			}
			// The deciding replica (b) runs the resume: the tool ran there, once.
			if n := b.Calls.Get("refund"); n != 1 || (a != b && a.Calls.Get("refund") != 0) {
				t.Fatalf("refund ran %d times on the deciding replica, %d on the waiting one", n, a.Calls.Get("refund"))
			}
			// The turn ended: the next message is answered, no 409.
			next, err := client(a, session(sess)).Chat.Completions.New(context.Background(), params(user("thanks")))
			if err != nil || next.Choices[0].Message.Content != "echo: thanks" {
				t.Fatalf("next message: %v %+v", err, next)
			}
		})
	}
}

// TestApprovalWaitRejected: a rejected call's request goes on with the
// model's answer to the rejection; the tool never runs.
func TestApprovalWaitRejected(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	res := chatAsync(env, false, "please refund my order", session("wait-reject"), waitHeader)
	it := pendingSoon(t, env, "wait-reject")
	stillOpen(t, res)
	hitlCLI(t, env.URL, "reject", it.ID, "--message", "Customer already refunded")
	r := testwait.Recv(t, res, "the waiting request's answer")
	if r.err != nil || !strings.Contains(r.content, "Refund result: ") || !strings.Contains(r.content, "Customer already refunded") || r.finish != "stop" || r.calls != 0 {
		t.Fatalf("after a rejection: %+v", r)
	}
	if env.Calls.Get("refund") != 0 {
		t.Fatal("a rejected tool ran")
	}
}

// TestApprovalWaitRunsOut: with a short STACKBONE_APPROVAL_WAIT and no
// decision, the waiting request ends exactly as a paused one does (the
// call as tool_calls, the waiting note) once the wait is over, streamed
// (with keepalives meanwhile) or not; the next message gets 409
// approval_pending; a later decision resumes the turn as always.
func TestApprovalWaitRunsOut(t *testing.T) {
	t.Parallel()
	const wait = 300 * time.Millisecond
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "json", true: "stream"}[stream]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := stacktest.New(t, stacktest.Options{KeepAliveInterval: 20 * time.Millisecond,
				Configure: func(c *config.Config) { c.ApprovalWait = wait }})
			sess := "wait-out-" + name
			r := testwait.Recv(t, chatAsync(env, stream, "please refund my order", session(sess), waitHeader), "the request's end")
			t.Logf("%s: the request ended after %s (STACKBONE_APPROVAL_WAIT %s)", name, r.took.Round(time.Millisecond), wait)
			if r.err != nil || r.finish != "tool_calls" || r.calls != 1 || !strings.HasPrefix(r.content, "Waiting for approval: Refund order ord_42") {
				t.Fatalf("after the wait: %+v", r)
			}
			if r.took < wait {
				t.Fatalf("the request ended after %s, before the %s wait", r.took, wait)
			}
			_, err := client(env, session(sess)).Chat.Completions.New(context.Background(), params(user("hello?")))
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 409 || apiErr.Code != "approval_pending" {
				t.Fatalf("next message: want 409 approval_pending, got %v", err)
			}
			it := pendingSoon(t, env, sess)
			if env.Calls.Get("refund") != 0 {
				t.Fatal("the tool ran without a decision")
			}
			hitlCLI(t, env.URL, "approve", it.ID)
			waitIdle(t, env, sess)
			if env.Calls.Get("refund") != 1 {
				t.Fatalf("refund ran %d times", env.Calls.Get("refund"))
			}
		})
	}
	// The stream gets keepalives while it waits.
	env := stacktest.New(t, stacktest.Options{KeepAliveInterval: 20 * time.Millisecond,
		Configure: func(c *config.Config) { c.ApprovalWait = wait }})
	body := testwait.Recv(t, streamPost(t, env.URL+"/v1/chat/completions",
		`{"model":"assistant","stream":true,"messages":[{"role":"user","content":"please refund my order"}]}`,
		"x-stackbone-session", "wait-out-raw", "x-stackbone-approval", "wait"), "the stream's end")
	if !strings.HasPrefix(body, "200\n") || !strings.Contains(body, "\n: ") || !strings.Contains(body, `"finish_reason":"tool_calls"`) || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("raw stream after the wait:\n%s", body)
	}
}

// TestApprovalWaitOptIn: without the header the seed's behaviour holds (the
// request ends at the pause, however long STACKBONE_APPROVAL_WAIT is); an
// agent with approvalMode 'wait' waits without the header, and a request's
// x-stackbone-approval: pause wins over it; any other header value is a
// 400; AG-UI never waits (its clients resolve interrupts).
func TestApprovalWaitOptIn(t *testing.T) {
	t.Parallel()
	t.Run("default pauses", func(t *testing.T) {
		t.Parallel()
		env := stacktest.New(t, stacktest.Options{})
		for _, stream := range []bool{false, true} {
			sess := map[bool]string{false: "seed-json", true: "seed-stream"}[stream]
			r := testwait.Recv(t, chatAsync(env, stream, "please refund my order", session(sess)), "the paused request")
			if r.err != nil || r.finish != "tool_calls" || r.calls != 1 {
				t.Fatalf("without the header: %+v", r)
			}
			if it := pendingSoon(t, env, sess); it.Tool != "refund" {
				t.Fatalf("pending %+v", it)
			}
		}
	})
	t.Run("agent approvalMode wait", func(t *testing.T) {
		t.Parallel()
		env := stacktest.New(t, stacktest.Options{Agents: func(env *stacktest.Env) []*agent.Spec {
			specs := stacktest.DefaultAgents(env, "openai/test-model")
			specs[0].ApprovalMode = agent.ApprovalWait
			return specs
		}})
		// x-stackbone-approval: pause wins over the agent's mode.
		r := testwait.Recv(t, chatAsync(env, false, "please refund my order", session("mode-pause"), option.WithHeader("x-stackbone-approval", "pause")), "the paused request")
		if r.err != nil || r.finish != "tool_calls" {
			t.Fatalf("header pause: %+v", r)
		}
		res := chatAsync(env, true, "please refund my order", session("mode-wait"))
		it := pendingSoon(t, env, "mode-wait")
		stillOpen(t, res)
		if r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", ""); r.status != 200 {
			t.Fatalf("approve: %d %s", r.status, r.body)
		}
		if r := testwait.Recv(t, res, "the waiting request"); r.err != nil || r.finish != "stop" || !strings.Contains(r.content, "Refund result: ") {
			t.Fatalf("agent approvalMode wait: %+v", r)
		}
		// AG-UI resolves interrupts itself: its run finishes on the pause.
		s, _ := aguiInterrupt(t, env, "mode-agui", "please refund my order")
		if s.last()["type"] != "RUN_FINISHED" {
			t.Fatalf("AG-UI run %v", s.last())
		}
		if env.Calls.Get("refund") != 1 {
			t.Fatalf("refund ran %d times", env.Calls.Get("refund"))
		}
	})
	t.Run("bad header", func(t *testing.T) {
		t.Parallel()
		env := stacktest.New(t, stacktest.Options{})
		r := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"hi"}]}`,
			"x-stackbone-session", "bad-mode", "x-stackbone-approval", "forever")
		var e struct {
			Error struct{ Param, Code string }
		}
		_ = json.Unmarshal(r.body, &e)
		if r.status != 400 || e.Error.Param != "x-stackbone-approval" {
			t.Fatalf("bad header: %d %s", r.status, r.body)
		}
	})
}

// TestApprovalWaitClientGone: a client that hangs up while its request
// waits leaves a normal pending decision; deciding it later resumes the
// turn once.
func TestApprovalWaitClientGone(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := client(env, session("wait-gone"), waitHeader, option.WithMaxRetries(0)).Chat.Completions.New(ctx, params(user("please refund my order")))
		done <- err
	}()
	it := pendingSoon(t, env, "wait-gone")
	cancel()
	if err := testwait.Recv(t, done, "the cancelled request"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled request: %v", err)
	}
	// (The interrupt is stored a moment before the run's end.)
	stacktest.WaitFor(t, "the thread to wait on its decision", func() bool { return env.Thread(t, "dev", "wait-gone").Status == store.Waiting })
	if it2 := pendingSoon(t, env, "wait-gone"); it2.ID != it.ID {
		t.Fatalf("pending %s, want %s", it2.ID, it.ID)
	}
	hitlCLI(t, env.URL, "approve", it.ID)
	waitIdle(t, env, "wait-gone")
	if env.Calls.Get("refund") != 1 {
		t.Fatalf("refund ran %d times", env.Calls.Get("refund"))
	}
}

// decideFirst is a store whose FinishRun of a pause first runs decide: a
// decision that lands between the checkpoint that stored the pause's
// interrupts and the run's end (an approver as fast as a client waiting
// in-band can be).
type decideFirst struct {
	store.Store
	decide func()
}

func (s *decideFirst) FinishRun(ctx context.Context, f store.FinishRun) error {
	if f.Status == store.Waiting && s.decide != nil {
		s.decide()
		s.decide = nil
	}
	return s.Store.FinishRun(ctx, f)
}

// TestDecisionBeforeThePauseEndsResumes: a decision made while the pausing
// run still holds the thread resumes the turn at once when the run ends;
// the thread is not left queued for a recovery sweep.
func TestDecisionBeforeThePauseEndsResumes(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(context.Background(), t.TempDir()+"/decide-first.db", nil)
	if err != nil {
		t.Fatal(err)
	}
	df := &decideFirst{Store: st}
	env := stacktest.New(t, stacktest.Options{Store: df})
	df.decide = func() {
		its, err := st.ListInterrupts(context.Background(), "dev", store.InterruptFilter{ThreadID: "early", Status: store.Pending})
		if err != nil || len(its) != 1 {
			t.Errorf("pending before the run's end: %v %d", err, len(its))
			return
		}
		if _, err := env.Runner.Decide(context.Background(), "dev", its[0].ID, engine.Decision{Approved: true, Via: "api", By: "dev"}); err != nil {
			t.Errorf("decide: %v", err)
		}
	}
	res := testwait.Recv(t, chatAsync(env, false, "please refund my order", session("early"), waitHeader), "the answer")
	if res.err != nil || res.finish != "stop" || !strings.Contains(res.content, "Refund result: ") {
		t.Fatalf("the waiting request: %+v", res)
	}
	waitIdle(t, env, "early")
	if env.Calls.Get("refund") != 1 {
		t.Fatalf("refund ran %d times", env.Calls.Get("refund"))
	}
}

// TestApprovalWaitAnthropic: the Anthropic wire waits the same way: the
// message ends with the resumed turn's text and stop_reason end_turn, not
// the paused tool_use.
func TestApprovalWaitAnthropic(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	out := make(chan apiResp, 1)
	go func() {
		req, _ := http.NewRequest("POST", env.URL+"/v1/messages", strings.NewReader(`{"model":"assistant","max_tokens":100,"messages":[{"role":"user","content":"please refund my order"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-stackbone-session", "wait-anthropic")
		req.Header.Set("x-stackbone-approval", "wait")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- apiResp{status: -1, body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		out <- apiResp{status: resp.StatusCode, body: b}
	}()
	it := pendingSoon(t, env, "wait-anthropic")
	hitlCLI(t, env.URL, "approve", it.ID)
	r := testwait.Recv(t, out, "the waiting message")
	var msg struct {
		StopReason string `json:"stop_reason"`
		Content    []struct{ Type, Text string }
	}
	_ = json.Unmarshal(r.body, &msg)
	if r.status != 200 || msg.StopReason != "end_turn" || len(msg.Content) != 1 || !strings.Contains(msg.Content[0].Text, "Refund result: ") {
		t.Fatalf("anthropic wire: %d %s", r.status, r.body)
	}
	if env.Calls.Get("refund") != 1 {
		t.Fatalf("refund ran %d times", env.Calls.Get("refund"))
	}
}

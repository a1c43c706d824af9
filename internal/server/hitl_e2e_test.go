package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// countingClient counts HTTP requests the SDK sends.
type countingClient struct {
	n atomic.Int64
}

func (c *countingClient) Do(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultClient.Do(req)
}

// pause drives a session into an approval pause and returns the call.
func pause(t *testing.T, env *stacktest.Env, sess, prompt string) openai.ChatCompletionMessageToolCallUnion {
	t.Helper()
	c := client(env, session(sess))
	res, err := c.Chat.Completions.New(context.Background(), params(user(prompt)))
	if err != nil {
		t.Fatal(err)
	}
	ch := res.Choices[0]
	if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("want a paused tool call, got %+v", ch)
	}
	// A client that does not own the call still has something to show.
	want := "Waiting for approval: a call to " + ch.Message.ToolCalls[0].Function.Name + "."
	if ch.Message.ToolCalls[0].Function.Name == "refund" {
		want = "Waiting for approval: Refund order " // the tool's description
	}
	if !strings.HasPrefix(ch.Message.Content, want) {
		t.Fatalf("the paused turn's text %q", ch.Message.Content)
	}
	return ch.Message.ToolCalls[0]
}

type apiResp struct {
	status int
	header http.Header
	body   []byte
}

func call(t *testing.T, method, url, body string, hdr ...string) apiResp {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return apiResp{resp.StatusCode, resp.Header, b}
}

func pendingOf(t *testing.T, env *stacktest.Env, thread string) store.Interrupt {
	t.Helper()
	r := call(t, "GET", env.URL+"/v1/hitl?thread="+thread, "")
	var page struct {
		Data []store.Interrupt `json:"data"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil || len(page.Data) != 1 {
		t.Fatalf("want one pending decision, got %d %s", r.status, r.body)
	}
	return page.Data[0]
}

func waitIdle(t *testing.T, env *stacktest.Env, thread string) *store.Thread {
	t.Helper()
	var th *store.Thread
	stacktest.WaitFor(t, "thread "+thread+" to go idle", func() bool {
		th = env.Thread(t, "dev", thread)
		return th.Status == store.Idle
	})
	return th
}

func TestApprovalPauseApproveResume(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	tc := pause(t, env, "refund-1", "please refund my order")
	if tc.Function.Name != "refund" || !strings.Contains(tc.Function.Arguments, "ord_42") {
		t.Fatalf("paused call %+v", tc)
	}
	if env.Calls.Get("refund") != 0 {
		t.Fatal("the tool ran before approval")
	}
	it := pendingOf(t, env, "refund-1")
	if it.Description != "Refund order ord_42 for 19.99" || it.ToolCallID != tc.ID || !strings.HasPrefix(it.ID, "int_") {
		t.Fatalf("pending decision %+v", it)
	}
	if strings.Join(it.AllowedDecisions, ",") != "approve,reject,edit" || !strings.Contains(string(it.ResponseSchema), "editedArgs") {
		t.Fatalf("decision shape %+v", it)
	}

	// The next chat call is a 409 with the exact body, and the SDK does not retry it.
	cc := &countingClient{}
	c := client(env, session("refund-1"), option.WithHTTPClient(cc))
	upstreamBefore := env.Upstream.Count()
	_, err := c.Chat.Completions.New(context.Background(), params(user("hello?")))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 409 {
		t.Fatalf("want 409, got %v", err)
	}
	if cc.n.Load() != 1 {
		t.Fatalf("the SDK sent %d requests; want 1 (no retry)", cc.n.Load())
	}
	raw := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"hello?"}]}`, "x-stackbone-session", "refund-1")
	want := `{"error":{"message":"This conversation is waiting on a human decision. Resolve it before sending a new message.","type":"invalid_request_error","code":"approval_pending"}}`
	if raw.status != 409 || string(raw.body) != want || raw.header.Get("x-should-retry") != "false" {
		t.Fatalf("409 body/header: %d %s %q", raw.status, raw.body, raw.header.Get("x-should-retry"))
	}
	if env.Upstream.Count() != upstreamBefore {
		t.Fatal("a refused call reached the model")
	}
	msgs, _ := env.Store.Messages(context.Background(), "dev", "refund-1")
	for _, m := range msgs {
		if m.Content == "hello?" {
			t.Fatal("a refused message was stored")
		}
	}

	// Approve over HTTP: the tool runs once and the turn finishes in the background.
	r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "")
	if r.status != 200 {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	waitIdle(t, env, "refund-1")
	if env.Calls.Get("refund") != 1 {
		t.Fatalf("refund ran %d times", env.Calls.Get("refund"))
	}
	got := call(t, "GET", env.URL+"/v1/hitl/"+it.ID, "")
	var decided store.Interrupt
	_ = json.Unmarshal(got.body, &decided)
	if decided.Status != store.Approved || decided.Decision == nil || decided.Decision.Via != "api" || decided.Decision.By != "dev" {
		t.Fatalf("audit record %s", got.body)
	}

	// The next turn works and its upstream request holds the tool result.
	res, err := client(env, session("refund-1")).Chat.Completions.New(context.Background(), params(user("thanks")))
	if err != nil {
		t.Fatal(err)
	}
	if res.Choices[0].Message.Content != "echo: thanks" {
		t.Fatalf("next turn %q", res.Choices[0].Message.Content)
	}
	last, _ := env.Upstream.Last()
	found := false
	for _, m := range last.Request.Messages {
		if m.Role == message.Tool && strings.Contains(m.Content, `"refunded":19.99`) {
			found = true
		}
	}
	if !found {
		t.Fatalf("upstream did not see the tool result: %+v", last.Request.Messages)
	}
	// The thread shows the resumed turn.
	view := call(t, "GET", env.URL+"/v1/threads/refund-1", "")
	if !strings.Contains(string(view.body), "Refund result:") {
		t.Fatalf("thread view lacks the resumed answer: %s", view.body)
	}
}

func TestApprovalReject(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	pause(t, env, "refund-2", "refund please")
	it := pendingOf(t, env, "refund-2")
	r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/reject", `{"message":"Customer already refunded"}`)
	if r.status != 200 {
		t.Fatalf("reject: %d %s", r.status, r.body)
	}
	waitIdle(t, env, "refund-2")
	if env.Calls.Get("refund") != 0 {
		t.Fatal("a rejected tool ran")
	}
	msgs, _ := env.Store.Messages(context.Background(), "dev", "refund-2")
	var toolMsg *message.Message
	for i := range msgs {
		if msgs[i].Role == message.Tool {
			toolMsg = &msgs[i]
		}
	}
	if toolMsg == nil || !toolMsg.IsError || !strings.Contains(toolMsg.Content, "rejected") || !strings.Contains(toolMsg.Content, "Customer already refunded") {
		t.Fatalf("rejection not told to the model: %+v", toolMsg)
	}
	// Deciding again is a 409.
	again := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "")
	if again.status != 409 {
		t.Fatalf("second decision: %d %s", again.status, again.body)
	}
	if unknown := call(t, "POST", env.URL+"/v1/hitl/int_nope/approve", ""); unknown.status != 404 {
		t.Fatalf("unknown id: %d", unknown.status)
	}
}

func TestApprovalEditInvalidThenValid(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	pause(t, env, "refund-3", "refund it")
	it := pendingOf(t, env, "refund-3")
	bad := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", `{"editedArgs":{"orderId":"ord_42","amount":"lots"}}`)
	if bad.status != 400 || !strings.Contains(string(bad.body), "/amount") {
		t.Fatalf("invalid edit: %d %s", bad.status, bad.body)
	}
	if env.Thread(t, "dev", "refund-3").Status != store.Waiting {
		t.Fatal("an invalid edit changed the thread")
	}
	ok := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", `{"editedArgs":{"orderId":"ord_42","amount":5}}`)
	if ok.status != 200 {
		t.Fatalf("valid edit: %d %s", ok.status, ok.body)
	}
	waitIdle(t, env, "refund-3")
	args := env.Calls.Args("refund")
	if len(args) != 1 || !strings.Contains(string(args[0]), `"amount":5`) {
		t.Fatalf("refund ran with %s", args)
	}
	var decided store.Interrupt
	_ = json.Unmarshal(call(t, "GET", env.URL+"/v1/hitl/"+it.ID, "").body, &decided)
	if !strings.Contains(string(decided.Args), "19.99") || !strings.Contains(string(decided.Decision.EditedArgs), `"amount":5`) {
		t.Fatalf("audit keeps original and edited args: %+v", decided)
	}
}

func TestEditNotAllowed(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	pause(t, env, "del-1", "delete the file")
	it := pendingOf(t, env, "del-1")
	if it.Description != "" || strings.Contains(call(t, "GET", env.URL+"/v1/hitl/"+it.ID, "").String(), `"description"`) {
		t.Fatalf("a pause without description must have no description field: %+v", it)
	}
	r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", `{"editedArgs":{"path":"/tmp/y"}}`)
	if r.status != 400 || !strings.Contains(string(r.body), "not allowed") {
		t.Fatalf("edit not allowed: %d %s", r.status, r.body)
	}
}

func (r apiResp) String() string { return string(r.body) }

func TestConcurrentApprovalsOneWins(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	pause(t, env, "refund-4", "refund now")
	it := pendingOf(t, env, "refund-4")
	var wg sync.WaitGroup
	statuses := make([]int, 2)
	for i := range statuses {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			statuses[i] = call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "").status
		}(i)
	}
	wg.Wait()
	if !((statuses[0] == 200 && statuses[1] == 409) || (statuses[0] == 409 && statuses[1] == 200)) {
		t.Fatalf("statuses %v, want one 200 and one 409", statuses)
	}
	waitIdle(t, env, "refund-4")
	if env.Calls.Get("refund") != 1 {
		t.Fatalf("refund ran %d times", env.Calls.Get("refund"))
	}
}

func TestStatelessTurnRunsApprovalTool(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	res, err := client(env).Chat.Completions.New(context.Background(), params(user("refund without session")))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Choices[0].Message.Content; !strings.HasPrefix(got, "Refund result:") {
		t.Fatalf("content %q", got)
	}
	if env.Calls.Get("refund") != 1 {
		t.Fatalf("refund ran %d times", env.Calls.Get("refund"))
	}
}

func TestTwoApprovalsInOneStep(t *testing.T) {
	t.Parallel()
	script := `[
	 {"when":{"afterTool":true},"reply":{"text":"all done: {{toolCount}} results"}},
	 {"reply":{"toolCalls":[{"name":"refund","arguments":{"orderId":"a","amount":1}},{"name":"get_weather","arguments":{"city":"Oslo"}},{"name":"refund","arguments":{"orderId":"b","amount":2}}]}}
	]`
	env := stacktest.New(t, stacktest.Options{Script: script})
	res, err := client(env, session("multi")).Chat.Completions.New(context.Background(), params(user("go")))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Choices[0].Message.ToolCalls); n != 2 {
		t.Fatalf("want the 2 paused calls shown, got %d", n)
	}
	if env.Calls.Get("get_weather") != 1 {
		t.Fatal("the call needing no approval must run before the pause")
	}
	r := call(t, "GET", env.URL+"/v1/hitl?thread=multi", "")
	var page struct {
		Data []store.Interrupt `json:"data"`
	}
	_ = json.Unmarshal(r.body, &page)
	if len(page.Data) != 2 {
		t.Fatalf("want 2 decisions, got %s", r.body)
	}
	call(t, "POST", env.URL+"/v1/hitl/"+page.Data[0].ID+"/approve", "")
	if st := env.Thread(t, "dev", "multi").Status; st != store.Waiting {
		t.Fatalf("after one of two decisions the thread is %s", st)
	}
	call(t, "POST", env.URL+"/v1/hitl/"+page.Data[1].ID+"/reject", "")
	waitIdle(t, env, "multi")
	if env.Calls.Get("refund") != 1 {
		t.Fatalf("refund ran %d times, want 1", env.Calls.Get("refund"))
	}
	msgs, _ := env.Store.Messages(context.Background(), "dev", "multi")
	if last := msgs[len(msgs)-1]; last.Content != "all done: 3 results" {
		t.Fatalf("last message %q", last.Content)
	}
	_ = fmt.Sprint()
}

func TestMetricsAndHealth(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	if h := call(t, "GET", env.URL+"/healthz", ""); h.status != 200 {
		t.Fatalf("healthz %d", h.status)
	}
	pause(t, env, "metrics", "refund please")
	m := call(t, "GET", env.URL+"/metrics", "").String()
	for _, want := range []string{
		"stackbone_pending_decisions 1",
		`stackbone_http_requests_total{route="POST /v1/chat/completions",status="200"} 1`,
		`stackbone_turn_duration_seconds_count{agent="assistant",outcome="interrupt"} 1`,
		"stackbone_active_runs 0",
	} {
		if !strings.Contains(m, want) {
			t.Fatalf("metrics lack %q:\n%s", want, m)
		}
	}
}

// TestResumeKeepsTheTurnsOptions: after a decision, the resumed turn still
// has the client's system prompt and tools.
func TestResumeKeepsTheTurnsOptions(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Script: `[
	 {"when":{"lastTool":"refund","system":"SYSMARK"},"reply":{"text":"system kept"}},
	 {"when":{"lastTool":"refund"},"reply":{"text":"system lost"}},
	 {"reply":{"toolCalls":[{"name":"refund","arguments":{"orderId":"o","amount":1}}]}}]`})
	body := `{"model":"assistant","tools":[{"type":"function","function":{"name":"open_modal","parameters":{"type":"object"}}}],
	 "messages":[{"role":"system","content":"SYSMARK"},{"role":"user","content":"refund"}]}`
	call(t, "POST", env.URL+"/v1/chat/completions", body, "x-stackbone-session", "opts")
	it := pendingOf(t, env, "opts")
	call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "")
	waitIdle(t, env, "opts")
	last, _ := env.Upstream.Last()
	msgs, _ := env.Store.Messages(context.Background(), "dev", "opts")
	if got := msgs[len(msgs)-1].Content; got != "system kept" {
		t.Fatalf("resumed turn: %q", got)
	}
	found := false
	for _, tl := range last.Request.Tools {
		if tl.Name == "open_modal" {
			found = true
		}
	}
	if !found {
		t.Fatalf("the client's tools were lost on resume: %+v", last.Request.Tools)
	}
}

// TestThreadEventsLiveHaveEveryStoredEventOnce: a live stream of a thread
// carries each stored event once, in order, with no gap in the ids.
func TestThreadEventsLiveHaveEveryStoredEventOnce(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"hi"}]}`, "x-stackbone-session", "ev")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", env.URL+"/v1/threads/ev/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var ids []int
	finished := 0
	for sc.Scan() && finished < 2 {
		line := sc.Text()
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			n, _ := strconv.Atoi(id)
			ids = append(ids, n)
		}
		if strings.Contains(line, `"type":"run_finished"`) {
			finished++
			if finished == 1 {
				// The stored first turn is replayed: the stream is
				// live now, so the second turn arrives on it live.
				go func() {
					req, _ := http.NewRequest("POST", env.URL+"/v1/chat/completions", strings.NewReader(`{"model":"assistant","messages":[{"role":"user","content":"weather please"}]}`))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("x-stackbone-session", "ev")
					if resp, err := http.DefaultClient.Do(req); err == nil {
						resp.Body.Close()
					}
				}()
			}
		}
	}
	if finished != 2 {
		t.Fatalf("saw %d run_finished events", finished)
	}
	for i, id := range ids {
		if id != i+1 {
			t.Fatalf("stored event ids %v: want 1..%d without gaps or repeats", ids, len(ids))
		}
	}
	evs, _ := env.Store.Events(context.Background(), "dev", "ev", 0, 0)
	if len(evs) != len(ids) {
		t.Fatalf("stream carried %d stored events, store has %d", len(ids), len(evs))
	}
}

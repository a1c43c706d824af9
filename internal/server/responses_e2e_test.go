package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

func ask(input string) responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: "assistant", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(input)}}
}

func TestResponsesNonStream(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	c := client(env)
	res, err := c.Responses.New(context.Background(), ask("hello there"))
	if err != nil {
		t.Fatal(err)
	}
	if res.OutputText() != "echo: hello there" || res.Status != responses.ResponseStatusCompleted || !strings.HasPrefix(res.ID, "resp_") {
		t.Fatalf("response %s", res.RawJSON())
	}
	if res.Usage.TotalTokens == 0 || res.Usage.TotalTokens != res.Usage.InputTokens+res.Usage.OutputTokens {
		t.Fatalf("usage %+v", res.Usage)
	}
	if res.Conversation.ID == "" || res.Model != "assistant" || string(res.Object) != "response" {
		t.Fatalf("conversation/model/object: %s", res.RawJSON())
	}
	// Stored by default: retrievable, and the thread holds the turn.
	got, err := c.Responses.Get(context.Background(), res.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != res.ID || got.OutputText() != "echo: hello there" || got.Status != responses.ResponseStatusCompleted {
		t.Fatalf("retrieved %s", got.RawJSON())
	}
	msgs, err := env.Store.Messages(context.Background(), "dev", res.Conversation.ID)
	if err != nil || len(msgs) != 2 || msgs[0].Content != "hello there" || msgs[1].Content != "echo: hello there" {
		t.Fatalf("thread messages %+v %v", msgs, err)
	}
}

func TestResponsesStreamEvents(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	c := client(env)
	stream := c.Responses.NewStreaming(context.Background(), ask("stream me please"))
	var types []string
	var text strings.Builder
	last := int64(-1)
	var done responses.Response
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber <= last {
			t.Fatalf("sequence_number %d after %d (%s)", ev.SequenceNumber, last, ev.Type)
		}
		last = ev.SequenceNumber
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			done = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != "echo: stream me please" || done.OutputText() != text.String() {
		t.Fatalf("text %q, final %q", text.String(), done.OutputText())
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}
	if len(types) < 8 || strings.Join(types[:4], ",") != strings.Join(want, ",") {
		t.Fatalf("event order %v", types)
	}
	tail := []string{"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}
	if strings.Join(types[len(types)-4:], ",") != strings.Join(tail, ",") {
		t.Fatalf("event order %v", types)
	}
	// The raw stream has event: lines and no [DONE].
	r := call(t, "POST", env.URL+"/v1/responses", `{"model":"assistant","input":"raw","stream":true}`)
	if !strings.Contains(string(r.body), "event: response.created\ndata: {") || strings.Contains(string(r.body), "[DONE]") {
		t.Fatalf("raw stream:\n%s", r.body)
	}
}

// TestResponsesChainAcrossWires: previous_response_id continues the
// response's thread (the model sees the earlier turn), and that thread is
// the same conversation on Chat Completions and AG-UI.
func TestResponsesChainAcrossWires(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	c := client(env)
	first, err := c.Responses.New(context.Background(), ask("my name is Ada"))
	if err != nil {
		t.Fatal(err)
	}
	p := ask("what is my name")
	p.PreviousResponseID = openai.String(first.ID)
	second, err := c.Responses.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if second.Conversation.ID != first.Conversation.ID || second.PreviousResponseID != first.ID {
		t.Fatalf("second response %s", second.RawJSON())
	}
	last, _ := env.Upstream.Last()
	if len(last.Request.Messages) < 3 || !strings.Contains(last.Request.Messages[len(last.Request.Messages)-3].Content, "Ada") {
		t.Fatalf("the model did not see the earlier turn: %+v", last.Request.Messages)
	}
	// The first response still reads as it was (its range ends where the
	// second begins).
	got, err := c.Responses.Get(context.Background(), first.ID, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != "echo: my name is Ada" {
		t.Fatalf("first response now: %v %s", err, got.RawJSON())
	}

	// Chat Completions on the same conversation.
	thread := first.Conversation.ID
	cc, err := client(env, session(thread)).Chat.Completions.New(context.Background(), params(user("from chat")))
	if err != nil || cc.Choices[0].Message.Content != "echo: from chat" {
		t.Fatalf("chat turn: %v", err)
	}
	// AG-UI on the same thread: the snapshot holds every wire's turns.
	r := call(t, "POST", env.URL+"/v1/agents/assistant/agui", `{"threadId":"`+thread+`","runId":"r1","messages":[{"id":"u9","role":"user","content":"from agui"}],"tools":[],"context":[],"state":{},"forwardedProps":{}}`)
	if r.status != 200 || !strings.Contains(string(r.body), "echo: from agui") || !strings.Contains(string(r.body), "what is my name") {
		t.Fatalf("agui turn: %d %s", r.status, r.body)
	}
	// And a Responses turn after both continues from the latest response.
	p = ask("back on responses")
	p.PreviousResponseID = openai.String(second.ID)
	if _, err := c.Responses.New(context.Background(), p); err == nil {
		// second is no longer its conversation's latest turn? It is: the
		// chat and AG-UI turns are not responses, so it continues.
	} else {
		t.Fatalf("continue after other wires: %v", err)
	}
	msgs, _ := env.Store.Messages(context.Background(), "dev", thread)
	var contents []string
	for _, m := range msgs {
		if m.Role == message.User {
			contents = append(contents, m.Content)
		}
	}
	if strings.Join(contents, "|") != "my name is Ada|what is my name|from chat|from agui|back on responses" {
		t.Fatalf("thread user messages %v", contents)
	}
}

func TestResponsesConversationAndErrors(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	c := client(env)
	p := ask("hi conv")
	p.Conversation = responses.ResponseNewParamsConversationUnion{OfString: openai.String("conv-test-1")}
	res, err := c.Responses.New(context.Background(), p)
	if err != nil || res.Conversation.ID != "conv-test-1" {
		t.Fatalf("conversation: %v", err)
	}
	if th := env.Thread(t, "dev", "conv-test-1"); th.Status != store.Idle {
		t.Fatalf("thread %+v", th)
	}
	cases := []struct{ body, param string }{
		{`{"input":"x"}`, "model"},
		{`{"model":"assistant"}`, "input"},
		{`{"model":"assistant","input":[{"type":"wat"}]}`, "input[0].type"},
		{`{"model":"assistant","input":"x","tools":[{"type":"web_search"},{"type":"namespace","name":"ns","tools":[{"type":"function"}]}]}`, "tools[1].tools[0].name"},
		{`{"model":"assistant","input":"x","previous_response_id":"resp_nope"}`, "previous_response_id"},
		{`{"model":"assistant","input":"x","store":false,"background":true}`, "background"},
		{`{"model":"assistant","input":"x","text":{"format":{"type":"json_schema","name":"a b","schema":{}}}}`, "text.format.name"},
		{`{"model":"assistant","input":[{"type":"function_call_output","output":"x"}]}`, "input[0].call_id"},
	}
	for _, tc := range cases {
		r := call(t, "POST", env.URL+"/v1/responses", tc.body)
		var eb struct {
			Error struct{ Type, Param, Message string }
		}
		_ = json.Unmarshal(r.body, &eb)
		if r.status/100 != 4 || eb.Error.Param != tc.param || eb.Error.Message == "" {
			t.Errorf("%s: %d %s (want param %s)", tc.body, r.status, r.body, tc.param)
		}
	}
	if r := call(t, "GET", env.URL+"/v1/responses/resp_nope", ""); r.status != 404 || !strings.Contains(string(r.body), "not found") {
		t.Fatalf("unknown response: %d %s", r.status, r.body)
	}
	_, err = c.Responses.New(context.Background(), responses.ResponseNewParams{Model: "nobody", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("unknown agent: %v", err)
	}
}

// TestResponsesApproval: a paused server tool call is a function_call item
// of a completed response; the chain answers 409 approval_pending until a
// human decides; then the latest response shows the resumed outcome and the
// chain goes on.
func TestResponsesApproval(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	c := client(env)
	res, err := c.Responses.New(context.Background(), ask("please refund my order"))
	if err != nil {
		t.Fatal(err)
	}
	var fc *responses.ResponseOutputItemUnion
	for i := range res.Output {
		if res.Output[i].Type == "function_call" {
			fc = &res.Output[i]
		}
	}
	if fc == nil || fc.Name != "refund" || !strings.Contains(fc.Arguments.OfString, "ord_42") || res.Status != responses.ResponseStatusCompleted {
		t.Fatalf("paused response %s", res.RawJSON())
	}
	if env.Calls.Get("refund") != 0 {
		t.Fatal("the tool ran before approval")
	}
	thread := res.Conversation.ID
	p := ask("hello?")
	p.PreviousResponseID = openai.String(res.ID)
	cc := &countingClient{}
	_, err = client(env, option.WithHTTPClient(cc)).Responses.New(context.Background(), p)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 409 || apiErr.Code != "approval_pending" || cc.n.Load() != 1 {
		t.Fatalf("want one 409 approval_pending, got %v after %d requests", err, cc.n.Load())
	}
	it := pendingOf(t, env, thread)
	if r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", ""); r.status != 200 {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	waitIdle(t, env, thread)
	if env.Calls.Get("refund") != 1 {
		t.Fatalf("refund ran %d times", env.Calls.Get("refund"))
	}
	got, err := c.Responses.Get(context.Background(), res.ID, responses.ResponseGetParams{})
	if err != nil || !strings.Contains(got.OutputText(), "Refund result:") || got.Status != responses.ResponseStatusCompleted {
		t.Fatalf("resumed response: %v %s", err, got.RawJSON())
	}
	next, err := c.Responses.New(context.Background(), p)
	if err != nil || next.OutputText() != "echo: hello?" {
		t.Fatalf("next turn: %v", err)
	}
}

// TestResponsesClientTool: a client function tool ends the response with a
// function_call item; function_call_output on previous_response_id goes on.
func TestResponsesClientTool(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	c := client(env)
	tool := responses.ToolParamOfFunction("open_modal", map[string]any{"type": "object", "properties": map[string]any{"title": map[string]any{"type": "string"}}}, false)
	p := ask("open the modal")
	p.Tools = []responses.ToolUnionParam{tool}
	res, err := c.Responses.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	var call0 responses.ResponseOutputItemUnion
	for _, o := range res.Output {
		if o.Type == "function_call" {
			call0 = o
		}
	}
	if call0.Name != "open_modal" || call0.CallID == "" || call0.Arguments.OfString != `{"title":"Hello"}` {
		t.Fatalf("client call %s", res.RawJSON())
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput("modal closed by user")
	out.OfFunctionCallOutput.CallID = openai.String(call0.CallID)
	p2 := responses.ResponseNewParams{Model: "assistant", PreviousResponseID: openai.String(res.ID), Tools: p.Tools,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}}
	res2, err := c.Responses.New(context.Background(), p2)
	if err != nil {
		t.Fatal(err)
	}
	if res2.OutputText() != "Modal said: modal closed by user" {
		t.Fatalf("after the client tool: %s", res2.RawJSON())
	}
}

// TestResponsesStatelessReplay is what Codex sends: store false, the whole
// input replayed with the previous turn's function_call and output items.
func TestResponsesStatelessReplay(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	body := `{"model":"assistant","store":false,"stream":true,"instructions":"Be brief.",
	 "tools":[{"type":"function","name":"open_modal","parameters":{"type":"object"}}],
	 "input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"open it"}]},
	  {"type":"function_call","call_id":"call_x","name":"open_modal","arguments":"{}"},
	  {"type":"function_call_output","call_id":"call_x","output":"done"}]}`
	r := call(t, "POST", env.URL+"/v1/responses", body)
	if r.status != 200 || !strings.Contains(string(r.body), `"delta":"Modal said: done"`) || !strings.Contains(string(r.body), "event: response.completed") {
		t.Fatalf("stateless replay: %d %s", r.status, r.body)
	}
	last, _ := env.Upstream.Last()
	if last.Request.System == "" || !strings.Contains(last.Request.System, "Be brief.") {
		t.Fatalf("instructions did not reach the model: %q", last.Request.System)
	}
	threads, _ := env.Store.ListThreads(context.Background(), "dev", store.ThreadFilter{})
	if len(threads) != 0 {
		t.Fatalf("store:false kept a thread: %+v", threads)
	}
	var id string
	for _, line := range strings.Split(string(r.body), "\n") {
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"response.completed"`) {
			var ev struct{ Response struct{ ID string } }
			_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev)
			id = ev.Response.ID
		}
	}
	if g := call(t, "GET", env.URL+"/v1/responses/"+id, ""); id == "" || g.status != 404 {
		t.Fatalf("a store:false response is retrievable: %q %d", id, g.status)
	}
}

// TestResponsesTenants: another tenant's response is not found, and its
// id cannot continue their chain.
func TestResponsesTenants(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: []config.Key{{Tenant: "acme", Secret: "acme-secret-1"}, {Tenant: "beta", Secret: "beta-secret-1"}}})
	a := openai.NewClient(option.WithBaseURL(env.URL+"/v1"), option.WithAPIKey("acme-secret-1"))
	b := openai.NewClient(option.WithBaseURL(env.URL+"/v1"), option.WithAPIKey("beta-secret-1"), option.WithMaxRetries(0))
	res, err := a.Responses.New(context.Background(), ask("acme secret plan"))
	if err != nil {
		t.Fatal(err)
	}
	var apiErr *openai.Error
	if _, err := b.Responses.Get(context.Background(), res.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("beta read acme's response: %v", err)
	}
	p := ask("continue theirs")
	p.PreviousResponseID = openai.String(res.ID)
	if _, err := b.Responses.New(context.Background(), p); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("beta continued acme's chain: %v", err)
	}
	if err := b.Responses.Delete(context.Background(), res.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("beta deleted acme's response: %v", err)
	}
	if _, err := a.Responses.Get(context.Background(), res.ID, responses.ResponseGetParams{}); err != nil {
		t.Fatalf("acme lost its response: %v", err)
	}
}

// TestResponsesBackgroundCancel: a background response answers at once,
// in progress; cancel stops its run (the model call is cut off), the
// response reads cancelled, and the conversation takes a new turn.
func TestResponsesBackgroundCancel(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	release := env.Upstream.HoldOnce(script.When{LastUser: "slow"})
	defer release()
	c := client(env)
	p := ask("slow thinking")
	p.Background = openai.Bool(true)
	res, err := c.Responses.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != responses.ResponseStatusInProgress || !res.Background || len(res.Output) != 0 {
		t.Fatalf("background response %s", res.RawJSON())
	}
	stacktest.WaitFor(t, "the model call to be held", func() bool { return env.Upstream.Count() == 1 })
	if got, _ := c.Responses.Get(context.Background(), res.ID, responses.ResponseGetParams{}); got.Status != responses.ResponseStatusInProgress {
		t.Fatalf("while running: %s", got.RawJSON())
	}
	cancelled, err := c.Responses.Cancel(context.Background(), res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cancelled.Status != responses.ResponseStatusCancelled {
		t.Fatalf("cancel answered %s", cancelled.RawJSON())
	}
	stacktest.WaitFor(t, "the cancelled run to end", func() bool {
		return env.Thread(t, "dev", res.Conversation.ID).Status == store.Failed
	})
	got, err := c.Responses.Get(context.Background(), res.ID, responses.ResponseGetParams{})
	if err != nil || got.Status != responses.ResponseStatusCancelled {
		t.Fatalf("after cancel: %v %s", err, got.RawJSON())
	}
	// Cancelling again changes nothing, nor does cancelling a foreground
	// response that is over (one still running is cancelled:
	// TestResponsesForegroundStreamCancel).
	if again, err := c.Responses.Cancel(context.Background(), res.ID); err != nil || again.Status != responses.ResponseStatusCancelled {
		t.Fatalf("cancel again: %v", err)
	}
	fg, err := c.Responses.New(context.Background(), ask("quick one"))
	if err != nil {
		t.Fatal(err)
	}
	if done, err := c.Responses.Cancel(context.Background(), fg.ID); err != nil ||
		done.Status != responses.ResponseStatusCompleted || done.OutputText() != "echo: quick one" {
		t.Fatalf("cancel of a finished foreground response: %v", err)
	}
	// The conversation goes on.
	next := ask("after the cancel")
	next.PreviousResponseID = openai.String(res.ID)
	if r, err := c.Responses.New(context.Background(), next); err != nil || r.OutputText() != "echo: after the cancel" {
		t.Fatalf("next turn: %v", err)
	}
}

// TestResponsesDeleteAndInputItems: input_items lists a response's input
// (newest first by default, paginated); DELETE hides the response but not
// its conversation.
func TestResponsesDeleteAndInputItems(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	c := client(env)
	body := `{"model":"assistant","input":[{"role":"user","content":"one"},{"role":"assistant","content":"two"},{"role":"user","content":"three"}]}`
	r := call(t, "POST", env.URL+"/v1/responses", body)
	var res struct {
		ID           string
		Conversation struct{ ID string }
	}
	if err := json.Unmarshal(r.body, &res); err != nil || r.status != 200 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	page := c.Responses.InputItems.ListAutoPaging(context.Background(), res.ID, responses.InputItemListParams{Limit: openai.Int(2)})
	var texts []string
	for page.Next() {
		it := page.Current()
		if it.ID == "" {
			t.Fatalf("input item without id: %s", it.RawJSON())
		}
		var m struct{ Content []struct{ Type, Text string } }
		if err := json.Unmarshal([]byte(it.RawJSON()), &m); err != nil || len(m.Content) != 1 || !strings.HasSuffix(m.Content[0].Type, "_text") {
			t.Fatalf("input item %s", it.RawJSON())
		}
		texts = append(texts, m.Content[0].Text)
	}
	if err := page.Err(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(texts, ",") != "three,two,one" {
		t.Fatalf("input items %v", texts)
	}
	asc := call(t, "GET", env.URL+"/v1/responses/"+res.ID+"/input_items?order=asc&limit=1", "")
	if !strings.Contains(string(asc.body), `"has_more":true`) || !strings.Contains(string(asc.body), `"one"`) {
		t.Fatalf("asc page: %s", asc.body)
	}
	if err := c.Responses.Delete(context.Background(), res.ID); err != nil {
		t.Fatal(err)
	}
	var apiErr *openai.Error
	if _, err := c.Responses.Get(context.Background(), res.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("deleted response still reads: %v", err)
	}
	if err := c.Responses.Delete(context.Background(), res.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("delete again: %v", err)
	}
	if msgs, err := env.Store.Messages(context.Background(), "dev", res.Conversation.ID); err != nil || len(msgs) != 4 {
		t.Fatalf("the conversation lost messages: %d %v", len(msgs), err)
	}
}

// TestResponsesRetryGetsSameResponse: a client's retry of a request that
// reached the server (the same body and Idempotency-Key, as the SDKs send
// on a retry) gets the first attempt's response, with its id, and the
// model is not asked again.
func TestResponsesRetryGetsSameResponse(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	first := call(t, "POST", env.URL+"/v1/responses", `{"model":"assistant","input":"hello","conversation":"retry-1"}`, "Idempotency-Key", "k-1")
	again := call(t, "POST", env.URL+"/v1/responses", `{"model":"assistant","input":"hello","conversation":"retry-1"}`, "Idempotency-Key", "k-1")
	var a, b struct {
		ID     string
		Output []struct{ Content []struct{ Text string } }
	}
	_ = json.Unmarshal(first.body, &a)
	_ = json.Unmarshal(again.body, &b)
	if first.status != 200 || again.status != 200 || a.ID == "" || a.ID != b.ID || len(b.Output) != 1 || b.Output[0].Content[0].Text != "echo: hello" {
		t.Fatalf("first %s\nretry %s", first.body, again.body)
	}
	if env.Upstream.Count() != 1 {
		t.Fatalf("the model was asked %d times", env.Upstream.Count())
	}
	msgs, _ := env.Store.Messages(context.Background(), "dev", "retry-1")
	if len(msgs) != 2 {
		t.Fatalf("stored %d messages", len(msgs))
	}
}

// failingResponses is a store whose response records cannot be written.
type failingResponses struct{ store.Store }

func (failingResponses) PutResponse(context.Context, store.Response) (*store.Response, bool, error) {
	return nil, false, store.ErrUnavailable
}

// TestResponsesRecordFailure: when a response's record cannot be stored,
// the client gets a clear error in OpenAI's envelope (streaming, not, and
// background), not an empty answer.
func TestResponsesRecordFailure(t *testing.T) {
	t.Parallel()
	sq := stacktest.New(t, stacktest.Options{}).Store
	env := stacktest.New(t, stacktest.Options{Store: failingResponses{sq}})
	for _, body := range []string{
		`{"model":"assistant","input":"x"}`,
		`{"model":"assistant","input":"x","stream":true}`,
		`{"model":"assistant","input":"x","background":true}`,
	} {
		r := call(t, "POST", env.URL+"/v1/responses", body)
		var eb struct {
			Error struct{ Type, Code, Message string }
		}
		if err := json.Unmarshal(r.body, &eb); err != nil || r.status != 503 || eb.Error.Message == "" {
			t.Errorf("%s: %d %s", body, r.status, r.body)
		}
	}
}

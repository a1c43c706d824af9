package modeltest

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/script"
)

// FastRetry is a retry policy for tests: 3 attempts, about 1ms apart.
var FastRetry = model.RetryPolicy{Attempts: 3, Base: time.Millisecond, Max: 2 * time.Millisecond}

// NewProviderFunc builds the provider under test for a mock's base URL.
type NewProviderFunc func(baseURL string, retry model.RetryPolicy) model.Provider

// suiteScript drives TestProvider.
const suiteScript = `[
  {"when": {"lastTool": "get_weather"}, "reply": {"text": "It is {{lastTool}} in Paris."}},
  {"when": {"lastUser": "weather"}, "reply": {"text": "Checking.", "toolCalls": [
     {"name": "get_weather", "arguments": {"city": "Paris", "units": "metric", "note": "déjà vu"}},
     {"name": "get_time", "arguments": {"tz": "Europe/Paris"}}]}},
  {"when": {"lastUser": "bad request"}, "reply": {"error": {"status": 400, "message": "messages: invalid"}}},
  {"when": {"lastUser": "slow"}, "reply": {"text": "one two three four five six seven eight nine ten", "chunkDelayMs": 100}},
  {"when": {"lastUser": "sleepy"}, "reply": {"text": "late", "delayMs": 5000}},
  {"when": {"lastUser": "cut"}, "reply": {"text": "short answer here", "stop": "length"}},
  {"reply": {"text": "Hello there, you said: {{lastUser}}"}}
]`

// TestProvider runs the behaviour every HTTP provider must show against a
// mock upstream of kind: streamed text, tool calls with arguments in
// fragments, a multi-turn conversation reaching the upstream intact, error
// mapping, retries (and their limits), connection failures, cancellation.
func TestProvider(t *testing.T, kind Kind, newProvider NewProviderFunc) {
	s := script.MustParse(suiteScript)
	start := func(t *testing.T) (*Server, model.Provider) {
		srv := newServer(t, kind, s)
		return srv, newProvider(srv.URL(), FastRetry)
	}
	user := func(text string) []message.Message {
		return []message.Message{{Role: message.User, Content: text}}
	}

	t.Run("text stream", func(t *testing.T) {
		srv, p := start(t)
		st, err := Collect(p.Stream(context.Background(), model.Request{Model: "m1", System: "Be brief.", Messages: user("hi there friend")}))
		if err != nil {
			t.Fatal(err)
		}
		if st.Text != "Hello there, you said: hi there friend" || st.Stop != event.StopEnd {
			t.Fatalf("got text %q stop %q", st.Text, st.Stop)
		}
		if st.Chunks[model.Text] < 2 {
			t.Fatalf("text came in %d chunk(s), want it streamed", st.Chunks[model.Text])
		}
		if st.Usage.InputTokens == 0 || st.Usage.OutputTokens == 0 {
			t.Fatalf("usage not reported: %+v", st.Usage)
		}
		if st.EarlyInputTokens != 0 && st.EarlyInputTokens != st.Usage.InputTokens {
			t.Fatalf("input tokens reported early %d, at the end %d", st.EarlyInputTokens, st.Usage.InputTokens)
		}
		rec, _ := srv.Last()
		if !rec.Stream || rec.Request.Model != "m1" || rec.Request.System != "Be brief." {
			t.Fatalf("upstream saw stream=%v model=%q system=%q", rec.Stream, rec.Request.Model, rec.Request.System)
		}
	})

	t.Run("stop length", func(t *testing.T) {
		_, p := start(t)
		st, err := Collect(p.Stream(context.Background(), model.Request{Model: "m", Messages: user("cut it")}))
		if err != nil {
			t.Fatal(err)
		}
		if st.Stop != event.StopLength {
			t.Fatalf("stop %q, want length", st.Stop)
		}
	})

	t.Run("tool calls with arguments in fragments", func(t *testing.T) {
		_, p := start(t)
		st, err := Collect(p.Stream(context.Background(), model.Request{Model: "m", Messages: user("weather?")}))
		if err != nil {
			t.Fatal(err)
		}
		if st.Text != "Checking." || st.Stop != event.StopToolCalls || len(st.ToolCalls) != 2 {
			t.Fatalf("got text %q stop %q calls %+v", st.Text, st.Stop, st.ToolCalls)
		}
		if st.Chunks[model.ToolCallArgs] < 4 {
			t.Fatalf("arguments came in %d fragments, want them streamed", st.Chunks[model.ToolCallArgs])
		}
		c := st.ToolCalls[0]
		var args map[string]string
		if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
			t.Fatalf("arguments %q: %v", c.Arguments, err)
		}
		if c.Name != "get_weather" || c.ID == "" || args["city"] != "Paris" || args["note"] != "déjà vu" {
			t.Fatalf("call %+v", c)
		}
		if st.ToolCalls[1].Name != "get_time" || st.ToolCalls[1].ID == c.ID {
			t.Fatalf("second call %+v", st.ToolCalls[1])
		}
	})

	t.Run("multi-turn conversation reaches the upstream once and intact", func(t *testing.T) {
		srv, p := start(t)
		temp := 0.5
		tools := []model.ToolDef{{
			Name: "get_weather", Description: "Current weather",
			Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		}}
		first, err := Collect(p.Stream(context.Background(), model.Request{Model: "m", Messages: user("weather in Paris?"), Tools: tools}))
		if err != nil {
			t.Fatal(err)
		}
		conv := []message.Message{
			{Role: message.User, Content: "weather in Paris?", Parts: []message.Part{
				{Type: "image", MediaType: "image/png", Data: "iVBORw0KGgo="},
				{Type: "image", URL: "https://example.com/cat.png"},
			}},
			{Role: message.Assistant, Content: first.Text, ToolCalls: first.ToolCalls},
			{Role: message.Tool, ToolCallID: first.ToolCalls[0].ID, ToolName: "get_weather", Content: `{"temp_c":21}`},
			{Role: message.Tool, ToolCallID: first.ToolCalls[1].ID, ToolName: "get_time", Content: "14:00", IsError: true},
		}
		// The weather result must be the last message for the script rule.
		conv[2], conv[3] = conv[3], conv[2]
		req := model.Request{
			Model: "m", System: "You are terse.", Messages: conv, Tools: tools,
			ToolChoice: "auto", MaxTokens: 321, Temperature: &temp, StopSequences: []string{"END"},
		}
		st, err := Collect(p.Stream(context.Background(), req))
		if err != nil {
			t.Fatal(err)
		}
		if st.Text != `It is {"temp_c":21} in Paris.` {
			t.Fatalf("the tool result did not reach the upstream: %q", st.Text)
		}
		if srv.Count() != 2 {
			t.Fatalf("upstream got %d requests, want 2", srv.Count())
		}
		rec, _ := srv.Last()
		got := rec.Request
		if got.System != req.System || got.MaxTokens != 321 || got.ToolChoice != "auto" || !reflect.DeepEqual(got.StopSequences, []string{"END"}) {
			t.Fatalf("upstream saw system %q max %d choice %q stop %v", got.System, got.MaxTokens, got.ToolChoice, got.StopSequences)
		}
		if len(got.Tools) != 1 || got.Tools[0].Name != "get_weather" || got.Tools[0].Description != "Current weather" ||
			!jsonEqual(got.Tools[0].Parameters, tools[0].Parameters) {
			t.Fatalf("upstream saw tools %+v", got.Tools)
		}
		if len(got.Messages) != len(conv) {
			t.Fatalf("upstream saw %d messages, want each of the %d once: %+v", len(got.Messages), len(conv), got.Messages)
		}
		for i, want := range conv {
			g := got.Messages[i]
			if kind == OpenAI {
				want.IsError = false // the OpenAI wire has no error flag on tool results
			}
			if g.Role != want.Role || g.Content != want.Content || g.ToolCallID != want.ToolCallID ||
				g.ToolName != want.ToolName || g.IsError != want.IsError || !reflect.DeepEqual(g.Parts, want.Parts) {
				t.Fatalf("message %d: upstream saw %+v, want %+v", i, g, want)
			}
			if len(g.ToolCalls) != len(want.ToolCalls) {
				t.Fatalf("message %d: upstream saw calls %+v", i, g.ToolCalls)
			}
			for j, c := range want.ToolCalls {
				gc := g.ToolCalls[j]
				if gc.ID != c.ID || gc.Name != c.Name || !jsonEqual(json.RawMessage(gc.Arguments), json.RawMessage(c.Arguments)) {
					t.Fatalf("message %d call %d: upstream saw %+v, want %+v", i, j, gc, c)
				}
			}
		}
	})

	t.Run("tools are sent as defined at each call", func(t *testing.T) {
		srv, p := start(t)
		sent := func(tools []model.ToolDef) []model.ToolDef {
			t.Helper()
			if _, err := Collect(p.Stream(context.Background(), model.Request{Model: "m", Messages: user("hi"), Tools: tools})); err != nil {
				t.Fatal(err)
			}
			rec, _ := srv.Last()
			return rec.Request.Tools
		}
		schema := func(tools []model.ToolDef, i int) map[string]any {
			var m map[string]any
			if err := json.Unmarshal(tools[i].Parameters, &m); err != nil {
				t.Fatalf("tool %d schema %s: %v", i, tools[i].Parameters, err)
			}
			return m
		}
		agent := []model.ToolDef{{Name: "find", Description: "Find <things> & more",
			Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}}
		for range 2 {
			got := sent(agent)
			if len(got) != 1 || got[0].Name != "find" || got[0].Description != "Find <things> & more" || schema(got, 0)["properties"].(map[string]any)["q"] == nil {
				t.Fatalf("tools %+v", got)
			}
		}
		// The agent reloaded: the same tool with another schema.
		reloaded := []model.ToolDef{{Name: "find", Description: "Find <things> & more",
			Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer"}}}`)}}
		if got := sent(reloaded); schema(got, 0)["properties"].(map[string]any)["id"] == nil {
			t.Fatalf("tools after a reload %+v", got)
		}
		// A client's tool for one request, after the agent's.
		withClient := append(agent[:1:1], model.ToolDef{Name: "open_modal", Parameters: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}}}`)})
		if got := sent(withClient); len(got) != 2 || got[0].Name != "find" || got[1].Name != "open_modal" || schema(got, 1)["properties"].(map[string]any)["title"] == nil {
			t.Fatalf("tools with a client tool %+v", got)
		}
	})

	t.Run("upstream error is a model.Error and 400 is not retried", func(t *testing.T) {
		srv, p := start(t)
		_, err := Collect(p.Stream(context.Background(), model.Request{Model: "m", Messages: user("a bad request")}))
		var me *model.Error
		if !errors.As(err, &me) || me.Status != 400 || !strings.Contains(me.Message, "messages: invalid") {
			t.Fatalf("got %v, want model.Error 400", err)
		}
		if srv.Count() != 1 {
			t.Fatalf("a 400 was sent %d times", srv.Count())
		}
	})

	for _, status := range []int{503, 429} {
		t.Run("retry after "+strconv.Itoa(status)+" then success", func(t *testing.T) {
			srv, p := start(t)
			srv.FailNext(2, status)
			st, err := Collect(p.Stream(context.Background(), model.Request{Model: "m", Messages: user("hi")}))
			if err != nil {
				t.Fatal(err)
			}
			if st.Text != "Hello there, you said: hi" || srv.Count() != 3 {
				t.Fatalf("text %q after %d requests", st.Text, srv.Count())
			}
		})
	}

	t.Run("sequential calls reuse one connection", func(t *testing.T) {
		srv, p := start(t)
		for range 50 {
			if _, err := Collect(p.Stream(context.Background(), model.Request{Model: "m", Messages: user("hi")})); err != nil {
				t.Fatal(err)
			}
		}
		if n := srv.Conns(); n != 1 {
			t.Fatalf("50 sequential streamed calls opened %d connections, want 1", n)
		}
		before := srv.Conns()
		for range 50 {
			if _, err := Collect(p.Stream(context.Background(), model.Request{Model: "m", Messages: user("bad request")})); err == nil {
				t.Fatal("a 400 answer was not an error")
			}
		}
		if n := srv.Conns() - before; n > 1 {
			t.Fatalf("50 sequential error answers opened %d more connections, want none", n)
		}
	})

	t.Run("retries are bounded", func(t *testing.T) {
		srv, p := start(t)
		srv.FailNext(10, 503)
		_, err := Collect(p.Stream(context.Background(), model.Request{Model: "m", Messages: user("hi")}))
		var me *model.Error
		if !errors.As(err, &me) || me.Status != 503 {
			t.Fatalf("got %v, want model.Error 503", err)
		}
		if srv.Count() != FastRetry.MaxAttempts() {
			t.Fatalf("%d requests, want %d", srv.Count(), FastRetry.MaxAttempts())
		}
	})

	t.Run("connection refused is status 0", func(t *testing.T) {
		srv, p := start(t)
		srv.Close()
		_, err := Collect(p.Stream(context.Background(), model.Request{Model: "m", Messages: user("hi")}))
		var me *model.Error
		if !errors.As(err, &me) || me.Status != 0 {
			t.Fatalf("got %v, want model.Error status 0", err)
		}
	})

	t.Run("no retry once a chunk was delivered", func(t *testing.T) {
		srv, p := start(t)
		var got string
		var err error
		for c, e := range p.Stream(context.Background(), model.Request{Model: "m", Messages: user("slow please")}) {
			if e != nil {
				err = e
				break
			}
			if c.Type == model.Text && got == "" {
				srv.Close() // the upstream dies mid-answer
			}
			got += c.Text
		}
		if err == nil {
			t.Fatalf("stream cut mid-answer ended without error (text %q)", got)
		}
		var me *model.Error
		if !errors.As(err, &me) {
			t.Fatalf("got %T %v, want *model.Error", err, err)
		}
		if srv.Count() != 1 {
			t.Fatalf("the step was retried after a chunk was delivered (%d requests)", srv.Count())
		}
	})

	t.Run("cancel while waiting", func(t *testing.T) {
		_, p := start(t)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		begin := time.Now()
		_, err := Collect(p.Stream(ctx, model.Request{Model: "m", Messages: user("sleepy")}))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want context.DeadlineExceeded", err)
		}
		if time.Since(begin) > 2*time.Second {
			t.Fatal("cancellation did not stop the request")
		}
	})
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

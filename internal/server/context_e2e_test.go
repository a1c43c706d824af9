package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/server"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/tool"
)

// contextScript: "weather" calls the lookup tool, anything else is noted.
const contextScript = `[
 {"when": {"afterTool": true}, "reply": {"text": "sunny"}},
 {"when": {"lastUser": "weather"}, "reply": {"toolCalls": [{"name": "lookup", "arguments": {"city": "Paris"}}]}},
 {"reply": {"text": "noted"}}
]`

// contextAgent is a Go agent with a 1450-token window and 100 tokens kept
// for the answer: with a short system prompt and one tool, about two turns
// of 2000-byte user messages (about 500 tokens each) fit, three do not.
func contextAgent(env *stacktest.Env) []*agent.Spec {
	lookup := &tool.Tool{Name: "lookup", Description: "Weather for a city",
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`),
		Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
			env.Calls.Add("lookup", c.Args)
			return tool.Result{Content: `{"sky":"clear"}`}, nil
		}}
	return []*agent.Spec{{Name: "assistant", Model: "openai/test-model", Instructions: "Be brief.",
		Tools: []*tool.Tool{lookup}, NoTodos: true, NoFiles: true,
		ContextWindow: 1450, ModelSettings: model.Settings{MaxTokens: 100}}}
}

// sent is the part of a message the model sees, to compare what the
// upstream received with what the thread stores.
func sent(msgs []message.Message) []message.Message {
	out := make([]message.Message, len(msgs))
	for i, m := range msgs {
		out[i] = message.Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			out[i].ToolCalls = append(out[i].ToolCalls, message.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
		}
	}
	return out
}

// TestContextWindowTrimsWhatIsSent: an agent with a small contextWindow
// keeps answering a thread that outgrew it. Each model call gets the system
// prompt and only the most recent turns that fit, oldest dropped first,
// a tool call always with its result (dropped together, never one without
// the other); the thread read back still holds the whole history. A user
// message too large for the window on its own fails the turn with a 400
// context_length_exceeded naming the window, and reaches no model; the
// next turn works.
func TestContextWindowTrimsWhatIsSent(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Script: contextScript, Agents: contextAgent})
	c := client(env, session("long"))
	turn := func(text string) string {
		t.Helper()
		res, err := c.Chat.Completions.New(context.Background(), params(user(text+" "+strings.Repeat("x", 2000))))
		if err != nil {
			t.Fatalf("turn %q: %v", text, err)
		}
		return res.Choices[0].Message.Content
	}
	for _, text := range []string{"turn 1", "turn 2", "weather turn 3", "turn 4", "turn 5"} {
		turn(text)
	}
	view := call(t, "GET", env.URL+"/v1/threads/long", "")
	var th server.ThreadView
	if err := json.Unmarshal(view.body, &th); err != nil || view.status != 200 {
		t.Fatalf("thread: %d %s", view.status, view.body)
	}
	// u1 a1 u2 a2 u3 a3(call) t3 a3b u4 a4 u5 a5: nothing was deleted.
	stored := th.Messages
	if len(stored) != 12 || stored[5].ToolCalls == nil || stored[6].Role != message.Tool || stored[7].Content != "sunny" || stored[11].Content != "noted" {
		t.Fatalf("stored history: %+v", stored)
	}
	reqs := env.Upstream.Requests()
	if len(reqs) != 6 {
		t.Fatalf("want 6 model calls, got %d", len(reqs))
	}
	want := [][]message.Message{
		stored[0:1],  // turn 1: u1
		stored[0:3],  // turn 2: u1 a1 u2 (fits)
		stored[2:5],  // turn 3: u1 a1 dropped
		stored[2:7],  // turn 3 after the tool: the call with its result
		stored[4:9],  // turn 4: u2 a2 dropped, the tool pair kept
		stored[8:11], // turn 5: u3 and the pair dropped together
	}
	for i, r := range reqs {
		if r.Request.System != "Be brief." {
			t.Fatalf("call %d: system prompt %q", i+1, r.Request.System)
		}
		if got, w := sent(r.Request.Messages), sent(want[i]); !reflect.DeepEqual(got, w) {
			t.Fatalf("call %d sent %d messages:\n%+v\nwant %d:\n%+v", i+1, len(got), got, len(w), w)
		}
	}

	_, err := c.Chat.Completions.New(context.Background(), params(user("huge "+strings.Repeat("y", 6000))))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "context_length_exceeded" ||
		!strings.Contains(apiErr.Message, "1450 tokens") {
		t.Fatalf("a message larger than the window: %v", err)
	}
	if n := len(env.Upstream.Requests()); n != 6 {
		t.Fatalf("the too-large turn reached the model: %d calls", n)
	}
	// The thread goes on: the stored message that could not fit is older
	// than the new one, so it is left out.
	if got := turn("turn 6"); got != "noted" {
		t.Fatalf("the turn after the failure: %q", got)
	}
	last := env.Upstream.Requests()[6].Request.Messages
	if len(last) != 1 || !strings.HasPrefix(last[0].Content, "turn 6 ") {
		t.Fatalf("the turn after the failure sent %+v", sent(last))
	}
	if env.Calls.Get("lookup") != 1 {
		t.Fatalf("lookup ran %d times", env.Calls.Get("lookup"))
	}
}

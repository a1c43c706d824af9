package script_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/script"
)

const weather = `{"rules": [
  {"when": {"system": "pirate"}, "reply": {"text": "Arr, {{lastUser}}!"}},
  {"when": {"lastTool": "get_weather"}, "reply": {"text": "Weather: {{lastTool}} ({{toolCount}} results)"}},
  {"when": {"afterTool": true}, "reply": {"text": "some other tool answered"}},
  {"when": {"lastUser": "WEATHER"}, "reply": {"text": "Checking.",
     "toolCalls": [{"name": "get_weather", "arguments": {"city": "Paris", "note": "asked: {{lastUser}}"}},
                   {"name": "get_time"}]}},
  {"when": {"lastUser": "long"}, "reply": {"text": "cut", "stop": "length", "delayMs": 5, "chunkDelayMs": 2}},
  {"when": {"lastUser": "fail"}, "reply": {"error": {"status": 503, "message": "overloaded: {{lastUser}}"}}},
  {"reply": {"text": "You said: {{lastUser}}"}}
]}`

func user(s string) message.Message { return message.Message{Role: message.User, Content: s} }

func TestRulesMatchInOrder(t *testing.T) {
	s := script.MustParse(weather)
	call := message.ToolCall{ID: "c1", Name: "get_weather", Arguments: `{"city":"Paris"}`}
	other := message.ToolCall{ID: "c2", Name: "get_time"}
	afterWeather := []message.Message{
		user("weather in Paris?"),
		{Role: message.Assistant, ToolCalls: []message.ToolCall{call, other}},
		{Role: message.Tool, ToolCallID: "c2", Content: "noon"},
		// no ToolName: the name is found from the call id
		{Role: message.Tool, ToolCallID: "c1", Content: "21C sunny"},
	}
	tests := []struct {
		name string
		req  model.Request
		rule int
		text string
	}{
		{"system substring, case-insensitive", model.Request{System: "Talk like a PIRATE.", Messages: []message.Message{user("hello")}}, 0, "Arr, hello!"},
		{"last tool by call id", model.Request{Messages: afterWeather}, 1, "Weather: 21C sunny (2 results)"},
		{"other tool result", model.Request{Messages: afterWeather[:3]}, 2, "some other tool answered"},
		{"lastUser case-insensitive", model.Request{Messages: []message.Message{user("What's the weather?")}}, 3, "Checking."},
		{"fallback", model.Request{Messages: []message.Message{user("hi")}}, 6, "You said: hi"},
		{"last user, not last message", model.Request{Messages: []message.Message{user("hi"), {Role: message.Assistant, Content: "yo"}}}, 6, "You said: hi"},
		{"a client's context block is not what the user said", model.Request{Messages: []message.Message{user("hi"),
			user("<environment_context>\n  <current_date>2026-12-03</current_date>\n</environment_context>")}}, 6, "You said: hi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := s.Reply(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if r.Rule != tt.rule || r.Text != tt.text {
				t.Fatalf("got rule %d text %q, want rule %d text %q", r.Rule, r.Text, tt.rule, tt.text)
			}
			if got := strings.Join(r.Chunks, ""); got != r.Text {
				t.Fatalf("chunks %q do not join to the text", r.Chunks)
			}
		})
	}
}

func TestToolCallsAndTemplatesInArguments(t *testing.T) {
	s := script.MustParse(weather)
	req := model.Request{Messages: []message.Message{user(`weather "now"`)}}
	r, err := s.Reply(req)
	if err != nil {
		t.Fatal(err)
	}
	if r.Stop != event.StopToolCalls || len(r.ToolCalls) != 2 {
		t.Fatalf("stop %q calls %+v", r.Stop, r.ToolCalls)
	}
	if got, want := r.ToolCalls[0].Arguments, `{"city":"Paris","note":"asked: weather \"now\""}`; got != want {
		t.Fatalf("arguments %s, want %s", got, want)
	}
	if r.ToolCalls[1].Arguments != "{}" {
		t.Fatalf("missing arguments should be {}, got %s", r.ToolCalls[1].Arguments)
	}
	if r.ToolCalls[0].ID == r.ToolCalls[1].ID || !strings.HasPrefix(r.ToolCalls[0].ID, "call_") {
		t.Fatalf("ids %q %q", r.ToolCalls[0].ID, r.ToolCalls[1].ID)
	}
	// A later step in the same conversation gets other ids.
	req.Messages = append(req.Messages,
		message.Message{Role: message.Assistant, ToolCalls: r.ToolCalls},
		message.Message{Role: message.Tool, ToolCallID: r.ToolCalls[0].ID, Content: "x"},
		message.Message{Role: message.Tool, ToolCallID: r.ToolCalls[1].ID, Content: "y"},
		user("weather again"))
	r2, err := s.Reply(req)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range r.ToolCalls {
		for _, b := range r2.ToolCalls {
			if a.ID == b.ID {
				t.Fatalf("tool call id %s reused in the same conversation", a.ID)
			}
		}
	}
}

func TestDeterministic(t *testing.T) {
	s := script.MustParse(weather)
	req := model.Request{Messages: []message.Message{user("weather please")}}
	a, err := s.Reply(req)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		b, err := script.MustParse(weather).Reply(req)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("same request, different replies:\n%+v\n%+v", a, b)
		}
	}
}

func TestStopDelaysAndErrors(t *testing.T) {
	s := script.MustParse(weather)
	r, err := s.Reply(model.Request{Messages: []message.Message{user("a long one")}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Stop != event.StopLength || r.Delay != 5*time.Millisecond || r.ChunkDelay != 2*time.Millisecond {
		t.Fatalf("got %+v", r)
	}
	r, err = s.Reply(model.Request{Messages: []message.Message{user("please fail")}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Error == nil || r.Error.Status != 503 || r.Error.Message != "overloaded: please fail" {
		t.Fatalf("error reply %+v", r.Error)
	}
}

func TestNoMatch(t *testing.T) {
	s := script.MustParse(`[{"when": {"lastUser": "x"}, "reply": {"text": "y"}}]`)
	_, err := s.Reply(model.Request{Messages: []message.Message{user("hello")}})
	if !errors.Is(err, script.ErrNoMatch) {
		t.Fatalf("got %v, want ErrNoMatch", err)
	}
}

func TestParseRejectsBadScripts(t *testing.T) {
	for name, src := range map[string]string{
		"empty":         `[]`,
		"not json":      `{`,
		"unknown field": `[{"reply": {"txt": "typo"}}]`,
		"empty reply":   `[{"reply": {}}]`,
		"bad stop":      `[{"reply": {"text": "a", "stop": "tool_calls"}}]`,
		"bad status":    `[{"reply": {"error": {"status": 200, "message": "x"}}}]`,
		"args array":    `[{"reply": {"toolCalls": [{"name": "t", "arguments": [1]}]}}]`,
		"no call name":  `[{"reply": {"toolCalls": [{"arguments": {}}]}}]`,
	} {
		if _, err := script.Parse([]byte(src)); !errors.Is(err, script.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.script.json")
	if err := os.WriteFile(path, []byte(`[{"reply":{"text":"ok"}}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := script.Load(path)
	if err != nil || len(s.Rules) != 1 {
		t.Fatalf("load: %v", err)
	}
	if _, err := script.Load(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: got %v", err)
	}
}

func TestSplitting(t *testing.T) {
	text := "one two three four five six seven  eight\nnine é"
	chunks := script.SplitText(text)
	if len(chunks) < 3 || strings.Join(chunks, "") != text {
		t.Fatalf("SplitText: %q", chunks)
	}
	args := `{"city":"Zürich","n":1}`
	frags := script.SplitArgs(args)
	if len(frags) != 3 || strings.Join(frags, "") != args {
		t.Fatalf("SplitArgs: %q", frags)
	}
	for _, f := range frags {
		if !utf8Valid(f) {
			t.Fatalf("fragment %q splits a rune", f)
		}
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

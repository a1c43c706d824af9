package responses

import (
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/message"
)

func seqIDs() func(string) string {
	n := 0
	return func(p string) string { n++; return p + "_" + strings.Repeat("x", n) }
}

// TestInputItemsToMessages: a Codex-style replay maps onto the engine's
// messages: instructions first, a message with its calls as one assistant
// message, outputs as tool messages, reasoning dropped; each message knows
// its input item.
func TestInputItemsToMessages(t *testing.T) {
	req, err := Decode([]byte(`{"model":"a","instructions":"Be brief.","input":[
	 {"role":"user","content":"hi"},
	 {"type":"reasoning","summary":[]},
	 {"type":"message","role":"assistant","content":[{"type":"output_text","text":"Let me look."}]},
	 {"type":"function_call","call_id":"c1","name":"ls","arguments":"{}"},
	 {"type":"function_call","call_id":"c2","name":"cat","arguments":"{\"f\":1}"},
	 {"type":"function_call_output","call_id":"c1","output":"a.txt"},
	 {"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"x"},{"type":"input_text","text":"y"}]},
	 {"type":"message","role":"user","content":[{"type":"input_text","text":"and?"},{"type":"input_image","image_url":"data:image/png;base64,AAAA"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	items, err := req.Items(seqIDs())
	if err != nil {
		t.Fatal(err)
	}
	if items[0].Type != ItemMessage || items[0].ID == "" || items[3].ID == "" {
		t.Fatalf("items %+v", items)
	}
	in, origin, err := req.input(items, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := in.Messages
	if len(m) != 6 || m[0].Role != message.System || m[0].Content != "Be brief." || m[1].Content != "hi" ||
		m[2].Role != message.Assistant || m[2].Content != "Let me look." || len(m[2].ToolCalls) != 2 || m[2].ToolCalls[1].Arguments != `{"f":1}` ||
		m[3].Role != message.Tool || m[3].ToolCallID != "c1" || m[3].Content != "a.txt" || m[4].Content != "xy" ||
		m[5].Content != "and?" || len(m[5].Parts) != 1 || m[5].Parts[0].MediaType != "image/png" {
		t.Fatalf("messages %+v", m)
	}
	if want := []int{-1, 0, 2, 5, 6, 7}; len(origin) != len(want) {
		t.Fatalf("origin %v", origin)
	} else {
		for i := range want {
			if origin[i] != want[i] {
				t.Fatalf("origin %v, want %v", origin, want)
			}
		}
	}
	// A string input is one user message.
	req, _ = Decode([]byte(`{"model":"a","input":"hello"}`))
	items, _ = req.Items(seqIDs())
	in, _, err = req.input(items, nil)
	if err != nil || len(in.Messages) != 1 || in.Messages[0].Content != "hello" || in.Messages[0].Role != message.User {
		t.Fatalf("string input %+v %v", in.Messages, err)
	}
}

// TestRequestOptions: tools, tool_choice, limits and text.format reach the
// engine input; bad ones are 400s on their own parameter.
func TestRequestOptions(t *testing.T) {
	req, err := Decode([]byte(`{"model":"a","input":"x","max_output_tokens":50,"temperature":0.2,
	 "tools":[{"type":"function","name":"open","description":"Open","parameters":{"type":"object"},"strict":true}],
	 "tool_choice":{"type":"function","name":"open"},
	 "text":{"format":{"type":"json_schema","name":"out","schema":{"type":"object","properties":{"a":{"type":"string"}}},"strict":true}}}`))
	if err != nil {
		t.Fatal(err)
	}
	items, _ := req.Items(seqIDs())
	in, _, err := req.input(items, nil)
	if err != nil {
		t.Fatal(err)
	}
	if in.MaxTokens != 50 || *in.Temperature != 0.2 || len(in.ClientTools) != 1 || in.ClientTools[0].Name != "open" ||
		in.ToolChoice != "open" || in.ResponseFormat == nil || in.ResponseFormat.Name != "out" || !in.ResponseFormat.Strict {
		t.Fatalf("input %+v", in)
	}
	for body, param := range map[string]string{
		`{"model":"a","input":"x","tool_choice":"sometimes"}`:                         "tool_choice",
		`{"model":"a","input":"x","max_output_tokens":0}`:                             "max_output_tokens",
		`{"model":"a","input":"x","text":{"format":{"type":"xml"}}}`:                  "text.format.type",
		`{"model":"a","input":"x","text":{"format":{"type":"json_schema","name":5}}}`: "text.format",
		`{"model":"a","input":[{"role":"robot","content":"x"}]}`:                      "input[0].role",
		`{"model":"a","input":[{"role":"user","content":[{"type":"audio"}]}]}`:        "input[0].content[0].type",
		`{"model":"a","input":[{"type":"function_call","call_id":"c"}]}`:              "input[0].name",
	} {
		req, err := Decode([]byte(body))
		if err == nil {
			var items []Item
			if items, err = req.Items(seqIDs()); err == nil {
				_, _, err = req.input(items, nil)
			}
		}
		e, ok := err.(*apierror.Error)
		if !ok || e.Param != param || e.Status != 400 {
			t.Errorf("%s: %v (want param %s)", body, err, param)
		}
	}
}

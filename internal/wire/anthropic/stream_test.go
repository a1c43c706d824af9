package anthropic

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/wire/sse"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func text(msg, d string) event.Event {
	return event.Event{Type: event.TextDelta, MessageID: msg, Delta: d}
}

func finished(o *event.Outcome) event.Event {
	return event.Event{Type: event.RunFinished, Outcome: o, Usage: &event.Usage{InputTokens: 42, OutputTokens: 7}}
}

var refundCall = message.ToolCall{ID: "call_1", Name: "refund", Arguments: "{\"orderId\": \"ord_42\",\n \"amount\": 19.99}"}

// Each case is a fixed event sequence a run could produce.
var streamCases = []struct {
	name   string
	events []event.Event
	err    error // the error that comes with a RunError
}{
	{name: "text", events: []event.Event{
		{Type: event.RunStarted}, {Type: event.InputUsage, MessageID: "m1", Usage: &event.Usage{InputTokens: 42}},
		{Type: event.TextStart, MessageID: "m1"}, text("m1", "Hel"), text("m1", "lo"), {Type: event.TextEnd, MessageID: "m1"},
		finished(&event.Outcome{Type: event.Success, Stop: event.StopEnd}),
	}},
	{name: "server_tool", events: []event.Event{
		{Type: event.RunStarted},
		{Type: event.TextStart, MessageID: "m1"}, text("m1", "Checking."), {Type: event.TextEnd, MessageID: "m1"},
		{Type: event.ToolCallStart, MessageID: "m1", ToolCallID: "call_w", ToolName: "get_weather"},
		{Type: event.ToolCallArgs, MessageID: "m1", ToolCallID: "call_w", Delta: `{"city":"Paris"}`},
		{Type: event.ToolCallEnd, MessageID: "m1", ToolCallID: "call_w"},
		{Type: event.ToolResult, MessageID: "t1", ToolCallID: "call_w", ToolName: "get_weather", Content: `{"temp_c":21}`},
		{Type: event.TextStart, MessageID: "s1", SubagentRunID: "run_sub"}, {Type: event.TextDelta, MessageID: "s1", Delta: "hidden", SubagentRunID: "run_sub"},
		{Type: event.TextStart, MessageID: "m2"}, text("m2", "Tool said: "), text("m2", "21"), {Type: event.TextEnd, MessageID: "m2"},
		finished(&event.Outcome{Type: event.Success, Stop: event.StopEnd}),
	}},
	{name: "approval_pause", events: []event.Event{
		{Type: event.RunStarted},
		{Type: event.ToolCallStart, MessageID: "m1", ToolCallID: "call_1", ToolName: "refund"},
		{Type: event.ToolCallEnd, MessageID: "m1", ToolCallID: "call_1"},
		finished(&event.Outcome{Type: event.Interrupt, Stop: event.StopToolCalls, PendingCalls: []message.ToolCall{refundCall},
			Interrupts: []event.InterruptInfo{{ID: "int_1", ToolCallID: "call_1", Tool: "refund"}}}),
	}},
	{name: "text_and_client_tools", events: []event.Event{
		{Type: event.RunStarted},
		text("m1", "Opening both."), {Type: event.InputUsage, MessageID: "m1", Usage: &event.Usage{InputTokens: 40}},
		finished(&event.Outcome{Type: event.Success, Stop: event.StopToolCalls, PendingCalls: []message.ToolCall{
			{ID: "call_a", Name: "open_modal", Arguments: `{"title":"A"}`, Client: true},
			{ID: "call_b", Name: "open_modal", Arguments: ``, Client: true},
		}}),
	}},
	{name: "max_tokens", events: []event.Event{
		{Type: event.RunStarted}, text("m1", "Cut o"), {Type: event.InputUsage, MessageID: "m1", Usage: &event.Usage{}},
		finished(&event.Outcome{Type: event.Success, Stop: event.StopLength}),
	}},
	{name: "error_mid_stream", events: []event.Event{
		{Type: event.RunStarted}, text("m1", "Partial"),
		{Type: event.RunError, Code: "upstream_rate_limited", Message: "The model provider is rate limiting requests: slow down"},
	}, err: &model.Error{Status: 429, Message: "slow down"}},
}

func encode(t *testing.T, events []event.Event, runErr error) []byte {
	t.Helper()
	rec := httptest.NewRecorder()
	st := NewStream(sse.New(rec), "msg_test", "assistant", 12)
	for i, e := range events {
		if e.Type == event.RunError {
			e.Err = runErr
		}
		if werr := st.Write(e); werr != nil {
			t.Fatalf("event %d: %v", i, werr)
		}
		if i == 1 {
			if err := st.Ping(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := st.Error(apierror.IncompleteRun()); err != nil {
		t.Fatal(err)
	}
	if err := st.Ping(); err != nil { // after the end: writes nothing
		t.Fatal(err)
	}
	return rec.Body.Bytes()
}

func TestStreamGolden(t *testing.T) {
	for _, tc := range streamCases {
		t.Run(tc.name, func(t *testing.T) {
			got := encode(t, tc.events, tc.err)
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("stream differs from %s:\n--- got\n%s\n--- want\n%s", path, got, want)
			}
		})
	}
}

type frame struct {
	name string
	data map[string]any
}

func frames(t *testing.T, b []byte) []frame {
	t.Helper()
	var out []frame
	for _, chunk := range strings.Split(strings.TrimSuffix(string(b), "\n\n"), "\n\n") {
		if strings.HasPrefix(chunk, ": ") && !strings.Contains(chunk, "\n") {
			continue // a keepalive comment
		}
		sc := bufio.NewScanner(strings.NewReader(chunk))
		var f frame
		for sc.Scan() {
			name, val, _ := strings.Cut(sc.Text(), ": ")
			switch name {
			case "event":
				f.name = val
			case "data":
				if err := json.Unmarshal([]byte(val), &f.data); err != nil {
					t.Fatalf("data is not JSON: %q", val)
				}
			default:
				t.Fatalf("unexpected line %q", sc.Text())
			}
		}
		if f.name == "" {
			t.Fatalf("frame without an event line: %q", chunk)
		}
		if f.data["type"] != f.name {
			t.Fatalf("event %q carries type %v", f.name, f.data["type"])
		}
		out = append(out, f)
	}
	return out
}

// The stream obeys the SDKs' rules: message_start first and once, block
// indexes without gaps, deltas only into open blocks, nothing after
// message_stop.
func TestStreamOrder(t *testing.T) {
	for _, tc := range streamCases {
		t.Run(tc.name, func(t *testing.T) {
			fs := frames(t, encode(t, tc.events, tc.err))
			if fs[0].name != "message_start" {
				t.Fatalf("first event %q", fs[0].name)
			}
			open := map[int]bool{}
			next := 0
			for i, f := range fs {
				if i > 0 && f.name == "message_start" {
					t.Fatal("second message_start")
				}
				if f.name == "message_stop" && i != len(fs)-1 {
					t.Fatalf("%d events after message_stop", len(fs)-1-i)
				}
				idx, hasIdx := f.data["index"].(float64)
				switch f.name {
				case "content_block_start":
					if int(idx) != next {
						t.Fatalf("block %v started, want %d", idx, next)
					}
					open[next] = true
					next++
				case "content_block_delta", "content_block_stop":
					if !hasIdx || !open[int(idx)] {
						t.Fatalf("%s for block %v that is not open", f.name, idx)
					}
					if f.name == "content_block_stop" {
						open[int(idx)] = false
					}
				}
			}
			last := fs[len(fs)-1].name
			if last != "message_stop" && last != "error" {
				t.Fatalf("stream ends with %q", last)
			}
		})
	}
}

// The SDK-accumulated stream equals the non-stream body.
func TestStreamMatchesCollector(t *testing.T) {
	for _, tc := range streamCases {
		t.Run(tc.name, func(t *testing.T) {
			col := NewCollector("msg_test", "assistant")
			for _, e := range tc.events {
				if e.Type == event.RunError {
					e.Err = tc.err
				}
				col.Add(e)
			}
			res, colErr := col.Result()

			var acc struct {
				Content    []map[string]any
				StopReason any
				Usage      map[string]any
			}
			var streamErr map[string]any
			for _, f := range frames(t, encode(t, tc.events, tc.err)) {
				switch f.name {
				case "content_block_start":
					acc.Content = append(acc.Content, f.data["content_block"].(map[string]any))
				case "content_block_delta":
					b := acc.Content[int(f.data["index"].(float64))]
					d := f.data["delta"].(map[string]any)
					switch d["type"] {
					case "text_delta":
						b["text"] = b["text"].(string) + d["text"].(string)
					case "input_json_delta":
						var in any
						if err := json.Unmarshal([]byte(d["partial_json"].(string)), &in); err != nil {
							t.Fatal(err)
						}
						b["input"] = in
					}
				case "message_delta":
					acc.StopReason = f.data["delta"].(map[string]any)["stop_reason"]
					acc.Usage = f.data["usage"].(map[string]any)
				case "error":
					streamErr = f.data["error"].(map[string]any)
				}
			}
			if colErr != nil {
				if streamErr == nil {
					t.Fatalf("collector failed (%v) but the stream did not", colErr)
				}
				return
			}
			b, _ := json.Marshal(res)
			var want struct {
				Content    []map[string]any
				StopReason any `json:"stop_reason"`
				Usage      map[string]any
			}
			_ = json.Unmarshal(b, &want)
			if !reflect.DeepEqual(acc.Content, want.Content) && !(len(acc.Content) == 0 && len(want.Content) == 0) {
				t.Fatalf("content:\nstream  %v\ncollect %v", acc.Content, want.Content)
			}
			if acc.StopReason != want.StopReason {
				t.Fatalf("stop_reason %v vs %v", acc.StopReason, want.StopReason)
			}
			if acc.Usage["input_tokens"] != want.Usage["input_tokens"] || acc.Usage["output_tokens"] != want.Usage["output_tokens"] {
				t.Fatalf("usage %v vs %v", acc.Usage, want.Usage)
			}
		})
	}
}

func TestStreamErrorType(t *testing.T) {
	fs := frames(t, encode(t, streamCases[len(streamCases)-1].events, &model.Error{Status: 429, Message: "slow down"}))
	last := fs[len(fs)-1]
	e := last.data["error"].(map[string]any)
	if last.name != "error" || e["type"] != "rate_limit_error" || strings.Contains(e["message"].(string), "slow down") {
		t.Fatalf("error event %v", last.data)
	}
	if _, err := NewCollector("msg_x", "assistant").Result(); err == nil {
		t.Fatal("a collector that saw no terminal event returned a message")
	}
}

// message_start carries the input tokens the run reports for the step of
// its first text, with only keepalive comments before it: reported before
// the text (Anthropic upstreams report them at the start of a step), the
// text streams at once; reported when the step ends (OpenAI upstreams), the
// step's text waits for the count, so message_start and message_delta agree
// either way.
func TestStreamMessageStartWaitsForInputUsage(t *testing.T) {
	run := func(t *testing.T, reportFirst bool) ([]frame, string) {
		rec := httptest.NewRecorder()
		st := NewStream(sse.New(rec), "msg_test", "assistant", 72)
		write := func(e event.Event) {
			t.Helper()
			if err := st.Write(e); err != nil {
				t.Fatal(err)
			}
		}
		write(event.Event{Type: event.RunStarted})
		if err := st.Ping(); err != nil {
			t.Fatal(err)
		}
		if got := rec.Body.String(); got != ": ping\n\n" {
			t.Fatalf("written before the first output: %q", got)
		}
		if reportFirst {
			write(event.Event{Type: event.InputUsage, MessageID: "m1", Usage: &event.Usage{InputTokens: 20}})
		}
		write(text("m1", "Hel"))
		afterFirstText := rec.Body.String()
		write(text("m1", "lo"))
		write(event.Event{Type: event.TextEnd, MessageID: "m1"})
		if !reportFirst {
			write(event.Event{Type: event.InputUsage, MessageID: "m1", Usage: &event.Usage{InputTokens: 20}})
		}
		write(event.Event{Type: event.RunFinished, Outcome: &event.Outcome{Type: event.Success, Stop: event.StopEnd},
			Usage: &event.Usage{InputTokens: 20, OutputTokens: 3}})
		fs := frames(t, rec.Body.Bytes())
		var names []string
		for _, f := range fs {
			names = append(names, f.name)
		}
		if strings.Join(names, " ") != "message_start content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop" {
			t.Fatalf("frames %v", names)
		}
		return fs, afterFirstText
	}
	inputOf := func(fs []frame) (start, delta any) {
		start = fs[0].data["message"].(map[string]any)["usage"].(map[string]any)["input_tokens"]
		delta = fs[len(fs)-2].data["usage"].(map[string]any)["input_tokens"]
		return
	}
	t.Run("reported before text", func(t *testing.T) {
		fs, _ := run(t, true)
		if start, delta := inputOf(fs); start != 20.0 || delta != 20.0 {
			t.Fatalf("message_start input %v, message_delta %v; want the reported 20 in both", start, delta)
		}
	})
	t.Run("reported after text", func(t *testing.T) {
		fs, afterFirstText := run(t, false)
		if afterFirstText != ": ping\n\n" {
			t.Fatalf("the text went out before its step's count: %q", afterFirstText)
		}
		if start, delta := inputOf(fs); start != 20.0 || delta != 20.0 {
			t.Fatalf("message_start input %v, message_delta %v; want the reported 20 in both", start, delta)
		}
	})
	t.Run("silent steps first", func(t *testing.T) {
		rec := httptest.NewRecorder()
		st := NewStream(sse.New(rec), "msg_test", "assistant", 72)
		for _, e := range []event.Event{{Type: event.RunStarted},
			{Type: event.InputUsage, MessageID: "m1", Usage: &event.Usage{InputTokens: 20}},
			{Type: event.ToolCallStart, MessageID: "m1", ToolCallID: "c1", ToolName: "get_weather"},
			{Type: event.ToolResult, MessageID: "t1", ToolCallID: "c1", Content: "{}"},
			text("m2", "Sunny"), {Type: event.InputUsage, MessageID: "m2", Usage: &event.Usage{InputTokens: 30}},
			{Type: event.TextEnd, MessageID: "m2"},
			{Type: event.RunFinished, Outcome: &event.Outcome{Type: event.Success, Stop: event.StopEnd},
				Usage: &event.Usage{InputTokens: 50, OutputTokens: 3}}} {
			if err := st.Write(e); err != nil {
				t.Fatal(err)
			}
		}
		if start, delta := inputOf(frames(t, rec.Body.Bytes())); start != 50.0 || delta != 50.0 {
			t.Fatalf("message_start input %v, message_delta %v; want the turn's 50 in both", start, delta)
		}
	})
}

package agui

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
)

type frames struct{ out []map[string]any }

func (f *frames) Data(b []byte) error {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	f.out = append(f.out, m)
	return nil
}

func (f *frames) Event(string, []byte) error { panic("the AG-UI stream writes no named events") }

func (f *frames) Comment(string) error { return nil }

func (f *frames) types() string {
	var ts []string
	for _, m := range f.out {
		s := m["type"].(string)
		if id, ok := m["subagentRunId"].(string); ok && m["type"] != "SUBAGENT_STARTED" && m["type"] != "SUBAGENT_FINISHED" {
			s += "@" + id
		}
		ts = append(ts, s)
	}
	return strings.Join(ts, " ")
}

func fixedNow() time.Time { return time.UnixMilli(1700000000000) }

func TestStreamClosesOpenWorkBeforeRunError(t *testing.T) {
	f := &frames{}
	s := NewStream(f, "t1", "r1", fixedNow)
	for _, e := range []event.Event{
		{Type: event.RunStarted, RunID: "ignored"},
		{Type: event.StepStarted, StepName: "plan"},
		{Type: event.SubagentStarted, SubagentRunID: "sub_1", Subagent: "researcher", ParentToolCallID: "task_1"},
		{Type: event.StepStarted, StepName: "researcher", SubagentRunID: "sub_1"},
		{Type: event.TextStart, MessageID: "m1", SubagentRunID: "sub_1"},
		{Type: event.TextDelta, MessageID: "m1", Delta: "hi", SubagentRunID: "sub_1"},
		{Type: event.ToolCallStart, MessageID: "m1", ToolCallID: "c1", ToolName: "search", SubagentRunID: "sub_1"},
		{Type: event.ToolCallArgs, MessageID: "m1", ToolCallID: "c1", Delta: `{"q"`, SubagentRunID: "sub_1"},
		{Type: event.TextDelta, MessageID: "m2", Delta: "parent"},
		{Type: event.RunError, Code: "upstream_error", Message: "boom"},
		{Type: event.TextDelta, MessageID: "m3", Delta: "after the end"},
		{Type: event.RunFinished},
	} {
		if err := s.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	// The subagent's wire id derives from its task call; the run's failure
	// ends it with SUBAGENT_ERROR after closing its own work.
	want := "RUN_STARTED STEP_STARTED SUBAGENT_STARTED STEP_STARTED@sub_task_1 TEXT_MESSAGE_START@sub_task_1 TEXT_MESSAGE_CONTENT@sub_task_1 " +
		"TOOL_CALL_START@sub_task_1 TOOL_CALL_ARGS@sub_task_1 TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT " +
		"TEXT_MESSAGE_END@sub_task_1 TOOL_CALL_END@sub_task_1 STEP_FINISHED@sub_task_1 SUBAGENT_ERROR@sub_task_1 TEXT_MESSAGE_END STEP_FINISHED RUN_ERROR"
	if got := f.types(); got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
	if rs := f.out[0]; rs["runId"] != "r1" || rs["threadId"] != "t1" || rs["protocolVersion"] != "1.0" || rs["timestamp"] != float64(1700000000000) {
		t.Fatalf("RUN_STARTED %v", rs)
	}
	if sa := f.out[2]; sa["name"] != "researcher" || sa["parentToolCallId"] != "task_1" || sa["subagentRunId"] != "sub_task_1" {
		t.Fatalf("SUBAGENT_STARTED %v", sa)
	}
	if tc := f.out[6]; tc["parentMessageId"] != "m1" {
		t.Fatalf("TOOL_CALL_START %v", tc)
	}
	if last := f.out[len(f.out)-1]; last["code"] != "upstream_error" || last["message"] != "boom" {
		t.Fatalf("RUN_ERROR %v", last)
	}
	if !s.Done() {
		t.Fatal("the stream must be done after RUN_ERROR")
	}
}

func TestStreamIgnoresUnknownSubagentsAndUnmatchedClosers(t *testing.T) {
	f := &frames{}
	s := NewStream(f, "t1", "", fixedNow)
	for _, e := range []event.Event{
		{Type: event.TextStart, MessageID: "m1", SubagentRunID: "sub_x"}, // RUN_STARTED is implied
		{Type: event.TextEnd, MessageID: "m1"},
		{Type: event.TextEnd, MessageID: "m1"},
		{Type: event.ToolCallArgs, ToolCallID: "nope", Delta: "x"},
		{Type: event.ToolCallEnd, ToolCallID: "nope"},
		{Type: event.StepFinished, StepName: "never"},
		{Type: event.SubagentFinished, SubagentRunID: "sub_x"},
		{Type: event.StateDelta, Patch: json.RawMessage(`[]`)},
		{Type: event.StateSnapshot},
		{Type: event.RunFinished, RunID: "run_9", Outcome: &event.Outcome{Type: event.Interrupt}},
	} {
		if err := s.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.types(); got != "RUN_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_END STATE_SNAPSHOT RUN_FINISHED" {
		t.Fatalf("events %s", got)
	}
	if snap := f.out[3]; !reflect.DeepEqual(snap["snapshot"], map[string]any{}) {
		t.Fatalf("an empty snapshot is {}: %v", snap)
	}
	fin := f.out[4]
	// An interrupt outcome without interrupts would be fatal to a client.
	if !reflect.DeepEqual(fin["outcome"], map[string]any{"type": "success"}) || fin["runId"] != "run_9" {
		t.Fatalf("RUN_FINISHED %v", fin)
	}
}

func TestSubagentEndings(t *testing.T) {
	f := &frames{}
	s := NewStream(f, "t1", "r1", fixedNow)
	for i, status := range []string{"success", "suspended", "error", ""} {
		rid := fmt.Sprintf("rt_%d", i)
		task := fmt.Sprintf("call_%d", i)
		for _, e := range []event.Event{
			{Type: event.SubagentStarted, SubagentRunID: rid, Subagent: "helper", ParentToolCallID: task},
			{Type: event.TextDelta, MessageID: "m" + task, Delta: "x", SubagentRunID: rid},
			{Type: event.TextEnd, MessageID: "m" + task, SubagentRunID: rid},
			{Type: event.SubagentFinished, SubagentRunID: rid, Message: status},
			{Type: event.SubagentFinished, SubagentRunID: rid, Message: status}, // a repeat is dropped
		} {
			if err := s.Write(e); err != nil {
				t.Fatal(err)
			}
		}
	}
	var ends []string
	for _, m := range f.out {
		switch m["type"] {
		case "SUBAGENT_FINISHED", "SUBAGENT_ERROR":
			b, _ := json.Marshal(m)
			ends = append(ends, string(b))
		}
	}
	want := []string{
		`{"outcome":{"type":"success"},"subagentRunId":"sub_call_0","timestamp":1700000000000,"type":"SUBAGENT_FINISHED"}`,
		`{"outcome":{"type":"suspended"},"subagentRunId":"sub_call_1","timestamp":1700000000000,"type":"SUBAGENT_FINISHED"}`,
		`{"message":"The subagent failed.","subagentRunId":"sub_call_2","timestamp":1700000000000,"type":"SUBAGENT_ERROR"}`,
		`{"subagentRunId":"sub_call_3","timestamp":1700000000000,"type":"SUBAGENT_FINISHED"}`,
	}
	if !reflect.DeepEqual(ends, want) {
		t.Fatalf("subagent endings\n got %v\nwant %v", ends, want)
	}
}

func TestSnapshotAttributesSubagentMessages(t *testing.T) {
	msgs := wireMessages([]message.Message{
		{ID: "u1", Role: message.User, Content: "go"},
		{ID: "a1", Role: message.Assistant, ToolCalls: []message.ToolCall{{ID: "call_t", Name: "task", Arguments: `{}`}}},
		{ID: "su", Role: message.User, Content: "sub task", TaskCallID: "call_t", Subagent: "helper"},
		{ID: "sa", Role: message.Assistant, Content: "done", TaskCallID: "call_t", Subagent: "helper"},
		{ID: "t1", Role: message.Tool, ToolCallID: "call_t", Content: "done"},
	}, true)
	b, _ := json.Marshal(msgs)
	want := `[{"id":"u1","role":"user","content":"go"},` +
		`{"id":"a1","role":"assistant","toolCalls":[{"id":"call_t","type":"function","function":{"name":"task","arguments":"{}"}}]},` +
		`{"id":"su","role":"user","content":"sub task","subagentRunId":"sub_call_t"},` +
		`{"id":"sa","role":"assistant","content":"done","subagentRunId":"sub_call_t"},` +
		`{"id":"t1","role":"tool","content":"done","toolCallId":"call_t"}]`
	if string(b) != want {
		t.Fatalf("snapshot\n got %s\nwant %s", b, want)
	}
}

func TestOutcomes(t *testing.T) {
	cases := []struct {
		in   *event.Outcome
		want string
	}{
		{nil, `{"type":"success"}`},
		{&event.Outcome{Type: event.Success, PendingCalls: []message.ToolCall{{ID: "c1"}, {ID: "c2"}}}, `{"type":"success","pendingToolCallIds":["c1","c2"]}`},
		{&event.Outcome{Type: event.Interrupt, Interrupts: []event.InterruptInfo{{ID: "int_1", ToolCallID: "c1", Tool: "delete_file",
			ResponseSchema: json.RawMessage(`{"type":"object"}`), Subagent: "ops"}}},
			`{"type":"interrupt","interrupts":[{"id":"int_1","reason":"tool_call","toolCallId":"c1","allowedDecisions":[],"responseSchema":{"type":"object"},"metadata":{"stackbone":{"allowedDecisions":[],"subagent":"ops","tool":"delete_file"}}}]}`},
		{&event.Outcome{Type: event.Interrupt, Interrupts: []event.InterruptInfo{{ID: "int_2", ToolCallID: "c2", Tool: "refund",
			Description: "Refund ord_1", AllowedDecisions: []string{"approve", "reject"}}}},
			`{"type":"interrupt","interrupts":[{"id":"int_2","reason":"tool_call","toolCallId":"c2","description":"Refund ord_1","allowedDecisions":["approve","reject"],"message":"Refund ord_1","metadata":{"stackbone":{"allowedDecisions":["approve","reject"],"description":"Refund ord_1","tool":"refund"}}}]}`},
	}
	for _, c := range cases {
		b, _ := json.Marshal(outcomeOf(c.in))
		if string(b) != c.want {
			t.Errorf("outcome\n got %s\nwant %s", b, c.want)
		}
	}
}

func TestDecodeAndInput(t *testing.T) {
	body := `{"threadId":"t1","runId":"r1","state":null,"unknown":1,
	 "tools":[{"name":"open_modal","description":"d","parameters":null}],
	 "resume":[{"interruptId":"int_1","status":"cancelled"},{"interruptId":"int_2","status":"resolved","payload":{"approved":true}}],
	 "messages":[
	  {"id":"a1","role":"assistant","content":"calling","toolCalls":[{"id":"c1","type":"function","function":{"name":"open_modal","arguments":{"x":1}}}]},
	  {"id":"t1","role":"tool","toolCallId":"c1","content":[{"type":"text","text":"failed"}],"error":"boom"},
	  {"id":"u1","role":"user","content":[{"type":"binary","mimeType":"image/jpeg","data":"AAAA"},{"type":"audio","source":{"type":"data","value":"x","mimeType":"audio/wav"}}]},
	  {"id":"x1","role":"someday"}
	 ]}`
	req, err := Decode([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	in, err := req.Input("assistant")
	if err != nil {
		t.Fatal(err)
	}
	if in.ThreadID != "t1" || in.RunID != "r1" || !in.Resync || in.State != nil || in.Agent != "assistant" {
		t.Fatalf("input %+v", in)
	}
	if len(in.ClientTools) != 1 || in.ClientTools[0].Parameters != nil {
		t.Fatalf("tools %+v", in.ClientTools)
	}
	if as := req.answers(); len(as) != 2 || !as[0].Cancelled || as[1].Cancelled || string(as[1].Payload) != `{"approved":true}` {
		t.Fatalf("resume %+v", as)
	}
	if len(in.Messages) != 3 {
		t.Fatalf("messages %+v", in.Messages)
	}
	if c := in.Messages[0].ToolCalls[0]; c.Arguments != `{"x":1}` || c.Name != "open_modal" {
		t.Fatalf("tool call %+v", c)
	}
	if tm := in.Messages[1]; tm.Content != "failed" || !tm.IsError || tm.ToolCallID != "c1" {
		t.Fatalf("tool message %+v", tm)
	}
	if um := in.Messages[2]; len(um.Parts) != 1 || um.Parts[0].MediaType != "image/jpeg" || um.Parts[0].Data != "AAAA" {
		t.Fatalf("user parts %+v", um.Parts)
	}
}

func TestStatelessRefusals(t *testing.T) {
	for _, body := range []string{
		`{"messages":[{"id":"m","role":"user","content":"x"}],"tools":[{"name":"t"}]}`,
		`{"threadId":"","messages":[{"id":"m","role":"user","content":"x"}],"state":{"draft":"x"}}`,
		`{"threadId":"","messages":[],"resume":[{"interruptId":"i","status":"cancelled"}]}`,
	} {
		req, err := Decode([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		_, err = req.Input("assistant")
		var ae *apierror.Error
		if !errors.As(err, &ae) || ae.Code != "thread_required" || !errors.Is(err, ErrThreadRequired) || !strings.Contains(ae.Message, "threadId") {
			t.Fatalf("%s: %v", body, err)
		}
	}
	// An empty state object is no seeding, so a stateless run may carry it.
	req, _ := Decode([]byte(`{"messages":[{"id":"m","role":"user","content":"x"}],"state":{}}`))
	if _, err := req.Input("assistant"); err != nil {
		t.Fatal(err)
	}
}

func TestWriteError(t *testing.T) {
	h := NewWire(nil, fixedNow)
	w := httptest.NewRecorder()
	_ = h.WriteError(w, apierror.New(apierror.Authentication, "invalid_api_key", "Invalid API key."))
	if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), `"invalid_api_key"`) {
		t.Fatalf("401: %d %s", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	_ = h.WriteError(w, apierror.ApprovalPending())
	want := `data: {"type":"RUN_ERROR","timestamp":1700000000000,"message":"` + apierror.ApprovalPendingMessage + `","code":"approval_pending"}` + "\n\n"
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "text/event-stream" || w.Body.String() != want {
		t.Fatalf("RUN_ERROR: %d %q", w.Code, w.Body)
	}
}

// TestSameNameStepsNest: two subagents of one name working side by side stay
// inside one STEP_STARTED/STEP_FINISHED pair that closes after the last.
func TestSameNameStepsNest(t *testing.T) {
	out := &frames{}
	s := NewStream(out, "t", "r", fixedNow)
	for _, e := range []event.Event{
		{Type: event.RunStarted},
		{Type: event.StepStarted, StepName: "writer"},
		{Type: event.StepStarted, StepName: "writer"},
		{Type: event.StepFinished, StepName: "writer"},
		{Type: event.TextStart, MessageID: "m"}, {Type: event.TextDelta, MessageID: "m", Delta: "x"}, {Type: event.TextEnd, MessageID: "m"},
		{Type: event.StepFinished, StepName: "writer"},
		{Type: event.RunFinished, Outcome: &event.Outcome{Type: event.Success}},
	} {
		if err := s.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	got := out.types()
	want := "RUN_STARTED STEP_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END STEP_FINISHED RUN_FINISHED"
	if got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
}

// streamFrames writes evs through a Stream adapted to req and returns the
// events it wrote.
func streamFrames(t *testing.T, req *RunAgentInput, evs ...event.Event) []map[string]any {
	t.Helper()
	var buf frames
	st := NewStream(&buf, "t1", "r1", func() time.Time { return time.UnixMilli(1) }).ForClient(req)
	for _, e := range evs {
		if err := st.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	return buf.out
}

func TestOutcomeForPreV1Clients(t *testing.T) {
	pending := event.Event{Type: event.RunFinished, Outcome: &event.Outcome{Type: event.Success, PendingCalls: []message.ToolCall{{ID: "c1"}}}}
	for _, c := range []struct {
		version string
		ev      event.Event
		want    string
	}{
		{"", pending, `{"type":"success"}`},
		{"0.0.59", pending, `{"type":"success"}`},
		{"1.0", pending, `{"pendingToolCallIds":["c1"],"type":"success"}`},
		{"2.3", pending, `{"pendingToolCallIds":["c1"],"type":"success"}`},
	} {
		fs := streamFrames(t, &RunAgentInput{ProtocolVersion: c.version}, c.ev)
		b, _ := json.Marshal(fs[len(fs)-1]["outcome"])
		if string(b) != c.want {
			t.Errorf("protocolVersion %q: outcome %s, want %s", c.version, b, c.want)
		}
	}
}

// TestSnapshotOrderForHeldMessages checks the MESSAGES_SNAPSHOT sequence
// against the reducer of @ag-ui/client (0.0.x and 1.0): messages the client
// holds stay in place, the others are appended, those left out are dropped.
func TestSnapshotOrderForHeldMessages(t *testing.T) {
	reduce := func(held []string, snaps [][]string) []string {
		for _, snap := range snaps {
			in := map[string]bool{}
			for _, id := range snap {
				in[id] = true
			}
			var next []string
			kept := map[string]bool{}
			for _, id := range held {
				if in[id] {
					next = append(next, id)
					kept[id] = true
				}
			}
			for _, id := range snap {
				if !kept[id] {
					next = append(next, id)
				}
			}
			held = next
		}
		return held
	}
	history := []message.Message{{ID: "h1", Role: message.User, Content: "a"}, {ID: "h2", Role: message.Assistant, Content: "b"},
		{ID: "new", Role: message.User, Content: "c"}}
	for _, c := range []struct {
		name  string
		held  []string
		snaps int
	}{
		{"reopened with only the new input", []string{"new"}, 2},
		{"continuing with the whole history", []string{"h1", "h2", "new"}, 1},
		{"a reasoning message of its own", []string{"h1", "r1", "h2", "new"}, 1},
		{"holding history out of order", []string{"h2", "h1", "new"}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			var msgs []Message
			for _, id := range c.held {
				msgs = append(msgs, Message{ID: id, Role: "user"})
			}
			fs := streamFrames(t, &RunAgentInput{Messages: msgs}, event.Event{Type: event.MessagesSnapshot, Messages: history})
			var snaps [][]string
			for _, f := range fs {
				if f["type"] != "MESSAGES_SNAPSHOT" {
					continue
				}
				ids := []string{}
				for _, m := range f["messages"].([]any) {
					ids = append(ids, m.(map[string]any)["id"].(string))
				}
				snaps = append(snaps, ids)
			}
			if len(snaps) != c.snaps {
				t.Fatalf("%d snapshots %v, want %d", len(snaps), snaps, c.snaps)
			}
			got := reduce(c.held, snaps)
			if c.name == "a reasoning message of its own" {
				got = slices.DeleteFunc(got, func(id string) bool { return id == "r1" })
			}
			if !slices.Equal(got, []string{"h1", "h2", "new"}) {
				t.Fatalf("the client ends with %v after %v", got, snaps)
			}
		})
	}
}

// TestReasoningGatedByVersion: a block of the model's reasoning reaches a
// 1.0 client as a closed REASONING_* span with one reasoning message (ids
// apart from the text message's), before the text; a client older than 1.0,
// whose schema knows no REASONING_* type, gets the text alone.
func TestReasoningGatedByVersion(t *testing.T) {
	evs := []event.Event{
		{Type: event.RunStarted},
		{Type: event.Reasoning, MessageID: "m1", Content: "Let me think."},
		{Type: event.TextDelta, MessageID: "m1", Delta: "Hi"},
		{Type: event.RunFinished, Outcome: &event.Outcome{Type: event.Success}},
	}
	types := func(fs []map[string]any) string {
		var out []string
		for _, f := range fs {
			out = append(out, f["type"].(string))
		}
		return strings.Join(out, ",")
	}
	fs := streamFrames(t, &RunAgentInput{ProtocolVersion: "1.0"}, evs...)
	want := "RUN_STARTED,REASONING_START,REASONING_MESSAGE_START,REASONING_MESSAGE_CONTENT,REASONING_MESSAGE_END,REASONING_END," +
		"TEXT_MESSAGE_START,TEXT_MESSAGE_CONTENT,TEXT_MESSAGE_END,RUN_FINISHED"
	if got := types(fs); got != want {
		t.Fatalf("1.0 events\n got %s\nwant %s", got, want)
	}
	if fs[2]["messageId"] != "m1-reasoning-1" || fs[2]["role"] != "reasoning" || fs[3]["delta"] != "Let me think." || fs[1]["messageId"] != fs[5]["messageId"] {
		t.Fatalf("reasoning events %v", fs[1:6])
	}
	for _, v := range []string{"", "0.0.59"} {
		if got := types(streamFrames(t, &RunAgentInput{ProtocolVersion: v}, evs...)); strings.Contains(got, "REASONING") {
			t.Fatalf("protocolVersion %q got %s", v, got)
		}
	}
}

// TestSnapshotReasoning: a 1.0 client's MESSAGES_SNAPSHOT holds an answer's
// shown reasoning as "reasoning" messages with the live events' ids, where
// they streamed (before the answer, or after it when they followed a tool
// call); a redacted block shows nothing; a client older than 1.0 gets the
// conversation without them.
func TestSnapshotReasoning(t *testing.T) {
	snap := event.Event{Type: event.MessagesSnapshot, Messages: []message.Message{
		{ID: "u1", Role: message.User, Content: "go"},
		{ID: "a1", Role: message.Assistant, Content: "Checking.", ToolCalls: []message.ToolCall{{ID: "c1", Name: "n", Arguments: "{}"}},
			Reasoning: []message.Reasoning{
				{Type: message.ReasoningText, Text: "first"},
				{Type: message.ReasoningRedacted, Data: "x"},
				{Type: message.ReasoningThinking, Text: "after the call", Signature: "s", AfterCalls: 1},
			}},
	}}
	ids := func(version string) string {
		fs := streamFrames(t, &RunAgentInput{ProtocolVersion: version}, event.Event{Type: event.RunStarted}, snap)
		var out []string
		for _, m := range fs[len(fs)-1]["messages"].([]any) {
			m := m.(map[string]any)
			out = append(out, fmt.Sprintf("%s:%s:%v", m["id"], m["role"], m["content"]))
		}
		return strings.Join(out, " ")
	}
	if got, want := ids("1.0"), "u1:user:go a1-reasoning-1:reasoning:first a1:assistant:Checking. a1-reasoning-2:reasoning:after the call"; got != want {
		t.Fatalf("1.0 snapshot\n got %s\nwant %s", got, want)
	}
	for _, v := range []string{"", "0.0.59"} {
		if got, want := ids(v), "u1:user:go a1:assistant:Checking."; got != want {
			t.Fatalf("protocolVersion %q snapshot\n got %s\nwant %s", v, got, want)
		}
	}
}

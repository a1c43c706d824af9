package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// aguiStream is one AG-UI response read raw.
type aguiStream struct {
	status int
	header http.Header
	body   string
	pings  int
	events []map[string]any
}

// aguiPost sends a RunAgentInput and reads the whole stream, checking the
// framing every AG-UI client relies on: LF-only "data: <one-line JSON>\n\n"
// frames (or ": ping" comments), integer timestamps, and no null anywhere.
func aguiPost(t *testing.T, env *stacktest.Env, agentName, body string, hdr ...string) aguiStream {
	t.Helper()
	return aguiRead(t, env, agentName, body, false, hdr...)
}

// aguiRead is aguiPost; allowNulls admits JSON nulls inside state payloads
// (snapshot and patch values), which are data, not absent fields.
func aguiRead(t *testing.T, env *stacktest.Env, agentName, body string, allowNulls bool, hdr ...string) aguiStream {
	t.Helper()
	req, _ := http.NewRequest("POST", env.URL+"/v1/agents/"+agentName+"/agui", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	s := aguiStream{status: resp.StatusCode, header: resp.Header, body: string(b)}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return s
	}
	if strings.Contains(s.body, "\r") {
		t.Fatalf("the stream holds a CR; frames must be LF-only:\n%q", s.body)
	}
	if !strings.HasSuffix(s.body, "\n\n") {
		t.Fatalf("the stream does not end with a blank line: %q", s.body)
	}
	for _, frame := range strings.Split(strings.TrimSuffix(s.body, "\n\n"), "\n\n") {
		if frame == ": ping" {
			s.pings++
			continue
		}
		data, ok := strings.CutPrefix(frame, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("frame is not one data line: %q", frame)
		}
		dec := json.NewDecoder(strings.NewReader(data))
		dec.UseNumber()
		var ev map[string]any
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("frame is not a JSON object: %q: %v", data, err)
		}
		for _, p := range aguiNullPaths(ev, "") {
			if !allowNulls || !aguiStatePath.MatchString(p) {
				t.Fatalf("null at %s in %s", p, data)
			}
		}
		ts, ok := ev["timestamp"].(json.Number)
		if _, err := ts.Int64(); !ok || err != nil {
			t.Fatalf("timestamp must be integer ms: %s", data)
		}
		if _, ok := ev["type"].(string); !ok {
			t.Fatalf("frame without a type: %s", data)
		}
		s.events = append(s.events, ev)
	}
	return s
}

// aguiStatePath matches where state data (which may hold nulls) sits in an
// event.
var aguiStatePath = regexp.MustCompile(`^/(snapshot|delta/\d+/value)(/|$)`)

// aguiNullPaths returns the paths of every JSON null in v.
func aguiNullPaths(v any, path string) []string {
	switch x := v.(type) {
	case nil:
		if path == "" {
			path = "/"
		}
		return []string{path}
	case map[string]any:
		var out []string
		for k, c := range x {
			out = append(out, aguiNullPaths(c, path+"/"+k)...)
		}
		return out
	case []any:
		var out []string
		for i, c := range x {
			out = append(out, aguiNullPaths(c, fmt.Sprintf("%s/%d", path, i))...)
		}
		return out
	}
	return nil
}

func (s aguiStream) types() []string {
	var out []string
	for _, e := range s.events {
		out = append(out, e["type"].(string))
	}
	return out
}

// first returns the first event of a type (nil when none).
func (s aguiStream) first(typ string) map[string]any {
	for _, e := range s.events {
		if e["type"] == typ {
			return e
		}
	}
	return nil
}

func (s aguiStream) all(typ string) []map[string]any {
	var out []map[string]any
	for _, e := range s.events {
		if e["type"] == typ {
			out = append(out, e)
		}
	}
	return out
}

func (s aguiStream) last() map[string]any {
	if len(s.events) == 0 {
		return nil
	}
	return s.events[len(s.events)-1]
}

// text joins the TEXT_MESSAGE_CONTENT deltas.
func (s aguiStream) text() string {
	var b strings.Builder
	for _, e := range s.all("TEXT_MESSAGE_CONTENT") {
		b.WriteString(e["delta"].(string))
	}
	return b.String()
}

// aguiInput builds a RunAgentInput with one user message.
func aguiInput(thread, run, text string, extra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"threadId":%q,"runId":%q,"state":{},"messages":[{"id":"u-%s","role":"user","content":%q}],"tools":[],"context":[],"forwardedProps":{}`,
		thread, run, run, text)
	for _, e := range extra {
		b.WriteString(",")
		b.WriteString(e)
	}
	b.WriteString("}")
	return b.String()
}

// checkTerminal asserts the stream is well formed for a verifying client:
// RUN_STARTED first, exactly one terminal event last, everything closed.
func checkTerminal(t *testing.T, s aguiStream) {
	t.Helper()
	if s.status != 200 {
		t.Fatalf("status %d: %s", s.status, s.body)
	}
	types := s.types()
	if len(types) == 0 || (types[0] != "RUN_STARTED" && types[0] != "RUN_ERROR") {
		t.Fatalf("first event %v", types)
	}
	terminals := 0
	open := map[string]bool{}
	calls := map[string]bool{}
	for _, e := range s.events {
		switch e["type"] {
		case "RUN_FINISHED", "RUN_ERROR":
			terminals++
			if len(open) > 0 {
				t.Fatalf("terminal event while %v open: %v", open, types)
			}
		case "TEXT_MESSAGE_START":
			open["text:"+e["messageId"].(string)] = true
		case "TEXT_MESSAGE_END":
			delete(open, "text:"+e["messageId"].(string))
		case "TOOL_CALL_START":
			id := e["toolCallId"].(string)
			if calls[id] {
				t.Fatalf("tool call id %s started twice in one stream: %v", id, types)
			}
			calls[id] = true
			open["tool:"+id] = true
		case "TOOL_CALL_END":
			delete(open, "tool:"+e["toolCallId"].(string))
		case "STEP_STARTED":
			open["step:"+e["stepName"].(string)] = true
		case "STEP_FINISHED":
			delete(open, "step:"+e["stepName"].(string))
		}
	}
	if terminals != 1 || (types[len(types)-1] != "RUN_FINISHED" && types[len(types)-1] != "RUN_ERROR") {
		t.Fatalf("want exactly one terminal event last, got %v", types)
	}
}

func TestAGUIRawTextRun(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	s := aguiPost(t, env, "assistant", aguiInput("th-text", "run-1", "hello there"))
	checkTerminal(t, s)
	if ct := s.header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	want := []string{"RUN_STARTED", "STATE_SNAPSHOT", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_FINISHED"}
	got := s.types()
	if got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[len(got)-2] != want[4] || got[len(got)-1] != want[5] {
		t.Fatalf("event order %v", got)
	}
	rs := s.events[0]
	if rs["protocolVersion"] != "1.0" || rs["threadId"] != "th-text" || rs["runId"] != "run-1" {
		t.Fatalf("RUN_STARTED %v", rs)
	}
	if snap := s.first("STATE_SNAPSHOT"); !reflect.DeepEqual(snap["snapshot"], map[string]any{}) {
		t.Fatalf("a new thread's snapshot must be {}: %v", snap)
	}
	if st := s.first("TEXT_MESSAGE_START"); st["role"] != "assistant" {
		t.Fatalf("TEXT_MESSAGE_START %v", st)
	}
	if s.text() != "echo: hello there" {
		t.Fatalf("text %q", s.text())
	}
	fin := s.last()
	if fin["threadId"] != "th-text" || fin["runId"] != "run-1" || !reflect.DeepEqual(fin["outcome"], map[string]any{"type": "success"}) {
		t.Fatalf("RUN_FINISHED %v", fin)
	}
	if s.first("MESSAGES_SNAPSHOT") != nil {
		t.Fatal("a new thread must not open with a MESSAGES_SNAPSHOT")
	}
	// The thread exists now and its run is the request's.
	if th := env.Thread(t, "dev", "th-text"); th.RunID != "run-1" || th.Agent != "assistant" {
		t.Fatalf("stored thread %+v", th)
	}
}

func TestAGUIRawServerTool(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	s := aguiPost(t, env, "assistant", aguiInput("th-tool", "run-1", "weather in Paris?"))
	checkTerminal(t, s)
	start, args, end, res := s.first("TOOL_CALL_START"), s.first("TOOL_CALL_ARGS"), s.first("TOOL_CALL_END"), s.first("TOOL_CALL_RESULT")
	if start == nil || args == nil || end == nil || res == nil {
		t.Fatalf("tool events missing: %v", s.types())
	}
	id := start["toolCallId"]
	if start["toolCallName"] != "get_weather" || start["parentMessageId"] != s.first("TEXT_MESSAGE_START")["messageId"] {
		t.Fatalf("TOOL_CALL_START %v", start)
	}
	var argText strings.Builder
	for _, a := range s.all("TOOL_CALL_ARGS") {
		if a["toolCallId"] != id {
			t.Fatalf("args of another call %v", a)
		}
		argText.WriteString(a["delta"].(string))
	}
	if argText.String() != `{"city":"Paris"}` || end["toolCallId"] != id {
		t.Fatalf("args/end %v %v", args, end)
	}
	if res["toolCallId"] != id || res["role"] != "tool" || res["messageId"] == "" || !strings.Contains(res["content"].(string), `"temp_c":21`) {
		t.Fatalf("TOOL_CALL_RESULT %v", res)
	}
	if !strings.Contains(s.text(), "Tool said:") {
		t.Fatalf("text %q", s.text())
	}
	if env.Calls.Get("get_weather") != 1 {
		t.Fatalf("get_weather ran %d times", env.Calls.Get("get_weather"))
	}
}

// aguiInterrupt pauses a thread and returns the stream and its interrupt.
func aguiInterrupt(t *testing.T, env *stacktest.Env, thread, text string) (aguiStream, map[string]any) {
	t.Helper()
	s := aguiPost(t, env, "assistant", aguiInput(thread, "run-1", text))
	checkTerminal(t, s)
	out, _ := s.last()["outcome"].(map[string]any)
	if out["type"] != "interrupt" {
		t.Fatalf("want an interrupt outcome, got %v", s.last())
	}
	its := out["interrupts"].([]any)
	if len(its) != 1 {
		t.Fatalf("interrupts %v", its)
	}
	return s, its[0].(map[string]any)
}

func TestAGUIRawInterruptShapes(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	s, it := aguiInterrupt(t, env, "th-refund", "refund my order")
	types := s.types()
	n := len(types)
	if types[n-3] != "STATE_SNAPSHOT" || types[n-2] != "MESSAGES_SNAPSHOT" {
		t.Fatalf("snapshots must precede an interrupt's RUN_FINISHED: %v", types)
	}
	call := s.first("TOOL_CALL_START")
	if it["reason"] != "tool_call" || it["toolCallId"] != call["toolCallId"] || !strings.HasPrefix(it["id"].(string), "int_") {
		t.Fatalf("interrupt %v", it)
	}
	if it["description"] != "Refund order ord_42 for 19.99" || it["message"] != it["description"] {
		t.Fatalf("description/message %v", it)
	}
	if !reflect.DeepEqual(it["allowedDecisions"], []any{"approve", "reject", "edit"}) {
		t.Fatalf("allowedDecisions %v", it["allowedDecisions"])
	}
	rs, _ := it["responseSchema"].(map[string]any)
	props, _ := rs["properties"].(map[string]any)
	if rs["type"] != "object" || props["approved"] == nil || props["editedArgs"] == nil {
		t.Fatalf("responseSchema %v", it["responseSchema"])
	}
	// metadata.stackbone repeats description and allowedDecisions where every
	// client version keeps them.
	if md, _ := it["metadata"].(map[string]any); !reflect.DeepEqual(md["stackbone"], map[string]any{"tool": "refund",
		"description": "Refund order ord_42 for 19.99", "allowedDecisions": []any{"approve", "reject", "edit"}}) {
		t.Fatalf("metadata %v", it["metadata"])
	}
	// The messages snapshot holds the whole conversation with the paused call.
	msgs := s.first("MESSAGES_SNAPSHOT")["messages"].([]any)
	if len(msgs) != 2 || msgs[0].(map[string]any)["content"] != "refund my order" {
		t.Fatalf("messages snapshot %v", msgs)
	}
	asst := msgs[1].(map[string]any)
	tc := asst["toolCalls"].([]any)[0].(map[string]any)
	fn := tc["function"].(map[string]any)
	if asst["role"] != "assistant" || tc["id"] != call["toolCallId"] || tc["type"] != "function" || fn["name"] != "refund" || !strings.Contains(fn["arguments"].(string), "ord_42") {
		t.Fatalf("assistant message %v", asst)
	}
	if _, has := asst["content"]; has {
		t.Fatalf("an assistant message without text must omit content: %v", asst)
	}

	// A pause without a description omits description and message.
	_, del := aguiInterrupt(t, env, "th-delete", "delete the file")
	if _, has := del["description"]; has {
		t.Fatalf("description must be omitted: %v", del)
	}
	if _, has := del["message"]; has {
		t.Fatalf("message must be omitted: %v", del)
	}
	if !reflect.DeepEqual(del["allowedDecisions"], []any{"approve", "reject"}) || del["responseSchema"] == nil {
		t.Fatalf("delete interrupt %v", del)
	}
	if strings.Contains(fmt.Sprint(del["responseSchema"]), "editedArgs") {
		t.Fatalf("no edit allowed, yet the schema offers editedArgs: %v", del["responseSchema"])
	}
}

// checkRunError asserts a stream is one RUN_ERROR with the code on a 200.
func checkRunError(t *testing.T, s aguiStream, code string) map[string]any {
	t.Helper()
	if s.status != 200 {
		t.Fatalf("want HTTP 200 with a RUN_ERROR, got %d: %s", s.status, s.body)
	}
	if len(s.events) != 1 || s.events[0]["type"] != "RUN_ERROR" {
		t.Fatalf("want one RUN_ERROR event, got %v", s.body)
	}
	e := s.events[0]
	if e["code"] != code || e["message"] == "" {
		t.Fatalf("want code %q, got %v", code, e)
	}
	return e
}

func TestAGUIRawErrorsAreRunErrorFirst(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	cases := []struct {
		name, agent, body, code, msg string
	}{
		{"bad json", "assistant", `{"threadId":"x","messages":[`, "invalid_request", "not a valid RunAgentInput"},
		{"wrong type", "assistant", `{"threadId":"x","messages":"hi"}`, "invalid_request", "messages"},
		{"unknown agent", "nobody", aguiInput("th-x", "r", "hi"), "agent_not_found", `"nobody"`},
		{"no role", "assistant", `{"threadId":"th-norole","runId":"r","messages":[{"id":"m","content":"hi"}]}`, "invalid_request", "role"},
		{"no new message", "assistant", `{"threadId":"th-empty","runId":"r","messages":[]}`, "invalid_request", "no new message"},
		{"stateless tools", "assistant", `{"threadId":"","runId":"r","messages":[{"id":"m","role":"user","content":"open"}],"tools":[{"name":"open_modal","description":"d","parameters":{"type":"object"}}]}`, "thread_required", "threadId"},
		{"stateless missing thread tools", "assistant", `{"runId":"r","messages":[{"id":"m","role":"user","content":"open"}],"tools":[{"name":"open_modal","description":"d"}]}`, "thread_required", "Frontend tools"},
		{"stateless state", "assistant", `{"threadId":"","runId":"r","state":{"draft":"x"},"messages":[{"id":"m","role":"user","content":"hi"}]}`, "thread_required", "threadId"},
		{"stateless resume", "assistant", `{"threadId":"","runId":"r","messages":[],"resume":[{"interruptId":"int_1","status":"resolved","payload":{"approved":true}}]}`, "thread_required", "threadId"},
		{"state not object", "assistant", `{"threadId":"th-s","runId":"r","state":[1],"messages":[{"id":"m","role":"user","content":"hi"}]}`, "invalid_state", "object"},
		{"state bad value", "assistant", `{"threadId":"th-s2","runId":"r","state":{"draft":42},"messages":[{"id":"m","role":"user","content":"hi"}]}`, "invalid_state", "draft"},
		{"resume bad status", "assistant", `{"threadId":"th-r","runId":"r","messages":[],"resume":[{"interruptId":"int_1","status":"maybe"}]}`, "invalid_request", "status"},
		{"resume unknown thread", "assistant", `{"threadId":"th-none","runId":"r","messages":[],"resume":[{"interruptId":"int_1","status":"resolved","payload":{"approved":true}}]}`, "unknown_interrupt", "no interrupts"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := checkRunError(t, aguiPost(t, env, c.agent, c.body), c.code)
			if !strings.Contains(e["message"].(string), c.msg) {
				t.Fatalf("message %q lacks %q", e["message"], c.msg)
			}
		})
	}
	// Nothing was stored for the refused requests.
	for _, id := range []string{"th-s", "th-s2", "th-norole", "th-empty"} {
		if _, err := env.Store.GetThread(t.Context(), "dev", id); err == nil {
			t.Fatalf("a refused request created thread %s", id)
		}
	}
	if env.Upstream.Count() != 0 {
		t.Fatal("a refused request reached the model")
	}

	// Fresh input while interrupted is a RUN_ERROR approval_pending, not a 409.
	aguiInterrupt(t, env, "th-paused", "refund this")
	before := env.Upstream.Count()
	e := checkRunError(t, aguiPost(t, env, "assistant", aguiInput("th-paused", "run-2", "hello?")), "approval_pending")
	if e["message"] != apierror.ApprovalPendingMessage {
		t.Fatalf("message %q", e["message"])
	}
	if env.Upstream.Count() != before {
		t.Fatal("input to a paused thread reached the model")
	}
}

func TestAGUIRaw401StaysHTTP(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: []config.Key{{Secret: "sk-agui", Tenant: "acme"}}})
	s := aguiPost(t, env, "assistant", aguiInput("th", "r", "hi"))
	if s.status != 401 || !strings.Contains(s.body, "invalid_api_key") {
		t.Fatalf("want 401, got %d %s", s.status, s.body)
	}
	ok := aguiPost(t, env, "assistant", aguiInput("th", "r", "hi"), "Authorization", "Bearer sk-agui")
	checkTerminal(t, ok)
	if ok.text() != "echo: hi" {
		t.Fatalf("text %q", ok.text())
	}
	if th := env.Thread(t, "acme", "th"); th.Tenant != "acme" {
		t.Fatalf("thread %+v", th)
	}
}

func TestAGUIRawResumeApprove(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	paused, it := aguiInterrupt(t, env, "th-approve", "refund my order")
	callID := paused.first("TOOL_CALL_START")["toolCallId"].(string)
	resume := fmt.Sprintf(`"resume":[{"interruptId":%q,"status":"resolved","payload":{"approved":true}}]`, it["id"])
	body := `{"threadId":"th-approve","runId":"run-2","state":{},"messages":[],"tools":[],"context":[],"forwardedProps":{},` + resume + `}`
	s := aguiPost(t, env, "assistant", body)
	checkTerminal(t, s)
	if s.events[0]["runId"] != "run-2" || s.last()["runId"] != "run-2" {
		t.Fatalf("the resumed run must echo the request's runId: %v / %v", s.events[0], s.last())
	}
	if s.first("TOOL_CALL_START") != nil {
		t.Fatalf("a resumed call must not start again: %v", s.types())
	}
	res := s.first("TOOL_CALL_RESULT")
	if res == nil || res["toolCallId"] != callID || !strings.Contains(res["content"].(string), callID) {
		t.Fatalf("TOOL_CALL_RESULT %v", res)
	}
	if s.first("MESSAGES_SNAPSHOT") == nil || !strings.HasPrefix(s.text(), "Refund result:") {
		t.Fatalf("resumed run %v %q", s.types(), s.text())
	}
	if !reflect.DeepEqual(s.last()["outcome"], map[string]any{"type": "success"}) {
		t.Fatalf("outcome %v", s.last()["outcome"])
	}
	if env.Calls.Get("refund") != 1 {
		t.Fatalf("refund ran %d times", env.Calls.Get("refund"))
	}
	got, err := env.Store.GetInterrupt(t.Context(), "dev", it["id"].(string))
	if err != nil || got.Status != store.Approved || got.Decision.Via != "agui" || got.Decision.By != "dev" {
		t.Fatalf("decision %+v %v", got, err)
	}
	// Replaying the same resume decides and runs nothing.
	again := aguiPost(t, env, "assistant", strings.Replace(body, "run-2", "run-3", 1))
	checkTerminal(t, again)
	if again.first("TOOL_CALL_RESULT") != nil || !reflect.DeepEqual(again.last()["outcome"], map[string]any{"type": "success"}) {
		t.Fatalf("replay %v", again.types())
	}
	if env.Calls.Get("refund") != 1 {
		t.Fatalf("a replay ran the tool again (%d)", env.Calls.Get("refund"))
	}
}

func TestAGUIRawInputShapes(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	// Every role, part content, null state and unknown fields are accepted.
	body := `{"threadId":"th-shapes","runId":"r1","state":null,"protocolVersion":"1.0","somethingNew":{"x":1},
	 "context":[{"description":"page","value":"checkout"}],
	 "messages":[
	  {"id":"d1","role":"developer","content":"Be brief."},
	  {"id":"s1","role":"system","content":"Be kind."},
	  {"id":"a0","role":"activity","activityType":"progress","content":{"pct":50}},
	  {"id":"rz","role":"reasoning","content":"thinking"},
	  {"id":"u1","role":"user","content":[{"type":"text","text":"look at"},{"type":"image","source":{"type":"data","value":"iVBORw0KGgo=","mimeType":"image/png"}},{"type":"image","source":{"type":"url","value":"https://example.com/a.png"}},{"type":"text","text":"this picture"}],"extra":true}
	 ]}`
	s := aguiPost(t, env, "assistant", body)
	checkTerminal(t, s)
	if s.text() != "echo: look at\nthis picture" {
		t.Fatalf("text %q", s.text())
	}
	last, _ := env.Upstream.Last()
	req := last.Request
	if !strings.Contains(req.System, "Be brief.") || !strings.Contains(req.System, "Be kind.") || !strings.Contains(req.System, "page: checkout") {
		t.Fatalf("system prompt %q", req.System)
	}
	if len(req.Messages) != 1 {
		t.Fatalf("only the user message reaches the model: %+v", req.Messages)
	}
	parts := req.Messages[0].Parts
	if len(parts) != 2 || parts[0].Data != "iVBORw0KGgo=" || parts[0].MediaType != "image/png" || parts[1].URL != "https://example.com/a.png" {
		t.Fatalf("image parts %+v", parts)
	}
	// Reopening the thread shows the parts back as AG-UI content parts.
	s2 := aguiPost(t, env, "assistant", aguiInput("th-shapes", "r2", "again"))
	checkTerminal(t, s2)
	msgs := s2.first("MESSAGES_SNAPSHOT")["messages"].([]any)
	u := msgs[0].(map[string]any)
	content, ok := u["content"].([]any)
	if u["id"] != "u1" || !ok || len(content) != 3 {
		t.Fatalf("user message %v", u)
	}
	img := content[1].(map[string]any)["source"].(map[string]any)
	if img["type"] != "data" || img["mimeType"] != "image/png" || img["value"] != "iVBORw0KGgo=" {
		t.Fatalf("image part %v", content[1])
	}
}

func TestAGUIRawPingKeepalive(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{KeepAliveInterval: 20 * time.Millisecond, Script: `[{"reply":{"text":"slow answer","delayMs":150}}]`})
	s := aguiPost(t, env, "assistant", aguiInput("th-ping", "r1", "hi"))
	checkTerminal(t, s)
	if s.pings == 0 || !strings.Contains(s.body, ": ping\n\n") {
		t.Fatalf("no keepalive in %q", s.body)
	}
	if s.text() != "slow answer" {
		t.Fatalf("text %q", s.text())
	}
}

// aguiJSON compacts a JSON literal for comparisons in messages.
func aguiJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSpace(b.String())
}

func TestAGUIRawErrorAfterStart(t *testing.T) {
	t.Parallel()
	script := `[{"when":{"lastUser":"fail"},"reply":{"error":{"status":400,"message":"bad prompt"}}},{"reply":{"text":"fine"}}]`
	env := stacktest.New(t, stacktest.Options{Script: script})
	s := aguiPost(t, env, "assistant", aguiInput("th-fail", "r1", "please fail"))
	checkTerminal(t, s)
	if got := s.types(); len(got) != 3 || got[0] != "RUN_STARTED" || got[1] != "STATE_SNAPSHOT" || got[2] != "RUN_ERROR" {
		t.Fatalf("events %v", got)
	}
	if e := s.last(); e["code"] != "upstream_error" || strings.Contains(e["message"].(string), "bad prompt") || !strings.Contains(e["message"].(string), "status") {
		t.Fatalf("RUN_ERROR %v", e)
	}
	// The thread is usable again afterwards.
	ok := aguiPost(t, env, "assistant", aguiInput("th-fail", "r2", "retry"))
	checkTerminal(t, ok)
	if ok.text() != "fine" || ok.first("MESSAGES_SNAPSHOT") == nil {
		t.Fatalf("after a failure: %v %q", ok.types(), ok.text())
	}
}

func TestAGUIRawSubagent(t *testing.T) {
	t.Parallel()
	var rules, defaults []json.RawMessage
	_ = json.Unmarshal([]byte(aguiSubagentRules), &rules)
	_ = json.Unmarshal([]byte(stacktest.DefaultScript), &defaults)
	script, _ := json.Marshal(append(rules, defaults...))
	env := stacktest.New(t, stacktest.Options{Script: string(script)})
	// A first turn, so the parent's task call and the subagent's first call
	// (both the first call of a conversation) get different scripted ids.
	checkTerminal(t, aguiPost(t, env, "assistant", aguiInput("th-sub", "r0", "hello first")))
	s := aguiPost(t, env, "assistant", aguiInput("th-sub", "r1", "research Paris for me"))
	checkTerminal(t, s)
	var task map[string]any
	for _, e := range s.all("TOOL_CALL_START") {
		if e["toolCallName"] == "task" {
			task = e
		}
	}
	if task == nil {
		t.Fatalf("no task call: %v", s.types())
	}
	subID := "sub_" + task["toolCallId"].(string)
	started := s.first("SUBAGENT_STARTED")
	if started == nil || started["subagentRunId"] != subID || started["name"] != "general-purpose" || started["parentToolCallId"] != task["toolCallId"] {
		t.Fatalf("SUBAGENT_STARTED %v", started)
	}
	fin := s.first("SUBAGENT_FINISHED")
	if fin == nil || fin["subagentRunId"] != subID || !reflect.DeepEqual(fin["outcome"], map[string]any{"type": "success"}) {
		t.Fatalf("SUBAGENT_FINISHED %v", fin)
	}
	// The subagent's work between the two is attributed to it; the step
	// named after the subagent brackets it all.
	in := false
	tagged := 0
	for _, e := range s.events {
		switch e["type"] {
		case "SUBAGENT_STARTED":
			in = true
		case "SUBAGENT_FINISHED":
			in = false
		case "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT":
			if got, _ := e["subagentRunId"].(string); (got == subID) != in {
				t.Fatalf("attribution of %v (inside subagent: %v)", e, in)
			}
			if in {
				tagged++
			}
		}
	}
	if tagged < 5 {
		t.Fatalf("only %d subagent events: %v", tagged, s.types())
	}
	types := strings.Join(s.types(), " ")
	if !strings.Contains(types, "STEP_STARTED SUBAGENT_STARTED") || !strings.Contains(types, "SUBAGENT_FINISHED STEP_FINISHED") {
		t.Fatalf("step bracketing: %s", types)
	}
	if st := s.first("STEP_STARTED"); st["stepName"] != "general-purpose" {
		t.Fatalf("STEP_STARTED %v", st)
	}
	if !strings.Contains(s.text(), "Summary: Tool said:") {
		t.Fatalf("text %q", s.text())
	}
	// Reopening: the snapshot attributes the subagent's stored conversation.
	again := aguiPost(t, env, "assistant", aguiInput("th-sub", "r2", "thanks"))
	checkTerminal(t, again)
	subMsgs := 0
	for _, m := range again.first("MESSAGES_SNAPSHOT")["messages"].([]any) {
		if m.(map[string]any)["subagentRunId"] == subID {
			subMsgs++
		}
	}
	if subMsgs < 3 {
		t.Fatalf("the snapshot attributes %d messages to the subagent", subMsgs)
	}
}

// TestAGUIRawReattachWaitingThread: a client that missed the pause (a
// reloaded page, or a pause made over the OpenAI wire) sends no new input and
// gets the pending interrupts again; fresh input still gets approval_pending.
func TestAGUIRawReattachWaitingThread(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	// Pause over the OpenAI wire.
	r := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"please refund"}]}`, "x-stackbone-session", "th-reattach")
	if r.status != 200 {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	s := aguiPost(t, env, "assistant", `{"threadId":"th-reattach","runId":"run-r","messages":[],"tools":[],"context":[]}`)
	checkTerminal(t, s)
	out, _ := s.last()["outcome"].(map[string]any)
	if out["type"] != "interrupt" || s.first("MESSAGES_SNAPSHOT") == nil || s.first("STATE_SNAPSHOT") == nil {
		t.Fatalf("reattach: %v %v", s.types(), s.last())
	}
	it := out["interrupts"].([]any)[0].(map[string]any)
	if it["description"] != "Refund order ord_42 for 19.99" {
		t.Fatalf("interrupt %v", it)
	}
	if env.Upstream.Count() != 1 {
		t.Fatal("a reattach must not call the model")
	}
	fresh := aguiPost(t, env, "assistant", aguiInput("th-reattach", "run-f", "something new"))
	checkRunError(t, fresh, "approval_pending")
}

// TestAGUIRawStateWithResume: state the client edited while paused is
// merged when it resumes (editable keys only).
func TestAGUIRawStateWithResume(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	_, it := aguiInterrupt(t, env, "th-state-resume", "refund my order")
	resume := fmt.Sprintf(`"resume":[{"interruptId":%q,"status":"resolved","payload":{"approved":true}}]`, it["id"])
	body := `{"threadId":"th-state-resume","runId":"run-2","state":{"draft":"edited while paused","secret":"x"},"messages":[],"tools":[],"context":[],` + resume + `}`
	s := aguiPost(t, env, "assistant", body)
	checkTerminal(t, s)
	var st map[string]any
	if err := json.Unmarshal(env.Thread(t, "dev", "th-state-resume").State, &st); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(st, map[string]any{"draft": "edited while paused"}) {
		t.Fatalf("state after resume %v", st)
	}
}

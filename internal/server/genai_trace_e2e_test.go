package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/redact"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/telemetry"
	"github.com/stackbone/stackbone/internal/telemetry/otlptest"
)

// tracedEnv is a stack whose spans go to a real OTLP receiver.
func tracedEnv(t *testing.T, configure func(*config.Config), more ...string) (*stacktest.Env, *otlptest.Receiver) {
	t.Helper()
	rcv := otlptest.NewReceiver(t)
	tel := rcv.Tracing(t, more...)
	env := stacktest.New(t, stacktest.Options{Configure: func(c *config.Config) {
		c.Tracer = tel.TracerProvider()
		if configure != nil {
			configure(c)
		}
	}})
	return env, rcv
}

// TestGenAISpansOfAToolTurn: a tool turn on a session sent by the official
// openai SDK with a traceparent is one trace under the caller's span: the
// HTTP server span, the run's invoke_agent span under it, and under that
// a chat span per model call and an execute_tool span for the tool, each
// with the GenAI conventions' attributes; no message content by default.
func TestGenAISpansOfAToolTurn(t *testing.T) {
	t.Parallel()
	env, rcv := tracedEnv(t, nil)
	const traceID, caller = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	res, err := client(env, session("traced"), option.WithHeader("traceparent", "00-"+traceID+"-"+caller+"-01")).
		Chat.Completions.New(context.Background(), params(user("what is the weather")))
	if err != nil {
		t.Fatal(err)
	}
	srv := rcv.WaitForName(t, "POST /v1/chat/completions")
	if srv.TraceID() != traceID || srv.ParentID() != caller {
		t.Fatalf("server span in trace %s under %s; want the caller's", srv.TraceID(), srv.ParentID())
	}
	run := rcv.WaitForName(t, "invoke_agent assistant")
	if !run.ChildOf(srv) || run.GetKind() != tracepb.Span_SPAN_KIND_INTERNAL ||
		run.StringAttr("gen_ai.agent.name") != "assistant" || run.StringAttr("gen_ai.conversation.id") != "traced" ||
		run.StringAttr("gen_ai.operation.name") != "invoke_agent" {
		t.Fatalf("invoke_agent span: parent %s kind %v attrs %v", run.ParentID(), run.GetKind(), run.GetAttributes())
	}
	tool := rcv.WaitForName(t, "execute_tool get_weather")
	if !tool.ChildOf(run) || tool.StringAttr("gen_ai.tool.name") != "get_weather" || tool.StringAttr("gen_ai.tool.call.id") == "" ||
		tool.StringAttr("gen_ai.tool.type") != "function" {
		t.Fatalf("execute_tool span: parent %s attrs %v", tool.ParentID(), tool.GetAttributes())
	}
	var chats []otlptest.Span
	stacktest.WaitFor(t, "two chat spans", func() bool {
		chats = nil
		for _, s := range rcv.Spans() {
			if s.GetName() == "chat test-model" {
				chats = append(chats, s)
			}
		}
		return len(chats) == 2
	})
	in, out := int64(0), int64(0)
	for _, c := range chats {
		if !c.ChildOf(run) || c.GetKind() != tracepb.Span_SPAN_KIND_CLIENT || c.StringAttr("gen_ai.provider.name") != "openai" ||
			c.StringAttr("gen_ai.request.model") != "test-model" || c.StringAttr("gen_ai.response.model") == "" ||
			c.StringAttr("gen_ai.response.id") == "" || !c.Has("gen_ai.response.finish_reasons") || !c.Has("gen_ai.response.time_to_first_chunk") {
			t.Fatalf("chat span: parent %s kind %v attrs %v", c.ParentID(), c.GetKind(), c.GetAttributes())
		}
		if c.Has("gen_ai.input.messages") || c.Has("gen_ai.output.messages") {
			t.Fatalf("a chat span carries content by default: %v", c.GetAttributes())
		}
		in += c.IntAttr("gen_ai.usage.input_tokens")
		out += c.IntAttr("gen_ai.usage.output_tokens")
	}
	if in != res.Usage.PromptTokens || out != res.Usage.CompletionTokens {
		t.Fatalf("the chat spans' tokens %d in, %d out; the client was told %d, %d", in, out, res.Usage.PromptTokens, res.Usage.CompletionTokens)
	}
	if tool.Has("gen_ai.tool.call.arguments") || tool.Has("gen_ai.tool.call.result") {
		t.Fatalf("an execute_tool span carries content by default: %v", tool.GetAttributes())
	}
	// The run's record names its trace.
	runs := threadRuns(t, env, "traced")
	if len(runs) != 1 || runs[0].TraceID != traceID {
		t.Fatalf("the run's trace id %+v; want %s", runs, traceID)
	}
}

// TestGenAISpanContentOptIn: with STACKBONE_TRACE_CONTENT the chat and tool
// spans carry what was sent and answered, through the log redactor.
func TestGenAISpanContentOptIn(t *testing.T) {
	t.Parallel()
	env, rcv := tracedEnv(t, func(c *config.Config) { c.TraceContent = true })
	const secret = "sk-live-Zq8wTr3pLm5nKx7vBc2d"
	if _, err := client(env).Chat.Completions.New(context.Background(), params(user("what is the weather, my key is "+secret))); err != nil {
		t.Fatal(err)
	}
	chat := rcv.WaitFor(t, "a chat span with content", func(s otlptest.Span) bool {
		return s.GetName() == "chat test-model" && s.Has("gen_ai.input.messages")
	})
	msgs := chat.StringAttr("gen_ai.input.messages")
	if !strings.Contains(msgs, "what is the weather") || strings.Contains(msgs, secret) || !strings.Contains(msgs, redact.Placeholder) {
		t.Fatalf("gen_ai.input.messages = %s; want the prompt with the key redacted", msgs)
	}
	tool := rcv.WaitForName(t, "execute_tool get_weather")
	if !strings.Contains(tool.StringAttr("gen_ai.tool.call.arguments"), "Paris") || !strings.Contains(tool.StringAttr("gen_ai.tool.call.result"), "temp_c") {
		t.Fatalf("execute_tool content: %v", tool.GetAttributes())
	}
}

// TestGenAIPausedRunIsLinked: the run an approval resumes, later, is its
// own trace linked to the paused run's span, which marks the pause.
func TestGenAIPausedRunIsLinked(t *testing.T) {
	t.Parallel()
	env, rcv := tracedEnv(t, nil)
	pause(t, env, "traced-pause", "refund please")
	paused := rcv.WaitFor(t, "the paused run", func(s otlptest.Span) bool {
		return s.GetName() == "invoke_agent assistant" && s.StringAttr("stackbone.run.outcome") == "interrupt"
	})
	pending := false
	for _, e := range paused.GetEvents() {
		pending = pending || e.GetName() == "stackbone.approval.pending"
	}
	if !pending {
		t.Fatalf("the paused run's span has no approval event: %v", paused.GetEvents())
	}
	its, err := env.Store.ListInterrupts(context.Background(), "dev", store.InterruptFilter{ThreadID: "traced-pause"})
	if err != nil || len(its) != 1 {
		t.Fatalf("pending: %v %v", its, err)
	}
	if r := call(t, http.MethodPost, env.URL+"/v1/hitl/"+its[0].ID+"/approve", `{}`); r.status != http.StatusOK {
		t.Fatalf("approve: %d", r.status)
	}
	resumed := rcv.WaitFor(t, "the resumed run", func(s otlptest.Span) bool {
		return s.GetName() == "invoke_agent assistant" && s.SpanID() != paused.SpanID() && s.StringAttr("stackbone.run.outcome") == "success"
	})
	linked := false
	for _, l := range resumed.GetLinks() {
		linked = linked || (otlptest.Span{Span: &tracepb.Span{TraceId: l.GetTraceId(), SpanId: l.GetSpanId()}}.SpanID() == paused.SpanID())
	}
	if !linked {
		t.Fatalf("the resumed run's span links %v; want the paused run's span %s", resumed.GetLinks(), paused.SpanID())
	}
	if tool := rcv.WaitForName(t, "execute_tool refund"); !tool.ChildOf(resumed) {
		t.Fatalf("the approved call's span is not under the resumed run")
	}
	var runs []runJSON
	stacktest.WaitFor(t, "the resumed run's record", func() bool {
		runs = threadRuns(t, env, "traced-pause")
		return len(runs) == 2 && runs[1].EndedAt != nil
	})
	if runs[0].TraceID != paused.TraceID() || runs[1].TraceID != resumed.TraceID() {
		t.Fatalf("the runs' trace ids %q, %q; want the spans' %s, %s", runs[0].TraceID, runs[1].TraceID, paused.TraceID(), resumed.TraceID())
	}
}

// TestGenAIUnreachableCollector: a collector that accepts connections and
// never answers does not fail a turn.
func TestGenAIUnreachableCollector(t *testing.T) {
	t.Parallel()
	rcvEnv := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + otlptest.Silent(t), "OTEL_BSP_SCHEDULE_DELAY": "10"}
	tel, err := telemetry.Setup(t.Context(), nil, otlptest.Getenv(rcvEnv), telemetry.WithShutdownTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	env := stacktest.New(t, stacktest.Options{Configure: func(c *config.Config) { c.Tracer = tel.TracerProvider() }})
	for i := range 3 {
		if _, err := client(env, session("silent")).Chat.Completions.New(context.Background(), params(user("what is the weather"))); err != nil {
			t.Fatalf("turn %d with a silent collector: %v", i, err)
		}
	}
}

// TestGenAISubagentAndRetrySpans: a subagent's work is an invoke_agent
// span nested under the task call's execute_tool span, its model call
// under it; a model call that failed once and was retried carries the
// retry as an event and its attempts, and its step says so too.
func TestGenAISubagentAndRetrySpans(t *testing.T) {
	t.Parallel()
	rcv := otlptest.NewReceiver(t)
	tel := rcv.Tracing(t)
	script := `[
	 {"when": {"system": "Help."}, "reply": {"text": "helped"}},
	 {"when": {"afterTool": true}, "reply": {"text": "done: {{lastTool}}"}},
	 {"when": {"lastUser": "delegate"}, "reply": {"toolCalls": [{"name": "task", "arguments": {"subagent_type": "helper", "description": "help me"}}]}},
	 {"reply": {"text": "echo: {{lastUser}}"}}
	]`
	env := stacktest.New(t, stacktest.Options{Script: script, Configure: func(c *config.Config) { c.Tracer = tel.TracerProvider() },
		Agents: func(env *stacktest.Env) []*agent.Spec {
			return []*agent.Spec{{Name: "boss", Model: "openai/test-model", Instructions: "Delegate.",
				Subagents: []agent.Subagent{{Name: "helper", Description: "Helps", Instructions: "Help."}}}}
		}})
	env.Upstream.FailNext(1, http.StatusServiceUnavailable)
	p := params(user("delegate"))
	p.Model = "boss"
	if _, err := client(env, session("traced-sub")).Chat.Completions.New(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	top := rcv.WaitForName(t, "invoke_agent boss")
	task := rcv.WaitForName(t, "execute_tool task")
	sub := rcv.WaitForName(t, "invoke_agent helper")
	if !task.ChildOf(top) || !sub.ChildOf(task) || sub.StringAttr("stackbone.subagent.task_call_id") != task.StringAttr("gen_ai.tool.call.id") {
		t.Fatalf("nesting: task under %s (want %s), helper under %s (want %s)", task.ParentID(), top.SpanID(), sub.ParentID(), task.SpanID())
	}
	rcv.WaitFor(t, "the helper's model call under its span", func(s otlptest.Span) bool { return s.GetName() == "chat test-model" && s.ChildOf(sub) })
	first := rcv.WaitFor(t, "the retried model call", func(s otlptest.Span) bool {
		return s.GetName() == "chat test-model" && s.ChildOf(top) && s.Has("stackbone.attempts")
	})
	retried := false
	for _, e := range first.GetEvents() {
		retried = retried || e.GetName() == "gen_ai.call.retry"
	}
	if first.IntAttr("stackbone.attempts") != 2 || !retried {
		t.Fatalf("the retried call: attempts %d, events %v", first.IntAttr("stackbone.attempts"), first.GetEvents())
	}
	runs := threadRuns(t, env, "traced-sub")
	var d runJSON
	getJSON(t, env.URL+"/v1/runs/"+runs[0].ID, &d)
	if len(d.Steps) == 0 || d.Steps[0].Attempts != 2 {
		t.Fatalf("the first step %+v; want 2 attempts", d.Steps)
	}
	helperSteps := 0
	for _, s := range d.Steps {
		if s.Kind == "model" && s.Subagent == "helper" {
			helperSteps++
		}
	}
	if helperSteps != 1 {
		t.Fatalf("steps %+v; want one model step of the helper", d.Steps)
	}
}

// TestGenAISpanReasoningContent: with STACKBONE_TRACE_CONTENT a chat span's
// output carries the model's reasoning (an OpenAI-compatible server's
// reasoning_content) as a "reasoning" part, through the log redactor as its
// text is.
func TestGenAISpanReasoningContent(t *testing.T) {
	t.Parallel()
	rcv := otlptest.NewReceiver(t)
	tel := rcv.Tracing(t)
	env := stacktest.New(t, stacktest.Options{
		Script: `[{"reply": {"reasoning": "They gave me {{lastUser}}; I will not repeat it.", "text": "Noted."}}]`,
		Configure: func(c *config.Config) {
			c.Tracer, c.TraceContent = tel.TracerProvider(), true
		}})
	const secret = "sk-live-Zq8wTr3pLm5nKx7vBc2d"
	if _, err := client(env).Chat.Completions.New(context.Background(), params(user("my key is "+secret))); err != nil {
		t.Fatal(err)
	}
	chat := rcv.WaitFor(t, "a chat span with its output", func(s otlptest.Span) bool {
		return s.GetName() == "chat test-model" && s.Has("gen_ai.output.messages")
	})
	out := chat.StringAttr("gen_ai.output.messages")
	if !strings.Contains(out, `{"type":"reasoning","content":"They gave me my key is `+redact.Placeholder) || strings.Contains(out, secret) ||
		!strings.Contains(out, `{"type":"text","content":"Noted."}`) {
		t.Fatalf("gen_ai.output.messages = %s; want the reasoning, redacted, before the text", out)
	}
}

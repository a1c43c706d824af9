package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
	"github.com/stackbone/stackbone/internal/usage"
)

// TracerName is the instrumentation scope of the engine's spans.
const TracerName = "github.com/stackbone/stackbone/internal/engine"

// ModelCallInfo is one model call, as Hooks.ModelCall reports it (metrics).
type ModelCallInfo struct {
	Agent, Provider, Model string
	Duration               time.Duration
	Usage                  event.Usage
	// ErrorType is the error's type ("" when the call succeeded).
	ErrorType string
}

// ToolCallInfo is one tool call, as Hooks.ToolCall reports it.
type ToolCallInfo struct {
	Agent, Tool string
	Duration    time.Duration
	Outcome     string
}

// observed is what a run collects of its model and tool calls: the steps
// written with its next checkpoint (or, stateless, with its record), held
// by the run's root execution.
type observed struct {
	mu       sync.Mutex
	steps    []store.Step
	recorded bool // the run's record is written
	// span is the run's invoke_agent span; resumedFrom the run it goes on
	// from after a pause.
	span        trace.Span
	resumedFrom string
}

// addStep keeps a finished step for the run's next write.
func (x *execution) addStep(s store.Step) {
	top := x.top()
	s.Agent, s.Key = top.spec.Name, top.in.Key
	if x.scope != "" {
		s.Subagent, s.ParentCallID = x.subName, x.scope
	}
	top.obs.mu.Lock()
	top.obs.steps = append(top.obs.steps, s)
	top.obs.mu.Unlock()
}

// takeSteps hands over the steps kept since the last write, and the run's
// record when it is not written yet (status is the run's, for the record).
func (x *execution) takeSteps(status string, ended bool) (*store.RunRecord, []store.Step) {
	top := x.top()
	top.obs.mu.Lock()
	defer top.obs.mu.Unlock()
	steps := top.obs.steps
	top.obs.steps = nil
	if top.obs.recorded && !ended {
		return nil, steps
	}
	top.obs.recorded = true
	rec := &store.RunRecord{Tenant: top.tenant, ThreadID: top.threadID, ID: top.runID, Agent: top.spec.Name, Key: top.in.Key,
		ResumedFrom: top.obs.resumedFrom, Status: status, StartedAt: top.begun}
	if top.obs.span != nil {
		if sc := top.obs.span.SpanContext(); sc.IsValid() {
			rec.TraceID, rec.SpanID = sc.TraceID().String(), sc.SpanID().String()
		}
	}
	if ended {
		end := top.r.Now()
		rec.EndedAt = &end
	}
	return rec, steps
}

// tracer is the engine's tracer.
func (r *Runner) tracer() trace.Tracer { return r.Tracer.Tracer(TracerName) }

// startAgentSpan starts the invoke_agent span of an execution (a run, or a
// subagent's work inside it) and returns ctx carrying it. A top-level run
// is a child of the span of the request that started it (parent) or,
// resumed later, linked to the run it continues.
//
// Attributes are built only for a span that records (with tracing off,
// the no-op span costs the hot path nothing more).
func (x *execution) startAgentSpan(ctx context.Context) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}
	if x.root == nil {
		if x.parent.IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, x.parent)
		}
		if x.link.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: x.link,
				Attributes: []attribute.KeyValue{attribute.String("stackbone.link", "resumes_paused_run")}}))
		}
	}
	ctx, span := x.r.tracer().Start(ctx, "invoke_agent "+x.spec.Name, opts...)
	if !span.IsRecording() {
		return ctx, span
	}
	span.SetAttributes(
		attribute.String("gen_ai.operation.name", "invoke_agent"),
		attribute.String("gen_ai.agent.name", x.spec.Name),
		attribute.String("gen_ai.provider.name", x.providerName("")),
		attribute.String("gen_ai.request.model", x.modelName),
	)
	if x.threadID != "" {
		span.SetAttributes(attribute.String("gen_ai.conversation.id", x.threadID))
	}
	if x.root == nil {
		span.SetAttributes(attribute.String("stackbone.run.id", x.runID))
	} else {
		span.SetAttributes(attribute.String("stackbone.subagent.task_call_id", x.scope))
	}
	return ctx, span
}

// endAgentSpan ends an invoke_agent span with the run's outcome.
func endAgentSpan(span trace.Span, outcome string, err error, u event.Usage) {
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", u.InputTokens),
		attribute.Int("gen_ai.usage.output_tokens", u.OutputTokens), attribute.String("stackbone.run.outcome", outcome))
	if err != nil {
		span.SetAttributes(attribute.String("error.type", errorType(err)))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// providerName is the provider of a model reference ("openai/gpt-4o" →
// "openai"); ref "" is the execution's own model.
func (x *execution) providerName(ref string) string {
	if ref == "" {
		ref = x.modelRef
	}
	if ref == "" {
		ref = x.spec.Model
	}
	p, _, ok := strings.Cut(ref, "/")
	if !ok {
		return ""
	}
	return p
}

// modelCall is a model call being made: its span and what its step records.
type modelCall struct {
	x     *execution
	span  trace.Span
	start time.Time
	first *time.Duration
	req   model.Request
	info  model.CallInfo
	usage event.Usage
	done  bool
}

// startModelCall starts the chat span of a model call; ctx carries it to
// the provider (whose HTTP client propagates it upstream).
func (x *execution) startModelCall(ctx context.Context, req model.Request) (context.Context, *modelCall) {
	mc := &modelCall{x: x, start: x.r.Now(), req: req}
	ctx, mc.span = x.r.tracer().Start(ctx, "chat "+req.Model, trace.WithSpanKind(trace.SpanKindClient))
	if !mc.span.IsRecording() {
		return ctx, mc
	}
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", x.providerName("")),
		attribute.String("gen_ai.request.model", req.Model),
		attribute.String("gen_ai.agent.name", x.spec.Name),
	}
	if x.threadID != "" {
		attrs = append(attrs, attribute.String("gen_ai.conversation.id", x.threadID))
	}
	if req.MaxTokens > 0 {
		attrs = append(attrs, attribute.Int("gen_ai.request.max_tokens", req.MaxTokens))
	}
	if req.Temperature != nil {
		attrs = append(attrs, attribute.Float64("gen_ai.request.temperature", *req.Temperature))
	}
	if req.TopP != nil {
		attrs = append(attrs, attribute.Float64("gen_ai.request.top_p", *req.TopP))
	}
	if req.Seed != nil {
		attrs = append(attrs, attribute.Int64("gen_ai.request.seed", *req.Seed))
	}
	if len(req.StopSequences) > 0 {
		attrs = append(attrs, attribute.StringSlice("gen_ai.request.stop_sequences", req.StopSequences))
	}
	if req.ReasoningEffort != "" {
		attrs = append(attrs, attribute.String("gen_ai.request.reasoning_effort", req.ReasoningEffort))
	}
	if req.ResponseFormat != nil {
		attrs = append(attrs, attribute.String("gen_ai.output.type", "json"))
	}
	mc.span.SetAttributes(attrs...)
	if x.r.TraceContent {
		mc.span.SetAttributes(attribute.String("gen_ai.input.messages", x.r.redactText(inputMessages(req))))
		if req.System != "" {
			mc.span.SetAttributes(attribute.String("gen_ai.system_instructions", x.r.redactText(systemInstructions(req.System))))
		}
		if len(req.Tools) > 0 {
			mc.span.SetAttributes(attribute.String("gen_ai.tool.definitions", x.r.redactText(toolDefinitions(req.Tools))))
		}
	}
	return ctx, mc
}

// chunk notes a chunk of the call's stream.
func (mc *modelCall) chunk(ch model.Chunk) {
	switch ch.Type {
	case model.Restart:
		mc.first = nil
		mc.span.AddEvent("gen_ai.call.restart")
		return
	case model.Finish:
		mc.usage = ch.Usage
		if ch.Call != nil {
			mc.info = *ch.Call
		}
	}
	if mc.first == nil && ch.Type != model.Finish {
		d := mc.x.r.Now().Sub(mc.start)
		mc.first = &d
	}
}

// end ends the call: its span gets the response's attributes, its step is
// kept for the run's next write, and the hooks hear of it. msg is the
// assembled answer (for content capture).
func (mc *modelCall) end(msg *message.Message, err error) {
	if mc.done {
		return
	}
	mc.done = true
	x := mc.x
	d := x.r.Now().Sub(mc.start)
	provider := x.providerName(mc.info.Ref)
	name := mc.req.Model
	if mc.info.Ref != "" {
		if _, m, ok := strings.Cut(mc.info.Ref, "/"); ok {
			name = m
		}
	}
	u := mc.usage
	outcome, etype := store.OutcomeOK, ""
	if err != nil {
		etype = errorType(err)
		outcome = store.OutcomeError
		if errors.Is(err, context.Canceled) {
			outcome = store.OutcomeCancelled
		}
		if errors.Is(err, model.ErrCallTimeout) || errors.Is(err, model.ErrIdleTimeout) {
			outcome = store.OutcomeTimedOut
		}
	}
	var out string
	if (x.r.TraceContent || x.r.KeepContent) && msg != nil {
		out = outputMessages(*msg, mc.info.FinishReason)
	}
	if mc.span.IsRecording() {
		mc.annotate(provider, err, etype, out)
	}
	mc.span.End()
	var content json.RawMessage
	if x.r.KeepContent && out != "" {
		content = x.r.stepContent(mc.req, out)
	}
	attempts := max(mc.info.Attempts, 1)
	errText := ""
	if err != nil {
		errText = x.r.redactText(err.Error())
	}
	x.addStep(store.Step{ID: x.r.NewID("step"), Kind: store.StepModel, Name: name, Provider: provider,
		ResponseModel: mc.info.ResponseModel, ResponseID: mc.info.ResponseID, StartedAt: mc.start, Duration: d,
		FirstChunk: mc.first, Usage: u, CostNanos: x.r.Prices.CostOf(provider, name, u), FinishReason: mc.info.FinishReason,
		Attempts: attempts, Outcome: outcome, Error: errText, Content: content})
	if h := x.r.Hooks.ModelCall; h != nil {
		h(ModelCallInfo{Agent: x.top().spec.Name, Provider: provider, Model: name, Duration: d, Usage: u, ErrorType: etype})
	}
}

// annotate puts what the call's response told on its (recording) span:
// the retries, usage, response, time to first chunk, the error, and the
// answer (out) when content is traced.
func (mc *modelCall) annotate(provider string, err error, etype, out string) {
	x, span, u := mc.x, mc.span, mc.usage
	for i, r := range mc.info.Retries {
		span.AddEvent("gen_ai.call.retry", trace.WithAttributes(attribute.Int("attempt", i+1), attribute.String("error", x.r.redactText(r))))
	}
	span.SetAttributes(
		attribute.String("gen_ai.provider.name", provider),
		attribute.Int("gen_ai.usage.input_tokens", u.InputTokens),
		attribute.Int("gen_ai.usage.output_tokens", u.OutputTokens),
	)
	if u.CachedInputTokens > 0 {
		span.SetAttributes(attribute.Int("gen_ai.usage.cache_read.input_tokens", u.CachedInputTokens))
	}
	if u.ReasoningTokens > 0 {
		span.SetAttributes(attribute.Int("gen_ai.usage.reasoning.output_tokens", u.ReasoningTokens))
	}
	if mc.info.ResponseID != "" {
		span.SetAttributes(attribute.String("gen_ai.response.id", mc.info.ResponseID))
	}
	if mc.info.ResponseModel != "" {
		span.SetAttributes(attribute.String("gen_ai.response.model", mc.info.ResponseModel))
	}
	if mc.info.FinishReason != "" {
		span.SetAttributes(attribute.StringSlice("gen_ai.response.finish_reasons", []string{mc.info.FinishReason}))
	}
	if mc.first != nil {
		span.SetAttributes(attribute.Float64("gen_ai.response.time_to_first_chunk", mc.first.Seconds()))
	}
	if mc.info.Attempts > 1 {
		span.SetAttributes(attribute.Int("stackbone.attempts", mc.info.Attempts))
	}
	if err != nil {
		span.SetAttributes(attribute.String("error.type", etype))
		span.SetStatus(codes.Error, x.r.redactText(err.Error()))
	}
	if x.r.TraceContent && out != "" {
		span.SetAttributes(attribute.String("gen_ai.output.messages", x.r.redactText(out)))
	}
}

// toolCall is a tool call running: its span and start.
type toolCall struct {
	span  trace.Span
	start time.Time
}

// startToolCall starts the execute_tool span of a call.
func (x *execution) startToolCall(ctx context.Context, t *tool.Tool, c message.ToolCall, args json.RawMessage) (context.Context, *toolCall) {
	kind := "function"
	if x.mcp[c.Name] {
		kind = "extension" // an MCP server's
	}
	ctx, span := x.r.tracer().Start(ctx, "execute_tool "+c.Name, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", c.Name),
			attribute.String("gen_ai.tool.call.id", c.ID),
			attribute.String("gen_ai.tool.type", kind),
		)
		if t.Description != "" {
			span.SetAttributes(attribute.String("gen_ai.tool.description", t.Description))
		}
		if x.r.TraceContent {
			span.SetAttributes(attribute.String("gen_ai.tool.call.arguments", x.r.redactText(string(args))))
		}
	}
	return ctx, &toolCall{span: span, start: x.r.Now()}
}

// endToolCall ends a call's span and keeps its step.
func (x *execution) endToolCall(tc *toolCall, c message.ToolCall, res *callResult) {
	d := x.r.Now().Sub(tc.start)
	outcome := store.OutcomeOK
	if res != nil && res.outcome != "" {
		outcome = res.outcome
	} else if res != nil && res.paused == nil && res.msg.IsError {
		outcome = store.OutcomeError
	}
	recording := tc.span.IsRecording()
	if res != nil && res.paused == nil && x.r.TraceContent && recording {
		tc.span.SetAttributes(attribute.String("gen_ai.tool.call.result", x.r.redactText(res.msg.Content)))
	}
	errText := ""
	if outcome != store.OutcomeOK && res != nil && res.paused == nil {
		errText = x.r.redactText(res.msg.Content)
		if recording {
			tc.span.SetAttributes(attribute.String("error.type", outcome))
			tc.span.SetStatus(codes.Error, errText)
		}
	}
	if res != nil && res.paused != nil {
		outcome = store.OutcomePaused
		if recording {
			tc.span.AddEvent("stackbone.paused", trace.WithAttributes(attribute.Int("decisions", len(res.paused.Interrupts))))
		}
	}
	tc.span.End()
	x.addStep(store.Step{ID: x.r.NewID("step"), Kind: store.StepTool, Name: c.Name, ToolCallID: c.ID, StartedAt: tc.start,
		Duration: d, Outcome: outcome, Error: errText})
	if h := x.r.Hooks.ToolCall; h != nil {
		h(ToolCallInfo{Agent: x.top().spec.Name, Tool: c.Name, Duration: d, Outcome: outcome})
	}
}

// settledCall keeps the step of a call that did not run: rejected,
// skipped or expired by a decision, or made in doubt.
func (x *execution) settledCall(c message.ToolCall, outcome, note string) {
	x.addStep(store.Step{ID: x.r.NewID("step"), Kind: store.StepTool, Name: c.Name, ToolCallID: c.ID, StartedAt: x.r.Now(),
		Outcome: outcome, Error: x.r.redactText(note)})
}

// pauseEvent marks a run's span with the decisions it waits on.
func pauseEvent(span trace.Span, out *event.Outcome) {
	if out == nil || out.Type != event.Interrupt || !span.IsRecording() {
		return
	}
	for _, it := range out.Interrupts {
		span.AddEvent("stackbone.approval.pending", trace.WithAttributes(attribute.String("stackbone.decision.id", it.ID),
			attribute.String("gen_ai.tool.name", it.Tool), attribute.String("gen_ai.tool.call.id", it.ToolCallID),
			attribute.String("stackbone.decision.reason", it.Reason)))
	}
}

// errorType is the error.type of err: its public code when it has one, else
// its Go type.
func errorType(err error) string {
	var me *model.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, model.ErrCallTimeout), errors.Is(err, model.ErrIdleTimeout):
		return "timeout"
	case errors.As(err, &me) && me.Status > 0:
		return "http_" + strconv.Itoa(me.Status)
	}
	var coded interface{ Code() string }
	if errors.As(err, &coded) {
		return coded.Code()
	}
	return "_OTHER"
}

// The GenAI conventions' message shapes, for content capture.
type otelPart struct {
	Type      string          `json:"type"`
	Content   string          `json:"content,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Response  string          `json:"response,omitempty"`
}

type otelMessage struct {
	Role         string     `json:"role"`
	Parts        []otelPart `json:"parts"`
	FinishReason string     `json:"finish_reason,omitempty"`
}

func messageParts(m message.Message) otelMessage {
	om := otelMessage{Role: string(m.Role)}
	if m.Role == message.Tool {
		om.Parts = append(om.Parts, otelPart{Type: "tool_call_response", ID: m.ToolCallID, Response: m.Content})
		return om
	}
	for _, r := range m.Reasoning {
		if r.Shown() {
			om.Parts = append(om.Parts, otelPart{Type: "reasoning", Content: r.Text})
		}
	}
	if m.Content != "" {
		om.Parts = append(om.Parts, otelPart{Type: "text", Content: m.Content})
	}
	for _, c := range m.ToolCalls {
		args := json.RawMessage(c.Arguments)
		if !json.Valid(args) {
			args = nil
		}
		om.Parts = append(om.Parts, otelPart{Type: "tool_call", ID: c.ID, Name: c.Name, Arguments: args})
	}
	return om
}

func inputMessages(req model.Request) string {
	out := make([]otelMessage, 0, len(req.Messages))
	for _, m := range req.Messages {
		out = append(out, messageParts(m))
	}
	b, _ := json.Marshal(out)
	return string(b)
}

func systemInstructions(s string) string {
	b, _ := json.Marshal([]otelPart{{Type: "text", Content: s}})
	return string(b)
}

func toolDefinitions(tools []model.ToolDef) string {
	type def struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	}
	out := make([]def, 0, len(tools))
	for _, t := range tools {
		out = append(out, def{Type: "function", Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	b, _ := json.Marshal(out)
	return string(b)
}

func outputMessages(m message.Message, finish string) string {
	om := messageParts(m)
	om.FinishReason = finish
	b, _ := json.Marshal([]otelMessage{om})
	return string(b)
}

// maxStepContent bounds the messages a model step keeps of its call.
const maxStepContent = 64 << 10

// stepContent is what a model step keeps of its call when content is
// captured: the request (system, messages, tools, settings) and the answer,
// redacted.
func (r *Runner) stepContent(req model.Request, output string) json.RawMessage {
	settings := map[string]any{}
	if req.MaxTokens > 0 {
		settings["maxTokens"] = req.MaxTokens
	}
	if req.Temperature != nil {
		settings["temperature"] = *req.Temperature
	}
	if req.TopP != nil {
		settings["topP"] = *req.TopP
	}
	if req.ToolChoice != "" {
		settings["toolChoice"] = req.ToolChoice
	}
	if req.ReasoningEffort != "" {
		settings["reasoningEffort"] = req.ReasoningEffort
	}
	// A long conversation is kept from its end: what a call sent is at
	// most maxStepContent bytes of its latest messages (the rest is
	// counted), so a thread's stored content grows with its length, not
	// its square.
	msgs, omitted := req, 0
	sent := inputMessages(msgs)
	for len(sent) > maxStepContent && len(msgs.Messages) > 1 {
		n := max(1, len(msgs.Messages)/4)
		msgs.Messages, omitted = msgs.Messages[n:], omitted+n
		sent = inputMessages(msgs)
	}
	body := map[string]any{
		"system":   req.System,
		"messages": json.RawMessage(sent),
		"tools":    json.RawMessage(toolDefinitions(req.Tools)),
		"settings": settings,
		"output":   json.RawMessage(output),
	}
	if omitted > 0 {
		body["omittedMessages"] = omitted
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil
	}
	return json.RawMessage(r.redactText(string(b)))
}

// redactText passes free text through the configured redactor.
func (r *Runner) redactText(s string) string {
	if r.Redact == nil {
		return s
	}
	return r.Redact(s)
}

// observedTool runs a tool call under its execute_tool span and keeps its
// step.
func (x *execution) observedTool(ctx context.Context, t *tool.Tool, c message.ToolCall, args json.RawMessage) *callResult {
	ctx, tc := x.startToolCall(ctx, t, c, args)
	res := x.execTool(ctx, t, c, args)
	x.endToolCall(tc, c, res)
	return res
}

// recordStateless stores a stateless run's record and steps when it made
// any call (usage without a thread). A failure to store them is logged:
// the turn's answer is not withheld for it.
func (x *execution) recordStateless(outcome string, err error) {
	rec, steps := x.takeSteps(outcome, true)
	if len(steps) == 0 {
		return
	}
	rec.Status = string(store.Idle)
	if err != nil {
		rec.Status, rec.Error = string(store.Failed), x.r.redactText(err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if werr := x.r.Store.RecordRun(ctx, *rec, steps); werr != nil {
		x.r.Logger.Error("store a stateless run's usage", "agent", x.spec.Name, "run", x.runID, "err", werr)
	}
}

// resumes notes the run a claimed run continues (the thread's latest): its
// id for the run's record, its span as the new run's link (it ran earlier,
// perhaps on another replica).
func (x *execution) resumes(ctx context.Context) error {
	prev, err := x.r.Store.LastRun(ctx, x.tenant, x.threadID)
	if err != nil || prev == nil || prev.ID == x.runID {
		return err
	}
	x.obs.resumedFrom = prev.ID
	tid, terr := trace.TraceIDFromHex(prev.TraceID)
	sid, serr := trace.SpanIDFromHex(prev.SpanID)
	if terr == nil && serr == nil {
		x.link = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	}
	return nil
}

// overBudget returns an *usage.ExceededError when a budget that limits the
// execution's turns is spent, as the store counts it now (every replica's
// finished steps; a step in flight elsewhere is not counted yet). The
// first time a budget is found spent in its period a budget.exceeded
// webhook notice goes out (once, whichever replica finds it).
func (x *execution) overBudget(ctx context.Context) error {
	if len(x.r.Budgets) == 0 {
		return nil
	}
	top := x.top()
	now := x.r.Now()
	for _, b := range x.r.Budgets {
		if !b.Applies(top.tenant, top.spec.Name, top.in.Key) {
			continue
		}
		st, err := b.Status(ctx, x.r.Store, top.tenant, now)
		if err != nil {
			return err
		}
		if !st.Exceeded {
			continue
		}
		if err := x.r.Store.NotifyOnce(ctx, budgetNotice(top.tenant, top.spec.Name, st, now)); err != nil {
			x.r.Logger.Error("store the budget.exceeded notice", "budget", b.Name, "err", err)
		}
		x.r.Logger.Info("budget spent: turn refused", "budget", b.Name, "tenant", top.tenant, "agent", top.spec.Name,
			"thread", top.threadID, "usedTokens", st.UsedTokens, "usedUSD", usage.USD(st.UsedNanos))
		return &usage.ExceededError{Status: st, Wait: st.ResetsAt.Sub(now)}
	}
	return nil
}

// budgetNotice is the budget.exceeded webhook notice of a spent budget.
func budgetNotice(tenant, agentName string, st usage.Status, now time.Time) store.Notice {
	data, _ := json.Marshal(map[string]any{
		"tenant": tenant, "agent": agentName, "budget": st.Name, "scope": st.Scope, "match": st.Match, "period": st.Period,
		"periodStart": st.From.UTC().Format(time.RFC3339), "resetsAt": st.ResetsAt.UTC().Format(time.RFC3339),
		"limitTokens": st.Tokens, "limitUsd": st.USD, "usedTokens": st.UsedTokens, "usedUsd": usage.USD(st.UsedNanos),
	})
	return store.Notice{ID: st.NoticeID(tenant, st.From), Type: store.NoticeBudgetExceeded, Tenant: tenant, At: now, Data: data}
}

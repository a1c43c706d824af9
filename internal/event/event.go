// Package event defines the canonical events a run emits. Every wire encoder
// writes straight from these typed events; no wire re-parses another wire's
// bytes.
package event

import (
	"encoding/json"

	"github.com/stackbone/stackbone/internal/message"
)

// Type names an event.
type Type string

// The canonical event types.
const (
	RunStarted       Type = "run_started"
	RunFinished      Type = "run_finished"
	RunError         Type = "run_error"
	TextStart        Type = "text_start"
	TextDelta        Type = "text_delta"
	TextEnd          Type = "text_end"
	ToolCallStart    Type = "tool_call_start"
	ToolCallArgs     Type = "tool_call_args"
	ToolCallEnd      Type = "tool_call_end"
	ToolResult       Type = "tool_result"
	StateSnapshot    Type = "state_snapshot"
	StateDelta       Type = "state_delta"
	MessagesSnapshot Type = "messages_snapshot"
	StepStarted      Type = "step_started"
	StepFinished     Type = "step_finished"
	SubagentStarted  Type = "subagent_started"
	SubagentFinished Type = "subagent_finished"
	// DecisionMade is published (live only) when a pending decision is
	// decided, whatever path decided it; Status says how.
	DecisionMade Type = "decision_made"
	// InputUsage is sent to the run's own consumer only (never stored or
	// published) once per model step of the turn, as soon as the provider
	// reports the step's input tokens: before its output when the provider
	// knows them at the start, else when the step ends (0 when it reported
	// none). MessageID is the step's assistant message; Usage holds the
	// count (InputTokens only).
	InputUsage Type = "input_usage"
	// QuestionAsked is stored when a running tool asks a human a question
	// (an MCP server's elicitation); Question holds it as a pending
	// decision. The run goes on once someone answers.
	QuestionAsked Type = "question_asked"
	// ControlChanged travels only on a thread's control topic
	// (bus.PublishControl), never among its events: the thread's stored
	// run control changed (a cancel of RunID was requested), and the
	// replica that drives that run reads it.
	ControlChanged Type = "control_changed"
	// Reasoning is sent live (never stored) when the model finishes a
	// block of visible reasoning (Anthropic's extended thinking, an
	// OpenAI-compatible server's reasoning_content) in a step:
	// MessageID is the step's assistant message and Content the
	// reasoning's text. It comes before the step's text and calls. The
	// block itself is stored with the assistant message.
	Reasoning Type = "reasoning"
)

// Event is one thing that happened in a run. Which fields are set depends on
// Type; unset fields are omitted from JSON.
type Event struct {
	Type     Type   `json:"type"`
	ThreadID string `json:"threadId,omitempty"`
	RunID    string `json:"runId,omitempty"`
	// Seq is the event's position in its thread's stored event log (0 for
	// live-only events such as token deltas).
	Seq int64 `json:"seq,omitempty"`
	// Time is a Unix millisecond timestamp.
	Time int64 `json:"time,omitempty"`

	// MessageID is the assistant message of text events, the parent message of
	// tool call events, and the tool message of a ToolResult.
	MessageID string `json:"messageId,omitempty"`
	// Delta is a text fragment (TextDelta) or an arguments fragment (ToolCallArgs).
	Delta string `json:"delta,omitempty"`
	// Arguments are a tool call's whole arguments, JSON text (the stored
	// ToolCallEnd).
	Arguments string `json:"arguments,omitempty"`

	ToolCallID string `json:"toolCallId,omitempty"`
	ToolName   string `json:"toolName,omitempty"`
	// Content is a tool result's text.
	Content string `json:"content,omitempty"`
	IsError bool   `json:"isError,omitempty"`

	// Snapshot is the full state (StateSnapshot).
	Snapshot json.RawMessage `json:"snapshot,omitempty"`
	// Patch is an RFC 6902 JSON Patch (StateDelta).
	Patch json.RawMessage `json:"patch,omitempty"`
	// Messages is the whole conversation (MessagesSnapshot).
	Messages []message.Message `json:"messages,omitempty"`

	// StepName names a step (the subagent's name for subagent work).
	StepName string `json:"stepName,omitempty"`
	// SubagentRunID is set on events produced by a subagent.
	SubagentRunID string `json:"subagentRunId,omitempty"`
	// Subagent is the subagent's name (SubagentStarted).
	Subagent string `json:"subagent,omitempty"`
	// ParentToolCallID is the `task` call that started a subagent.
	ParentToolCallID string `json:"parentToolCallId,omitempty"`

	// Outcome is set on RunFinished.
	Outcome *Outcome `json:"outcome,omitempty"`
	// Question is the pending decision of a QuestionAsked.
	Question *InterruptInfo `json:"question,omitempty"`
	// Usage is set on RunFinished: tokens used by the whole turn (and on
	// InputUsage).
	Usage *Usage `json:"usage,omitempty"`
	// Code and Message describe a RunError (public text only).
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	// Status is the decided interrupt's status, approved or rejected
	// (DecisionMade).
	Status string `json:"status,omitempty"`
	// Owner is the end user a DecisionMade's interrupt belongs to
	// (store.Interrupt.Owner; '' for the tenant's), so that a decision of
	// no thread reaches only those who see it.
	Owner string `json:"owner,omitempty"`
	// Err is the typed cause of a RunError, for the run's own consumer
	// only (never stored or published): the HTTP edge maps it to the
	// wire's error kind and status, as it maps an error returned before
	// the run started.
	Err error `json:"-"`
}

// OutcomeType says how a run ended.
type OutcomeType string

// The outcomes of a run.
const (
	Success   OutcomeType = "success"
	Interrupt OutcomeType = "interrupt"
)

// StopReason says why the last model step of a turn stopped.
type StopReason string

// Stop reasons, named as on the OpenAI wire.
const (
	StopEnd       StopReason = "stop"
	StopToolCalls StopReason = "tool_calls"
	StopLength    StopReason = "length"
)

// Outcome is how a run finished.
type Outcome struct {
	Type OutcomeType `json:"type"`
	// Stop is why the last model step stopped.
	Stop StopReason `json:"stop,omitempty"`
	// Interrupts are the pending decisions that paused the run.
	Interrupts []InterruptInfo `json:"interrupts,omitempty"`
	// PendingCalls are the calls the client must see as tool calls because
	// the turn stopped on them: client tools, and calls awaiting approval.
	PendingCalls []message.ToolCall `json:"pendingCalls,omitempty"`
	// PendingMessageID is the assistant message that holds PendingCalls.
	PendingMessageID string `json:"pendingMessageId,omitempty"`
}

// InterruptInfo is what a wire needs to show of a pending decision.
type InterruptInfo struct {
	ID               string          `json:"id"`
	ToolCallID       string          `json:"toolCallId"`
	Tool             string          `json:"tool"`
	Description      string          `json:"description,omitempty"`
	AllowedDecisions []string        `json:"allowedDecisions"`
	ResponseSchema   json.RawMessage `json:"responseSchema"`
	Subagent         string          `json:"subagent,omitempty"`
	// Reason is approval, in_doubt (a call that may already have run
	// before a crash: retry or skip) or elicitation (a question a running
	// tool asks); see store.Interrupt.
	Reason string `json:"reason,omitempty"`
}

// Usage counts tokens.
type Usage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
	// CachedInputTokens are the input tokens the provider read from its
	// prompt cache (part of InputTokens), where it reports them.
	CachedInputTokens int `json:"cachedInputTokens,omitempty"`
	// ReasoningTokens are the output tokens spent on reasoning (part of
	// OutputTokens), where the provider reports them.
	ReasoningTokens int `json:"reasoningTokens,omitempty"`
}

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{InputTokens: u.InputTokens + o.InputTokens, OutputTokens: u.OutputTokens + o.OutputTokens,
		CachedInputTokens: u.CachedInputTokens + o.CachedInputTokens, ReasoningTokens: u.ReasoningTokens + o.ReasoningTokens}
}

// WaitingNote is the short assistant text the chat wires (OpenAI, Anthropic)
// add to a turn that paused for a human decision, so a client that does not
// own the pending tool call still has something to show ("Waiting for
// approval: Refund order ord_1 for 5"; "Waiting for a decision: …" when a
// call is in doubt after a crash). ok is false for any other outcome.
// The note is part of the answer on those wires only: it is not stored, and
// AG-UI shows the interrupt itself.
func WaitingNote(o *Outcome) (text string, ok bool) {
	if o == nil || o.Type != Interrupt || len(o.Interrupts) == 0 {
		return "", false
	}
	head := "Waiting for approval: "
	for _, in := range o.Interrupts {
		if in.Reason != "" && in.Reason != "approval" {
			head = "Waiting for a decision: "
		}
	}
	b := []byte(head)
	for i, in := range o.Interrupts {
		if i > 0 {
			b = append(b, "; "...)
		}
		if in.Description != "" {
			b = append(b, in.Description...)
		} else {
			b = append(b, "a call to "...)
			b = append(b, in.Tool...)
		}
	}
	b = append(b, '.')
	return string(b), true
}

// WaitingNoteMessageID is the message id the wires give a WaitingNote's
// text, so it reads as a paragraph of its own.
const WaitingNoteMessageID = "waiting-note"

package agui

import "encoding/json"

// ProtocolVersion is the AG-UI version this wire speaks (RUN_STARTED).
const ProtocolVersion = "1.0"

// The wire structs below mirror AG-UI 1.0 exactly: required fields are always
// written (even when empty), optional ones are omitted when unset, never
// written as null.

type base struct {
	Type      string `json:"type"`
	Timestamp int64  `json:"timestamp,omitempty"`
}

type runStarted struct {
	base
	ThreadID        string `json:"threadId"`
	RunID           string `json:"runId"`
	ProtocolVersion string `json:"protocolVersion"`
}

type runFinished struct {
	base
	ThreadID string       `json:"threadId"`
	RunID    string       `json:"runId"`
	Outcome  *outcome     `json:"outcome,omitempty"`
	Usage    []tokenUsage `json:"usage,omitempty"`
}

type tokenUsage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
	TotalTokens  int `json:"totalTokens"`
}

type outcome struct {
	Type               string      `json:"type"`
	PendingToolCallIDs []string    `json:"pendingToolCallIds,omitempty"`
	Interrupts         []interrupt `json:"interrupts,omitempty"`
}

// interrupt is an AG-UI Interrupt plus Stackbone's description and
// allowedDecisions (unknown to the 1.0 schema; clients that validate strip
// them, so message repeats the description and metadata.stackbone carries
// both).
type interrupt struct {
	ID               string          `json:"id"`
	Reason           string          `json:"reason"`
	ToolCallID       string          `json:"toolCallId,omitempty"`
	Description      string          `json:"description,omitempty"`
	AllowedDecisions []string        `json:"allowedDecisions"`
	ResponseSchema   json.RawMessage `json:"responseSchema,omitempty"`
	Message          string          `json:"message,omitempty"`
	Metadata         map[string]any  `json:"metadata,omitempty"`
}

// custom is an AG-UI CUSTOM event.
type custom struct {
	base
	Name  string `json:"name"`
	Value any    `json:"value"`
}

// QuestionEvent names the CUSTOM event of a question a running tool asks
// (an MCP server's elicitation): its value is the pending interrupt, which
// a resume answers (payload {"editedArgs": answer}, or cancelled to
// decline) while the run goes on.
const QuestionEvent = "stackbone.question"

type runError struct {
	base
	Message string `json:"message"`
	Code    string `json:"code,omitempty"`
}

type step struct {
	base
	StepName      string `json:"stepName"`
	SubagentRunID string `json:"subagentRunId,omitempty"`
}

type textStart struct {
	base
	MessageID     string `json:"messageId"`
	Role          string `json:"role"`
	SubagentRunID string `json:"subagentRunId,omitempty"`
}

type textContent struct {
	base
	MessageID     string `json:"messageId"`
	Delta         string `json:"delta"`
	SubagentRunID string `json:"subagentRunId,omitempty"`
}

type textEnd struct {
	base
	MessageID     string `json:"messageId"`
	SubagentRunID string `json:"subagentRunId,omitempty"`
}

type toolStart struct {
	base
	ToolCallID      string `json:"toolCallId"`
	ToolCallName    string `json:"toolCallName"`
	ParentMessageID string `json:"parentMessageId,omitempty"`
	SubagentRunID   string `json:"subagentRunId,omitempty"`
}

type toolArgs struct {
	base
	ToolCallID    string `json:"toolCallId"`
	Delta         string `json:"delta"`
	SubagentRunID string `json:"subagentRunId,omitempty"`
}

type toolEnd struct {
	base
	ToolCallID    string `json:"toolCallId"`
	SubagentRunID string `json:"subagentRunId,omitempty"`
}

type toolResult struct {
	base
	MessageID     string `json:"messageId"`
	ToolCallID    string `json:"toolCallId"`
	Content       string `json:"content"`
	Role          string `json:"role"`
	SubagentRunID string `json:"subagentRunId,omitempty"`
}

type stateSnapshot struct {
	base
	Snapshot json.RawMessage `json:"snapshot"`
}

type stateDelta struct {
	base
	Delta json.RawMessage `json:"delta"`
}

type messagesSnapshot struct {
	base
	Messages []wireMessage `json:"messages"`
}

type subagentStarted struct {
	base
	SubagentRunID    string `json:"subagentRunId"`
	Name             string `json:"name"`
	ParentToolCallID string `json:"parentToolCallId,omitempty"`
}

type subagentFinished struct {
	base
	SubagentRunID string           `json:"subagentRunId"`
	Outcome       *subagentOutcome `json:"outcome,omitempty"`
}

type subagentOutcome struct {
	Type string `json:"type"`
}

type subagentError struct {
	base
	SubagentRunID string `json:"subagentRunId"`
	Message       string `json:"message"`
}

// wireMessage is an AG-UI message in a MESSAGES_SNAPSHOT.
type wireMessage struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"`
	ToolCalls  []wireToolCall  `json:"toolCalls,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	Error      string          `json:"error,omitempty"`
	// SubagentRunID attributes a message of a subagent's conversation.
	SubagentRunID string `json:"subagentRunId,omitempty"`
}

type wireToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type wirePart struct {
	Type   string      `json:"type"`
	Text   *string     `json:"text,omitempty"`
	Source *wireSource `json:"source,omitempty"`
}

type wireSource struct {
	Type     string `json:"type"`
	Value    string `json:"value"`
	MimeType string `json:"mimeType,omitempty"`
}

// reasoningSpan is REASONING_START or REASONING_END.
type reasoningSpan struct {
	base
	MessageID     string `json:"messageId"`
	SubagentRunID string `json:"subagentRunId,omitempty"`
}

type reasoningMessageStart struct {
	base
	MessageID     string `json:"messageId"`
	Role          string `json:"role"`
	SubagentRunID string `json:"subagentRunId,omitempty"`
}

// reasoningMessage is REASONING_MESSAGE_CONTENT (with Delta) or
// REASONING_MESSAGE_END.
type reasoningMessage struct {
	base
	MessageID     string `json:"messageId"`
	Delta         string `json:"delta,omitempty"`
	SubagentRunID string `json:"subagentRunId,omitempty"`
}

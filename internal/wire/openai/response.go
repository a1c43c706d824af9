package openai

import (
	"net/http"
	"strings"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/wire"
	"github.com/stackbone/stackbone/internal/wire/httpjson"
)

// Completion is a non-stream response body.
type Completion struct {
	ID                string           `json:"id"`
	Object            string           `json:"object"`
	Created           int64            `json:"created"`
	Model             string           `json:"model"`
	Choices           []CompletionItem `json:"choices"`
	Usage             Usage            `json:"usage"`
	SystemFingerprint *string          `json:"system_fingerprint"`
}

// CompletionItem is the one choice of a completion.
type CompletionItem struct {
	Index        int             `json:"index"`
	Message      ResponseMessage `json:"message"`
	Logprobs     *struct{}       `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
}

// ResponseMessage is the assistant message of a completion.
type ResponseMessage struct {
	Role      string     `json:"role"`
	Content   *string    `json:"content"`
	Refusal   *string    `json:"refusal"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ReasoningContent is the model's reasoning in the turn, as
	// OpenAI-compatible servers (DeepSeek, vLLM) answer it; OpenAI's SDKs
	// keep it as an extra field.
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

// Usage counts tokens.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func usageOf(u *event.Usage) Usage {
	if u == nil {
		return Usage{}
	}
	return Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.InputTokens + u.OutputTokens}
}

// finishReason names how a finished run ended on this wire.
func finishReason(o *event.Outcome) string {
	if o == nil {
		return "stop"
	}
	if len(o.PendingCalls) > 0 {
		return "tool_calls"
	}
	if o.Stop == event.StopLength {
		return "length"
	}
	return "stop"
}

// toolCalls renders the calls a turn stopped on.
func toolCalls(calls []message.ToolCall, withIndex bool) []ToolCall {
	out := make([]ToolCall, len(calls))
	for i, c := range calls {
		out[i] = ToolCall{ID: c.ID, Type: "function", Function: FunctionCall{Name: c.Name, Arguments: c.Arguments}}
		if withIndex {
			idx := i
			out[i].Index = &idx
		}
	}
	return out
}

// reasoningSep parts the blocks of reasoning of a turn (one per model step
// that reasoned) in reasoning_content.
const reasoningSep = "\n\n"

// Collector builds a non-stream completion from a run's events.
type Collector struct {
	c         Completion
	text      strings.Builder
	reasoning strings.Builder
	j         wire.TextJoiner
	err       error
}

// NewCollector starts a completion.
func NewCollector(id, model string, created int64) *Collector {
	return &Collector{c: Completion{ID: id, Object: "chat.completion", Created: created, Model: model}}
}

// Add folds one event in. A RunError is kept and returned by Result.
func (c *Collector) Add(e event.Event) {
	if e.SubagentRunID != "" {
		return // subagent work stays inside the turn
	}
	switch e.Type {
	case event.TextDelta:
		c.text.WriteString(c.j.Piece(e))
	case event.Reasoning:
		if e.Content == "" {
			return
		}
		if c.reasoning.Len() > 0 {
			c.reasoning.WriteString(reasoningSep)
		}
		c.reasoning.WriteString(e.Content)
	case event.RunFinished:
		if note, ok := event.WaitingNote(e.Outcome); ok {
			c.text.WriteString(c.j.Piece(event.Event{MessageID: event.WaitingNoteMessageID, Delta: note}))
		}
		msg := ResponseMessage{Role: "assistant", ReasoningContent: c.reasoning.String()}
		if e.Outcome != nil && len(e.Outcome.PendingCalls) > 0 {
			msg.ToolCalls = toolCalls(e.Outcome.PendingCalls, false)
		}
		if c.text.Len() > 0 || msg.ToolCalls == nil {
			s := c.text.String()
			msg.Content = &s
		}
		c.c.Choices = []CompletionItem{{Index: 0, Message: msg, FinishReason: finishReason(e.Outcome)}}
		c.c.Usage = usageOf(e.Usage)
	case event.RunError:
		c.err = apierror.OfRunError(e)
	}
}

// Result returns the completion or the run's error.
func (c *Collector) Result() (*Completion, error) {
	if c.err != nil {
		return nil, c.err
	}
	if c.c.Choices == nil {
		return nil, apierror.IncompleteRun()
	}
	return &c.c, nil
}

// ErrorBody is the OpenAI error envelope.
type ErrorBody struct {
	Error ErrorObject `json:"error"`
}

// ErrorObject is the inner error. Param is omitted when empty.
type ErrorObject struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   string `json:"param,omitempty"`
	Code    string `json:"code,omitempty"`
	Details any    `json:"details,omitempty"`
}

// ErrorOf renders an API error in OpenAI's envelope.
func ErrorOf(e *apierror.Error) ErrorBody {
	return ErrorBody{Error: ErrorObject{Message: e.Message, Type: errorType(e), Param: e.Param, Code: e.Code, Details: e.Details}}
}

func errorType(e *apierror.Error) string {
	switch e.Kind {
	case apierror.InvalidRequest, apierror.NotFound, apierror.TooLarge, apierror.Conflict:
		return "invalid_request_error"
	case apierror.Authentication:
		return "authentication_error"
	case apierror.Permission:
		return "permission_error"
	case apierror.RateLimit:
		return "rate_limit_error"
	default:
		return "server_error"
	}
}

// WriteError writes an error response in OpenAI's envelope.
func WriteError(w http.ResponseWriter, e *apierror.Error) error {
	apierror.SetRetryHeaders(w.Header(), e)
	return httpjson.Write(w, e.Status, ErrorOf(e))
}

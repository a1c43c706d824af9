package anthropic

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/wire/httpjson"
)

// Response is a message body: the non-stream answer, and (with empty
// content and a null stop_reason) the message of message_start.
type Response struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []ContentBlock `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        Usage          `json:"usage"`
}

// ContentBlock is a text or tool_use block of a response.
type ContentBlock struct {
	Type string `json:"type"`
	// Text is set (possibly empty) on text blocks only.
	Text *string `json:"text,omitempty"`
	// ID, Name and Input are set on tool_use blocks; Input is an object.
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

// Usage counts tokens. Both counts are always sent: clients crash on a
// missing one.
type Usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// The stop reasons this wire produces.
const (
	StopEndTurn   = "end_turn"
	StopToolUse   = "tool_use"
	StopMaxTokens = "max_tokens"
)

// stopReason names how a finished run ended on this wire.
func stopReason(o *event.Outcome) string {
	switch {
	case o == nil:
		return StopEndTurn
	case len(o.PendingCalls) > 0:
		return StopToolUse
	case o.Stop == event.StopLength:
		return StopMaxTokens
	}
	return StopEndTurn
}

func usageOf(u *event.Usage) Usage {
	if u == nil {
		return Usage{}
	}
	return Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}
}

// toolInput renders a call's arguments as a compact JSON object; arguments
// that are not an object become {}.
func toolInput(c message.ToolCall) json.RawMessage {
	raw := bytes.TrimSpace([]byte(c.Arguments))
	if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
		return json.RawMessage("{}")
	}
	var b bytes.Buffer
	_ = json.Compact(&b, raw)
	return b.Bytes()
}

// visible reports whether an event is shown on this wire: subagent work is
// not.
func visible(e event.Event) bool { return e.SubagentRunID == "" }

// Collector builds a non-stream message from a run's events: one text block
// per assistant message of the turn, then a tool_use block per call the turn
// stopped on — the same blocks a Stream sends.
type Collector struct {
	r        Response
	textMsg  string
	textOpen bool
	// text holds the open text block's text (the last block): one builder
	// per block keeps a long answer linear in its length.
	text strings.Builder
	done bool
	err  error
}

// NewCollector starts a message.
func NewCollector(id, model string) *Collector {
	return &Collector{r: Response{ID: id, Type: "message", Role: "assistant", Model: model, Content: []ContentBlock{}}}
}

// Add folds one event in. A RunError is kept and returned by Result.
func (c *Collector) Add(e event.Event) {
	if !visible(e) || c.done {
		return
	}
	switch e.Type {
	case event.TextDelta:
		if e.Delta == "" {
			return
		}
		if !c.textOpen || c.textMsg != e.MessageID {
			c.closeText()
			c.textOpen, c.textMsg = true, e.MessageID
			c.r.Content = append(c.r.Content, ContentBlock{Type: "text"})
		}
		c.text.WriteString(e.Delta)
	case event.TextEnd:
		if e.MessageID == c.textMsg {
			c.closeText()
		}
	case event.RunFinished:
		if note, ok := event.WaitingNote(e.Outcome); ok {
			c.Add(event.Event{Type: event.TextDelta, MessageID: event.WaitingNoteMessageID, Delta: note})
		}
		c.done = true
		c.closeText()
		if e.Outcome != nil {
			for _, call := range e.Outcome.PendingCalls {
				c.r.Content = append(c.r.Content, ContentBlock{Type: "tool_use", ID: call.ID, Name: call.Name, Input: toolInput(call)})
			}
		}
		sr := stopReason(e.Outcome)
		c.r.StopReason = &sr
		c.r.Usage = usageOf(e.Usage)
	case event.RunError:
		c.done = true
		c.err = apierror.OfRunError(e)
	}
}

// closeText sets the open text block's text.
func (c *Collector) closeText() {
	if !c.textOpen {
		return
	}
	c.textOpen = false
	t := c.text.String()
	c.r.Content[len(c.r.Content)-1].Text = &t
	c.text.Reset()
}

// Result returns the message or the run's error.
func (c *Collector) Result() (*Response, error) {
	if c.err != nil {
		return nil, c.err
	}
	if c.r.StopReason == nil {
		return nil, apierror.IncompleteRun()
	}
	return &c.r, nil
}

// ErrorBody is Anthropic's error envelope.
type ErrorBody struct {
	Type      string      `json:"type"`
	Error     ErrorObject `json:"error"`
	RequestID string      `json:"request_id,omitempty"`
}

// ErrorObject is the inner error.
type ErrorObject struct {
	Type    string        `json:"type"`
	Message string        `json:"message"`
	Details *ErrorDetails `json:"details,omitempty"`
}

// ErrorDetails carries Stackbone's machine-readable code, which the SDKs
// expose (Go: Error.ErrorCode(); Node: err.errorCode).
type ErrorDetails struct {
	ErrorCode string `json:"error_code,omitempty"`
	// Problems is structured extra data (e.g. schema errors).
	Problems any `json:"problems,omitempty"`
}

// ErrorOf renders an API error in Anthropic's envelope.
func ErrorOf(e *apierror.Error, requestID string) ErrorBody {
	obj := ErrorObject{Type: ErrorType(e), Message: e.Message}
	if e.Code != "" || e.Details != nil {
		obj.Details = &ErrorDetails{ErrorCode: e.Code, Problems: e.Details}
	}
	return ErrorBody{Type: "error", Error: obj, RequestID: requestID}
}

// ErrorType names an error's type on this wire, from its status (and kind,
// to tell an overload from other unavailability).
func ErrorType(e *apierror.Error) string {
	switch s := e.Status; {
	case s == http.StatusBadRequest, s == http.StatusConflict:
		return "invalid_request_error"
	case s == http.StatusUnauthorized:
		return "authentication_error"
	case s == http.StatusForbidden:
		return "permission_error"
	case s == http.StatusNotFound:
		return "not_found_error"
	case s == http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case s == http.StatusTooManyRequests:
		return "rate_limit_error"
	case s == http.StatusGatewayTimeout:
		return "timeout_error"
	case s == 529, e.Kind == apierror.Overloaded:
		return "overloaded_error"
	case s >= 400 && s < 500:
		return "invalid_request_error"
	}
	return "api_error"
}

// WriteError writes an error response in Anthropic's envelope, with the
// request id the server middleware put in the request-id header.
func WriteError(w http.ResponseWriter, e *apierror.Error) error {
	apierror.SetRetryHeaders(w.Header(), e)
	return httpjson.Write(w, e.Status, ErrorOf(e, w.Header().Get("request-id")))
}

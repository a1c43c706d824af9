package agui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/schema"
	"github.com/stackbone/stackbone/internal/wire/httpjson"
)

// RunAgentInput is the body of an AG-UI run request. Decoding is lenient:
// unknown fields are ignored, state may be null or absent, and every message
// role of AG-UI 1.0 is accepted.
type RunAgentInput struct {
	ThreadID        string          `json:"threadId"`
	RunID           string          `json:"runId"`
	ParentRunID     string          `json:"parentRunId"`
	ProtocolVersion string          `json:"protocolVersion"`
	State           json.RawMessage `json:"state"`
	Messages        []Message       `json:"messages"`
	Tools           []Tool          `json:"tools"`
	Context         []Context       `json:"context"`
	ForwardedProps  json.RawMessage `json:"forwardedProps"`
	Resume          []ResumeEntry   `json:"resume"`

	// origin is, for each message of the Input built from the request,
	// the index of the request message it came from (-1: the context).
	origin []int
}

// Message is a request message of any role. Content is a string or an array
// of content parts (user and tool messages), or absent.
type Message struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCalls  []ToolCall      `json:"toolCalls"`
	ToolCallID string          `json:"toolCallId"`
	// Error is set on a tool message whose tool failed.
	Error string `json:"error"`
}

// ToolCall is an assistant message's call. Arguments is a JSON string on the
// wire; an object is tolerated and kept as its JSON text.
type ToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// Tool is a frontend tool the client declares and runs itself.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Context is a piece of context the client gives the agent.
type Context struct {
	Description string `json:"description"`
	Value       string `json:"value"`
}

// ResumeEntry answers one interrupt of the thread.
type ResumeEntry struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload"`
}

// contentPart is a user or tool content part: text, or media with a source
// (AG-UI 1.0), or the legacy binary part.
type contentPart struct {
	Type   string `json:"type"`
	Text   string `json:"text"`
	Source *struct {
		Type     string `json:"type"`
		Value    string `json:"value"`
		MimeType string `json:"mimeType"`
	} `json:"source"`
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
	URL      string `json:"url"`
}

// ErrThreadRequired is wrapped by errors for features a stateless run (no
// threadId) cannot have.
var ErrThreadRequired = errors.New("threadId required")

// Decode parses a request body.
func Decode(body []byte) (*RunAgentInput, error) { return DecodeContext(context.Background(), body) }

// DecodeContext is Decode for a request whose context is ctx: once ctx
// ends, no more of its tool schemas are compiled.
func DecodeContext(ctx context.Context, body []byte) (*RunAgentInput, error) {
	var in RunAgentInput
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, apierror.Invalid("", "The request body is not a valid RunAgentInput: %v", httpjson.Problem(err))
	}
	if err := in.checkIDs(); err != nil {
		return nil, err
	}
	tools := schema.NewTools(ctx)
	for i, t := range in.Tools {
		if t.Name == "" {
			return nil, apierror.Invalid(fmt.Sprintf("tools[%d].name", i), "Every tool needs a name.")
		}
		params, err := tools.Parameters(t.Parameters)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			param := fmt.Sprintf("tools[%d].parameters", i)
			return nil, apierror.Invalid(param, "`%s` (tool %q) %v.", param, t.Name, err)
		}
		in.Tools[i].Parameters = params
	}
	for i, r := range in.Resume {
		if r.InterruptID == "" {
			return nil, apierror.Invalid(fmt.Sprintf("resume[%d].interruptId", i), "Every resume entry needs an interruptId.")
		}
		if r.Status != "resolved" && r.Status != "cancelled" {
			return nil, apierror.Invalid(fmt.Sprintf("resume[%d].status", i), "A resume entry's status must be \"resolved\" or \"cancelled\", not %q.", r.Status)
		}
	}
	return &in, nil
}

// ToolParam is the parameter path of client tool i of the request's
// engine.Input, for errors about it.
func (in *RunAgentInput) ToolParam(i int) string {
	return fmt.Sprintf("tools[%d].name", i)
}

// checkIDs refuses client-chosen ids the store would keep (threadId, runId,
// message and tool call ids) or look up (interruptId) unless they pass the
// check every wire applies to thread ids.
func (in *RunAgentInput) checkIDs() error {
	check := apierror.CheckID
	if err := check("threadId", in.ThreadID); err != nil {
		return err
	}
	if err := check("runId", in.RunID); err != nil {
		return err
	}
	for i, r := range in.Resume {
		if err := check(fmt.Sprintf("resume[%d].interruptId", i), r.InterruptID); err != nil {
			return err
		}
	}
	for i, m := range in.Messages {
		if err := check(fmt.Sprintf("messages[%d].id", i), m.ID); err != nil {
			return err
		}
		if err := check(fmt.Sprintf("messages[%d].toolCallId", i), m.ToolCallID); err != nil {
			return err
		}
		for j, c := range m.ToolCalls {
			if err := check(fmt.Sprintf("messages[%d].toolCalls[%d].id", i, j), c.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// Input maps the request onto a engine.Input for the named agent. Tenant and
// DecidedBy are the caller's to fill. A run without a threadId is stateless:
// frontend tools, state seeding and resume are refused then.
func (in *RunAgentInput) Input(agentName string) (engine.Input, error) {
	out := engine.Input{Agent: agentName, ThreadID: in.ThreadID, RunID: in.RunID, Resync: true, History: true}
	state, err := stateObject(in.State)
	if err != nil {
		return out, err
	}
	if in.ThreadID == "" {
		switch {
		case len(in.Tools) > 0:
			return out, needsThread("Frontend tools need a threadId: a stateless run has no thread to send the tool's result back to.")
		case len(state) > 0:
			return out, needsThread("Seeding state needs a threadId: a stateless run has no state to write to.")
		case len(in.Resume) > 0:
			return out, needsThread("A resume needs a threadId: a stateless run has no interrupts to resume.")
		}
	}
	out.State = state
	out.Multitask = forwardedMultitask(in.ForwardedProps)
	if out.Model, err = forwardedModel(in.ForwardedProps); err != nil {
		return out, err
	}
	for _, t := range in.Tools {
		// Decode left each schema as schema.ToolParameters gives it (nil
		// when absent or null).
		out.ClientTools = append(out.ClientTools, model.ToolDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	in.origin = in.origin[:0]
	if ctx := contextPrompt(in.Context); ctx != "" {
		out.Messages = append(out.Messages, message.Message{Role: message.System, Content: ctx})
		in.origin = append(in.origin, -1)
	}
	for i, m := range in.Messages {
		msg, keep, err := m.canonical(i)
		if err != nil {
			return out, err
		}
		if keep {
			out.Messages = append(out.Messages, msg)
			in.origin = append(in.origin, i)
		}
	}
	return out, nil
}

// answers are the request's resume entries as the engine takes them.
func (in *RunAgentInput) answers() []engine.Answer {
	var out []engine.Answer
	for _, r := range in.Resume {
		a := engine.Answer{InterruptID: r.InterruptID, Cancelled: r.Status == "cancelled"}
		if !isNull(r.Payload) {
			a.Payload = r.Payload
		}
		out = append(out, a)
	}
	return out
}

func needsThread(msg string) *apierror.Error {
	e := apierror.New(apierror.InvalidRequest, engine.CodeNeedsThread, msg)
	e.Param = "threadId"
	e.Err = ErrThreadRequired
	return e
}

// stateObject reads the client's state: absent or null is no state; an
// object gives its keys; anything else is invalid.
func stateObject(raw json.RawMessage) (map[string]json.RawMessage, error) {
	if isNull(raw) {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		e := apierror.New(apierror.InvalidRequest, engine.CodeInvalidState, "`state` must be a JSON object.")
		e.Param = "state"
		return nil, e
	}
	return m, nil
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// contextPrompt renders the client's context entries as one system prompt
// section.
func contextPrompt(cs []Context) string {
	var b strings.Builder
	for _, c := range cs {
		if c.Description == "" && c.Value == "" {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("Context from the client:")
		}
		b.WriteString("\n- ")
		if c.Description != "" {
			b.WriteString(c.Description)
			b.WriteString(": ")
		}
		b.WriteString(c.Value)
	}
	return b.String()
}

// canonical maps one request message. keep is false for roles that only
// matter to the UI (activity, reasoning) and for unknown roles.
func (m Message) canonical(i int) (message.Message, bool, error) {
	param := fmt.Sprintf("messages[%d]", i)
	out := message.Message{ID: m.ID}
	switch m.Role {
	case "developer", "system":
		text, _, err := content(m.Content, param)
		if err != nil {
			return out, false, err
		}
		out.Role, out.Content = message.System, text
	case "user":
		text, parts, err := content(m.Content, param)
		if err != nil {
			return out, false, err
		}
		out.Role, out.Content, out.Parts = message.User, text, parts
	case "assistant":
		text, _, err := content(m.Content, param)
		if err != nil {
			return out, false, err
		}
		out.Role, out.Content = message.Assistant, text
		for j, c := range m.ToolCalls {
			if c.ID == "" || c.Function.Name == "" {
				return out, false, apierror.Invalid(fmt.Sprintf("%s.toolCalls[%d]", param, j), "Every tool call needs an id and a function name.")
			}
			out.ToolCalls = append(out.ToolCalls, message.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: arguments(c.Function.Arguments)})
		}
	case "tool":
		text, _, err := content(m.Content, param)
		if err != nil {
			return out, false, err
		}
		if m.ToolCallID == "" {
			return out, false, apierror.Invalid(param+".toolCallId", "A tool message needs `toolCallId`.")
		}
		out.Role, out.Content, out.ToolCallID = message.Tool, text, m.ToolCallID
		if m.Error != "" {
			out.IsError = true
			if out.Content == "" {
				out.Content = m.Error
			}
		}
	case "":
		return out, false, apierror.Invalid(param+".role", "Every message needs a `role`.")
	default:
		// activity and reasoning messages are the UI's own; later roles are
		// ignored the same way.
		return out, false, nil
	}
	return out, true, nil
}

// arguments returns a tool call's arguments as JSON text.
func arguments(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}

// content reads absent/null, a string, or an array of content parts: text
// parts are joined, image parts become message parts, other media are
// dropped.
func content(raw json.RawMessage, param string) (string, []message.Part, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", nil, apierror.Invalid(param+".content", "`content` is not a valid string.")
		}
		return s, nil, nil
	}
	var ps []contentPart
	if err := json.Unmarshal(raw, &ps); err != nil {
		return "", nil, apierror.Invalid(param+".content", "`content` must be a string or an array of content parts.")
	}
	var texts []string
	var parts []message.Part
	for _, p := range ps {
		switch p.Type {
		case "text":
			texts = append(texts, p.Text)
		case "image":
			if p.Source == nil {
				continue
			}
			switch p.Source.Type {
			case "data":
				parts = append(parts, message.Part{Type: "image", MediaType: p.Source.MimeType, Data: p.Source.Value})
			case "url":
				parts = append(parts, message.Part{Type: "image", MediaType: p.Source.MimeType, URL: p.Source.Value})
			}
		case "binary":
			if !strings.HasPrefix(p.MimeType, "image/") {
				continue
			}
			switch {
			case p.Data != "":
				parts = append(parts, message.Part{Type: "image", MediaType: p.MimeType, Data: p.Data})
			case p.URL != "":
				parts = append(parts, message.Part{Type: "image", MediaType: p.MimeType, URL: p.URL})
			}
		}
	}
	return strings.Join(texts, "\n"), parts, nil
}

// forwardedModel is forwardedProps.model: the model the run picks among
// its agent's (Studio's playground, `stackbone dev`; the engine checks it).
// Absent or null is none; a value that is not a string is refused.
func forwardedModel(props json.RawMessage) (string, error) {
	var p struct {
		Model json.RawMessage `json:"model"`
	}
	if json.Unmarshal(props, &p) != nil || isNull(p.Model) {
		return "", nil
	}
	var s string
	if json.Unmarshal(p.Model, &s) != nil || s == "" {
		e := apierror.New(apierror.InvalidRequest, engine.CodeInvalidInput, "`forwardedProps.model` must be a model reference (a non-empty string such as \"openai/gpt-4o-mini\").")
		e.Param = "forwardedProps.model"
		return "", e
	}
	return s, nil
}

// forwardedMultitask is forwardedProps.multitask when it is a string (the
// run's double-texting strategy; the engine checks its value), else "".
func forwardedMultitask(props json.RawMessage) string {
	var p struct {
		Multitask any `json:"multitask"`
	}
	if json.Unmarshal(props, &p) != nil {
		return ""
	}
	s, _ := p.Multitask.(string)
	return s
}

// Package anthropic is the Anthropic Messages wire: it decodes requests
// leniently into a engine.Input and encodes canonical events as a message
// body or an SSE stream, exactly as the official SDKs expect.
package anthropic

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

// Request is a Messages request. Unknown fields are ignored; temperature,
// top_p, top_k and metadata are accepted.
type Request struct {
	Model         string          `json:"model"`
	MaxTokens     *int            `json:"max_tokens"`
	System        json.RawMessage `json:"system"`
	Messages      []Message       `json:"messages"`
	Tools         []Tool          `json:"tools"`
	ToolChoice    *ToolChoice     `json:"tool_choice"`
	Stream        bool            `json:"stream"`
	StopSequences []string        `json:"stop_sequences"`
	Metadata      json.RawMessage `json:"metadata"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	TopK          *int            `json:"top_k"`
	// Thinking and OutputConfig carry a client's extended thinking
	// (thinkingEffort maps them to a reasoning effort).
	Thinking     *Thinking     `json:"thinking"`
	OutputConfig *OutputConfig `json:"output_config"`

	// origin is, for each message of the Input built from the request,
	// the index of the request message it came from (-1: the system text).
	origin []int
}

// Message is a request message: content is a string or an array of blocks.
// Role is user, assistant, or system (2026-10-21 clients).
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// Block is a request content block (text, image, document, tool_use,
// tool_result); other types, such as thinking, are skipped.
type Block struct {
	Type   string  `json:"type"`
	Text   string  `json:"text"`
	Source *Source `json:"source"`
	// ID, Name and Input are set on tool_use.
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// ToolUseID, Content and IsError are set on tool_result.
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// Source is the source of an image or a document.
type Source struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
	FileID    string `json:"file_id"`
}

// Tool is a client-declared tool.
type Tool struct {
	// Type is empty or "custom" for a client tool; Anthropic's own server
	// tools (web_search_…, bash_…) carry other types and are skipped.
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// ToolChoice is auto, any, none, or a named tool.
type ToolChoice struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

// Decode parses and checks a Messages request body.
func Decode(body []byte) (*Request, error) { return DecodeContext(context.Background(), body) }

// DecodeContext is Decode for a request whose context is ctx: once ctx
// ends, no more of its tool schemas are compiled.
func DecodeContext(ctx context.Context, body []byte) (*Request, error) {
	req, err := parse(ctx, body)
	if err != nil {
		return nil, err
	}
	if req.Model == "" {
		return nil, apierror.Invalid("model", "model: Field required. Name the agent to talk to.")
	}
	if req.MaxTokens == nil {
		return nil, apierror.Invalid("max_tokens", "max_tokens: Field required")
	}
	if *req.MaxTokens < 1 {
		return nil, apierror.Invalid("max_tokens", "max_tokens: must be at least 1")
	}
	return req, nil
}

// DecodeCount parses and checks a count_tokens request body (max_tokens and
// model are optional there).
func DecodeCount(body []byte) (*Request, error) {
	return DecodeCountContext(context.Background(), body)
}

// DecodeCountContext is DecodeCount for a request whose context is ctx.
func DecodeCountContext(ctx context.Context, body []byte) (*Request, error) {
	return parse(ctx, body)
}

func parse(ctx context.Context, body []byte) (*Request, error) {
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, apierror.Invalid("", "The request body is not valid JSON: %v", httpjson.Problem(err))
	}
	if len(req.Messages) == 0 {
		return nil, apierror.Invalid("messages", "messages: Field required. Send at least one message.")
	}
	tools := schema.NewTools(ctx)
	for i, t := range req.Tools {
		if t.Name == "" {
			return nil, apierror.Invalid(fmt.Sprintf("tools.%d.name", i), "tools.%d.name: Field required", i)
		}
		if !clientTool(t) {
			continue
		}
		params, err := tools.Parameters(t.InputSchema)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			param := fmt.Sprintf("tools.%d.input_schema", i)
			return nil, apierror.Invalid(param, "%s (tool %q): %v", param, t.Name, err)
		}
		req.Tools[i].InputSchema = params
	}
	if c := req.ToolChoice; c != nil {
		switch c.Type {
		case "auto", "any", "none", "":
		case "tool":
			if c.Name == "" {
				return nil, apierror.Invalid("tool_choice.name", "tool_choice.name: Field required")
			}
		default:
			return nil, apierror.Invalid("tool_choice.type", "tool_choice.type: must be auto, any, none or tool, not %q", c.Type)
		}
	}
	return &req, nil
}

// Thinking is a request's thinking: enabled (with a budget), adaptive or
// disabled.
type Thinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

// OutputConfig is the part of a request's output_config the wire reads.
type OutputConfig struct {
	Effort string `json:"effort"`
}

// thinkingEffort maps a client's thinking settings to a reasoning effort
// (model.ReasoningEfforts): output_config.effort by name (max is high);
// else thinking enabled by its budget, to the effort whose thinking budget
// (the Anthropic provider's) is the nearest at or above it (at most 1024:
// low, 4096: medium, more: high); adaptive thinking without an effort is
// medium. Disabled, or none, is "" (the agent's own setting).
func (req *Request) thinkingEffort() string {
	if req.OutputConfig != nil {
		switch e := req.OutputConfig.Effort; e {
		case "low", "medium", "high":
			return e
		case "max", "xhigh":
			return "high"
		}
	}
	t := req.Thinking
	if t == nil {
		return ""
	}
	switch t.Type {
	case "enabled":
		switch {
		case t.BudgetTokens <= 1024:
			return "low"
		case t.BudgetTokens <= 4096:
			return "medium"
		}
		return "high"
	case "adaptive":
		return "medium"
	}
	return ""
}

// Input maps the request onto a engine.Input (tenant and thread are the
// caller's to fill).
func (req *Request) Input() (engine.Input, error) {
	in := engine.Input{Agent: req.Model, Temperature: req.Temperature, StopSequences: req.StopSequences, Collected: !req.Stream, History: true,
		ReasoningEffort: req.thinkingEffort()}
	if req.MaxTokens != nil {
		in.MaxTokens = *req.MaxTokens
	}
	if c := req.ToolChoice; c != nil {
		switch c.Type {
		case "auto":
			in.ToolChoice = "auto"
		case "any":
			in.ToolChoice = "required"
		case "none":
			in.ToolChoice = "none"
		case "tool":
			in.ToolChoice = c.Name
		}
	}
	for _, t := range req.Tools {
		if !clientTool(t) {
			continue
		}
		in.ClientTools = append(in.ClientTools, model.ToolDef{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
	}
	sys, err := systemText(req.System, "system")
	if err != nil {
		return in, err
	}
	req.origin = req.origin[:0]
	if sys != "" {
		in.Messages = append(in.Messages, message.Message{Role: message.System, Content: sys})
		req.origin = append(req.origin, -1)
	}
	names := map[string]string{} // tool_use id → tool name, for tool messages
	for i, m := range req.Messages {
		msgs, err := m.canonical(i, names)
		if err != nil {
			return in, err
		}
		in.Messages = append(in.Messages, msgs...)
		for range msgs {
			req.origin = append(req.origin, i)
		}
	}
	return in, nil
}

// ToolParam is the parameter path of client tool i of the request's
// engine.Input (Anthropic's own server tools are not in it), for errors
// about it.
func (req *Request) ToolParam(i int) string {
	for j, t := range req.Tools {
		if !clientTool(t) {
			continue
		}
		if i == 0 {
			return fmt.Sprintf("tools.%d.name", j)
		}
		i--
	}
	return "tools"
}

// clientTool reports whether t is a tool the client runs (not one of
// Anthropic's typed server tools).
func clientTool(t Tool) bool {
	return t.Type == "" || t.Type == "custom"
}

// systemText reads a string or an array of text blocks.
func systemText(raw json.RawMessage, param string) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	blocks, err := decodeBlocks(raw, param)
	if err != nil {
		return "", err
	}
	var texts []string
	for _, b := range blocks {
		if b.Type == "text" && b.Text != "" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n\n"), nil
}

// decodeBlocks reads content that is a string (one text block) or an array
// of blocks.
func decodeBlocks(raw json.RawMessage, param string) ([]Block, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, apierror.Invalid(param, "%s: not a valid string", param)
		}
		return []Block{{Type: "text", Text: s}}, nil
	}
	var bs []Block
	if err := json.Unmarshal(raw, &bs); err != nil {
		return nil, apierror.Invalid(param, "%s: must be a string or an array of content blocks", param)
	}
	return bs, nil
}

func (m Message) canonical(i int, names map[string]string) ([]message.Message, error) {
	param := fmt.Sprintf("messages.%d.content", i)
	blocks, err := decodeBlocks(m.Content, param)
	if err != nil {
		return nil, err
	}
	switch m.Role {
	case "system":
		text, err := systemText(m.Content, param)
		if err != nil {
			return nil, err
		}
		return []message.Message{{Role: message.System, Content: text}}, nil
	case "assistant":
		out := message.Message{Role: message.Assistant}
		var texts []string
		for _, b := range blocks {
			switch b.Type {
			case "text":
				if b.Text != "" {
					texts = append(texts, b.Text)
				}
			case "tool_use":
				if b.ID == "" || b.Name == "" {
					return nil, apierror.Invalid(param, "%s: a tool_use block needs an id and a name", param)
				}
				args, err := inputArgs(b.Input)
				if err != nil {
					return nil, apierror.Invalid(param, "%s: tool_use input must be a JSON object", param)
				}
				names[b.ID] = b.Name
				out.ToolCalls = append(out.ToolCalls, message.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
			}
		}
		out.Content = strings.Join(texts, "\n\n")
		return []message.Message{out}, nil
	case "user":
		var out []message.Message
		user := message.Message{Role: message.User}
		var texts []string
		for _, b := range blocks {
			switch b.Type {
			case "text":
				texts = append(texts, b.Text)
			case "image":
				p, err := imagePart(b.Source, param)
				if err != nil {
					return nil, err
				}
				user.Parts = append(user.Parts, p)
			case "document":
				if b.Source == nil || b.Source.Type != "text" {
					return nil, apierror.Invalid(param, "%s: only plain-text documents are supported", param)
				}
				texts = append(texts, b.Source.Data)
			case "tool_result":
				if b.ToolUseID == "" {
					return nil, apierror.Invalid(param, "%s: a tool_result block needs tool_use_id", param)
				}
				text, err := resultText(b.Content, param)
				if err != nil {
					return nil, err
				}
				out = append(out, message.Message{Role: message.Tool, ToolCallID: b.ToolUseID, ToolName: names[b.ToolUseID],
					Content: text, IsError: b.IsError})
			}
		}
		user.Content = strings.Join(texts, "\n\n")
		// A message of only tool results carries no user turn; a plain one
		// (even empty) does.
		if len(out) == 0 || user.Content != "" || len(user.Parts) > 0 {
			out = append(out, user)
		}
		return out, nil
	case "":
		return nil, apierror.Invalid(fmt.Sprintf("messages.%d.role", i), "messages.%d.role: Field required", i)
	default:
		return nil, apierror.Invalid(fmt.Sprintf("messages.%d.role", i), "messages.%d.role: must be user, assistant or system, not %q", i, m.Role)
	}
}

// inputArgs renders a tool_use input object as JSON text ("{}" when absent).
func inputArgs(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "{}", nil
	}
	if raw[0] != '{' {
		return "", errors.New("not an object")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "", err
	}
	return b.String(), nil
}

// resultText reads a tool_result's content: a string or blocks (text is
// kept; other blocks are skipped).
func resultText(raw json.RawMessage, param string) (string, error) {
	blocks, err := decodeBlocks(raw, param)
	if err != nil {
		return "", err
	}
	var texts []string
	for _, b := range blocks {
		if b.Type == "text" && b.Text != "" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n\n"), nil
}

// imagePart maps an image source onto a message part.
func imagePart(src *Source, param string) (message.Part, error) {
	if src == nil {
		return message.Part{}, apierror.Invalid(param, "%s: an image block needs a source", param)
	}
	switch src.Type {
	case "base64":
		if src.Data == "" || src.MediaType == "" {
			return message.Part{}, apierror.Invalid(param, "%s: a base64 image needs media_type and data", param)
		}
		return message.Part{Type: "image", MediaType: src.MediaType, Data: src.Data}, nil
	case "url":
		if src.URL == "" {
			return message.Part{}, apierror.Invalid(param, "%s: a url image needs url", param)
		}
		return message.Part{Type: "image", URL: src.URL}, nil
	}
	return message.Part{}, apierror.Invalid(param, "%s: image source type %q is not supported (use base64 or url)", param, src.Type)
}

// imageTokens is what one image counts for in an estimate (about a
// megapixel).
const imageTokens = 1600

// EstimateTokens estimates the input tokens of a request: about one token
// per four characters of every text it carries (system, messages, tool
// calls and results, tool definitions) plus extra text such as the agent's
// own instructions and tools, a fixed amount per image, and at least 1.
func EstimateTokens(req *Request, extra ...string) int {
	chars := len(req.System)
	images := 0
	for _, m := range req.Messages {
		blocks, err := decodeBlocks(m.Content, "")
		if err != nil {
			chars += len(m.Content)
			continue
		}
		for _, b := range blocks {
			switch b.Type {
			case "image":
				images++
			case "document":
				if b.Source != nil {
					chars += len(b.Source.Data)
				}
			default:
				chars += len(b.Text) + len(b.Name) + len(b.Input) + len(b.Content)
			}
		}
	}
	for _, t := range req.Tools {
		chars += len(t.Name) + len(t.Description) + len(t.InputSchema)
	}
	for _, s := range extra {
		chars += len(s)
	}
	n := (chars+3)/4 + images*imageTokens
	return max(n, 1)
}

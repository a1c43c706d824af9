package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/internal/upstream"
)

// chatRequest is the body of POST /chat/completions (wire.md §1.1), as
// this provider sends it: always streamed, with usage.
type chatRequest struct {
	Model    string        `json:"model"`
	Messages []chatMessage `json:"messages,omitempty"`
	// The tools are written after the other fields, already encoded (see
	// upstream.ToolCache).
	ToolChoice          any            `json:"tool_choice,omitempty"`
	MaxCompletionTokens int            `json:"max_completion_tokens,omitempty"`
	MaxTokens           int            `json:"max_tokens,omitempty"`
	Stop                []string       `json:"stop,omitempty"`
	Temperature         *float64       `json:"temperature,omitempty"`
	TopP                *float64       `json:"top_p,omitempty"`
	Seed                *int64         `json:"seed,omitempty"`
	ReasoningEffort     string         `json:"reasoning_effort,omitempty"`
	ParallelToolCalls   *bool          `json:"parallel_tool_calls,omitempty"`
	ResponseFormat      *chatFormat    `json:"response_format,omitempty"`
	Stream              bool           `json:"stream"`
	StreamOptions       chatStreamOpts `json:"stream_options"`
}

// chatFormat is response_format: {"type":"json_object"} or
// {"type":"json_schema","json_schema":{...}}.
type chatFormat struct {
	Type       string      `json:"type"`
	JSONSchema *chatSchema `json:"json_schema,omitempty"`
}

type chatSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      bool            `json:"strict,omitempty"`
}

type chatStreamOpts struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatMessage is one message. Content is a string, a []chatPart, or nil
// (left out: an assistant message that only calls tools, a user message
// with neither text nor images).
type chatMessage struct {
	Role      string         `json:"role"`
	Content   any            `json:"content,omitempty"`
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
	// ReasoningContent goes back only on an assistant message that calls
	// tools (see sentReasoning).
	ReasoningContent string `json:"reasoning_content,omitempty"`
	// ToolCallID is set (even to "") on tool messages only.
	ToolCallID *string `json:"tool_call_id,omitempty"`
}

type chatPart struct {
	Type     string        `json:"type"`
	Text     string        `json:"text,omitempty"`
	ImageURL *chatImageURL `json:"image_url,omitempty"`
}

type chatImageURL struct {
	URL string `json:"url"`
}

type chatToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function chatCallFunction `json:"function"`
}

type chatCallFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type chatNamedChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// emptySchema stands in for a tool without parameters.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// encode builds the request body for req.
func (p *Provider) encode(req model.Request) ([]byte, error) {
	body := chatRequest{
		Model:           req.Model,
		Messages:        make([]chatMessage, 0, len(req.Messages)+1),
		Stop:            req.StopSequences,
		Temperature:     req.Temperature,
		TopP:            req.TopP,
		Seed:            req.Seed,
		ReasoningEffort: req.ReasoningEffort,
		Stream:          true,
		StreamOptions:   chatStreamOpts{IncludeUsage: true},
	}
	if req.System != "" {
		body.Messages = append(body.Messages, chatMessage{Role: "system", Content: req.System})
	}
	for _, m := range req.Messages {
		body.Messages = append(body.Messages, toWire(m, p.cfg.Name))
	}
	var tools [][]byte
	if len(req.Tools) > 0 {
		var err error
		if tools, err = p.tools.Encode(req.Tools); err != nil {
			return nil, err
		}
		// OpenAI refuses parallel_tool_calls on a request without tools.
		body.ParallelToolCalls = req.ParallelToolCalls
	}
	switch req.ToolChoice {
	case "":
	case "auto", "none", "required":
		body.ToolChoice = req.ToolChoice
	default:
		c := &chatNamedChoice{Type: "function"}
		c.Function.Name = req.ToolChoice
		body.ToolChoice = c
	}
	if f := req.ResponseFormat; f != nil {
		body.ResponseFormat = &chatFormat{Type: f.Type}
		if f.Type == model.FormatJSONSchema {
			body.ResponseFormat.JSONSchema = &chatSchema{Name: f.Name, Description: f.Description, Schema: f.Schema, Strict: f.Strict}
		}
	}
	if req.MaxTokens > 0 {
		if p.cfg.LegacyMaxTokens {
			body.MaxTokens = req.MaxTokens
		} else {
			body.MaxCompletionTokens = req.MaxTokens
		}
	}
	return upstream.EncodeBody(&body, tools, req.ProviderOptions[p.cfg.Name])
}

// encodeTool encodes one entry of "tools" with its schema checked and
// compacted.
func encodeTool(t model.ToolDef) ([]byte, error) {
	params, err := toolParameters(t.Parameters)
	if err != nil {
		return nil, fmt.Errorf("tool %s: parameters: %w", t.Name, err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(chatTool{Type: "function", Function: chatFunction{Name: t.Name, Description: t.Description, Parameters: params}}); err != nil {
		return nil, fmt.Errorf("tool %s: %w", t.Name, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// toolParameters checks a tool's JSON Schema and returns it as sent: an
// object schema as written, the empty object schema for none, null or {}.
func toolParameters(raw json.RawMessage) (json.RawMessage, error) {
	s := bytes.TrimSpace(raw)
	if len(s) == 0 || string(s) == "null" {
		return emptySchema, nil
	}
	if s[0] != '{' || !json.Valid(s) {
		// The same error decoding into an object gives.
		var m map[string]any
		if err := json.Unmarshal(s, &m); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("not a JSON object")
	}
	if len(bytes.TrimSpace(s[1:len(s)-1])) == 0 {
		return emptySchema, nil
	}
	return s, nil
}

func toWire(m message.Message, source string) chatMessage {
	switch m.Role {
	case message.System:
		return chatMessage{Role: "system", Content: m.Content}
	case message.Assistant:
		a := chatMessage{Role: "assistant"}
		if m.Content != "" || len(m.ToolCalls) == 0 {
			a.Content = m.Content
		}
		if len(m.ToolCalls) > 0 {
			a.ToolCalls = make([]chatToolCall, len(m.ToolCalls))
			for i, tc := range m.ToolCalls {
				a.ToolCalls[i] = chatToolCall{ID: tc.ID, Type: "function", Function: chatCallFunction{Name: tc.Name, Arguments: string(tc.ArgsJSON())}}
			}
			a.ReasoningContent = sentReasoning(m.Reasoning, source)
		}
		return a
	case message.Tool:
		id := m.ToolCallID
		return chatMessage{Role: "tool", Content: m.Content, ToolCallID: &id}
	default:
		if len(m.Parts) == 0 {
			return chatMessage{Role: "user", Content: m.Content}
		}
		parts := make([]chatPart, 0, len(m.Parts)+1)
		if m.Content != "" {
			parts = append(parts, chatPart{Type: "text", Text: m.Content})
		}
		for _, pt := range m.Parts {
			if pt.Type != "image" {
				continue
			}
			url := pt.URL
			if url == "" {
				url = "data:" + pt.MediaType + ";base64," + pt.Data
			}
			parts = append(parts, chatPart{Type: "image_url", ImageURL: &chatImageURL{URL: url}})
		}
		if len(parts) == 0 { // no text, no image: content left out, as the SDK did
			return chatMessage{Role: "user"}
		}
		return chatMessage{Role: "user", Content: parts}
	}
}

// sentReasoning is the reasoning_content an assistant message that calls
// tools goes back with: the text of its plain-text reasoning blocks (an
// OpenAI-compatible server's own reasoning_content). DeepSeek's thinking
// mode answers 400 when a tool-calling turn comes back without it; other
// messages go back without it, as DeepSeek's older reasoner refuses it on
// them and other servers do not need it. Anthropic's thinking blocks are
// never sent here, nor the reasoning of another upstream (source names
// this one): a fallback from DeepSeek to OpenAI must not send OpenAI a
// field it refuses.
func sentReasoning(blocks []message.Reasoning, source string) string {
	var b strings.Builder
	for _, r := range blocks {
		if r.Type == message.ReasoningText && (r.Source == "" || r.Source == source) {
			b.WriteString(r.Text)
		}
	}
	return b.String()
}

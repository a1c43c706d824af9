package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/internal/upstream"
)

// messagesRequest is the body of POST /v1/messages (wire.md §3), as this
// provider sends it: always streamed. The tools are written after the other
// fields, already encoded (see upstream.ToolCache).
type messagesRequest struct {
	Model         string        `json:"model"`
	MaxTokens     int           `json:"max_tokens"`
	System        []block       `json:"system,omitempty"`
	Messages      []turn        `json:"messages"`
	ToolChoice    *toolChoice   `json:"tool_choice,omitempty"`
	StopSequences []string      `json:"stop_sequences,omitempty"`
	Thinking      *thinking     `json:"thinking,omitempty"`
	OutputConfig  *outputConfig `json:"output_config,omitempty"`
	Stream        bool          `json:"stream"`
}

// turn is one entry of "messages": a user or assistant turn of blocks.
type turn struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

// block is a content block: text, image, tool_use, tool_result, thinking or
// redacted_thinking.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Source    *imageSource    `json:"source,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   []block         `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	// Thinking and Signature are set on thinking, Data on
	// redacted_thinking.
	Thinking  *string `json:"thinking,omitempty"`
	Signature string  `json:"signature,omitempty"`
	Data      string  `json:"data,omitempty"`
}

type imageSource struct {
	Type      string `json:"type"` // base64 or url
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

type toolChoice struct {
	Type                   string `json:"type"` // auto, any, none, tool
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

type thinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

type outputConfig struct {
	Format struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	} `json:"format"`
}

// encode builds the request body for req: the system prompt (and system
// messages) in "system", tool messages as tool_result blocks in user turns
// (consecutive user-side messages merged into one turn), assistant tool
// calls as tool_use blocks, images as image blocks. Temperature and top_p
// are not sent: the 2026-10-21 API version dropped them (an endpoint that
// still takes them gets them through ProviderOptions["anthropic"]); Seed has
// no equivalent. ReasoningEffort turns on extended thinking with
// ThinkingBudgets' budget, raising an unset max_tokens to the budget plus
// DefaultMaxTokens; ParallelToolCalls false becomes
// tool_choice.disable_parallel_tool_use. ProviderOptions["anthropic"] fields
// are set on the body last, replacing any of the above. A json_schema
// response format becomes output_config.format (structured outputs; Name and
// Strict have no equivalent, the schema is always enforced); json_object
// becomes JSONObjectInstruction in the system prompt.
func encode(req model.Request) ([]byte, error) {
	body := messagesRequest{Model: req.Model, MaxTokens: req.MaxTokens, StopSequences: req.StopSequences, Stream: true,
		Messages: make([]turn, 0, len(req.Messages))}
	if body.MaxTokens <= 0 {
		body.MaxTokens = DefaultMaxTokens
	}
	if req.System != "" {
		body.System = append(body.System, block{Type: "text", Text: req.System})
	}
	thinkingOn := thinks(req)
	for _, m := range req.Messages {
		if m.Role == message.System {
			if m.Content != "" {
				body.System = append(body.System, block{Type: "text", Text: m.Content})
			}
			continue
		}
		user, blocks := toBlocks(m, thinkingOn)
		if len(blocks) == 0 {
			continue // the API rejects empty turns
		}
		role := "assistant"
		if user {
			role = "user"
		}
		if n := len(body.Messages); n > 0 && body.Messages[n-1].Role == role {
			body.Messages[n-1].Content = append(body.Messages[n-1].Content, blocks...)
		} else {
			body.Messages = append(body.Messages, turn{Role: role, Content: blocks})
		}
	}
	var tools [][]byte
	if len(req.Tools) > 0 {
		var err error
		if tools, err = toolCache.Encode(req.Tools); err != nil {
			return nil, err
		}
	}
	serial := req.ParallelToolCalls != nil && !*req.ParallelToolCalls && len(req.Tools) > 0
	switch req.ToolChoice {
	case "":
		if serial {
			body.ToolChoice = &toolChoice{Type: "auto", DisableParallelToolUse: true}
		}
	case "auto":
		body.ToolChoice = &toolChoice{Type: "auto", DisableParallelToolUse: serial}
	case "required":
		body.ToolChoice = &toolChoice{Type: "any", DisableParallelToolUse: serial}
	case "none":
		body.ToolChoice = &toolChoice{Type: "none"}
	default:
		body.ToolChoice = &toolChoice{Type: "tool", Name: req.ToolChoice}
	}
	if req.ReasoningEffort != "" {
		budget, ok := ThinkingBudgets[req.ReasoningEffort]
		if !ok {
			return nil, fmt.Errorf("reasoning effort %q: want one of %s", req.ReasoningEffort, strings.Join(model.ReasoningEfforts, ", "))
		}
		if req.MaxTokens <= 0 {
			body.MaxTokens = budget + DefaultMaxTokens
		} else if body.MaxTokens <= budget {
			return nil, fmt.Errorf("max tokens %d must exceed the %d-token thinking budget of reasoning effort %q", req.MaxTokens, budget, req.ReasoningEffort)
		}
		body.Thinking = &thinking{Type: "enabled", BudgetTokens: budget}
	}
	if f := req.ResponseFormat; f != nil {
		switch f.Type {
		case model.FormatJSONSchema:
			if !isObject(f.Schema) {
				return nil, fmt.Errorf("response format schema: not a JSON object")
			}
			body.OutputConfig = &outputConfig{}
			body.OutputConfig.Format.Type = "json_schema"
			body.OutputConfig.Format.Schema = f.Schema
		case model.FormatJSONObject:
			body.System = append(body.System, block{Type: "text", Text: JSONObjectInstruction})
		}
	}

	return upstream.EncodeBody(&body, tools, req.ProviderOptions["anthropic"])
}

// thinks reports whether the request's body turns extended thinking on: a
// reasoning effort does, unless providerOptions.anthropic sets "thinking",
// which replaces it in the body: then that says (any type but "disabled" is
// on, "enabled" or "adaptive").
func thinks(req model.Request) bool {
	on := req.ReasoningEffort != ""
	if extra := req.ProviderOptions["anthropic"]; len(extra) > 0 {
		var fields map[string]json.RawMessage
		if json.Unmarshal(extra, &fields) == nil {
			if raw, ok := fields["thinking"]; ok {
				var t struct {
					Type string `json:"type"`
				}
				on = json.Unmarshal(raw, &t) == nil && t.Type != "" && t.Type != "disabled"
			}
		}
	}
	return on
}

// toBlocks returns the content blocks of a user, tool or assistant message
// and whether they belong to a user turn. With thinking on, an assistant
// message has the thinking blocks it came with, verbatim and in their
// places: the API requires them back in a tool-use cycle.
func toBlocks(m message.Message, thinking bool) (user bool, blocks []block) {
	switch m.Role {
	case message.Assistant:
		// Each thinking block goes where it came: before the text, or
		// after the tool call it followed (interleaved thinking).
		reasoning := func(after int, last bool) {
			if !thinking {
				return
			}
			for _, r := range m.Reasoning {
				if r.AfterCalls != after && !(last && r.AfterCalls > after) {
					continue
				}
				switch r.Type {
				case "thinking":
					blocks = append(blocks, block{Type: "thinking", Thinking: &r.Text, Signature: r.Signature})
				case "redacted_thinking":
					blocks = append(blocks, block{Type: "redacted_thinking", Data: r.Data})
				}
			}
		}
		reasoning(0, len(m.ToolCalls) == 0)
		if m.Content != "" {
			blocks = append(blocks, block{Type: "text", Text: m.Content})
		}
		for i, tc := range m.ToolCalls {
			blocks = append(blocks, block{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: tc.ArgsJSON()})
			reasoning(i+1, i == len(m.ToolCalls)-1)
		}
		return false, blocks
	case message.Tool:
		b := block{Type: "tool_result", ToolUseID: m.ToolCallID, IsError: m.IsError}
		if m.Content != "" {
			b.Content = append(b.Content, block{Type: "text", Text: m.Content})
		}
		for _, pt := range m.Parts {
			if ib, ok := imageBlock(pt); ok {
				b.Content = append(b.Content, ib)
			}
		}
		return true, []block{b}
	default:
		if m.Content != "" {
			blocks = append(blocks, block{Type: "text", Text: m.Content})
		}
		for _, pt := range m.Parts {
			if b, ok := imageBlock(pt); ok {
				blocks = append(blocks, b)
			}
		}
		return true, blocks
	}
}

// imageBlock is the image block of an image part: base64 data (given, or
// from a base64 data: URL) or a URL; false for other parts.
func imageBlock(pt message.Part) (block, bool) {
	if pt.Type != "image" {
		return block{}, false
	}
	if pt.Data != "" {
		return block{Type: "image", Source: &imageSource{Type: "base64", MediaType: pt.MediaType, Data: pt.Data}}, true
	}
	if rest, ok := strings.CutPrefix(pt.URL, "data:"); ok {
		// data:<media type>;base64,<data>
		meta, data, found := strings.Cut(rest, ",")
		if mt, isB64 := strings.CutSuffix(meta, ";base64"); found && isB64 {
			return block{Type: "image", Source: &imageSource{Type: "base64", MediaType: mt, Data: data}}, true
		}
		return block{}, false
	}
	if pt.URL != "" {
		return block{Type: "image", Source: &imageSource{Type: "url", URL: pt.URL}}, true
	}
	return block{}, false
}

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool {
	s := bytes.TrimSpace(raw)
	return len(s) > 0 && s[0] == '{' && json.Valid(s)
}

// toolCache holds the tools encode sends, each encoded once.
var toolCache = upstream.NewToolCache(encodeTool)

// anTool is one entry of "tools".
type anTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// encodeTool encodes one entry of "tools" with its input_schema.
func encodeTool(t model.ToolDef) ([]byte, error) {
	schema, err := inputSchema(t.Parameters)
	if err != nil {
		return nil, fmt.Errorf("tool %s: parameters: %w", t.Name, err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(anTool{Name: t.Name, Description: t.Description, InputSchema: schema}); err != nil {
		return nil, fmt.Errorf("tool %s: %w", t.Name, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// objectSchema is the input_schema of a tool without parameters: the API
// requires the field, with type "object".
var objectSchema = json.RawMessage(`{"type":"object"}`)

// inputSchema returns a tool's JSON Schema as the input_schema the API
// takes: an object schema (its "type" is always "object"; a "required" list
// keeps its names), {"type":"object"} for none.
func inputSchema(raw json.RawMessage) (json.RawMessage, error) {
	s := bytes.TrimSpace(raw)
	if len(s) == 0 || string(s) == "null" {
		return objectSchema, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(s, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return objectSchema, nil
	}
	m["type"] = json.RawMessage(`"object"`)
	if p, ok := m["properties"]; ok && string(p) == "null" {
		delete(m, "properties")
	}
	if r, ok := m["required"]; ok {
		var list []any
		_ = json.Unmarshal(r, &list)
		var names []string
		for _, v := range list {
			if name, ok := v.(string); ok {
				names = append(names, name)
			}
		}
		if len(names) == 0 {
			delete(m, "required")
		} else {
			m["required"], _ = json.Marshal(names)
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

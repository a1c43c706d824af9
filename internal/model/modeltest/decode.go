package modeltest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
)

// wireRequest is a decoded request body.
type wireRequest struct {
	req          model.Request
	stream       bool
	includeUsage bool
	// thinking is an Anthropic request's extended thinking: the answer
	// starts with a thinking block.
	thinking bool
}

// --- OpenAI Chat Completions ---

type oaRequest struct {
	Model         string          `json:"model"`
	Messages      []oaMessage     `json:"messages"`
	Tools         []oaTool        `json:"tools"`
	ToolChoice    json.RawMessage `json:"tool_choice"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           int             `json:"max_tokens"`
	MaxCompletionTokens int             `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	Stop                json.RawMessage `json:"stop"`
}

type oaMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []oaToolCall    `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	// ReasoningContent is the reasoning an assistant message came back
	// with (recorded as a message.ReasoningText block).
	ReasoningContent string `json:"reasoning_content"`
}

type oaToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type oaTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

type oaPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

func decodeOpenAI(body []byte) (wireRequest, error) {
	var in oaRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return wireRequest{}, fmt.Errorf("invalid JSON body: %w", err)
	}
	if in.Model == "" {
		return wireRequest{}, errors.New("model: field required")
	}
	out := wireRequest{stream: in.Stream, includeUsage: in.StreamOptions != nil && in.StreamOptions.IncludeUsage}
	r := &out.req
	r.Model = in.Model
	r.MaxTokens = in.MaxCompletionTokens
	if r.MaxTokens == 0 {
		r.MaxTokens = in.MaxTokens
	}
	r.Temperature = in.Temperature
	if len(in.Stop) > 0 && string(in.Stop) != "null" {
		var one string
		if json.Unmarshal(in.Stop, &one) == nil {
			r.StopSequences = []string{one}
		} else if err := json.Unmarshal(in.Stop, &r.StopSequences); err != nil {
			return wireRequest{}, fmt.Errorf("stop: %w", err)
		}
	}
	var system []string
	for i, m := range in.Messages {
		text, parts, err := oaContent(m.Content)
		if err != nil {
			return wireRequest{}, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		switch m.Role {
		case "system", "developer":
			system = append(system, text)
		case "user":
			r.Messages = append(r.Messages, message.Message{Role: message.User, Content: text, Parts: parts})
		case "assistant":
			am := message.Message{Role: message.Assistant, Content: text}
			if m.ReasoningContent != "" {
				am.Reasoning = []message.Reasoning{{Type: message.ReasoningText, Text: m.ReasoningContent}}
			}
			for _, tc := range m.ToolCalls {
				am.ToolCalls = append(am.ToolCalls, message.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
			}
			r.Messages = append(r.Messages, am)
		case "tool":
			if m.ToolCallID == "" {
				return wireRequest{}, fmt.Errorf("messages[%d].tool_call_id: field required", i)
			}
			r.Messages = append(r.Messages, message.Message{Role: message.Tool, Content: text, ToolCallID: m.ToolCallID})
		default:
			return wireRequest{}, fmt.Errorf("messages[%d].role: unknown role %q", i, m.Role)
		}
	}
	r.System = strings.Join(system, "\n")
	for _, t := range in.Tools {
		r.Tools = append(r.Tools, model.ToolDef{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	r.ToolChoice = oaToolChoice(in.ToolChoice)
	nameToolMessages(r.Messages)
	return out, nil
}

// oaContent reads a content that is null, a string or a parts array.
func oaContent(raw json.RawMessage) (string, []message.Part, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, nil, err
	}
	var ps []oaPart
	if err := json.Unmarshal(raw, &ps); err != nil {
		return "", nil, err
	}
	var text strings.Builder
	var parts []message.Part
	for _, p := range ps {
		switch p.Type {
		case "text":
			text.WriteString(p.Text)
		case "image_url":
			parts = append(parts, imagePart(p.ImageURL.URL))
		}
	}
	return text.String(), parts, nil
}

// imagePart splits a data URL into media type and data; other URLs stay URLs.
func imagePart(url string) message.Part {
	if rest, ok := strings.CutPrefix(url, "data:"); ok {
		meta, data, found := strings.Cut(rest, ",")
		if mt, b64 := strings.CutSuffix(meta, ";base64"); found && b64 {
			return message.Part{Type: "image", MediaType: mt, Data: data}
		}
	}
	return message.Part{Type: "image", URL: url}
}

func oaToolChoice(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var named struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	_ = json.Unmarshal(raw, &named)
	return named.Function.Name
}

// --- Anthropic Messages ---

type anRequest struct {
	Model         string          `json:"model"`
	MaxTokens     int             `json:"max_tokens"`
	System        json.RawMessage `json:"system"`
	Messages      []anMessage     `json:"messages"`
	Tools         []anTool        `json:"tools"`
	ToolChoice    *anToolChoice   `json:"tool_choice"`
	Stream        bool            `json:"stream"`
	StopSequences []string        `json:"stop_sequences"`
	Temperature   *float64        `json:"temperature"`
	Thinking      *struct {
		Type string `json:"type"`
	} `json:"thinking"`
}

type anMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Source    struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	} `json:"source"`
}

type anTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type anToolChoice struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

func decodeAnthropic(body []byte) (wireRequest, error) {
	var in anRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return wireRequest{}, fmt.Errorf("invalid JSON body: %w", err)
	}
	switch {
	case in.Model == "":
		return wireRequest{}, errors.New("model: Field required")
	case in.MaxTokens <= 0:
		return wireRequest{}, errors.New("max_tokens: Field required")
	}
	out := wireRequest{stream: in.Stream, thinking: in.Thinking != nil && in.Thinking.Type != "" && in.Thinking.Type != "disabled"}
	r := &out.req
	r.Model, r.MaxTokens, r.StopSequences, r.Temperature = in.Model, in.MaxTokens, in.StopSequences, in.Temperature
	if out.thinking {
		if err := checkThinking(in.Messages); err != nil {
			return wireRequest{}, err
		}
	}
	sys, err := anBlocks(in.System)
	if err != nil {
		return wireRequest{}, fmt.Errorf("system: %w", err)
	}
	system := []string{joinText(sys)}
	for i, m := range in.Messages {
		blocks, err := anBlocks(m.Content)
		if err != nil {
			return wireRequest{}, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		switch m.Role {
		case "system":
			system = append(system, joinText(blocks))
		case "user":
			um := message.Message{Role: message.User}
			for _, b := range blocks {
				switch b.Type {
				case "text":
					um.Content += b.Text
				case "image":
					if b.Source.Type == "url" {
						um.Parts = append(um.Parts, message.Part{Type: "image", URL: b.Source.URL})
					} else {
						um.Parts = append(um.Parts, message.Part{Type: "image", MediaType: b.Source.MediaType, Data: b.Source.Data})
					}
				case "tool_result":
					res, err := anBlocks(b.Content)
					if err != nil {
						return wireRequest{}, fmt.Errorf("messages[%d] tool_result content: %w", i, err)
					}
					r.Messages = append(r.Messages, message.Message{Role: message.Tool, Content: joinText(res), ToolCallID: b.ToolUseID, IsError: b.IsError})
				}
			}
			if um.Content != "" || len(um.Parts) > 0 {
				r.Messages = append(r.Messages, um)
			}
		case "assistant":
			am := message.Message{Role: message.Assistant}
			for _, b := range blocks {
				switch b.Type {
				case "text":
					am.Content += b.Text
				case "tool_use":
					args := "{}"
					if len(b.Input) > 0 {
						var buf bytes.Buffer
						if err := json.Compact(&buf, b.Input); err != nil {
							return wireRequest{}, fmt.Errorf("messages[%d] tool_use input: %w", i, err)
						}
						args = buf.String()
					}
					am.ToolCalls = append(am.ToolCalls, message.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
				}
			}
			r.Messages = append(r.Messages, am)
		default:
			return wireRequest{}, fmt.Errorf("messages[%d].role: unknown role %q", i, m.Role)
		}
	}
	r.System = strings.Join(nonEmpty(system), "\n")
	for i, t := range in.Tools {
		// As the API: a custom tool must have an object input_schema.
		var schema struct {
			Type string `json:"type"`
		}
		if len(t.InputSchema) == 0 || json.Unmarshal(t.InputSchema, &schema) != nil || schema.Type != "object" {
			return wireRequest{}, fmt.Errorf("tools.%d.custom.input_schema: Field required (an object schema with type \"object\")", i)
		}
		r.Tools = append(r.Tools, model.ToolDef{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
	}
	if tc := in.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto", "none":
			r.ToolChoice = tc.Type
		case "any":
			r.ToolChoice = "required"
		case "tool":
			r.ToolChoice = tc.Name
		}
	}
	nameToolMessages(r.Messages)
	return out, nil
}

// checkThinking enforces the API's rule for extended thinking in a tool-use
// cycle: the last assistant message, when it calls tools, starts with the
// thinking block it came with, verbatim (its signature is the one the mock
// gave that thinking).
func checkThinking(msgs []anMessage) error {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "assistant" {
			continue
		}
		blocks, err := anBlocks(msgs[i].Content)
		if err != nil || len(blocks) == 0 {
			return nil // reported by the decoding below
		}
		calls := false
		for _, b := range blocks {
			calls = calls || b.Type == "tool_use"
		}
		if !calls {
			return nil
		}
		switch b := blocks[0]; b.Type {
		case "redacted_thinking":
			return nil
		case "thinking":
			if b.Signature != ThinkingSignature(b.Thinking) {
				return fmt.Errorf("messages.%d.content.0: Invalid `signature` in `thinking` block", i)
			}
			return nil
		default:
			return fmt.Errorf("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. "+
				"When `thinking` is enabled, a final `assistant` message must start with a thinking block", i, b.Type)
		}
	}
	return nil
}

// anBlocks reads a content that is null, a string or a block array.
func anBlocks(raw json.RawMessage) ([]anBlock, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []anBlock{{Type: "text", Text: s}}, nil
	}
	var bs []anBlock
	err := json.Unmarshal(raw, &bs)
	return bs, err
}

func joinText(bs []anBlock) string {
	var b strings.Builder
	for _, x := range bs {
		if x.Type == "text" {
			b.WriteString(x.Text)
		}
	}
	return b.String()
}

func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// nameToolMessages sets ToolName on tool messages from the call they answer
// (neither wire carries the name on the result).
func nameToolMessages(msgs []message.Message) {
	names := map[string]string{}
	for i := range msgs {
		for _, tc := range msgs[i].ToolCalls {
			names[tc.ID] = tc.Name
		}
		if msgs[i].Role == message.Tool && msgs[i].ToolName == "" {
			msgs[i].ToolName = names[msgs[i].ToolCallID]
		}
	}
}

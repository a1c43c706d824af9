// Package responses is the OpenAI Responses wire: POST /v1/responses,
// streaming or not, and the routes that read, stream again, cancel and
// delete a stored response. A response with store: true is a turn of a
// durable thread (previous_response_id continues that response's thread,
// conversation names one); store: false is a stateless turn.
package responses

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/schema"
	"github.com/stackbone/stackbone/internal/wire/httpjson"
	"github.com/stackbone/stackbone/internal/wire/openai"
)

// Request is a Responses request. Unknown fields are ignored.
type Request struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       *string           `json:"instructions"`
	Tools              []Tool            `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	Text               *TextOptions      `json:"text"`
	Metadata           map[string]string `json:"metadata"`
	Store              *bool             `json:"store"`
	Stream             bool              `json:"stream"`
	Background         bool              `json:"background"`
	PreviousResponseID string            `json:"previous_response_id"`
	Conversation       json.RawMessage   `json:"conversation"`
}

// Tool is a function tool of a request: flat, unlike Chat Completions'.
// A request's "namespace" tools are flattened into the function tools they
// hold (Namespace names the group, which the calls of those tools carry
// back); hosted tools (web_search, file_search, …) are dropped.
type Tool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
	// Namespace is the namespace tool this function came from.
	Namespace string `json:"namespace,omitempty"`
	// Tools are a namespace tool's own tools, as sent.
	Tools []Tool `json:"tools,omitempty"`
	// at is where the tool sits in the request, for errors.
	at string
}

// Tool types the wire reads; any other is a hosted tool.
const (
	ToolFunction  = "function"
	ToolNamespace = "namespace"
)

// clientTools flattens a request's tools into the function tools the client
// runs: a namespace's function tools join the list with their namespace
// (its other tools are dropped), and a hosted tool we do not offer (web
// search, file search, code interpreter, computer use, MCP, custom tools,
// …) is dropped, as OpenAI-compatible servers do, so a client such as Codex
// that declares them works with the function tools it also sends.
func clientTools(in []Tool) []Tool {
	var out []Tool
	for i, t := range in {
		at := fmt.Sprintf("tools[%d]", i)
		switch t.Type {
		case ToolFunction:
			t.at, t.Namespace, t.Tools = at, "", nil
			out = append(out, t)
		case ToolNamespace:
			for j, f := range t.Tools {
				if f.Type != ToolFunction {
					continue
				}
				f.at, f.Namespace, f.Tools = fmt.Sprintf("%s.tools[%d]", at, j), t.Name, nil
				out = append(out, f)
			}
		}
	}
	return out
}

// TextOptions is the request's text configuration: its output format.
type TextOptions struct {
	Format json.RawMessage `json:"format,omitempty"`
}

// Item is an input or output item: a message, a function call or a
// function call's output.
type Item struct {
	Type string `json:"type"`
	ID   string `json:"id,omitempty"`
	// message
	Role    string          `json:"role,omitempty"`
	Content json.RawMessage `json:"content,omitempty"`
	Status  string          `json:"status,omitempty"`
	// function_call and function_call_output
	CallID    string          `json:"call_id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments *string         `json:"arguments,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
}

// Item types.
const (
	ItemMessage            = "message"
	ItemFunctionCall       = "function_call"
	ItemFunctionCallOutput = "function_call_output"
)

// maxMetadata bounds metadata as OpenAI does: 16 pairs, keys of at most 64
// characters, values of at most 512.
const (
	maxMetadata      = 16
	maxMetadataKey   = 64
	maxMetadataValue = 512
)

// Decode parses and checks a request body.
func Decode(body []byte) (*Request, error) { return DecodeContext(context.Background(), body) }

// DecodeContext is Decode for a request whose context is ctx: once ctx
// ends, no more of its tool schemas are compiled.
func DecodeContext(ctx context.Context, body []byte) (*Request, error) {
	var req Request
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&req); err != nil {
		return nil, apierror.Invalid("", "The request body is not valid JSON: %v", httpjson.Problem(err))
	}
	if req.Model == "" {
		return nil, apierror.Invalid("model", "`model` is required: name the agent to talk to.")
	}
	if len(bytes.TrimSpace(req.Input)) == 0 || string(bytes.TrimSpace(req.Input)) == "null" {
		return nil, apierror.Invalid("input", "`input` is required: a string or a list of input items.")
	}
	tools := schema.NewTools(ctx)
	req.Tools = clientTools(req.Tools)
	for i, t := range req.Tools {
		param := t.at
		if t.Name == "" {
			return nil, apierror.Invalid(param+".name", "Every function tool needs a `name`.")
		}
		params, err := tools.Parameters(t.Parameters)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			return nil, apierror.Invalid(param+".parameters", "`%s.parameters` (tool %q) %v.", param, t.Name, err)
		}
		req.Tools[i].Parameters = params
	}
	if err := checkMetadata(req.Metadata); err != nil {
		return nil, err
	}
	if req.Background && !req.Stored() {
		return nil, apierror.Invalid("background", "A background response must be stored: drop `store: false` or `background: true`.")
	}
	if req.PreviousResponseID != "" && len(req.Conversation) > 0 && string(req.Conversation) != "null" {
		return nil, apierror.Invalid("conversation", "Send `previous_response_id` or `conversation`, not both.")
	}
	return &req, nil
}

// checkMetadata bounds metadata (a request's, a conversation's) as OpenAI
// does.
func checkMetadata(m map[string]string) error {
	if len(m) > maxMetadata {
		return apierror.Invalid("metadata", "`metadata` holds at most %d key-value pairs.", maxMetadata)
	}
	for k, v := range m {
		if len(k) > maxMetadataKey || len(v) > maxMetadataValue {
			return apierror.Invalid("metadata", "`metadata` keys are at most %d characters and values at most %d.", maxMetadataKey, maxMetadataValue)
		}
	}
	return nil
}

// Stored reports whether the response is kept (store defaults to true).
func (req *Request) Stored() bool { return req.Store == nil || *req.Store }

// ConversationID is the thread the request names with conversation: a
// string or {"id": …}; "" when absent.
func (req *Request) ConversationID() (string, error) {
	raw := bytes.TrimSpace(req.Conversation)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var id string
	if raw[0] == '{' {
		var obj struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw, &obj) != nil || obj.ID == "" {
			return "", apierror.Invalid("conversation.id", "`conversation` must be a conversation id or an object with `id`.")
		}
		id = obj.ID
	} else if json.Unmarshal(raw, &id) != nil || id == "" {
		return "", apierror.Invalid("conversation", "`conversation` must be a conversation id or an object with `id`.")
	}
	if err := apierror.CheckID("conversation", id); err != nil {
		return "", err
	}
	return id, nil
}

// Items returns the input as items: a string is one user message. Items
// without an id get one (they are listed by GET …/input_items).
func (req *Request) Items(newID func(string) string) ([]Item, error) {
	raw := bytes.TrimSpace(req.Input)
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, apierror.Invalid("input", "`input` is not a valid string.")
		}
		text, _ := json.Marshal([]map[string]string{{"type": "input_text", "text": s}})
		return []Item{{Type: ItemMessage, ID: newID("msg"), Role: "user", Content: text}}, nil
	}
	var items []Item
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, apierror.Invalid("input", "`input` must be a string or a list of input items.")
	}
	if len(items) == 0 {
		return nil, apierror.Invalid("input", "`input` must hold at least one item.")
	}
	for i := range items {
		it := &items[i]
		if it.Type == "" && it.Role != "" {
			it.Type = ItemMessage
		}
		if it.Type == ItemMessage {
			it.Content = partsOf(it.Role, it.Content)
		}
		if it.Type == ItemReference && it.ID == "" {
			return nil, apierror.Invalid(fmt.Sprintf("input[%d].id", i), "An item_reference needs the `id` of a stored item.")
		}
		if it.ID == "" {
			switch it.Type {
			case ItemFunctionCall:
				it.ID = newID("fc")
			case ItemFunctionCallOutput:
				it.ID = newID("fco")
			default:
				it.ID = newID("msg")
			}
		}
	}
	return items, nil
}

// partsOf gives a message item's string content as one text part, as
// input_items lists it (input_text; output_text for the assistant's).
func partsOf(role string, content json.RawMessage) json.RawMessage {
	raw := bytes.TrimSpace(content)
	if len(raw) == 0 || raw[0] != '"' {
		return content
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return content
	}
	typ := "input_text"
	if role == "assistant" {
		typ = "output_text"
	}
	b, err := json.Marshal([]map[string]any{{"type": typ, "text": s}})
	if err != nil {
		return content
	}
	return b
}

// ignored are input item types a turn can carry but an agent has no use
// for: reasoning the client kept.
var ignored = map[string]bool{"reasoning": true}

// ItemReference is an input item that names a stored output item by id
// (what the Vercel AI SDK sends for the assistant's earlier text).
const ItemReference = "item_reference"

// Resolver finds the stored message an item_reference names (nil: none
// can be resolved yet).
type Resolver func(id string) (*message.Message, error)

// Messages maps input items onto the engine's messages (instructions
// first, as a system message) and, for each message, the input item it
// came from (-1: none), so input errors name the client's own item.
func Messages(instructions *string, items []Item, resolve Resolver) ([]message.Message, []int, error) {
	var msgs []message.Message
	var origin []int
	if instructions != nil && *instructions != "" {
		msgs, origin = append(msgs, message.Message{Role: message.System, Content: *instructions}), append(origin, -1)
	}
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case ItemMessage:
			m, err := it.message(param)
			if err != nil {
				return nil, nil, err
			}
			msgs, origin = append(msgs, m), append(origin, i)
		case ItemFunctionCall:
			if it.CallID == "" {
				return nil, nil, apierror.Invalid(param+".call_id", "A function_call item needs `call_id`.")
			}
			if it.Name == "" {
				return nil, nil, apierror.Invalid(param+".name", "A function_call item needs `name`.")
			}
			call := message.ToolCall{ID: it.CallID, Name: it.Name, Arguments: "{}"}
			if it.Arguments != nil && *it.Arguments != "" {
				call.Arguments = *it.Arguments
			}
			// Calls right after an assistant message (or each other) are
			// that message's calls, as one model step made them.
			if n := len(msgs); n > 0 && msgs[n-1].Role == message.Assistant {
				msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, call)
				continue
			}
			msgs, origin = append(msgs, message.Message{Role: message.Assistant, ToolCalls: []message.ToolCall{call}}), append(origin, i)
		case ItemFunctionCallOutput:
			if it.CallID == "" {
				return nil, nil, apierror.Invalid(param+".call_id", "A function_call_output item needs `call_id`.")
			}
			out, err := outputText(it.Output, param+".output")
			if err != nil {
				return nil, nil, err
			}
			msgs, origin = append(msgs, message.Message{Role: message.Tool, ToolCallID: it.CallID, Content: out}), append(origin, i)
		case ItemReference:
			if resolve == nil {
				continue
			}
			m, err := resolve(it.ID)
			if err != nil {
				return nil, nil, err
			}
			ref := *m
			ref.ID = "" // a copy in this conversation
			msgs, origin = append(msgs, ref), append(origin, i)
		case "":
			return nil, nil, apierror.Invalid(param+".type", "Every input item needs a `type` (message, function_call, function_call_output) or a `role`.")
		default:
			if !ignored[it.Type] {
				return nil, nil, apierror.Invalid(param+".type", "Unsupported input item type %q: send message, function_call or function_call_output items.", it.Type)
			}
		}
	}
	return msgs, origin, nil
}

// part is a content part of a message item.
type part struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	ImageURL json.RawMessage `json:"image_url"`
}

func (it Item) message(param string) (message.Message, error) {
	var m message.Message
	switch it.Role {
	case "user":
		m.Role = message.User
	case "assistant":
		m.Role = message.Assistant
	case "system", "developer":
		m.Role = message.System
	case "":
		return m, apierror.Invalid(param+".role", "A message item needs a `role`.")
	default:
		return m, apierror.Invalid(param+".role", "Unknown role %q: want user, assistant, system or developer.", it.Role)
	}
	raw := bytes.TrimSpace(it.Content)
	if len(raw) == 0 || string(raw) == "null" {
		return m, apierror.Invalid(param+".content", "A message item needs `content`.")
	}
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &m.Content); err != nil {
			return m, apierror.Invalid(param+".content", "`content` is not a valid string.")
		}
		return m, nil
	}
	var parts []part
	if err := json.Unmarshal(raw, &parts); err != nil {
		return m, apierror.Invalid(param+".content", "`content` must be a string or a list of content parts.")
	}
	var b strings.Builder
	for j, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text", "refusal":
			b.WriteString(p.Text)
		case "input_image":
			var url string
			if json.Unmarshal(p.ImageURL, &url) != nil || url == "" {
				return m, apierror.Invalid(fmt.Sprintf("%s.content[%d].image_url", param, j), "An input_image part needs `image_url` (a URL or a data: URL).")
			}
			m.Parts = append(m.Parts, openai.ImagePart(url))
		default:
			return m, apierror.Invalid(fmt.Sprintf("%s.content[%d].type", param, j), "Unsupported content part type %q: send input_text or input_image.", p.Type)
		}
	}
	m.Content = b.String()
	return m, nil
}

// outputText reads a function_call_output's output: a string, or a list of
// parts whose text is joined.
func outputText(raw json.RawMessage, param string) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", apierror.Invalid(param, "A function_call_output item needs `output`.")
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", apierror.Invalid(param, "`output` is not a valid string.")
		}
		return s, nil
	}
	var parts []part
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", apierror.Invalid(param, "`output` must be a string or a list of content parts.")
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// ToolChoice reads tool_choice: "auto", "none", "required", or
// {"type":"function","name":…}.
func (req *Request) toolChoice() (string, error) {
	raw := bytes.TrimSpace(req.ToolChoice)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto", "none", "required":
			return s, nil
		}
		return "", apierror.Invalid("tool_choice", "`tool_choice` must be auto, none, required or {\"type\":\"function\",\"name\":…}.")
	}
	var obj struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &obj) != nil || obj.Type != "function" || obj.Name == "" {
		return "", apierror.Invalid("tool_choice", "`tool_choice` must be auto, none, required or {\"type\":\"function\",\"name\":…}.")
	}
	return obj.Name, nil
}

// format reads text.format: text (nil), json_object, or json_schema with
// name, schema, strict and description flat in the object.
func (req *Request) format() (*model.ResponseFormat, error) {
	if req.Text == nil {
		return nil, nil
	}
	return openai.OutputFormat("text.format", req.Text.Format, func(obj []byte) (openai.JSONSchemaSpec, string, error) {
		var js openai.JSONSchemaSpec
		if err := json.Unmarshal(obj, &js); err != nil {
			return js, "", apierror.Invalid("text.format", "A json_schema text format needs a string `name` and a `schema` object.")
		}
		return js, "text.format", nil
	})
}

// input maps the request onto an engine.Input (tenant and thread are the
// caller's to fill), with each engine message's input item.
func (req *Request) input(items []Item, resolve Resolver) (engine.Input, []int, error) {
	// A background response can be followed as it streams (GET with
	// stream=true): only a plain request sees nothing before the end.
	in := engine.Input{Agent: req.Model, Temperature: req.Temperature, Collected: !req.Stream && !req.Background,
		Multitask: req.Metadata["multitask"]}
	if req.MaxOutputTokens != nil {
		if *req.MaxOutputTokens < 1 {
			return in, nil, apierror.Invalid("max_output_tokens", "`max_output_tokens` must be at least 1.")
		}
		in.MaxTokens = *req.MaxOutputTokens
	}
	var err error
	if in.ToolChoice, err = req.toolChoice(); err != nil {
		return in, nil, err
	}
	if in.ResponseFormat, err = req.format(); err != nil {
		return in, nil, err
	}
	for _, t := range req.Tools {
		in.ClientTools = append(in.ClientTools, model.ToolDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	msgs, origin, err := Messages(req.Instructions, items, resolve)
	if err != nil {
		return in, nil, err
	}
	in.Messages = msgs
	return in, origin, nil
}

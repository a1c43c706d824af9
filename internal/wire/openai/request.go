// Package openai is the OpenAI Chat Completions wire: it decodes requests
// leniently into a engine.Input and encodes canonical events as chunks or a
// completion body, exactly as the official SDKs expect.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/schema"
	"github.com/stackbone/stackbone/internal/wire/httpjson"
)

// Request is a Chat Completions request. Unknown fields are ignored.
type Request struct {
	Model         string          `json:"model"`
	Messages      []Message       `json:"messages"`
	Tools         []Tool          `json:"tools"`
	ToolChoice    json.RawMessage `json:"tool_choice"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stop                json.RawMessage `json:"stop"`
	Temperature         *float64        `json:"temperature"`
	ResponseFormat      json.RawMessage `json:"response_format"`
}

// Message is a request message: content may be null, a string or parts.
type Message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []ToolCall      `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
}

// ToolCall is an assistant's call in a request or response.
type ToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is the function of a tool call.
type FunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// Tool is a client-declared function tool.
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

type part struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// Decode parses and checks a request body.
func Decode(body []byte) (*Request, error) { return DecodeContext(context.Background(), body) }

// DecodeContext is Decode for a request whose context is ctx: once ctx
// ends, no more of its tool schemas are compiled.
func DecodeContext(ctx context.Context, body []byte) (*Request, error) {
	var req Request
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		return nil, apierror.Invalid("", "The request body is not valid JSON: %v", httpjson.Problem(err))
	}
	if req.Model == "" {
		return nil, apierror.Invalid("model", "`model` is required: name the agent to talk to.")
	}
	if len(req.Messages) == 0 {
		return nil, apierror.Invalid("messages", "`messages` must hold at least one message.")
	}
	tools := schema.NewTools(ctx)
	for i, t := range req.Tools {
		if t.Function.Name == "" {
			return nil, apierror.Invalid(fmt.Sprintf("tools[%d].function.name", i), "Every tool needs a function name.")
		}
		params, err := tools.Parameters(t.Function.Parameters)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			param := fmt.Sprintf("tools[%d].function.parameters", i)
			return nil, apierror.Invalid(param, "`%s` (tool %q) %v.", param, t.Function.Name, err)
		}
		req.Tools[i].Function.Parameters = params
	}
	return &req, nil
}

// ToolParam is the parameter path of client tool i of the request's
// engine.Input, for errors about it.
func (req *Request) ToolParam(i int) string {
	return fmt.Sprintf("tools[%d].function.name", i)
}

// Input maps the request onto a engine.Input (tenant and thread are the
// caller's to fill).
func (req *Request) Input() (engine.Input, error) {
	in := engine.Input{Agent: req.Model, Temperature: req.Temperature, Collected: !req.Stream, History: true}
	switch {
	case req.MaxCompletionTokens != nil:
		in.MaxTokens = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		in.MaxTokens = *req.MaxTokens
	}
	if len(req.Stop) > 0 && string(req.Stop) != "null" {
		var one string
		if json.Unmarshal(req.Stop, &one) == nil {
			in.StopSequences = []string{one}
		} else if err := json.Unmarshal(req.Stop, &in.StopSequences); err != nil {
			return in, apierror.Invalid("stop", "`stop` must be a string or an array of strings.")
		}
	}
	if len(req.ToolChoice) > 0 && string(req.ToolChoice) != "null" {
		var s string
		if json.Unmarshal(req.ToolChoice, &s) == nil {
			in.ToolChoice = s
		} else {
			var obj struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			}
			if json.Unmarshal(req.ToolChoice, &obj) == nil && obj.Function.Name != "" {
				in.ToolChoice = obj.Function.Name
			}
		}
	}
	f, err := responseFormat(req.ResponseFormat)
	if err != nil {
		return in, err
	}
	in.ResponseFormat = f
	for _, t := range req.Tools {
		in.ClientTools = append(in.ClientTools, model.ToolDef{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	for i, m := range req.Messages {
		msg, err := m.canonical(i)
		if err != nil {
			return in, err
		}
		in.Messages = append(in.Messages, msg)
	}
	return in, nil
}

// schemaName is what OpenAI accepts as response_format.json_schema.name.
var schemaName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// responseFormat reads response_format: absent, null or {"type":"text"}
// is free text (nil); {"type":"json_object"}; or {"type":"json_schema",
// "json_schema":{"name","description","schema","strict"}}.
func responseFormat(raw json.RawMessage) (*model.ResponseFormat, error) {
	return OutputFormat("response_format", raw, func(obj []byte) (JSONSchemaSpec, string, error) {
		var rf struct {
			JSONSchema json.RawMessage `json:"json_schema"`
		}
		var js JSONSchemaSpec
		_ = json.Unmarshal(obj, &rf)
		if b := bytes.TrimSpace(rf.JSONSchema); len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &js) != nil {
			return js, "", apierror.Invalid("response_format.json_schema", "A json_schema response format needs `json_schema`: an object with `name` and `schema`.")
		}
		return js, "response_format.json_schema", nil
	})
}

// JSONSchemaSpec is what a json_schema output format says: nested under
// response_format.json_schema on Chat Completions, flat in text.format on
// Responses.
type JSONSchemaSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Strict      *bool           `json:"strict"`
}

// OutputFormat reads an output format object at param: absent, null or
// {"type":"text"} is free text (nil); {"type":"json_object"}; or
// {"type":"json_schema", …}, whose spec (and the param its fields sit at)
// spec reads from the object, checked by JSONSchemaFormat.
func OutputFormat(param string, raw json.RawMessage, spec func(obj []byte) (JSONSchemaSpec, string, error)) (*model.ResponseFormat, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var f struct {
		Type string `json:"type"`
	}
	if raw[0] != '{' || json.Unmarshal(raw, &f) != nil {
		return nil, apierror.Invalid(param, "`%s` must be an object such as {\"type\":\"json_object\"}.", param)
	}
	switch f.Type {
	case "text":
		return nil, nil
	case model.FormatJSONObject:
		return &model.ResponseFormat{Type: model.FormatJSONObject}, nil
	case model.FormatJSONSchema:
		js, at, err := spec(raw)
		if err != nil {
			return nil, err
		}
		return JSONSchemaFormat(at, js.Name, js.Description, js.Schema, js.Strict)
	case "":
		return nil, apierror.Invalid(param+".type", "`%s.type` is required: text, json_object or json_schema.", param)
	}
	return nil, apierror.Invalid(param+".type", "Unknown `%s.type` %q: want text, json_object or json_schema.", param, f.Type)
}

// JSONSchemaFormat checks a json_schema output format (param is where its
// fields sit in the request: response_format.json_schema on Chat
// Completions, text.format on Responses): a schema that compiles, and a
// name OpenAI accepts (a missing one becomes "response").
func JSONSchemaFormat(param, name, description string, sch json.RawMessage, strict *bool) (*model.ResponseFormat, error) {
	if s := bytes.TrimSpace(sch); len(s) == 0 || s[0] != '{' {
		return nil, apierror.Invalid(param+".schema", "`%s.schema` must be a JSON Schema object.", param)
	}
	if name == "" {
		name = "response"
	} else if !schemaName.MatchString(name) {
		return nil, apierror.Invalid(param+".name", "`%s.name` must be 1 to 64 letters, digits, underscores or dashes.", param)
	}
	if _, err := schema.CompileClient(sch); err != nil {
		return nil, apierror.Invalid(param+".schema", "`%s.schema` is not a valid JSON Schema: %v", param, err)
	}
	return &model.ResponseFormat{Type: model.FormatJSONSchema, Name: name, Description: description,
		Schema: bytes.TrimSpace(sch), Strict: strict != nil && *strict}, nil
}

func (m Message) canonical(i int) (message.Message, error) {
	param := fmt.Sprintf("messages[%d]", i)
	text, parts, err := content(m.Content, param)
	if err != nil {
		return message.Message{}, err
	}
	out := message.Message{Content: text, Parts: parts}
	switch m.Role {
	case "system", "developer":
		out.Role = message.System
	case "user":
		out.Role = message.User
	case "assistant":
		out.Role = message.Assistant
		for _, c := range m.ToolCalls {
			out.ToolCalls = append(out.ToolCalls, message.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
	case "tool", "function":
		out.Role = message.Tool
		out.ToolCallID = m.ToolCallID
		if out.ToolCallID == "" {
			return out, apierror.Invalid(param+".tool_call_id", "A tool message needs `tool_call_id`.")
		}
	case "":
		return out, apierror.Invalid(param+".role", "Every message needs a `role`.")
	default:
		return out, apierror.Invalid(param+".role", "Unknown role %q.", m.Role)
	}
	return out, nil
}

// content reads null, a string, or an array of parts.
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
	var ps []part
	if err := json.Unmarshal(raw, &ps); err != nil {
		return "", nil, apierror.Invalid(param+".content", "`content` must be null, a string or an array of parts.")
	}
	var b strings.Builder
	var parts []message.Part
	for _, p := range ps {
		switch p.Type {
		case "text", "input_text":
			b.WriteString(p.Text)
		case "image_url":
			if p.ImageURL == nil {
				continue
			}
			parts = append(parts, ImagePart(p.ImageURL.URL))
		}
	}
	return b.String(), parts, nil
}

// ImagePart splits a data: URL into media type and data.
func ImagePart(url string) message.Part {
	if rest, ok := strings.CutPrefix(url, "data:"); ok {
		if meta, data, ok := strings.Cut(rest, ","); ok {
			return message.Part{Type: "image", MediaType: strings.TrimSuffix(meta, ";base64"), Data: data}
		}
	}
	return message.Part{Type: "image", URL: url}
}

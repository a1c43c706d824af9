// Package anthropic is the model.Provider for the Anthropic Messages API. It
// streams with the official anthropic-sdk-go, whose own retries are off: the
// retry policy is model.RetryPolicy.
package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"strings"

	ant "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/internal/upstream"
)

// DefaultMaxTokens is sent when a request sets no MaxTokens (the Messages
// API requires the field).
const DefaultMaxTokens = 4096

// ThinkingBudgets maps a reasoning effort to the extended-thinking budget
// (thinking.budget_tokens) it asks for; 1024 is the API's minimum.
var ThinkingBudgets = map[string]int64{"minimal": 1024, "low": 1024, "medium": 4096, "high": 16384}

// Config configures a Provider. The caller reads the environment
// (ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY); this package does not.
type Config struct {
	// BaseURL is the API root without "/v1" (the SDK appends
	// "/v1/messages"). Empty means https://api.anthropic.com.
	BaseURL string
	// APIKey authenticates the requests when not empty.
	APIKey string
	// HTTPClient is used for requests (nil: a client of the provider's own,
	// with an idle pool sized for concurrent calls).
	HTTPClient *http.Client
	// Retry bounds retries of 429/5xx/connection failures.
	Retry model.RetryPolicy
	// Logger receives retry warnings (nil: discard).
	Logger *slog.Logger
}

// Provider streams Anthropic Messages.
type Provider struct {
	cfg    Config
	client ant.Client
	log    *slog.Logger
}

var (
	_ model.Provider       = (*Provider)(nil)
	_ model.FormatHonourer = (*Provider)(nil)
)

// JSONObjectInstruction joins the system prompt for a json_object response
// format: the Messages API has no "any JSON object" mode, so the model is
// told, and the engine checks the final answer.
const JSONObjectInstruction = "Answer with a single JSON object and nothing else: no prose before or after it, no Markdown code fences."

// HonoursFormat reports that both response formats can be honoured:
// json_schema as structured output (output_config.format), json_object by
// instruction (JSONObjectInstruction).
func (p *Provider) HonoursFormat(f model.ResponseFormat) bool {
	return f.Known()
}

// New returns a Provider for cfg.
func New(cfg Config) *Provider {
	hc := cfg.HTTPClient
	if hc == nil {
		hc = upstream.NewHTTPClient()
	}
	opts := []option.RequestOption{
		// Nothing is read from the process environment: the caller decides.
		option.WithoutEnvironmentDefaults(),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Provider{cfg: cfg, client: ant.NewClient(opts...), log: log.With("upstream", "anthropic")}
}

// Stream runs one step as a streamed message.
func (p *Provider) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Chunk, error] {
	params, err := Params(req)
	if err != nil {
		return func(yield func(model.Chunk, error) bool) { yield(model.Chunk{}, err) }
	}
	return p.cfg.Retry.Stream(ctx, p.log, req.Timeouts, func(ctx context.Context) iter.Seq2[model.Chunk, error] {
		return p.attempt(ctx, params)
	})
}

// streamEvent is the part of a Messages stream event the provider reads
// (the SDK's event union cost most of a call's CPU to decode).
type streamEvent struct {
	Type    string `json:"type"`
	Index   int64  `json:"index"`
	Message struct {
		Usage eventUsage `json:"usage"`
	} `json:"message"`
	ContentBlock struct {
		Type string `json:"type"`
		Text string `json:"text"`
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"content_block"`
	Delta struct {
		Type        string         `json:"type"`
		Text        string         `json:"text"`
		PartialJSON string         `json:"partial_json"`
		StopReason  ant.StopReason `json:"stop_reason"`
	} `json:"delta"`
	Usage eventUsage `json:"usage"`
}

type eventUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// attempt sends the request once and streams its answer. The SDK sends it
// (headers, errors); the events are read here.
func (p *Provider) attempt(ctx context.Context, params ant.MessageNewParams) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		fail := func(err error) { yield(model.Chunk{}, upstream.MapError(ctx, "anthropic", err, statusOf)) }
		var resp *http.Response
		if err := p.client.Post(ctx, "v1/messages", params, &resp, option.WithJSONSet("stream", true)); err != nil {
			fail(err)
			return
		}
		dec := ssestream.NewDecoder(resp)
		if dec == nil {
			fail(errors.New("no answer body"))
			return
		}
		defer func() { _ = dec.Close() }()

		var (
			calls   = map[int64]int{} // content block index -> call index
			n       int
			stop    ant.StopReason
			usage   event.Usage
			stopped bool
			early   bool // input tokens reported
		)
		// send yields c, preceded by the input tokens message_start
		// reported, so a client learns them before any output (and a
		// retry is still possible until the first chunk).
		send := func(c model.Chunk) bool {
			if !early && usage.InputTokens > 0 {
				early = true
				if !yield(model.Chunk{Type: model.InputTokens, Usage: event.Usage{InputTokens: usage.InputTokens}}, nil) {
					return false
				}
			}
			return yield(c, nil)
		}
		var ev streamEvent
		for dec.Next() {
			// Events as the SDK's stream takes them: ping and unnamed ones
			// skipped, an error event ends the stream.
			data := bytes.TrimSuffix(dec.Event().Data, []byte("\n"))
			switch dec.Event().Type {
			case "ping", "":
				continue
			case "error":
				fail(streamError(resp, data))
				return
			}
			if len(data) == 0 {
				continue
			}
			ev = streamEvent{}
			if err := json.Unmarshal(data, &ev); err != nil {
				fail(err)
				return
			}
			switch ev.Type {
			case "message_start":
				usage.InputTokens = int(ev.Message.Usage.InputTokens)
				usage.OutputTokens = int(ev.Message.Usage.OutputTokens)
			case "content_block_start":
				cb := ev.ContentBlock
				switch cb.Type {
				case "text":
					if cb.Text != "" && !send(model.Chunk{Type: model.Text, Text: cb.Text}) {
						return
					}
				case "tool_use":
					calls[ev.Index] = n
					n++
					if !send(model.Chunk{Type: model.ToolCallStart, Index: calls[ev.Index], ID: cb.ID, Name: cb.Name}) {
						return
					}
				}
			case "content_block_delta":
				switch ev.Delta.Type {
				case "text_delta":
					if ev.Delta.Text != "" && !send(model.Chunk{Type: model.Text, Text: ev.Delta.Text}) {
						return
					}
				case "input_json_delta":
					idx, ok := calls[ev.Index]
					if ok && ev.Delta.PartialJSON != "" &&
						!send(model.Chunk{Type: model.ToolCallArgs, Index: idx, Text: ev.Delta.PartialJSON}) {
						return
					}
				}
			case "message_delta":
				if ev.Delta.StopReason != "" {
					stop = ev.Delta.StopReason
				}
				if ev.Usage.InputTokens > 0 {
					usage.InputTokens = int(ev.Usage.InputTokens)
				}
				usage.OutputTokens = int(ev.Usage.OutputTokens)
			case "message_stop":
				stopped = true
			}
		}
		if err := dec.Err(); err != nil {
			fail(err)
			return
		}
		if !stopped {
			yield(model.Chunk{}, &model.Error{Status: http.StatusBadGateway, Message: "anthropic: stream ended without message_stop"})
			return
		}
		send(model.Chunk{Type: model.Finish, Stop: stopReason(stop, n > 0), Usage: usage})
	}
}

// streamError is the failure an error event inside a 200 stream reports,
// as the SDK builds it: an API error carrying the event's error.
func streamError(resp *http.Response, data []byte) error {
	e := &ant.Error{Request: resp.Request, Response: resp, StatusCode: resp.StatusCode,
		RequestID: resp.Header.Get("request-id"), WorkspaceID: resp.Header.Get("anthropic-workspace-id")}
	if e.UnmarshalJSON(data) != nil {
		return fmt.Errorf("received error while streaming: %s", data)
	}
	return e
}

func statusOf(err error) (int, string, http.Header, bool) {
	var apiErr *ant.Error
	if !errors.As(err, &apiErr) {
		return 0, "", nil, false
	}
	msg := apiErr.Message
	if msg == "" {
		msg = http.StatusText(apiErr.StatusCode)
	}
	var h http.Header
	if apiErr.Response != nil {
		h = apiErr.Response.Header
	}
	return apiErr.StatusCode, msg, h, true
}

func stopReason(r ant.StopReason, hadCalls bool) event.StopReason {
	switch {
	case hadCalls || r == ant.StopReasonToolUse:
		return event.StopToolCalls
	case r == ant.StopReasonMaxTokens || r == ant.StopReasonModelContextWindowExceeded:
		return event.StopLength
	default:
		return event.StopEnd
	}
}

// Params maps a canonical request onto Messages API parameters: system
// prompt (and system messages) to "system", tool messages to tool_result
// blocks in user turns (consecutive user-side messages merged into one turn),
// assistant tool calls to tool_use blocks, images to image blocks.
// Temperature and top_p are not sent: the 2026-10-21 API version dropped
// them (an endpoint that still takes them gets them through
// ProviderOptions["anthropic"]); Seed has no equivalent. ReasoningEffort
// turns on extended thinking with ThinkingBudgets' budget, raising an unset
// max_tokens to the budget plus DefaultMaxTokens; ParallelToolCalls false
// becomes tool_choice.disable_parallel_tool_use. ProviderOptions["anthropic"]
// fields are set on the body last, replacing any of the above. A
// json_schema response format becomes output_config.format (structured
// outputs; Name and Strict have no equivalent, the schema is always
// enforced); json_object becomes JSONObjectInstruction in the system prompt.
func Params(req model.Request) (ant.MessageNewParams, error) {
	params := ant.MessageNewParams{Model: req.Model, MaxTokens: int64(req.MaxTokens)}
	if params.MaxTokens <= 0 {
		params.MaxTokens = DefaultMaxTokens
	}
	if req.System != "" {
		params.System = append(params.System, ant.TextBlockParam{Text: req.System})
	}
	for _, m := range req.Messages {
		var blocks []ant.ContentBlockParamUnion
		user := true
		switch m.Role {
		case message.System:
			if m.Content != "" {
				params.System = append(params.System, ant.TextBlockParam{Text: m.Content})
			}
			continue
		case message.Assistant:
			user = false
			if m.Content != "" {
				blocks = append(blocks, ant.NewTextBlock(m.Content))
			}
			for _, tc := range m.ToolCalls {
				blocks = append(blocks, ant.NewToolUseBlock(tc.ID, tc.ArgsJSON(), tc.Name))
			}
		case message.Tool:
			b := ant.ToolResultBlockParam{ToolUseID: m.ToolCallID}
			if m.Content != "" {
				b.Content = []ant.ToolResultBlockParamContentUnion{{OfText: &ant.TextBlockParam{Text: m.Content}}}
			}
			for _, pt := range m.Parts {
				if ib, ok := imageBlock(pt); ok && ib.OfImage != nil {
					b.Content = append(b.Content, ant.ToolResultBlockParamContentUnion{OfImage: ib.OfImage})
				}
			}
			if m.IsError {
				b.IsError = ant.Bool(true)
			}
			blocks = append(blocks, ant.ContentBlockParamUnion{OfToolResult: &b})
		default:
			if m.Content != "" {
				blocks = append(blocks, ant.NewTextBlock(m.Content))
			}
			for _, pt := range m.Parts {
				if b, ok := imageBlock(pt); ok {
					blocks = append(blocks, b)
				}
			}
		}
		if len(blocks) == 0 {
			continue // the API rejects empty turns
		}
		params.Messages = appendTurn(params.Messages, user, blocks)
	}
	tools, err := toolCache.Encode(req.Tools)
	if err != nil {
		return params, err
	}
	for _, t := range tools {
		params.Tools = append(params.Tools, param.Override[ant.ToolUnionParam](json.RawMessage(t)))
	}
	serial := req.ParallelToolCalls != nil && !*req.ParallelToolCalls && len(req.Tools) > 0
	switch req.ToolChoice {
	case "":
		if serial {
			params.ToolChoice.OfAuto = &ant.ToolChoiceAutoParam{DisableParallelToolUse: ant.Bool(true)}
		}
	case "auto":
		params.ToolChoice.OfAuto = &ant.ToolChoiceAutoParam{}
		if serial {
			params.ToolChoice.OfAuto.DisableParallelToolUse = ant.Bool(true)
		}
	case "required":
		params.ToolChoice.OfAny = &ant.ToolChoiceAnyParam{}
		if serial {
			params.ToolChoice.OfAny.DisableParallelToolUse = ant.Bool(true)
		}
	case "none":
		params.ToolChoice.OfNone = &ant.ToolChoiceNoneParam{}
	default:
		params.ToolChoice = ant.ToolChoiceParamOfTool(req.ToolChoice)
	}
	if len(req.StopSequences) > 0 {
		params.StopSequences = req.StopSequences
	}
	if req.ReasoningEffort != "" {
		budget, ok := ThinkingBudgets[req.ReasoningEffort]
		if !ok {
			return params, fmt.Errorf("reasoning effort %q: want one of %s", req.ReasoningEffort, strings.Join(model.ReasoningEfforts, ", "))
		}
		if req.MaxTokens <= 0 {
			params.MaxTokens = budget + DefaultMaxTokens
		} else if params.MaxTokens <= budget {
			return params, fmt.Errorf("max tokens %d must exceed the %d-token thinking budget of reasoning effort %q", req.MaxTokens, budget, req.ReasoningEffort)
		}
		params.Thinking = ant.ThinkingConfigParamOfEnabled(budget)
	}
	if extra := req.ProviderOptions["anthropic"]; len(extra) > 0 {
		var fields map[string]any
		if err := json.Unmarshal(extra, &fields); err != nil {
			return params, fmt.Errorf("provider options: %w", err)
		}
		params.SetExtraFields(fields)
	}
	if f := req.ResponseFormat; f != nil {
		switch f.Type {
		case model.FormatJSONSchema:
			var schema map[string]any
			if err := json.Unmarshal(f.Schema, &schema); err != nil {
				return params, fmt.Errorf("response format schema: %w", err)
			}
			params.OutputConfig.Format = ant.JSONOutputFormatParam{Schema: schema}
		case model.FormatJSONObject:
			params.System = append(params.System, ant.TextBlockParam{Text: JSONObjectInstruction})
		}
	}
	return params, nil
}

// appendTurn adds blocks as a user or assistant turn, merging them into the
// previous turn when it has the same role.
func appendTurn(msgs []ant.MessageParam, user bool, blocks []ant.ContentBlockParamUnion) []ant.MessageParam {
	if n := len(msgs); n > 0 {
		last := msgs[n-1]
		if user && last.OfUser != nil {
			last.OfUser.Content = append(last.OfUser.Content, blocks...)
			return msgs
		}
		if !user && last.OfAssistant != nil {
			last.OfAssistant.Content = append(last.OfAssistant.Content, blocks...)
			return msgs
		}
	}
	if user {
		return append(msgs, ant.NewUserMessage(blocks...))
	}
	return append(msgs, ant.NewAssistantMessage(blocks...))
}

func imageBlock(pt message.Part) (ant.ContentBlockParamUnion, bool) {
	if pt.Type != "image" {
		return ant.ContentBlockParamUnion{}, false
	}
	if pt.Data != "" {
		return ant.NewImageBlockBase64(pt.MediaType, pt.Data), true
	}
	if rest, ok := strings.CutPrefix(pt.URL, "data:"); ok {
		// data:<media type>;base64,<data>
		meta, data, found := strings.Cut(rest, ",")
		if mt, isB64 := strings.CutSuffix(meta, ";base64"); found && isB64 {
			return ant.NewImageBlockBase64(mt, data), true
		}
		return ant.ContentBlockParamUnion{}, false
	}
	if pt.URL != "" {
		return ant.NewImageBlock(ant.URLImageSourceParam{URL: pt.URL}), true
	}
	return ant.ContentBlockParamUnion{}, false
}

// toolCache holds the tools Params sends, each encoded once.
var toolCache = upstream.NewToolCache(encodeTool)

// encodeTool encodes one entry of "tools" with its input_schema.
func encodeTool(t model.ToolDef) ([]byte, error) {
	schema, err := inputSchema(t.Parameters)
	if err != nil {
		return nil, fmt.Errorf("tool %s: parameters: %w", t.Name, err)
	}
	u := ant.ToolUnionParamOfTool(schema, t.Name)
	if t.Description != "" {
		u.OfTool.Description = ant.String(t.Description)
	}
	b, err := u.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("tool %s: %w", t.Name, err)
	}
	return b, nil
}

func inputSchema(raw json.RawMessage) (ant.ToolInputSchemaParam, error) {
	var s ant.ToolInputSchemaParam
	if len(raw) == 0 {
		return s, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return s, err
	}
	s.Properties = m["properties"]
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				s.Required = append(s.Required, name)
			}
		}
	}
	delete(m, "type")
	delete(m, "properties")
	delete(m, "required")
	if len(m) > 0 {
		s.ExtraFields = m
	}
	return s, nil
}

// Package openai is the model.Provider for OpenAI Chat Completions and for
// any OpenAI-compatible endpoint (Ollama, vLLM, LM Studio, gateways) chosen by
// base URL. It streams with the official openai-go SDK, whose own retries are
// off: the retry policy is model.RetryPolicy.
package openai

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/internal/upstream"
)

// Config configures a Provider. The caller reads the environment
// (OPENAI_BASE_URL, OPENAI_API_KEY); this package does not.
type Config struct {
	// BaseURL includes the version path, e.g. "https://api.openai.com/v1"
	// or "http://127.0.0.1:11434/v1". Empty means the OpenAI API.
	BaseURL string
	// APIKey is sent as a bearer token when not empty.
	APIKey string
	// HTTPClient is used for requests (nil: http.DefaultClient).
	HTTPClient *http.Client
	// Retry bounds retries of 429/5xx/connection failures.
	Retry model.RetryPolicy
	// LegacyMaxTokens sends max_tokens instead of max_completion_tokens,
	// for compatible servers that only know the older field.
	LegacyMaxTokens bool
	// Name names the upstream in logs (default "openai").
	Name string
	// Logger receives retry warnings (nil: discard).
	Logger *slog.Logger
}

// Provider streams Chat Completions.
type Provider struct {
	cfg    Config
	client oai.Client
	log    *slog.Logger
}

var _ model.Provider = (*Provider)(nil)

// New returns a Provider for cfg.
func New(cfg Config) *Provider {
	if cfg.Name == "" {
		cfg.Name = "openai"
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	opts := []option.RequestOption{
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
		// Always set, so a key from the process environment is never sent
		// to an endpoint the caller did not give it for.
		option.WithAPIKey(cfg.APIKey),
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	} else {
		opts = append(opts, option.WithBaseURL("https://api.openai.com/v1"))
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Provider{cfg: cfg, client: oai.NewClient(opts...), log: log.With("upstream", cfg.Name)}
}

// Stream runs one step as a streamed chat completion.
func (p *Provider) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Chunk, error] {
	params, err := p.params(req)
	if err != nil {
		return func(yield func(model.Chunk, error) bool) { yield(model.Chunk{}, err) }
	}
	return p.cfg.Retry.Stream(ctx, p.log, func(ctx context.Context) iter.Seq2[model.Chunk, error] {
		return p.attempt(ctx, params)
	})
}

func (p *Provider) attempt(ctx context.Context, params oai.ChatCompletionNewParams) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		stream := p.client.Chat.Completions.NewStreaming(ctx, params)
		defer func() { _ = stream.Close() }()

		type open struct {
			idx int
			id  string
		}
		var (
			byWire = map[int]*open{}
			n      int // calls started
			finish string
			usage  event.Usage
		)
		for stream.Next() {
			chunk := stream.Current()
			if chunk.JSON.Usage.Valid() && (chunk.Usage.PromptTokens > 0 || chunk.Usage.CompletionTokens > 0) {
				usage = event.Usage{InputTokens: int(chunk.Usage.PromptTokens), OutputTokens: int(chunk.Usage.CompletionTokens)}
			}
			for _, ch := range chunk.Choices {
				if ch.Index != 0 {
					continue
				}
				d := ch.Delta
				if d.Content != "" && !yield(model.Chunk{Type: model.Text, Text: d.Content}, nil) {
					return
				}
				for _, tc := range d.ToolCalls {
					// A call starts with the first delta of its index, or when a
					// server that reuses or omits the index sends a new id.
					o := byWire[int(tc.Index)]
					if o == nil || (tc.ID != "" && tc.ID != o.id) {
						id := tc.ID
						if id == "" { // some compatible servers send none
							id = "call_" + rand.Text()[:16]
						}
						o = &open{idx: n, id: id}
						byWire[int(tc.Index)] = o
						n++
						if !yield(model.Chunk{Type: model.ToolCallStart, Index: o.idx, ID: id, Name: tc.Function.Name}, nil) {
							return
						}
					}
					if a := tc.Function.Arguments; a != "" {
						if !yield(model.Chunk{Type: model.ToolCallArgs, Index: o.idx, Text: a}, nil) {
							return
						}
					}
				}
				if ch.FinishReason != "" {
					finish = ch.FinishReason
				}
			}
		}
		if err := stream.Err(); err != nil {
			yield(model.Chunk{}, upstream.MapError(ctx, p.cfg.Name, err, statusOf))
			return
		}
		if finish == "" {
			yield(model.Chunk{}, &model.Error{Status: http.StatusBadGateway, Message: p.cfg.Name + ": stream ended without a finish reason"})
			return
		}
		yield(model.Chunk{Type: model.Finish, Stop: stopReason(finish, n > 0), Usage: usage}, nil)
	}
}

// statusOf extracts the HTTP status and public message of an SDK error.
func statusOf(err error) (int, string, bool) {
	var apiErr *oai.Error
	if errors.As(err, &apiErr) {
		msg := apiErr.Message
		if msg == "" {
			msg = http.StatusText(apiErr.StatusCode)
		}
		return apiErr.StatusCode, msg, true
	}
	var se *ssestream.StreamError
	if errors.As(err, &se) {
		return http.StatusBadGateway, se.Message, true
	}
	return 0, "", false
}

func stopReason(finish string, hadCalls bool) event.StopReason {
	switch {
	case hadCalls, finish == "tool_calls", finish == "function_call":
		return event.StopToolCalls
	case finish == "length":
		return event.StopLength
	default:
		return event.StopEnd
	}
}

func (p *Provider) params(req model.Request) (oai.ChatCompletionNewParams, error) {
	params := oai.ChatCompletionNewParams{
		Model:         shared.ChatModel(req.Model),
		StreamOptions: oai.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)},
	}
	if req.System != "" {
		params.Messages = append(params.Messages, oai.SystemMessage(req.System))
	}
	for _, m := range req.Messages {
		params.Messages = append(params.Messages, toWire(m))
	}
	for _, t := range req.Tools {
		schema := map[string]any{}
		if len(t.Parameters) > 0 {
			if err := json.Unmarshal(t.Parameters, &schema); err != nil {
				return params, fmt.Errorf("tool %s: parameters: %w", t.Name, err)
			}
		}
		if len(schema) == 0 {
			schema = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		def := shared.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
		if t.Description != "" {
			def.Description = param.NewOpt(t.Description)
		}
		params.Tools = append(params.Tools, oai.ChatCompletionFunctionTool(def))
	}
	switch req.ToolChoice {
	case "":
	case "auto", "none", "required":
		params.ToolChoice.OfAuto = param.NewOpt(req.ToolChoice)
	default:
		params.ToolChoice.OfFunctionToolChoice = &oai.ChatCompletionNamedToolChoiceParam{
			Function: oai.ChatCompletionNamedToolChoiceFunctionParam{Name: req.ToolChoice},
		}
	}
	if req.MaxTokens > 0 {
		if p.cfg.LegacyMaxTokens {
			params.MaxTokens = param.NewOpt(int64(req.MaxTokens))
		} else {
			params.MaxCompletionTokens = param.NewOpt(int64(req.MaxTokens))
		}
	}
	if len(req.StopSequences) > 0 {
		params.Stop.OfStringArray = req.StopSequences
	}
	if req.Temperature != nil {
		params.Temperature = param.NewOpt(*req.Temperature)
	}
	return params, nil
}

func toWire(m message.Message) oai.ChatCompletionMessageParamUnion {
	switch m.Role {
	case message.System:
		return oai.SystemMessage(m.Content)
	case message.Assistant:
		var a oai.ChatCompletionAssistantMessageParam
		if m.Content != "" || len(m.ToolCalls) == 0 {
			a.Content.OfString = param.NewOpt(m.Content)
		}
		for _, tc := range m.ToolCalls {
			a.ToolCalls = append(a.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
					ID: tc.ID,
					Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name:      tc.Name,
						Arguments: string(tc.ArgsJSON()),
					},
				},
			})
		}
		return oai.ChatCompletionMessageParamUnion{OfAssistant: &a}
	case message.Tool:
		return oai.ToolMessage(m.Content, m.ToolCallID)
	default:
		if len(m.Parts) == 0 {
			return oai.UserMessage(m.Content)
		}
		var parts []oai.ChatCompletionContentPartUnionParam
		if m.Content != "" {
			parts = append(parts, oai.TextContentPart(m.Content))
		}
		for _, pt := range m.Parts {
			if pt.Type != "image" {
				continue
			}
			url := pt.URL
			if url == "" {
				url = "data:" + pt.MediaType + ";base64," + pt.Data
			}
			parts = append(parts, oai.ImageContentPart(oai.ChatCompletionContentPartImageImageURLParam{URL: url}))
		}
		return oai.UserMessage(parts)
	}
}

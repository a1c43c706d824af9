// Package anthropic is the model.Provider for the Anthropic Messages API. It
// speaks the wire format directly with a small streaming client (request.go
// encodes, stream.go reads the SSE answer), sending what the official
// anthropic-sdk-go v2 sends: anthropic-version 2026-10-21 and the key as a
// bearer token. The SDK cost about 4× the OpenAI provider's CPU per call.
// Retries follow model.RetryPolicy.
package anthropic

import (
	"bytes"
	"context"
	"iter"
	"log/slog"
	"net/http"

	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/internal/upstream"
)

// DefaultMaxTokens is sent when a request sets no MaxTokens (the Messages
// API requires the field).
const DefaultMaxTokens = 4096

// APIVersion is the anthropic-version header sent with every request, as
// anthropic-sdk-go v2 sends it (wire.md §2).
const APIVersion = "2026-10-21"

// defaultBaseURL is used when Config.BaseURL is empty.
const defaultBaseURL = "https://api.anthropic.com"

// ThinkingBudgets maps a reasoning effort to the extended-thinking budget
// (thinking.budget_tokens) it asks for; 1024 is the API's minimum.
var ThinkingBudgets = map[string]int{"minimal": 1024, "low": 1024, "medium": 4096, "high": 16384}

// Config configures a Provider. The caller reads the environment
// (ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY); this package does not.
type Config struct {
	// BaseURL is the API root without "/v1" ("/v1/messages" is appended, as
	// the SDK does). Empty means https://api.anthropic.com.
	BaseURL string
	// APIKey authenticates the requests (Authorization: Bearer) when not
	// empty.
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
	hc     *http.Client
	url    string // the v1/messages endpoint
	urlErr error  // set when BaseURL does not parse
	auth   string // the Authorization header value, "" for none
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
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Provider{cfg: cfg, hc: hc, log: log.With("upstream", "anthropic")}
	p.url, p.urlErr = upstream.Endpoint(cfg.BaseURL, defaultBaseURL, "v1/messages")
	if cfg.APIKey != "" {
		p.auth = "Bearer " + cfg.APIKey
	}
	return p
}

// Stream runs one step as a streamed message.
func (p *Provider) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Chunk, error] {
	if p.urlErr != nil {
		err := &model.Error{Status: 0, Message: "anthropic: invalid base URL", Err: p.urlErr}
		return func(yield func(model.Chunk, error) bool) { yield(model.Chunk{}, err) }
	}
	body, err := encode(req)
	if err != nil {
		return func(yield func(model.Chunk, error) bool) { yield(model.Chunk{}, err) }
	}
	return p.cfg.Retry.Stream(ctx, p.log, req, func(ctx context.Context) iter.Seq2[model.Chunk, error] {
		return p.attempt(ctx, body)
	})
}

// attempt sends the request once and streams its answer.
func (p *Provider) attempt(ctx context.Context, body []byte) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		resp, err := p.send(ctx, body)
		if err != nil {
			yield(model.Chunk{}, upstream.MapError(ctx, "anthropic", err, upstream.StatusOf))
			return
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			err := upstream.ReadAPIError(resp)
			upstream.Drain(resp.Body)
			yield(model.Chunk{}, upstream.MapError(ctx, "anthropic", err, upstream.StatusOf))
			return
		}
		read(ctx, resp.Body, upstream.RequestID(resp.Header), yield)
	}
}

func (p *Provider) send(ctx context.Context, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	h := req.Header
	h["Content-Type"] = []string{"application/json"}
	h["Accept"] = []string{"application/json"}
	h["Anthropic-Version"] = []string{APIVersion}
	if p.auth != "" {
		h["Authorization"] = []string{p.auth}
	}
	return p.hc.Do(req)
}

// Package openai is the model.Provider for OpenAI Chat Completions and for
// any OpenAI-compatible endpoint (Ollama, vLLM, LM Studio, gateways) chosen by
// base URL. It speaks the wire format directly with a small streaming client
// (request.go encodes, stream.go reads the SSE answer); the official SDK
// cost about 40% of a stateless turn. Retries follow model.RetryPolicy.
package openai

import (
	"bytes"
	"context"
	"iter"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/internal/upstream"
)

// defaultBaseURL is used when Config.BaseURL is empty.
const defaultBaseURL = "https://api.openai.com/v1"

// Config configures a Provider. The caller reads the environment
// (OPENAI_BASE_URL, OPENAI_API_KEY); this package does not.
type Config struct {
	// BaseURL includes the version path, e.g. "https://api.openai.com/v1"
	// or "http://127.0.0.1:11434/v1". Empty means the OpenAI API.
	BaseURL string
	// APIKey is sent as a bearer token when not empty (as the api-key
	// header with AzureAPIVersion).
	APIKey string
	// AzureAPIVersion, when set, makes this an Azure OpenAI provider:
	// BaseURL is the resource's ".../openai" URL, the model name is the
	// deployment, requests go to BaseURL/deployments/MODEL/chat/completions
	// with this api-version query, and the key is the api-key header.
	AzureAPIVersion string
	// HTTPClient is used for requests (nil: a client of the provider's own,
	// with an idle pool sized for concurrent calls).
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
	hc     *http.Client
	url    string // the chat/completions endpoint
	urlErr error  // set when BaseURL does not parse
	auth   string // the Authorization header value, "" for none
	log    *slog.Logger
	tools  *upstream.ToolCache
}

var (
	_ model.Provider       = (*Provider)(nil)
	_ model.FormatHonourer = (*Provider)(nil)
)

// New returns a Provider for cfg.
func New(cfg Config) *Provider {
	if cfg.Name == "" {
		cfg.Name = "openai"
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = upstream.NewHTTPClient()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Provider{cfg: cfg, hc: hc, log: log.With("upstream", cfg.Name), tools: upstream.NewToolCache(encodeTool)}
	p.url, p.urlErr = upstream.Endpoint(cfg.BaseURL, defaultBaseURL, "chat/completions")
	if cfg.APIKey != "" && cfg.AzureAPIVersion == "" {
		p.auth = "Bearer " + cfg.APIKey
	}
	return p
}

// HonoursFormat reports that both response formats pass through as
// response_format (OpenAI and compatible servers such as Ollama take it).
func (p *Provider) HonoursFormat(f model.ResponseFormat) bool {
	return f.Known()
}

// Stream runs one step as a streamed chat completion.
func (p *Provider) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Chunk, error] {
	if p.urlErr != nil {
		err := &model.Error{Status: 0, Message: p.cfg.Name + ": invalid base URL", Err: p.urlErr}
		return func(yield func(model.Chunk, error) bool) { yield(model.Chunk{}, err) }
	}
	body, err := p.encode(req)
	if err != nil {
		return func(yield func(model.Chunk, error) bool) { yield(model.Chunk{}, err) }
	}
	return p.cfg.Retry.Stream(ctx, p.log, req, func(ctx context.Context) iter.Seq2[model.Chunk, error] {
		return p.attempt(ctx, p.target(req.Model), body)
	})
}

// attempt sends the request once and streams its answer.
// target is the URL of a request for modelName: the chat/completions
// endpoint, or Azure's deployment URL.
func (p *Provider) target(modelName string) string {
	if p.cfg.AzureAPIVersion == "" {
		return p.url
	}
	base := strings.TrimSuffix(p.url, "chat/completions")
	return base + "deployments/" + url.PathEscape(modelName) + "/chat/completions?api-version=" + url.QueryEscape(p.cfg.AzureAPIVersion)
}

func (p *Provider) attempt(ctx context.Context, target string, body []byte) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		resp, err := p.send(ctx, target, body)
		if err != nil {
			yield(model.Chunk{}, upstream.MapError(ctx, p.cfg.Name, err, upstream.StatusOf))
			return
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			err := upstream.ReadAPIError(resp)
			upstream.Drain(resp.Body)
			yield(model.Chunk{}, upstream.MapError(ctx, p.cfg.Name, err, upstream.StatusOf))
			return
		}
		p.read(ctx, resp.Body, upstream.RequestID(resp.Header), yield)
	}
}

func (p *Provider) send(ctx context.Context, target string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	h := req.Header
	h["Content-Type"] = []string{"application/json"}
	h["Accept"] = []string{"application/json"}
	if p.auth != "" {
		h["Authorization"] = []string{p.auth}
	}
	if p.cfg.AzureAPIVersion != "" && p.cfg.APIKey != "" {
		h["Api-Key"] = []string{p.cfg.APIKey}
	}
	return p.hc.Do(req)
}

// Package providers resolves an agent's "provider/model" reference into a
// model.Provider. It is separate from package model because it imports every
// provider, and the providers import model.
//
// References:
//
//	openai/MODEL     OpenAI Chat Completions at OpenAIBaseURL (any compatible endpoint)
//	anthropic/MODEL  Anthropic Messages at AnthropicBaseURL
//	ollama/MODEL     Ollama's OpenAI-compatible API at OllamaHost + "/v1"
//	scripted/NAME    the script <agentDir>/NAME.script.json (tests, offline demo)
//	NAME/MODEL       a provider configured in stackbone.json (Config.Custom)
package providers

import (
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/anthropic"
	"github.com/stackbone/stackbone/internal/model/openai"
	"github.com/stackbone/stackbone/internal/model/scripted"
)

// DefaultOllamaHost is used when Config.OllamaHost is empty.
const DefaultOllamaHost = "http://127.0.0.1:11434"

// Config holds the upstream settings. The caller reads them from the
// environment (OPENAI_BASE_URL, OPENAI_API_KEY, ANTHROPIC_BASE_URL,
// ANTHROPIC_API_KEY, OLLAMA_HOST); this package reads nothing itself.
type Config struct {
	// OpenAIBaseURL includes "/v1" (empty: https://api.openai.com/v1).
	OpenAIBaseURL string
	OpenAIKey     string
	// AnthropicBaseURL has no "/v1" (empty: https://api.anthropic.com).
	AnthropicBaseURL string
	AnthropicKey     string
	// OllamaHost is Ollama's root URL; a bare "host:port" gets "http://".
	OllamaHost string
	// HTTPClient is used by every HTTP provider (nil: each provider has a
	// client of its own, with an idle pool sized for concurrent calls).
	HTTPClient *http.Client
	// Retry is the retry policy of every HTTP provider.
	Retry model.RetryPolicy
	// Logger receives retry warnings (nil: discard).
	Logger *slog.Logger
	// Custom are the providers of stackbone.json by name (see LoadFile).
	Custom map[string]Custom
}

// Resolver implements model.Resolver and caches the providers it builds.
// It is safe for concurrent use.
type Resolver struct {
	cfg   Config
	mu    sync.Mutex
	cache map[string]model.Provider
}

var _ model.Resolver = (*Resolver)(nil)

// New returns a Resolver for cfg.
func New(cfg Config) *Resolver {
	return &Resolver{cfg: cfg, cache: map[string]model.Provider{}}
}

// Resolve returns the provider for ref ("provider/model") and the model name
// to send it. agentDir is the folder of the agent file (used by scripted/).
// An unknown provider gives an error wrapping model.ErrUnknownProvider.
func (r *Resolver) Resolve(ref, agentDir string) (model.Provider, string, error) {
	kind, name, ok := strings.Cut(ref, "/")
	if !ok || kind == "" || name == "" {
		return nil, "", fmt.Errorf("model %q: want \"provider/model\": %w", ref, model.ErrUnknownProvider)
	}
	key := kind
	if kind == "scripted" {
		path, err := scripted.Path(agentDir, name)
		if err != nil {
			return nil, "", fmt.Errorf("model %q: %w", ref, err)
		}
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		key = "scripted:" + path
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.cache[key]; ok {
		return p, name, nil
	}
	p, err := r.build(kind, name, agentDir)
	if err != nil {
		return nil, "", fmt.Errorf("model %q: %w", ref, err)
	}
	r.cache[key] = p
	return p, name, nil
}

func (r *Resolver) build(kind, name, agentDir string) (model.Provider, error) {
	c := r.cfg
	switch kind {
	case "openai":
		return openai.New(openai.Config{
			BaseURL: c.OpenAIBaseURL, APIKey: c.OpenAIKey,
			HTTPClient: c.HTTPClient, Retry: c.Retry, Logger: c.Logger,
		}), nil
	case "anthropic":
		return anthropic.New(anthropic.Config{
			BaseURL: c.AnthropicBaseURL, APIKey: c.AnthropicKey,
			HTTPClient: c.HTTPClient, Retry: c.Retry, Logger: c.Logger,
		}), nil
	case "ollama":
		return openai.New(openai.Config{
			BaseURL: OllamaBaseURL(c.OllamaHost), Name: "ollama", LegacyMaxTokens: true,
			HTTPClient: c.HTTPClient, Retry: c.Retry, Logger: c.Logger,
		}), nil
	case "scripted":
		return scripted.Open(agentDir, name)
	}
	if cu, ok := c.Custom[kind]; ok {
		if cu.unset != nil {
			return nil, cu.unset
		}
		return openai.New(openai.Config{
			BaseURL: cu.BaseURL, APIKey: cu.APIKey, AzureAPIVersion: cu.APIVersion, Name: kind,
			HTTPClient: c.HTTPClient, Retry: c.Retry, Logger: c.Logger,
		}), nil
	}
	known := []string{"openai", "anthropic", "ollama", "scripted"}
	for n := range c.Custom {
		known = append(known, n)
	}
	sort.Strings(known[4:])
	return nil, fmt.Errorf("%w %q (known: %s; more in %s)", model.ErrUnknownProvider, kind, strings.Join(known, ", "), ProjectFile)
}

// OllamaBaseURL returns the OpenAI-compatible base URL of an Ollama host
// ("" means DefaultOllamaHost).
func OllamaBaseURL(host string) string {
	host = strings.TrimSpace(host)
	if host == "" {
		host = DefaultOllamaHost
	}
	if !strings.Contains(host, "://") {
		host = "http://" + host
	}
	return strings.TrimRight(host, "/") + "/v1"
}

// Endpoint is where an OpenAI-compatible API other than Chat Completions
// (embeddings) is reached for a "provider/model" reference.
type Endpoint struct {
	// Name is the provider's name.
	Name string
	// BaseURL includes the version path ("…/v1").
	BaseURL string
	APIKey  string
	// Model is the model name to send (Azure: the deployment).
	Model string
	// AzureAPIVersion is set for an azure-openai provider.
	AzureAPIVersion string
	// HTTPClient is Config.HTTPClient (nil: the caller's own).
	HTTPClient *http.Client
}

// EmbeddingsEndpoint returns the endpoint of an embeddings model ref
// ("openai/text-embedding-3-small", "ollama/nomic-embed-text", or
// NAME/MODEL of a stackbone.json provider). Anthropic and scripted models
// have no embeddings API: an error wrapping model.ErrUnknownProvider.
func (r *Resolver) EmbeddingsEndpoint(ref string) (Endpoint, error) {
	kind, name, ok := strings.Cut(ref, "/")
	if !ok || kind == "" || name == "" {
		return Endpoint{}, fmt.Errorf("embeddings model %q: want \"provider/model\": %w", ref, model.ErrUnknownProvider)
	}
	c := r.cfg
	e := Endpoint{Name: kind, Model: name, HTTPClient: c.HTTPClient}
	switch kind {
	case "openai":
		e.BaseURL, e.APIKey = c.OpenAIBaseURL, c.OpenAIKey
		if e.BaseURL == "" {
			e.BaseURL = "https://api.openai.com/v1"
		}
	case "ollama":
		e.BaseURL = OllamaBaseURL(c.OllamaHost)
	case "anthropic", "scripted":
		return Endpoint{}, fmt.Errorf("embeddings model %q: %s has no embeddings API (use openai/…, ollama/… or a provider of %s): %w",
			ref, kind, ProjectFile, model.ErrUnknownProvider)
	default:
		cu, ok := c.Custom[kind]
		if !ok {
			return Endpoint{}, fmt.Errorf("embeddings model %q: %w %q", ref, model.ErrUnknownProvider, kind)
		}
		if cu.unset != nil {
			return Endpoint{}, cu.unset
		}
		e.BaseURL, e.APIKey, e.AzureAPIVersion = cu.BaseURL, cu.APIKey, cu.APIVersion
	}
	return e, nil
}

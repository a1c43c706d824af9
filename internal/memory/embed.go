package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Embedder turns texts into embeddings, one per text, in order.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// EmbedError is a failed embedding call: the upstream's status (0: not
// reached) and what it said.
type EmbedError struct {
	Status  int
	Message string
	Err     error
}

// Error implements error.
func (e *EmbedError) Error() string {
	if e.Status == 0 {
		return "embeddings: " + e.Message
	}
	return fmt.Sprintf("embeddings: status %d: %s", e.Status, e.Message)
}

// Unwrap returns the cause.
func (e *EmbedError) Unwrap() error { return e.Err }

// OpenAIConfig configures an OpenAI-compatible embeddings client.
type OpenAIConfig struct {
	// BaseURL includes the version path ("https://api.openai.com/v1"; empty:
	// that one); requests go to BaseURL/embeddings.
	BaseURL string
	// APIKey is sent as a bearer token (Azure: the api-key header).
	APIKey string
	// Model is the model name sent (Azure: the deployment).
	Model string
	// AzureAPIVersion, when set, sends requests to Azure's
	// BaseURL/deployments/MODEL/embeddings?api-version=.
	AzureAPIVersion string
	// HTTPClient sends the requests (nil: a client with a 60 s timeout).
	HTTPClient *http.Client
}

// OpenAI is an Embedder speaking OpenAI's POST /v1/embeddings.
type OpenAI struct {
	cfg OpenAIConfig
	url string
	hc  *http.Client
}

var _ Embedder = (*OpenAI)(nil)

// NewOpenAI returns an OpenAI-compatible Embedder.
func NewOpenAI(cfg OpenAIConfig) *OpenAI {
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = "https://api.openai.com/v1"
	}
	u := base + "/embeddings"
	if cfg.AzureAPIVersion != "" {
		u = base + "/deployments/" + url.PathEscape(cfg.Model) + "/embeddings?api-version=" + url.QueryEscape(cfg.AzureAPIVersion)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	return &OpenAI{cfg: cfg, url: u, hc: hc}
}

// Model is the model the embeddings come from.
func (o *OpenAI) Model() string { return o.cfg.Model }

type embedRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
}

type embedResponse struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// maxEmbedResponse bounds an embeddings response body.
const maxEmbedResponse = 64 << 20

// Embed sends one request for all texts.
func (o *OpenAI) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	body, err := json.Marshal(embedRequest{Model: o.cfg.Model, Input: texts, EncodingFormat: "float"})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.url, bytes.NewReader(body))
	if err != nil {
		return nil, &EmbedError{Message: "invalid base URL", Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if o.cfg.APIKey != "" {
		if o.cfg.AzureAPIVersion != "" {
			req.Header.Set("api-key", o.cfg.APIKey)
		} else {
			req.Header.Set("Authorization", "Bearer "+o.cfg.APIKey)
		}
	}
	res, err := o.hc.Do(req)
	if err != nil {
		return nil, &EmbedError{Message: "the embeddings endpoint could not be reached", Err: err}
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxEmbedResponse))
	if err != nil {
		return nil, &EmbedError{Status: res.StatusCode, Message: "reading the response", Err: err}
	}
	var out embedResponse
	decodeErr := json.Unmarshal(raw, &out)
	if res.StatusCode/100 != 2 {
		msg := http.StatusText(res.StatusCode)
		if decodeErr == nil && out.Error != nil && out.Error.Message != "" {
			msg = out.Error.Message
		}
		return nil, &EmbedError{Status: res.StatusCode, Message: msg}
	}
	if decodeErr != nil {
		return nil, &EmbedError{Status: res.StatusCode, Message: "the response is not an embeddings list", Err: decodeErr}
	}
	vecs := make([][]float32, len(texts))
	for _, d := range out.Data {
		if d.Index < 0 || d.Index >= len(texts) {
			return nil, &EmbedError{Status: res.StatusCode, Message: fmt.Sprintf("embedding index %d out of range", d.Index)}
		}
		vecs[d.Index] = d.Embedding
	}
	for i, v := range vecs {
		if len(v) == 0 {
			return nil, &EmbedError{Status: res.StatusCode, Message: fmt.Sprintf("no embedding for input %d", i)}
		}
	}
	return vecs, nil
}

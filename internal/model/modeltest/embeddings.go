package modeltest

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"unicode"
)

// DefaultEmbeddingDims is the length of the mock's embeddings when a
// request names no dimensions (text-embedding-3-small's).
const DefaultEmbeddingDims = 1536

// Embeddings returns a copy of every embeddings request received so far
// (POST …/embeddings), in order; they are numbered apart from the model
// calls, which Requests and Count return.
func (m *Mock) Embeddings() []RecordedRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.embeds)
}

// Embed is the mock's embedding of text in dims dimensions: a hashed bag
// of words (lower-cased runs of letters and digits), at unit length, so
// texts sharing words score higher by cosine similarity. A text without a
// word gets the first axis.
func Embed(text string, dims int) []float32 {
	v := make([]float32, dims)
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	for _, w := range words {
		h := fnv.New32a()
		_, _ = h.Write([]byte(w))
		v[int(h.Sum32()%uint32(dims))]++
	}
	if len(words) == 0 {
		v[0] = 1
	}
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	n := float32(math.Sqrt(sum))
	for i := range v {
		v[i] /= n
	}
	return v
}

// serveEmbeddings answers OpenAI's POST /v1/embeddings: input a string or
// a list of strings, dimensions optional, encoding_format float (the
// default) or base64; the answer has OpenAI's shape.
func (m *Mock) serveEmbeddings(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	rec := RecordedRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: bytes.Clone(body)}
	var req struct {
		Model          string          `json:"model"`
		Input          json.RawMessage `json:"input"`
		Dimensions     int             `json:"dimensions"`
		EncodingFormat string          `json:"encoding_format"`
	}
	var inputs []string
	msg := ""
	switch {
	case r.Method != http.MethodPost:
		rec.Status, msg = http.StatusMethodNotAllowed, "use POST"
	case err != nil || json.Unmarshal(body, &req) != nil:
		rec.Status, msg = http.StatusBadRequest, "the body is not JSON"
	case req.Model == "":
		rec.Status, msg = http.StatusBadRequest, "model is required"
	case json.Unmarshal(req.Input, &inputs) != nil:
		var one string
		if json.Unmarshal(req.Input, &one) != nil {
			rec.Status, msg = http.StatusBadRequest, "input must be a string or an array of strings"
		} else {
			inputs = []string{one}
		}
	}
	if rec.Status == 0 && len(inputs) == 0 {
		rec.Status, msg = http.StatusBadRequest, "input must not be empty"
	}
	if rec.Status == 0 {
		rec.Status = http.StatusOK
	}
	m.mu.Lock()
	rec.Seq = len(m.embeds) + 1
	m.embeds = append(m.embeds, rec)
	m.mu.Unlock()
	if rec.Status != http.StatusOK {
		m.writeError(w, rec.Status, msg)
		return
	}
	dims := req.Dimensions
	if dims <= 0 {
		dims = DefaultEmbeddingDims
	}
	type datum struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"`
	}
	data := make([]datum, len(inputs))
	tokens := 0
	for i, in := range inputs {
		v := Embed(in, dims)
		tokens += len(strings.Fields(in))
		var e any = v
		if req.EncodingFormat == "base64" {
			b := make([]byte, 4*len(v))
			for j, x := range v {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(x))
			}
			e = base64.StdEncoding.EncodeToString(b)
		}
		data[i] = datum{Object: "embedding", Index: i, Embedding: e}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "model": req.Model,
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens}})
}

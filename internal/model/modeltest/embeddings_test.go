package modeltest_test

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
)

// TestEmbeddingsEndpoint: POST /v1/embeddings answers in OpenAI's shape
// (a list of {object, index, embedding}, model, usage), floats or base64,
// in the requested dimensions, deterministically, with texts sharing words
// closer than texts that do not; bad requests are 400s in OpenAI's error
// envelope; every request is recorded apart from the model calls.
func TestEmbeddingsEndpoint(t *testing.T) {
	mock := modeltest.Handler(modeltest.OpenAI, script.MustParse(`[{"reply":{"text":"x"}}]`))
	srv := httptest.NewServer(mock)
	defer srv.Close()
	post := func(body string) (int, []byte) {
		resp, err := http.Post(srv.URL+"/v1/embeddings", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	status, b := post(`{"model":"text-embedding-3-small","input":["green tea every morning","tea in the morning","a red bicycle"],"dimensions":64}`)
	var out struct {
		Object string
		Data   []struct {
			Object    string
			Index     int
			Embedding []float32
		}
		Model string
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	if status != 200 || json.Unmarshal(b, &out) != nil || out.Object != "list" || len(out.Data) != 3 || out.Model != "text-embedding-3-small" || out.Usage.PromptTokens == 0 {
		t.Fatalf("%d %s", status, b)
	}
	dot := func(a, b []float32) (s float64) {
		for i := range a {
			s += float64(a[i] * b[i])
		}
		return s
	}
	e := out.Data
	if len(e[0].Embedding) != 64 || e[2].Index != 2 || e[0].Object != "embedding" {
		t.Fatalf("data: %+v", e)
	}
	if dot(e[0].Embedding, e[1].Embedding) <= dot(e[0].Embedding, e[2].Embedding) {
		t.Fatal("texts sharing words are not closer")
	}
	if got := modeltest.Embed("green tea every morning", 64); dot(got, e[0].Embedding) < 0.9999 {
		t.Fatal("not deterministic")
	}
	status, b = post(`{"model":"m","input":"one text","encoding_format":"base64"}`)
	var b64 struct {
		Data []struct{ Embedding string }
	}
	if status != 200 || json.Unmarshal(b, &b64) != nil || len(b64.Data) != 1 {
		t.Fatalf("base64: %d %s", status, b)
	}
	raw, err := base64.StdEncoding.DecodeString(b64.Data[0].Embedding)
	if err != nil || len(raw) != 4*modeltest.DefaultEmbeddingDims {
		t.Fatalf("base64 embedding: %d bytes, %v", len(raw), err)
	}
	if x := math.Float32frombits(binary.LittleEndian.Uint32(raw)); math.IsNaN(float64(x)) {
		t.Fatal("NaN")
	}
	for _, bad := range []string{`{"input":"x"}`, `{"model":"m","input":[]}`, `{"model":"m","input":5}`, `not json`} {
		if status, b := post(bad); status != 400 || !strings.Contains(string(b), `"invalid_request_error"`) {
			t.Fatalf("%s: %d %s", bad, status, b)
		}
	}
	if n := len(mock.Embeddings()); n != 6 || mock.Count() != 0 {
		t.Fatalf("recorded: %d embeddings, %d model calls", n, mock.Count())
	}
}

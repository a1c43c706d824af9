package memory_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/memory"
	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/store/sqlite"
	"github.com/stackbone/stackbone/internal/tool"
)

// stores runs fn on a fresh SQLite store and a fresh PostgreSQL schema.
func stores(t *testing.T, fn func(t *testing.T, st store.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "m.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		fn(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, stacktest.Postgres(t, "memory"))
	})
}

// mockEmbedder is the OpenAI embedder on the scripted upstream's
// /v1/embeddings, over real HTTP.
func mockEmbedder(t *testing.T) (*memory.OpenAI, *modeltest.Mock) {
	mock := modeltest.Handler(modeltest.OpenAI, script.MustParse(`[{"reply":{"text":"unused"}}]`))
	srv := httptest.NewServer(mock)
	t.Cleanup(srv.Close)
	return memory.NewOpenAI(memory.OpenAIConfig{BaseURL: srv.URL + "/v1", APIKey: "sk-test", Model: "text-embedding-3-small"}), mock
}

// TestSemanticSearch: with the mock's embeddings, a query finds the fact
// that shares its words first, on both stores; each put and each query is
// one embeddings call in OpenAI's shape, the indexed field's text only.
func TestSemanticSearch(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		emb, mock := mockEmbedder(t)
		svc := memory.New(memory.Config{Store: st, Embedder: emb})
		ctx := t.Context()
		m := svc.For("acme")
		facts := map[string]string{
			"tea":    "The user drinks green tea every morning",
			"city":   "The user lives in Lyon, France",
			"pet":    "Their dog is called Biscuit",
			"editor": "They write Go code in Neovim",
		}
		for k, f := range facts {
			v, _ := json.Marshal(map[string]any{"fact": f, "source": "chat"})
			if _, err := m.Put(ctx, []string{"users", "u1"}, k, v, tool.MemoryPut{Index: []string{"fact"}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := m.Put(ctx, []string{"users", "u1"}, "raw", json.RawMessage(`{"fact":"green tea"}`), tool.MemoryPut{NoIndex: true}); err != nil {
			t.Fatal(err)
		}
		items, err := m.Search(ctx, []string{"users"}, tool.MemorySearch{Query: "what does the user drink, tea or coffee?", Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(items) != 3 || items[0].Key != "tea" || items[0].Score == nil || *items[0].Score <= *items[1].Score {
			t.Fatalf("nearest: %+v", items)
		}
		items, _ = m.Search(ctx, []string{"users", "u1"}, tool.MemorySearch{Query: "dog name", Limit: 1})
		if len(items) != 1 || items[0].Key != "pet" {
			t.Fatalf("dog: %+v", items)
		}
		calls := mock.Embeddings()
		if len(calls) != 6 {
			t.Fatalf("embeddings calls: %d (4 puts, 2 queries; the unindexed put none)", len(calls))
		}
		var body struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		_ = json.Unmarshal(calls[0].Body, &body)
		if body.Model != "text-embedding-3-small" || len(body.Input) != 1 || strings.Contains(body.Input[0], "chat") ||
			calls[0].Header.Get("Authorization") != "Bearer sk-test" || calls[0].Path != "/v1/embeddings" {
			t.Fatalf("embeddings request: %s %s %v", calls[0].Path, calls[0].Body, calls[0].Header)
		}
		if mock.Count() != 0 {
			t.Fatalf("model calls: %d", mock.Count())
		}
	})
}

// TestRecencyWithoutEmbeddings: with no embedding model a query keeps the
// items containing it, latest first, and nothing is embedded.
func TestRecencyWithoutEmbeddings(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		svc := memory.New(memory.Config{Store: st})
		m := svc.For("acme")
		ctx := t.Context()
		for _, k := range []string{"a", "b", "c"} {
			if _, err := m.Put(ctx, []string{"n"}, k, json.RawMessage(`{"fact":"Tea `+k+`"}`), tool.MemoryPut{}); err != nil {
				t.Fatal(err)
			}
		}
		items, err := m.Search(ctx, []string{"n"}, tool.MemorySearch{Query: "TEA B"})
		if err != nil || len(items) != 1 || items[0].Key != "b" || items[0].Score != nil {
			t.Fatalf("contains: %+v %v", items, err)
		}
		if svc.Semantic() {
			t.Fatal("semantic without an embedder")
		}
	})
}

// TestEmbedderErrors: an upstream failure is an *EmbedError with its
// status, and the put writes nothing.
func TestEmbedderErrors(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "m.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	emb := memory.NewOpenAI(memory.OpenAIConfig{BaseURL: "http://127.0.0.1:1/v1", Model: "m"})
	svc := memory.New(memory.Config{Store: st, Embedder: emb})
	_, err = svc.Put(t.Context(), "acme", memory.PutRequest{Namespace: []string{"n"}, Key: "k", Value: json.RawMessage(`{"a":"b"}`)})
	var ee *memory.EmbedError
	if !errorsAs(err, &ee) || ee.Status != 0 {
		t.Fatalf("unreachable: %v", err)
	}
	if _, err := svc.Get(t.Context(), "acme", []string{"n"}, "k", false); err == nil {
		t.Fatal("a failed put wrote the item")
	}
}

func TestIndexText(t *testing.T) {
	v := json.RawMessage(`{"a":"x","b":{"c":"y","d":2},"e":[true,"z"]}`)
	for _, c := range []struct {
		fields []string
		want   string
	}{
		{nil, "x\ny\n2\ntrue\nz"},
		{[]string{"b.c", "a"}, "y\nx"},
		{[]string{"missing", "b.d"}, "2"},
	} {
		got, err := memory.IndexText(v, c.fields)
		if err != nil || got != c.want {
			t.Fatalf("%v: %q %v", c.fields, got, err)
		}
	}
}

func errorsAs(err error, target **memory.EmbedError) bool { return errors.As(err, target) }

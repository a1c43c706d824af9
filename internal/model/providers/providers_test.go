package providers_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/providers"
	"github.com/stackbone/stackbone/internal/model/script"
)

var hello = script.MustParse(`[{"reply":{"text":"hi from {{lastUser}}"}}]`)

func run(t *testing.T, r *providers.Resolver, ref, dir string) (modeltest.Step, string) {
	t.Helper()
	p, name, err := r.Resolve(ref, dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := modeltest.Collect(p.Stream(context.Background(), model.Request{
		Model: name, Messages: []message.Message{{Role: message.User, Content: ref}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	return st, name
}

func TestResolvesEachProvider(t *testing.T) {
	oa := modeltest.NewOpenAI(t, hello)
	an := modeltest.NewAnthropic(t, hello)
	ol := modeltest.NewOpenAI(t, hello)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "demo.script.json"), []byte(`[{"reply":{"text":"offline"}}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := providers.New(providers.Config{
		OpenAIBaseURL: oa.URL(), OpenAIKey: "sk-o",
		AnthropicBaseURL: an.URL(), AnthropicKey: "sk-a",
		OllamaHost: strings.TrimSuffix(ol.URL(), "/v1"),
		Retry:      modeltest.FastRetry,
	})

	for _, tc := range []struct {
		ref, name, text string
		srv             *modeltest.Server
	}{
		{"openai/gpt-4o-mini", "gpt-4o-mini", "hi from openai/gpt-4o-mini", oa},
		{"anthropic/claude-x", "claude-x", "hi from anthropic/claude-x", an},
		{"ollama/llama3", "llama3", "hi from ollama/llama3", ol},
		{"scripted/demo", "demo", "offline", nil},
	} {
		st, name := run(t, r, tc.ref, dir)
		if name != tc.name || st.Text != tc.text {
			t.Errorf("%s: model %q text %q", tc.ref, name, st.Text)
		}
		if tc.srv != nil {
			rec, _ := tc.srv.Last()
			if rec.Request.Model != tc.name {
				t.Errorf("%s: upstream saw model %q", tc.ref, rec.Request.Model)
			}
		}
	}
	if rec, _ := ol.Last(); rec.Path != "/v1/chat/completions" || rec.Header.Get("Authorization") != "" {
		t.Errorf("ollama request %s auth %q", rec.Path, rec.Header.Get("Authorization"))
	}
	if rec, _ := oa.Last(); rec.Header.Get("Authorization") != "Bearer sk-o" {
		t.Errorf("openai auth %q", rec.Header.Get("Authorization"))
	}
}

func TestCachesProviders(t *testing.T) {
	r := providers.New(providers.Config{})
	a, _, err := r.Resolve("openai/gpt-4o", "")
	if err != nil {
		t.Fatal(err)
	}
	b, name, err := r.Resolve("openai/gpt-4o-mini", "")
	if err != nil {
		t.Fatal(err)
	}
	if a != b || name != "gpt-4o-mini" {
		t.Fatalf("provider not shared across models (name %q)", name)
	}
}

func TestResolveErrors(t *testing.T) {
	r := providers.New(providers.Config{})
	for _, ref := range []string{"gemini/pro", "gpt-4o", "/x", "openai/"} {
		if _, _, err := r.Resolve(ref, ""); !errors.Is(err, model.ErrUnknownProvider) {
			t.Errorf("%q: got %v, want ErrUnknownProvider", ref, err)
		}
	}
	if _, _, err := r.Resolve("scripted/nope", t.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing script: got %v", err)
	}
}

func TestOllamaBaseURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                        "http://127.0.0.1:11434/v1",
		"0.0.0.0:11434":           "http://0.0.0.0:11434/v1",
		"https://ollama.example/": "https://ollama.example/v1",
	} {
		if got := providers.OllamaBaseURL(in); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}

// TestLoadFileDefaults: a google provider without baseURL gets Gemini's
// OpenAI-compatible endpoint; an azure-openai one without apiVersion the
// default; apiVersion on another type is an error naming the field.
func TestLoadFileDefaults(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, providers.ProjectFile), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	none := func(string) (string, bool) { return "", false }
	write(`{"providers": {"g": {"type": "google"}, "az": {"type": "azure-openai", "baseURL": "https://r.openai.azure.com/openai"}}}`)
	got, err := providers.LoadFile(dir, none)
	if err != nil {
		t.Fatal(err)
	}
	if got["g"].BaseURL != providers.GoogleBaseURL || got["az"].APIVersion != providers.DefaultAzureAPIVersion {
		t.Fatalf("defaults: %+v", got)
	}
	write(`{"providers": {"p": {"type": "openai-compatible", "baseURL": "http://x/v1", "apiVersion": "1"}}}`)
	if _, err := providers.LoadFile(dir, none); err == nil || !strings.Contains(err.Error(), "providers.p.apiVersion: only for type \"azure-openai\"") {
		t.Fatalf("apiVersion on openai-compatible: %v", err)
	}
}

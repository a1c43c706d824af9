package server_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	ant "github.com/anthropics/anthropic-sdk-go/v2"
	antopt "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestUnfixable4xxSayDoNotRetry: every 4xx that the same request sent again
// cannot fix (400, 401, 403, 404, 413) carries x-should-retry: false, on
// every wire: OpenAI chat, Responses, Anthropic Messages, AG-UI, MCP over
// HTTP and the control API.
func TestUnfixable4xxSayDoNotRetry(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: roleKeys, MaxBodyBytes: 4096})
	admin := []string{"Authorization", "Bearer sk-admin-0001"}
	wrong := []string{"Authorization", "Bearer sk-wrong-key-1"}
	antWrong := []string{"x-api-key", "sk-wrong-key-1", "anthropic-version", "2023-06-01"}
	chat := `{"model":"assistant","messages":[{"role":"user","content":"hi"}]}`
	big := `{"model":"assistant","messages":[{"role":"user","content":"` + strings.Repeat("x", 8000) + `"}]}`
	cases := []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
	}{
		{"chat 401", "POST", "/v1/chat/completions", chat, wrong, 401},
		{"chat 403 role", "POST", "/v1/chat/completions", chat, []string{"Authorization", "Bearer sk-approver-1"}, 403},
		{"chat 400", "POST", "/v1/chat/completions", `{"model":`, admin, 400},
		{"chat 404 agent", "POST", "/v1/chat/completions", `{"model":"nobody","messages":[{"role":"user","content":"hi"}]}`, admin, 404},
		{"chat 413", "POST", "/v1/chat/completions", big, admin, 413},
		{"responses 401", "POST", "/v1/responses", `{"model":"assistant","input":"hi"}`, wrong, 401},
		{"responses 404", "GET", "/v1/responses/resp_nothing", "", admin, 404},
		{"messages 401", "POST", "/v1/messages", `{"model":"assistant","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, antWrong, 401},
		{"messages 400", "POST", "/v1/messages", `{"model":"assistant","messages":"no"}`, []string{"x-api-key", "sk-admin-0001", "anthropic-version", "2023-06-01"}, 400},
		{"agui 401", "POST", "/v1/agents/assistant/agui", `{"threadId":"t","runId":"r","messages":[]}`, wrong, 401},
		{"mcp 401", "POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, wrong, 401},
		{"threads 404", "GET", "/v1/threads/no-such-thread", "", admin, 404},
		{"hitl 403 role", "POST", "/v1/hitl/int_none/approve", "", []string{"Authorization", "Bearer sk-caller-001"}, 403},
	}
	for _, c := range cases {
		r := call(t, c.method, env.URL+c.path, c.body, c.hdr...)
		if r.status != c.status || r.header.Get("x-should-retry") != "false" {
			t.Errorf("%s: %d x-should-retry %q, want %d and false (%s)", c.name, r.status, r.header.Get("x-should-retry"), c.status, r.body)
		}
	}
}

// TestSDKsStopAtOnceOnAWrongKey: the official openai-go and Anthropic Go
// SDKs, with their default retries, send a request with a wrong key once
// (counted where the server receives them) and return the 401.
func TestSDKsStopAtOnceOnAWrongKey(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: roleKeys})
	target, _ := url.Parse(env.URL)
	var got atomic.Int64
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	ctx := context.Background()

	oc := openai.NewClient(option.WithBaseURL(front.URL+"/v1"), option.WithAPIKey("sk-wrong-key-1"))
	_, err := oc.Chat.Completions.New(ctx, params(user("hi")))
	var oerr *openai.Error
	if !errors.As(err, &oerr) || oerr.StatusCode != 401 || got.Load() != 1 {
		t.Fatalf("openai-go: %v after %d requests, want a 401 after 1", err, got.Load())
	}
	got.Store(0)
	ac := ant.NewClient(antopt.WithoutEnvironmentDefaults(), antopt.WithBaseURL(front.URL), antopt.WithAPIKey("sk-wrong-key-1"))
	_, err = ac.Messages.New(ctx, antParams(antUser("hi")))
	var aerr *ant.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != 401 || got.Load() != 1 {
		t.Fatalf("anthropic-sdk-go: %v after %d requests, want a 401 after 1", err, got.Load())
	}
}

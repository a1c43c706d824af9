package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// postMCP sends a raw POST to /mcp.
func postMCP(t *testing.T, env *stacktest.Env, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", env.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// A client's protocol mistakes get the HTTP status the streamable HTTP
// transport prescribes with a JSON-RPC error body (not plain text, not a
// 200 with code 0), are logged at info, not error, and a 401 names its
// scheme in WWW-Authenticate.
func TestMCPProtocolMistakes(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: []config.Key{{Tenant: "acme", Secret: "sk-acme"}}})
	auth := []string{"Authorization", "Bearer sk-acme"}
	for _, tc := range []struct {
		name   string
		body   string
		hdr    []string
		status int
		code   float64
		id     any
	}{
		{"no session", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, nil, 400, -32600, 7.0},
		{"unknown session", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, []string{"Mcp-Session-Id", "nope"}, 404, -32001, nil},
		{"not JSON", `not json`, nil, 400, -32700, nil},
	} {
		resp, b := postMCP(t, env, tc.body, append(auth, tc.hdr...)...)
		var e struct {
			JSONRPC string `json:"jsonrpc"`
			ID      any    `json:"id"`
			Error   struct {
				Code    float64 `json:"code"`
				Message string  `json:"message"`
			} `json:"error"`
		}
		if resp.StatusCode != tc.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") ||
			json.Unmarshal(b, &e) != nil || e.JSONRPC != "2.0" || e.Error.Code != tc.code || e.ID != tc.id || e.Error.Message == "" {
			t.Errorf("%s: %d %s %s; want %d with a JSON-RPC error %v", tc.name, resp.StatusCode, resp.Header.Get("Content-Type"), b, tc.status, tc.code)
		}
	}
	resp, b := postMCP(t, env, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("no key: %d, WWW-Authenticate %q, %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), b)
	}
	if logs := env.Logs.String(); strings.Contains(logs, "level=ERROR") {
		t.Errorf("client mistakes logged as errors:\n%s", logs)
	}

	// A session-based client that asks for resources or prompts, which
	// the server does not declare, is told the methods do not exist.
	cs := connect(t, env, protocols[1], "sk-acme", nil)
	if _, err := cs.ListResources(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("resources/list: %v; want method not found", err)
	}
	if _, err := cs.ListPrompts(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("prompts/list: %v; want method not found", err)
	}
}

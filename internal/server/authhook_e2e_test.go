package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ant "github.com/anthropics/anthropic-sdk-go/v2"
	antopt "github.com/anthropics/anthropic-sdk-go/v2/option"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// authTS is the project's auth.ts of the hook tests: opaque session
// tokens, checked asynchronously (a timer stands for the team's own
// session lookup).
const authTS = `
import type { AuthRequest, AuthResult } from 'stackbone';

const sessions: Record<string, AuthResult> = {
  'sess-alice': { tenant: 'acme', user: { id: 'alice', label: 'Alice A.' }, role: 'caller' },
  'sess-bob': { tenant: 'acme', user: 'bob' },
  'sess-dave': { tenant: 'acme', user: 'dave', role: 'approver' },
  'sess-boss': { tenant: 'acme', user: 'boss', role: 'superuser' as any },
};

export async function authenticate(request: AuthRequest) {
  await new Promise((resolve) => setTimeout(resolve, 1));
  const token = (request.headers['authorization'] || '').replace(/^Bearer /i, '') || request.headers['x-api-key'] || request.query['session'] || '';
  if (token === 'sess-bug') return (null as any).tenant; // a bug: a TypeError
  const s = sessions[token];
  if (!s) throw new Error('unknown or expired session');
  return s;
}
`

func newHookStack(t *testing.T) *stacktest.Env {
	t.Helper()
	return stacktest.New(t, stacktest.Options{Mode: config.Start,
		Keys: []config.Key{{Tenant: "acme", Secret: "sk-acme-admin-1", Role: config.RoleAdmin, Label: "ops"}},
		Configure: func(cfg *config.Config) {
			if err := os.WriteFile(filepath.Join(cfg.Dir, "auth.ts"), []byte(authTS), 0o644); err != nil {
				t.Fatal(err)
			}
		}})
}

// TestAuthHookOnEveryWire: a project's auth.ts authenticates the requests
// no key does, on every wire (openai-go, anthropic-sdk-go, the MCP Go SDK,
// AG-UI, the control API), its users own their threads as JWT users do,
// a throw is a 401 in each wire's format (its message shown, a bug's
// not), and an identity that is not one is a clear 500.
func TestAuthHookOnEveryWire(t *testing.T) {
	t.Parallel()
	env := newHookStack(t)
	ctx := context.Background()
	chat := func(tok string) *openai.Client {
		c := openai.NewClient(option.WithBaseURL(env.URL+"/v1"), option.WithAPIKey(tok), option.WithMaxRetries(0))
		return &c
	}

	// Alice starts a thread with her session token: it is hers.
	res, err := chat("sess-alice").Chat.Completions.New(ctx, params(user("hello")), session("t-alice"))
	if err != nil || res.Choices[0].Message.Content != "echo: hello" {
		t.Fatalf("alice's turn: %v", err)
	}
	if th := env.Thread(t, "acme", "t-alice"); th.Owner != "alice" {
		t.Fatalf("owner %q, want alice", th.Owner)
	}
	// Bob (a user given as a string, caller by default) does not see it, on
	// the API or by going on with it.
	if r := call(t, "GET", env.URL+"/v1/threads/t-alice", "", "Authorization", "Bearer sess-bob"); r.status != 404 {
		t.Fatalf("bob reads alice's thread: %d %s", r.status, r.body)
	}
	_, err = chat("sess-bob").Chat.Completions.New(ctx, params(user("mine now")), session("t-alice"))
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 404 {
		t.Fatalf("bob goes on with alice's thread: %v", err)
	}
	// The key comes first and is the admin key it always was.
	if r := call(t, "GET", env.URL+"/v1/threads/t-alice", "", "Authorization", "Bearer sk-acme-admin-1"); r.status != 200 {
		t.Fatalf("the admin key: %d %s", r.status, r.body)
	}
	// The hook sees the query too; an approver decides, not turns.
	if r := call(t, "GET", env.URL+"/v1/hitl?session=sess-dave", ""); r.status != 200 {
		t.Fatalf("dave by query: %d %s", r.status, r.body)
	}
	if _, err := chat("sess-dave").Chat.Completions.New(ctx, params(user("hi"))); !errors.As(err, &oe) || oe.StatusCode != 403 {
		t.Fatalf("an approver's turn: %v", err)
	}

	// MCP, through the Go SDK: alice lists and calls the tools.
	cs := mcpConnect(t, env, "sess-alice")
	tools, err := cs.ListTools(ctx, &sdk.ListToolsParams{})
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("mcp tools/list: %v", err)
	}
	closeMCP(t, cs)

	// Refused: a throw is a 401 with its message.
	_, err = chat("sess-nobody").Chat.Completions.New(ctx, params(user("hi")))
	if !errors.As(err, &oe) || oe.StatusCode != 401 || oe.Code != "unauthenticated" || oe.Type != "authentication_error" ||
		!strings.Contains(oe.Message, "unknown or expired session") {
		t.Fatalf("an unknown session: %v", err)
	}
	ac := ant.NewClient(antopt.WithoutEnvironmentDefaults(), antopt.WithBaseURL(env.URL), antopt.WithAPIKey("sess-nobody"), antopt.WithMaxRetries(0))
	_, err = ac.Messages.New(ctx, antParams(antUser("hi")))
	var ae *ant.Error
	var antBody struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	if !errors.As(err, &ae) || ae.StatusCode != 401 || json.Unmarshal([]byte(ae.RawJSON()), &antBody) != nil || antBody.Error.Type != "authentication_error" ||
		!strings.Contains(antBody.Error.Message, "unknown or expired session") {
		t.Fatalf("messages: want an Anthropic authentication_error, got %v", err)
	}
	// Anthropic's x-api-key works as well for a good session.
	ac = ant.NewClient(antopt.WithoutEnvironmentDefaults(), antopt.WithBaseURL(env.URL), antopt.WithAPIKey("sess-alice"), antopt.WithMaxRetries(0))
	if _, err := ac.Messages.New(ctx, antParams(antUser("hi"))); err != nil {
		t.Fatalf("messages with alice's session: %v", err)
	}
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/agents/assistant/agui", `{"threadId":"t-x","runId":"r-x","messages":[{"id":"m1","role":"user","content":"hi"}],"tools":[],"context":[],"state":{},"forwardedProps":{}}`},
		{"GET", "/v1/threads", ""},
		{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
		{"POST", "/a2a/assistant", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`},
	} {
		res := call(t, r.method, env.URL+r.path, r.body, "Authorization", "Bearer sess-nobody", "Accept", "application/json, text/event-stream")
		if res.status != 401 || !strings.Contains(string(res.body), "unknown or expired session") || !strings.HasPrefix(res.header.Get("WWW-Authenticate"), "Bearer ") {
			t.Fatalf("%s %s: want 401, got %d %v %s", r.method, r.path, res.status, res.header, res.body)
		}
	}
	// A bug in the hook: 401 with a generic message, the error in the log.
	_, err = chat("sess-bug").Chat.Completions.New(ctx, params(user("hi")))
	if !errors.As(err, &oe) || oe.StatusCode != 401 || oe.Message != "Not authenticated." {
		t.Fatalf("a hook that throws a TypeError: %v", err)
	}
	if !strings.Contains(env.Logs.String(), "TypeError") {
		t.Fatal("the hook's TypeError is not in the log")
	}
	// An identity with an unknown role: the server's fault, said clearly.
	_, err = chat("sess-boss").Chat.Completions.New(ctx, params(user("hi")))
	if !errors.As(err, &oe) || oe.StatusCode != 500 || oe.Code != "auth_hook_invalid" || !strings.Contains(oe.Message, `"superuser" is not admin, caller or approver`) {
		t.Fatalf("an invalid role: %v", err)
	}
	if th, err := env.Store.GetThread(ctx, "acme", "t-x"); err == nil {
		t.Fatalf("a refused request made a thread: %+v", th)
	}
}

package server_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ant "github.com/anthropics/anthropic-sdk-go/v2"
	antopt "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/go-jose/go-jose/v4"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/stackbone/stackbone/internal/clock"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// apiAudience is the audience the tests' server takes tokens for (besides
// its MCP resource).
const apiAudience = "https://api.stackbone.test"

// endUsers are the provider's clients, one end user each.
var endUsers = []stacktest.OIDCClient{
	{ID: "alice", Secret: "alice-secret-0123456789abcdef0123456789", Tenant: "acme", Email: "alice@example.com", Alg: "ES256"},
	{ID: "bob", Secret: "bob-secret-0123456789abcdef0123456789ab", Tenant: "acme", Role: "caller", Name: "Bob", Alg: "RS256"},
	{ID: "carol", Secret: "carol-secret-0123456789abcdef0123456789", Tenant: "acme", Role: "admin", Alg: "EdDSA"},
	{ID: "dave", Secret: "dave-secret-0123456789abcdef0123456789a", Tenant: "acme", Role: "approver", Email: "dave@example.com"},
	{ID: "erin", Secret: "erin-secret-0123456789abcdef0123456789a", Tenant: "globex", Email: "erin@example.com"},
}

// jwtStack is a stack taking end users' tokens from a real OpenID
// provider, and one static admin key; skew moves its clock.
type jwtStack struct {
	env  *stacktest.Env
	oidc *stacktest.OIDC
	skew *atomic.Int64
}

func newJWTStack(t *testing.T, opts stacktest.Options) *jwtStack {
	t.Helper()
	o := stacktest.StartOIDC(t, endUsers...)
	skew := &atomic.Int64{}
	opts.Mode = config.Start
	opts.Keys = append(opts.Keys, config.Key{Tenant: "acme", Secret: "sk-acme-admin-1", Role: config.RoleAdmin, Label: "ops"})
	configure := opts.Configure
	opts.Configure = func(cfg *config.Config) {
		cfg.JWT = config.JWT{Issuer: o.Issuer, Audiences: []string{apiAudience}}
		cfg.Clock = clock.Func(func() time.Time { return time.Now().Add(time.Duration(skew.Load())) })
		if configure != nil {
			configure(cfg)
		}
	}
	return &jwtStack{env: stacktest.New(t, opts), oidc: o, skew: skew}
}

// token is client's access token for the API audience.
func (s *jwtStack) token(t *testing.T, client string) string {
	return s.oidc.Token(t, s.oidc.Issuer, client, apiAudience)
}

func jwtPart(t *testing.T, tok string, i int) map[string]any {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[i])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func enc(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

// forged are tokens made from a good one that must all be refused.
func (s *jwtStack) forged(t *testing.T, good string) map[string]string {
	t.Helper()
	parts := strings.Split(good, ".")
	head := jwtPart(t, good, 0)
	payload := jwtPart(t, good, 1)

	// HS256 keyed with the issuer's published (public) key: PEM, as the
	// classic algorithm confusion does.
	resp, err := http.Get(s.oidc.Issuer + "/jwks")
	if err != nil {
		t.Fatal(err)
	}
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	keys := set.Key(head["kid"].(string))
	if len(keys) != 1 {
		t.Fatalf("the provider publishes no key %v", head["kid"])
	}
	der, err := x509.MarshalPKIXPublicKey(keys[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	hsHead := enc(map[string]any{"alg": "HS256", "typ": "JWT", "kid": head["kid"]})
	mac := hmac.New(sha256.New, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	mac.Write([]byte(hsHead + "." + parts[1]))

	payload["tenant"] = "globex"
	return map[string]string{
		"wrong audience":   s.oidc.Token(t, s.oidc.Issuer, "alice", "https://other.example/api"),
		"wrong issuer":     s.oidc.Token(t, s.oidc.OtherIssuer, "alice", apiAudience),
		"alg none":         enc(map[string]any{"alg": "none", "typ": "JWT"}) + "." + parts[1] + ".",
		"HS256 public key": hsHead + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)),
		"tampered":         parts[0] + "." + enc(payload) + "." + parts[2],
	}
}

// refusedOnEveryWire checks a token gets a 401 in each wire's own error
// format, and that the token is in no log line.
func (s *jwtStack) refusedOnEveryWire(t *testing.T, what, tok, reason string) {
	t.Helper()
	env := s.env
	bearer := []string{"Authorization", "Bearer " + tok}
	// OpenAI Chat Completions, through the official SDK.
	c := openai.NewClient(option.WithBaseURL(env.URL+"/v1"), option.WithAPIKey(tok), option.WithMaxRetries(0))
	_, err := c.Chat.Completions.New(context.Background(), params(user("hi")))
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 401 || oe.Code != "invalid_token" || oe.Type != "authentication_error" ||
		!strings.Contains(oe.Message, reason) {
		t.Fatalf("%s: chat: want 401 invalid_token (%s), got %v", what, reason, err)
	}
	// Responses.
	_, err = c.Responses.New(context.Background(), responses.ResponseNewParams{Model: "assistant",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	if !errors.As(err, &oe) || oe.StatusCode != 401 || oe.Code != "invalid_token" {
		t.Fatalf("%s: responses: want 401 invalid_token, got %v", what, err)
	}
	// Anthropic Messages, through the official SDK (Bearer auth).
	ac := ant.NewClient(antopt.WithoutEnvironmentDefaults(), antopt.WithBaseURL(env.URL), antopt.WithAuthToken(tok), antopt.WithMaxRetries(0))
	_, err = ac.Messages.New(context.Background(), antParams(antUser("hi")))
	var ae *ant.Error
	if !errors.As(err, &ae) || ae.StatusCode != 401 {
		t.Fatalf("%s: messages: want 401, got %v", what, err)
	}
	var antBody struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	if json.Unmarshal([]byte(ae.RawJSON()), &antBody) != nil || antBody.Type != "error" || antBody.Error.Type != "authentication_error" ||
		!strings.Contains(antBody.Error.Message, reason) {
		t.Fatalf("%s: messages: want an Anthropic authentication_error, got %s", what, ae.RawJSON())
	}
	// AG-UI, the control API and MCP: the OpenAI envelope, and a Bearer
	// challenge saying the token is invalid.
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/agents/assistant/agui", `{"threadId":"t-x","runId":"r-x","messages":[{"id":"m1","role":"user","content":"hi"}],"tools":[],"context":[],"state":{},"forwardedProps":{}}`},
		{"GET", "/v1/threads", ""},
		{"GET", "/v1/hitl", ""},
		{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
	} {
		res := call(t, r.method, env.URL+r.path, r.body, append(bearer, "Accept", "application/json, text/event-stream")...)
		var body struct {
			Error struct{ Code, Type, Message string } `json:"error"`
		}
		if res.status != 401 || json.Unmarshal(res.body, &body) != nil || body.Error.Code != "invalid_token" || body.Error.Type != "authentication_error" {
			t.Fatalf("%s: %s %s: want 401 invalid_token, got %d %s", what, r.method, r.path, res.status, res.body)
		}
		ch := res.header.Get("WWW-Authenticate")
		if !strings.HasPrefix(ch, "Bearer ") || !strings.Contains(ch, `error="invalid_token"`) || !strings.Contains(ch, "resource_metadata=") {
			t.Fatalf("%s: %s %s: challenge %q", what, r.method, r.path, ch)
		}
	}
	if strings.Contains(env.Logs.String(), strings.Split(tok, ".")[1]) {
		t.Fatalf("%s: the token reached the log", what)
	}
}

// TestJWTOnEveryWire: tokens a real OpenID provider signed (RS256, ES256,
// EdDSA) are accepted on every wire next to a static key, and tokens that
// are expired, for another audience or issuer, unsigned, HMAC-signed with
// the public key or tampered are refused with 401 in each wire's format.
// A new signing key (rotation) is fetched when a token names it.
func TestJWTOnEveryWire(t *testing.T) {
	t.Parallel()
	s := newJWTStack(t, stacktest.Options{})
	env := s.env
	ctx := context.Background()
	for _, who := range []string{"alice", "bob", "carol"} {
		tok := s.token(t, who)
		c := openai.NewClient(option.WithBaseURL(env.URL+"/v1"), option.WithAPIKey(tok), option.WithMaxRetries(0))
		res, err := c.Chat.Completions.New(ctx, params(user("hello from "+who)))
		if err != nil || res.Choices[0].Message.Content != "echo: hello from "+who {
			t.Fatalf("%s (%s): chat: %v %+v", who, jwtPart(t, tok, 0)["alg"], err, res)
		}
	}
	tok := s.token(t, "alice")
	c := openai.NewClient(option.WithBaseURL(env.URL+"/v1"), option.WithAPIKey(tok), option.WithMaxRetries(0))
	if r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "assistant",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}); err != nil || r.OutputText() != "echo: hi" {
		t.Fatalf("responses: %v", err)
	}
	ac := ant.NewClient(antopt.WithoutEnvironmentDefaults(), antopt.WithBaseURL(env.URL), antopt.WithAuthToken(tok), antopt.WithMaxRetries(0))
	if m, err := ac.Messages.New(ctx, antParams(antUser("hi"))); err != nil || texts(m)[0] != "echo: hi" {
		t.Fatalf("messages: %v", err)
	}
	// In x-api-key, as the Anthropic SDK sends keys, too.
	ak := ant.NewClient(antopt.WithoutEnvironmentDefaults(), antopt.WithBaseURL(env.URL), antopt.WithAPIKey(tok), antopt.WithMaxRetries(0))
	if _, err := ak.Messages.New(ctx, antParams(antUser("hi"))); err != nil {
		t.Fatalf("messages with x-api-key: %v", err)
	}
	agui := call(t, "POST", env.URL+"/v1/agents/assistant/agui",
		`{"threadId":"t-agui","runId":"r-1","messages":[{"id":"m1","role":"user","content":"hi"}],"tools":[],"context":[],"state":{},"forwardedProps":{}}`,
		"Authorization", "Bearer "+tok, "Accept", "text/event-stream")
	if agui.status != 200 || !strings.Contains(string(agui.body), "RUN_FINISHED") {
		t.Fatalf("agui: %d %s", agui.status, agui.body)
	}
	if r := call(t, "GET", env.URL+"/v1/threads", "", "Authorization", "Bearer "+tok); r.status != 200 {
		t.Fatalf("threads: %d %s", r.status, r.body)
	}
	// MCP with a token for its resource (RFC 8707), through the Go SDK.
	mcpTok := s.oidc.Token(t, s.oidc.Issuer, "alice", env.URL+"/mcp")
	cs := mcpConnect(t, env, mcpTok)
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatalf("mcp tools/list: %v", err)
	}
	closeMCP(t, cs)
	// The static key still works, unchanged.
	kc := openai.NewClient(option.WithBaseURL(env.URL+"/v1"), option.WithAPIKey("sk-acme-admin-1"), option.WithMaxRetries(0))
	if _, err := kc.Chat.Completions.New(ctx, params(user("hi"))); err != nil {
		t.Fatalf("static key: %v", err)
	}

	for what, bad := range s.forged(t, tok) {
		reason := map[string]string{"wrong audience": "audience", "wrong issuer": "issuer", "alg none": "algorithm",
			"HS256 public key": "algorithm", "tampered": "signature"}[what]
		s.refusedOnEveryWire(t, what, bad, reason)
	}

	// Rotation: the provider signs with a new key; the server holds the old
	// set and fetches it again for the unknown kid (past its refresh
	// interval).
	s.skew.Add(int64(31 * time.Second))
	kid := s.oidc.Rotate(t, "ES256")
	rotated := s.token(t, "alice")
	if got := jwtPart(t, rotated, 0)["kid"]; got != kid {
		t.Fatalf("the provider signs with %v, want the new %s", got, kid)
	}
	c = openai.NewClient(option.WithBaseURL(env.URL+"/v1"), option.WithAPIKey(rotated), option.WithMaxRetries(0))
	if _, err := c.Chat.Completions.New(ctx, params(user("after rotation"))); err != nil {
		t.Fatalf("a token of the new key: %v", err)
	}

	// Expired: past its exp and the 30 s leeway on the server's clock.
	s.skew.Store(int64(10 * time.Minute))
	s.refusedOnEveryWire(t, "expired", rotated, "expired")
}

// closeMCP ends an MCP client session while its token is still valid,
// within a bound.
func closeMCP(t *testing.T, cs *sdk.ClientSession) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cs.Close() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("closing the MCP session hangs")
	}
}

// mcpConnect opens a Go SDK client session on /mcp with a bearer token
// (the caller closes it: closeMCP).
func mcpConnect(t *testing.T, env *stacktest.Env, tok string) *sdk.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: bearerTransport{tok: tok, next: http.DefaultTransport}}
	c := sdk.NewClient(&sdk.Implementation{Name: "go-test", Version: "1.0.0"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: env.URL + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("mcp connect: %v", err)
	}
	return cs
}

type bearerTransport struct {
	tok  string
	next http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return b.next.RoundTrip(r)
}

// TestJWTKeysUnreachable: when the issuer's keys cannot be read, a token
// is not refused as invalid (401 would send its client to sign in again)
// but answered 503 auth_unavailable with retry-after.
func TestJWTKeysUnreachable(t *testing.T) {
	t.Parallel()
	s := newJWTStack(t, stacktest.Options{Configure: func(cfg *config.Config) {
		cfg.JWT.JWKSURL = "http://127.0.0.1:1/jwks" // nothing listens there
	}})
	r := call(t, "GET", s.env.URL+"/v1/threads", "", "Authorization", "Bearer "+s.token(t, "alice"))
	var body struct {
		Error struct{ Code string } `json:"error"`
	}
	if r.status != 503 || json.Unmarshal(r.body, &body) != nil || body.Error.Code != "auth_unavailable" || r.header.Get("retry-after") == "" {
		t.Fatalf("keys unreachable: %d %v %s", r.status, r.header, r.body)
	}
	if ch := r.header.Get("WWW-Authenticate"); ch != "" {
		t.Fatalf("a 503 asks for no credentials: %q", ch)
	}
	// Keys are not affected.
	if r := call(t, "GET", s.env.URL+"/v1/threads", "", "Authorization", "Bearer sk-acme-admin-1"); r.status != 200 {
		t.Fatalf("a key: %d %s", r.status, r.body)
	}
}

// TestJWTOpenAINodeSDK: the official openai Node SDK (v7 and v6) with an
// end user's token as its API key, and with an expired one.
func TestJWTOpenAINodeSDK(t *testing.T) {
	t.Parallel()
	s := newJWTStack(t, stacktest.Options{})
	node, dir := nodeFixture(t, "clients", filepath.Join("openai", "package.json"), filepath.Join("openai6", "package.json"))
	good := s.token(t, "bob")
	bad := s.forged(t, good)["tampered"]
	var out struct {
		Results []struct {
			Name, Error string
			OK          bool
		}
	}
	err := runNodeScript(t, node, dir, "jwt.mjs", &out, s.env.URL, "assistant", good, bad)
	for _, r := range out.Results {
		if !r.OK {
			t.Errorf("%s: %s", r.Name, r.Error)
		}
	}
	if err != nil || len(out.Results) != 6 {
		t.Fatalf("jwt.mjs: %v, %d results", err, len(out.Results))
	}
}

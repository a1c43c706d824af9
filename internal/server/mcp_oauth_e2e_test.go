package server_test

import (
	"context"
	"encoding/json"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestMCPOAuthResourceServer: with an issuer configured, /mcp is an OAuth
// protected resource (RFC 9728, as the MCP 2026-07-28 spec asks): its 401
// names its metadata document, which names the issuer as its
// authorization server and /mcp as the resource; the Go SDK's oauthex reads
// and checks both documents, a token the issuer signed for the resource is
// taken, and the official TypeScript SDK's OAuth client signs in by itself
// from the 401 alone. The thread it starts is its user's.
func TestMCPOAuthResourceServer(t *testing.T) {
	t.Parallel()
	s := newJWTStack(t, stacktest.Options{})
	env := s.env
	ctx := context.Background()

	r := call(t, "POST", env.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "Accept", "application/json, text/event-stream")
	if r.status != 401 {
		t.Fatalf("/mcp without a token: %d %s", r.status, r.body)
	}
	cs, err := oauthex.ParseWWWAuthenticate(r.header.Values("WWW-Authenticate"))
	if err != nil || len(cs) != 1 || !strings.EqualFold(cs[0].Scheme, "bearer") {
		t.Fatalf("challenge %q: %v", r.header.Values("WWW-Authenticate"), err)
	}
	if _, bad := cs[0].Params["error"]; bad {
		t.Fatalf("a request without a token is not an invalid token (RFC 6750 §3.1): %v", cs[0].Params)
	}
	docURL := cs[0].Params["resource_metadata"]
	if docURL != env.URL+"/.well-known/oauth-protected-resource/mcp" {
		t.Fatalf("resource_metadata %q", docURL)
	}
	// The SDK checks the document names the resource it was fetched for.
	prm, err := oauthex.GetProtectedResourceMetadata(ctx, docURL, env.URL+"/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(prm.AuthorizationServers) != 1 || prm.AuthorizationServers[0] != s.oidc.Issuer ||
		len(prm.BearerMethodsSupported) != 1 || prm.BearerMethodsSupported[0] != "header" {
		t.Fatalf("metadata %+v", prm)
	}
	if _, err := oauthex.GetProtectedResourceMetadata(ctx, env.URL+"/.well-known/oauth-protected-resource", env.URL, nil); err != nil {
		t.Fatalf("the server's own document: %v", err)
	}
	// The control API's 401 points at the server's document.
	if ch := call(t, "GET", env.URL+"/v1/threads", "").header.Get("WWW-Authenticate"); !strings.Contains(ch,
		`resource_metadata="`+env.URL+`/.well-known/oauth-protected-resource"`) {
		t.Fatalf("control API challenge %q", ch)
	}

	// A token for the resource, from the authorization server the
	// metadata names, is taken.
	tok := s.oidc.Token(t, prm.AuthorizationServers[0], "bob", prm.Resource)
	sess := mcpConnect(t, env, tok)
	if _, err := sess.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	closeMCP(t, sess)

	// The TypeScript SDK signs in from the 401 alone.
	node, dir := stacktest.NodeFixture(t, "mcp", "@modelcontextprotocol/sdk/package.json")
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	alice := endUsers[0]
	cmd := exec.CommandContext(tctx, node, filepath.Join(dir, "oauth.mjs"), env.URL, alice.ID, alice.Secret, "ts-oauth", s.oidc.Issuer)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("oauth.mjs: %v\n%s\n%s", err, out, stderr.String())
	}
	var got struct {
		Seen []struct {
			URL       string
			Status    int
			Challenge string
		}
		Names       []string
		Text, Token string
		Error       string
	}
	if err := json.Unmarshal(out, &got); err != nil || got.Error != "" {
		t.Fatalf("oauth.mjs: %v %s", err, out)
	}
	if got.Token != "yes" || got.Text != "echo: hello over oauth" || len(got.Names) == 0 {
		t.Fatalf("the TS client over OAuth: %s", out)
	}
	var sawChallenge, sawMetadata, sawToken bool
	for _, x := range got.Seen {
		sawChallenge = sawChallenge || x.Status == 401 && strings.Contains(x.Challenge, "resource_metadata=")
		sawMetadata = sawMetadata || x.URL == docURL && x.Status == 200
		sawToken = sawToken || strings.HasPrefix(x.URL, s.oidc.Issuer) && strings.HasSuffix(x.URL, "/token") && x.Status == 200
	}
	if !sawChallenge || !sawMetadata || !sawToken {
		t.Fatalf("the TS client's requests: %s", out)
	}
	if th := env.Thread(t, "acme", "ts-oauth"); th.Owner != "alice" {
		t.Fatalf("the MCP session's thread owner %q, want alice", th.Owner)
	}
}

// TestNoOAuthWithoutIssuer: without STACKBONE_JWT_ISSUER the server takes
// no OAuth tokens and advertises none: no metadata document, and a bare
// Bearer challenge.
func TestNoOAuthWithoutIssuer(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: []config.Key{{Tenant: "acme", Secret: "sk-acme-000001"}}})
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		if r := call(t, "GET", env.URL+path, ""); r.status != 404 {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
	}
	r := call(t, "POST", env.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "Accept", "application/json, text/event-stream")
	if ch := r.header.Get("WWW-Authenticate"); r.status != 401 || ch != `Bearer realm="stackbone"` {
		t.Fatalf("401 %d, challenge %q", r.status, ch)
	}
	// A JWT is just a wrong key here.
	r = call(t, "GET", env.URL+"/v1/threads", "", "Authorization", "Bearer eyJhbGciOiJFUzI1NiJ9.e30.c2ln")
	if !strings.Contains(string(r.body), "invalid_api_key") {
		t.Fatalf("a JWT without an issuer: %d %s", r.status, r.body)
	}
}

// TestMCPOAuthAuthorizationCode: the official TypeScript SDK's MCP client
// signs a person in with the authorization code grant and PKCE (S256) on
// the real provider's login and consent pages, from the 401 alone: the
// authorization request names the /mcp resource (RFC 8707), the token is a
// JWT for it carrying the person's claims, and the thread its tool call
// starts is that person's.
func TestMCPOAuthAuthorizationCode(t *testing.T) {
	t.Parallel()
	o := stacktest.StartOIDCUsers(t, []stacktest.OIDCUser{{Login: "alice", Tenant: "acme", Role: "caller", Email: "alice@example.com"}})
	env := stacktest.New(t, stacktest.Options{Mode: config.Start,
		Keys: []config.Key{{Tenant: "acme", Secret: "sk-acme-admin-1", Role: config.RoleAdmin, Label: "ops"}},
		Configure: func(cfg *config.Config) {
			cfg.JWT = config.JWT{Issuer: o.Issuer, Audiences: []string{apiAudience}}
		}})
	o.AddApps(t, stacktest.OIDCApp{ID: "mcp-cli", RedirectURIs: []string{"http://127.0.0.1:9/callback"}})

	node, dir := stacktest.NodeFixture(t, "mcp", "@modelcontextprotocol/sdk/package.json")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "oauth-code.mjs"), env.URL, "mcp-cli", "alice", "ts-code")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("oauth-code.mjs: %v\n%s\n%s", err, out, stderr.String())
	}
	var got struct {
		Seen []struct {
			URL    string
			Status int
		}
		Authorize   string
		Names       []string
		Text        string
		AccessToken string
		PKCE        bool
		Error       string
	}
	if err := json.Unmarshal(out, &got); err != nil || got.Error != "" {
		t.Fatalf("oauth-code.mjs: %v %s", err, out)
	}
	if got.Text != "echo: hello with a code" || len(got.Names) == 0 || !got.PKCE {
		t.Fatalf("the TS client with a code: %s", out)
	}
	au, err := url.Parse(got.Authorize)
	if err != nil || !strings.HasPrefix(got.Authorize, o.Issuer) {
		t.Fatalf("authorization request %q", got.Authorize)
	}
	q := au.Query()
	if q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" ||
		q.Get("resource") != env.URL+"/mcp" || q.Get("client_id") != "mcp-cli" {
		t.Fatalf("authorization request %s", au)
	}
	claims := jwtPart(t, got.AccessToken, 1)
	if claims["aud"] != env.URL+"/mcp" || claims["sub"] != "alice" || claims["tenant"] != "acme" {
		t.Fatalf("access token claims %v", claims)
	}
	var sawCode bool
	for _, x := range got.Seen {
		sawCode = sawCode || strings.HasPrefix(x.URL, o.Issuer) && strings.HasSuffix(x.URL, "/token") && x.Status == 200
	}
	if !sawCode {
		t.Fatalf("no code exchange at the provider: %s", out)
	}
	if th := env.Thread(t, "acme", "ts-code"); th.Owner != "alice" {
		t.Fatalf("the thread's owner %q, want alice", th.Owner)
	}
}

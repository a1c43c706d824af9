package stacktest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// OIDCClient is a client of the test OpenID provider: each stands for an
// end user, whose tokens (client_credentials grant) carry its claims.
type OIDCClient struct {
	ID     string `json:"client_id"`
	Secret string `json:"client_secret"`
	Tenant string `json:"tenant,omitempty"`
	Role   string `json:"role,omitempty"`
	Email  string `json:"email,omitempty"`
	Name   string `json:"name,omitempty"`
	// Alg is the tokens' signature algorithm: RS256, ES256 (default) or
	// EdDSA.
	Alg string `json:"alg,omitempty"`
	// TTL is the tokens' lifetime in seconds (300 when 0).
	TTL int `json:"ttl,omitempty"`
}

// OIDC is a real OpenID provider (the oidc-provider package, tests/oidc)
// running for a test: Issuer signs the tokens, OtherIssuer is another
// issuer signing with the same keys.
type OIDC struct {
	Issuer, OtherIssuer string
	clients             map[string]OIDCClient
}

// OIDCUser is a person who signs in on the test provider's built-in
// login page (any password) with Login: their ID tokens and the access
// tokens of the authorization code grant carry these claims (sub is
// Login).
type OIDCUser struct {
	Login  string `json:"-"`
	Tenant string `json:"tenant,omitempty"`
	Role   string `json:"role,omitempty"`
	Email  string `json:"email,omitempty"`
	Name   string `json:"name,omitempty"`
}

// OIDCApp is an authorization code client of the test provider (PKCE
// required); no Secret makes it a public client.
type OIDCApp struct {
	ID           string   `json:"client_id"`
	Secret       string   `json:"client_secret,omitempty"`
	RedirectURIs []string `json:"redirect_uris"`
}

// oidcStarts bounds how many providers start at once in a test binary.
var oidcStarts = make(chan struct{}, 2)

// oidcStartWait bounds one start of the provider (a start takes about a
// second alone, six with twelve at once on two cores); oidcStartTries is
// how many starts are tried.
const (
	oidcStartWait  = 40 * time.Second
	oidcStartTries = 3
)

// startOIDCProcess starts provider.mjs with its clients and users and
// returns the line where it says where it listens; the process stops with
// the test. One that does not say so within oidcStartWait is killed.
func startOIDCProcess(t testing.TB, node, dir, clients, users string) (string, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "provider.mjs"), clients, users)
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		return "", err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return "", err
	}
	stderr := &lockedWriter{w: &strings.Builder{}}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		cancel()
		return "", err
	}
	stop := func() {
		_ = stdin.Close() // the provider exits when its input closes
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cancel()
			<-done
		}
		cancel()
	}
	type read struct {
		line string
		err  error
	}
	started := make(chan read, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		started <- read{line, err}
	}()
	select {
	case r := <-started:
		if r.err != nil {
			stop()
			return "", fmt.Errorf("%v\n%s", r.err, stderr.String())
		}
		t.Cleanup(stop)
		return r.line, nil
	case <-time.After(oidcStartWait):
		cancel()
		stop()
		return "", fmt.Errorf("no address within %s\n%s", oidcStartWait, stderr.String())
	}
}

// StartOIDC starts the provider with clients; it stops with the test.
func StartOIDC(t testing.TB, clients ...OIDCClient) *OIDC {
	t.Helper()
	return StartOIDCUsers(t, nil, clients...)
}

// StartOIDCUsers starts the provider with clients and people who sign in
// on its login page; it stops with the test.
func StartOIDCUsers(t testing.TB, users []OIDCUser, clients ...OIDCClient) *OIDC {
	t.Helper()
	node, dir := NodeFixture(t, "oidc", "oidc-provider/package.json")
	if clients == nil {
		clients = []OIDCClient{}
	}
	arg, err := json.Marshal(clients)
	if err != nil {
		t.Fatal(err)
	}
	byLogin := map[string]OIDCUser{}
	for _, u := range users {
		byLogin[u.Login] = u
	}
	uarg, err := json.Marshal(byLogin)
	if err != nil {
		t.Fatal(err)
	}
	// Starts take turns (oidcStarts), and a start that has not said where
	// it listens within oidcStartWait is killed and tried again: now and
	// then (about one start in fifty, seen with twelve at once) Node hangs
	// before it listens, idle, and it never would.
	oidcStarts <- struct{}{}
	defer func() { <-oidcStarts }()
	var line string
	for try := 1; ; try++ {
		l, err := startOIDCProcess(t, node, dir, string(arg), string(uarg))
		if err == nil {
			line = l
			break
		}
		if try == oidcStartTries {
			t.Fatalf("the OIDC provider did not start (%d tries): %v", try, err)
		}
		t.Logf("the OIDC provider did not start, trying again: %v", err)
	}
	var first struct{ Issuer, OtherIssuer string }
	if err := json.Unmarshal([]byte(line), &first); err != nil {
		t.Fatalf("the OIDC provider said %q: %v", line, err)
	}
	o := &OIDC{Issuer: first.Issuer, OtherIssuer: first.OtherIssuer, clients: map[string]OIDCClient{}}
	for _, c := range clients {
		o.clients[c.ID] = c
	}
	return o
}

// Token gets an access token for client from issuer (Issuer or
// OtherIssuer) for resource, the audience of the token (RFC 8707).
func (o *OIDC) Token(t testing.TB, issuer, client, resource string) string {
	t.Helper()
	c, ok := o.clients[client]
	if !ok {
		t.Fatalf("no OIDC client %q", client)
	}
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {resource}, "scope": {"mcp"}}
	req, err := http.NewRequest(http.MethodPost, issuer+"/token", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(c.ID), url.QueryEscape(c.Secret)) // RFC 6749 §2.3.1
	resp, err := oidcClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &tok) != nil || tok.AccessToken == "" {
		t.Fatalf("token for %s: %s %s", client, resp.Status, body)
	}
	return tok.AccessToken
}

// Rotate makes the provider sign with a new key of alg from now on (the
// old keys stay published) and returns its kid.
func (o *OIDC) Rotate(t testing.TB, alg string) string {
	t.Helper()
	resp, err := oidcClient.Post(o.Issuer+"/_test/rotate?alg="+url.QueryEscape(alg), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Kid string `json:"kid"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || v.Kid == "" {
		t.Fatalf("rotate: %s %v", resp.Status, err)
	}
	return v.Kid
}

// AddApps registers authorization code clients with the provider (it
// forgets its sign-ins and codes so far: call it before any).
func (o *OIDC) AddApps(t testing.TB, apps ...OIDCApp) {
	t.Helper()
	b, err := json.Marshal(apps)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := oidcClient.Post(o.Issuer+"/_test/apps", "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("add apps: %s", resp.Status)
	}
}

// oidcClient bounds each request to the provider, so a stuck provider
// fails the test instead of hanging it.
var oidcClient = &http.Client{Timeout: 30 * time.Second}

// lockedWriter is a strings.Builder safe to write from the process's
// output copier while a test reads it.
type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

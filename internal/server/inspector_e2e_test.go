package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestMCPInspectorOAuth: the MCP Inspector's CLI (the official
// @modelcontextprotocol/inspector, run headless) signs a person in to /mcp
// on its own: on the 401 it discovers the provider from the protected
// resource metadata, prints the authorization URL (authorization code,
// S256 PKCE, the /mcp resource) and listens on its loopback callback; the
// test plays the person's browser on the provider's login and consent
// pages; the Inspector exchanges the code and calls a tool, whose thread
// is the person's.
func TestMCPInspectorOAuth(t *testing.T) {
	t.Parallel()
	o := stacktest.StartOIDCUsers(t, []stacktest.OIDCUser{{Login: "alice", Tenant: "acme", Role: "caller", Email: "alice@example.com"}})
	env := stacktest.New(t, stacktest.Options{Mode: config.Start,
		Keys: []config.Key{{Tenant: "acme", Secret: "sk-acme-admin-1", Role: config.RoleAdmin, Label: "ops"}},
		Configure: func(cfg *config.Config) {
			// The provider issues a token for a resource only with one of
			// its scopes: the metadata names it, the Inspector asks for it.
			cfg.JWT = config.JWT{Issuer: o.Issuer, Audiences: []string{apiAudience}, Scopes: []string{"mcp"}}
		}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	callback := fmt.Sprintf("http://%s/oauth/callback", ln.Addr())
	_ = ln.Close() // the Inspector listens there
	o.AddApps(t, stacktest.OIDCApp{ID: "mcp-inspector", RedirectURIs: []string{callback}})

	node, dir := stacktest.NodeFixture(t, "inspector", "@modelcontextprotocol/inspector/package.json")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"),
		"--cli", "--server-url", env.URL+"/mcp", "--transport", "http", "--method", "tools/call",
		"--tool-name", "other", "--tool-arg", "message=hello from the inspector", "session=insp-1",
		"--client-id", "mcp-inspector", "--callback-url", callback)
	cmd.Dir = dir
	cmd.Env = append(cmd.Environ(), "HOME="+home, "MCP_CATALOG_PATH="+filepath.Join(home, "mcp.json"), "NO_COLOR=1",
		"MCP_AUTO_OPEN_ENABLED=true", "MCP_INSPECTOR_SECRET_STORE=memory", "BROWSER=true")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		errLog   strings.Builder
		authURL  = make(chan string, 1)
		ended    = make(chan struct{})
		navigate = regexp.MustCompile(`Please navigate to: (\S+)`)
		ansi     = regexp.MustCompile(`\x1b\[[0-9;]*m|\x1b\]8;;[^\x07\x1b]*(\x07|\x1b\\)`)
	)
	go func() {
		defer close(ended)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := ansi.ReplaceAllString(sc.Text(), "")
			errLog.WriteString(line + "\n")
			if m := navigate.FindStringSubmatch(line); m != nil {
				select {
				case authURL <- m[1]:
				default:
				}
			}
		}
	}()
	var au string
	select {
	case au = <-authURL:
	case <-ended:
		_ = cmd.Wait()
		t.Fatalf("the Inspector ended without an authorization URL:\n%s\n%s", stdout.String(), errLog.String())
	case <-ctx.Done():
		t.Fatalf("the Inspector printed no authorization URL:\n%s", errLog.String())
	}
	u, err := url.Parse(au)
	if err != nil || !strings.HasPrefix(au, o.Issuer) {
		t.Fatalf("authorization URL %q", au)
	}
	q := u.Query()
	if q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("client_id") != "mcp-inspector" ||
		q.Get("resource") != env.URL+"/mcp" || q.Get("redirect_uri") != callback || !strings.Contains(" "+q.Get("scope")+" ", " mcp ") {
		t.Fatalf("authorization URL %s", u)
	}
	browseSignIn(t, au, "alice")
	<-ended
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the Inspector: %v\nstdout: %s\nstderr: %s", err, stdout.String(), errLog.String())
	}
	var got struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &got); err != nil || len(got.Content) == 0 || got.Content[0].Text != "echo: hello from the inspector" {
		t.Fatalf("the Inspector's tools/call: %v\n%s\n%s", err, stdout.String(), errLog.String())
	}
	if th := env.Thread(t, "acme", "insp-1"); th.Owner != "alice" {
		t.Fatalf("the thread's owner %q, want alice", th.Owner)
	}
}

// browseSignIn plays a person's browser from an authorization URL of the
// test provider: it signs login in on the login page (any password),
// consents, and follows the redirects to the client's redirect URI.
func browseSignIn(t *testing.T, authURL, login string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	res, err := c.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	action := regexp.MustCompile(`<form[^>]*action="([^"]+)"`)
	for _, form := range []url.Values{{"prompt": {"login"}, "login": {login}, "password": {"x"}}, {"prompt": {"consent"}}} {
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		m := action.FindSubmatch(body)
		if m == nil {
			t.Fatalf("no form on %s: %d %s", res.Request.URL, res.StatusCode, body)
		}
		next, _ := res.Request.URL.Parse(string(m[1]))
		if res, err = c.PostForm(next.String(), form); err != nil {
			t.Fatal(err)
		}
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the redirect back to the client: %s %d %s", res.Request.URL, res.StatusCode, body)
	}
}

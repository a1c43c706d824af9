package studio_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/studio"
)

// oidcAudience is the API audience of the end users' access tokens.
const oidcAudience = "https://api.stackbone.test"

// The people of the OpenID sign-in tests: they sign in on the provider's
// login page; alice and bob also have API clients whose tokens name them
// (client_credentials: sub is the client id), to start threads they own.
var (
	oidcUsers = []stacktest.OIDCUser{
		{Login: "alice", Tenant: "acme", Role: "caller", Email: "alice@example.com"},
		{Login: "bob", Tenant: "acme", Role: "caller", Email: "bob@example.com"},
		{Login: "dave", Tenant: "acme", Role: "approver", Name: "Dave"},
	}
	oidcClients = []stacktest.OIDCClient{
		{ID: "alice", Secret: "alice-secret-0123456789abcdef0123456789", Tenant: "acme", Role: "caller", Email: "alice@example.com"},
		{ID: "bob", Secret: "bob-secret-0123456789abcdef0123456789ab", Tenant: "acme", Role: "caller", Email: "bob@example.com"},
	}
	opsAdmin = config.Key{Tenant: "acme", Secret: "sk-acme-ops-0123456789", Role: config.RoleAdmin, Label: "ops"}
)

// oidcStack is a production server whose Studio signs people in with a
// real OpenID provider as the client "studio" (confidential when secret is
// set, else public).
func oidcStack(t *testing.T, secret string) (*stacktest.Env, *stacktest.OIDC) {
	t.Helper()
	o := stacktest.StartOIDCUsers(t, oidcUsers, oidcClients...)
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: []config.Key{opsAdmin}, Configure: func(cfg *config.Config) {
		cfg.JWT = config.JWT{Issuer: o.Issuer, Audiences: []string{oidcAudience}, StudioClientID: "studio", StudioClientSecret: secret,
			StudioProvider: "Acme ID"}
	}})
	o.AddApps(t, stacktest.OIDCApp{ID: "studio", Secret: secret, RedirectURIs: []string{env.URL + studio.OIDCCallbackPath}})
	return env, o
}

// TestStudioOIDCSignInInChromium: people sign in to Studio on the
// provider's own login and consent pages; each lands in Studio as
// themselves, sees their own threads and not another user's, and an
// approver decides a user's paused call, recorded as decided by them.
func TestStudioOIDCSignInInChromium(t *testing.T) {
	t.Parallel()
	env, o := oidcStack(t, "studio-secret-0123456789abcdef0123456789")
	alice := o.Token(t, o.Issuer, "alice", oidcAudience)
	bob := o.Token(t, o.Issuer, "bob", oidcAudience)
	pause(t, env, alice, "alice-refund", "please refund my order")
	it := onePending(t, env, opsAdmin.Secret, "alice-refund")
	body := `{"model":"assistant","messages":[{"role":"user","content":"draft something"}]}`
	if r := do(t, "POST", env.URL+"/v1/chat/completions", body, "x-stackbone-session", "bob-draft", "Authorization", "Bearer "+bob); r.status != 200 {
		t.Fatalf("bob's turn: %d %s", r.status, r)
	}

	signIn := func(p *page, login string) {
		t.Helper()
		p.open(env.URL + "/studio/")
		p.waitText("#signin-h", "Sign in")
		p.waitText("#oidc-signin", "Sign in with Acme ID")
		p.click("#oidc-signin")
		// The provider's own login page, then its consent page.
		waitAcross(p, "the provider's login page", `!!document.querySelector('input[name=login]')`)
		if !strings.HasPrefix(eval[string](p, `location.href`), o.Issuer) {
			t.Fatalf("the sign-in is not at the provider: %s", eval[string](p, `location.href`))
		}
		p.do(chromedp.SendKeys(chromedp.CSS("input[name=login]"), login), chromedp.SendKeys(chromedp.CSS("input[name=password]"), "any password"))
		p.click("button[type=submit]")
		waitAcross(p, "the consent page", `!!document.querySelector('input[name=prompt][value=consent]')`)
		p.click("button[type=submit]")
		waitAcross(p, "Studio", `location.pathname.startsWith('/studio/') && document.documentElement.dataset.ready === 'true' && !document.querySelector('#signin-h')`)
	}

	p := newPage(t)
	signIn(p, "alice")
	p.waitText("#tenant", "alice@example.com")
	p.waitText("#tenant", "tenant acme")
	p.do(chromedp.Navigate(env.URL + "/studio/#/threads"))
	p.waitText("table.threads", "alice-refund")
	if eval[bool](p, `document.querySelector('table.threads').textContent.includes('bob-draft')`) {
		t.Fatal("alice's Studio lists bob's thread")
	}
	if eval[bool](p, `document.cookie.includes('stackbone_studio')`) {
		t.Fatal("the session cookie is readable by scripts")
	}
	// The API under her session: her thread, not bob's.
	if s := eval[int](p, `fetch('/v1/threads/alice-refund').then(r => r.status)`); s != 200 {
		t.Fatalf("alice reads her thread: %d", s)
	}
	if s := eval[int](p, `fetch('/v1/threads/bob-draft').then(r => r.status)`); s != 404 {
		t.Fatalf("alice reads bob's thread: %d, want 404", s)
	}
	// A caller decides nothing, in Studio as with her token.
	csrf := eval[string](p, `fetch('/studio/api/session').then(r => r.json()).then(s => s.csrf)`)
	if s := eval[string](p, `fetch('/v1/hitl/`+it.ID+`/approve', {method: 'POST', headers: {'x-csrf-token': `+js(csrf)+`}}).then(async r => r.status + ' ' + (await r.json()).error.code)`); s != "403 forbidden_role" {
		t.Fatalf("a caller's approve: %s, want 403 forbidden_role", s)
	}

	// The approver signs in in another browser and approves the call.
	q := newPage(t)
	signIn(q, "dave")
	q.waitText("#tenant", "Dave")
	q.do(chromedp.Navigate(env.URL + "/studio/#/inbox"))
	q.waitText(card(it.ID)+" .desc", "Refund order ord_42 for 19.99")
	q.click(card(it.ID) + ` button[data-action="approve"]`)
	q.waitJS("the decided card to disappear", `!document.querySelector(`+js(card(it.ID))+`)`)
	d := decision(t, env, "acme", it.ID)
	if d.Status != store.Approved || d.Decision.By != "dave" || d.Decision.Via != "studio" {
		t.Fatalf("decision: %s by %q via %q, want approved by dave via studio", d.Status, d.Decision.By, d.Decision.Via)
	}
	// The approver sees the decision, not the conversation.
	if s := eval[int](q, `fetch('/v1/threads/alice-refund').then(r => r.status)`); s != 404 {
		t.Fatalf("the approver reads alice's thread: %d, want 404", s)
	}
}

// waitAcross waits for a JavaScript condition while the tab navigates
// from page to page (each navigation ends the page a poll runs in).
func waitAcross(p *page, what, cond string) {
	p.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](`!!(`+cond+`)`, chromedp.WithPollingInterval(50*time.Millisecond)))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("timed out waiting for %s (%s): %v", what, cond, err)
		}
	}
}

// flowClient walks an OpenID sign-in over plain HTTP: it follows the
// provider's redirects and fills its login and consent forms, and stops at
// Studio's callback, which it returns unvisited.
type flowClient struct {
	t   *testing.T
	c   *http.Client
	env *stacktest.Env
}

func newFlowClient(t *testing.T, env *stacktest.Env) *flowClient {
	jar, _ := cookiejar.New(nil)
	f := &flowClient{t: t, env: env}
	f.c = &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), env.URL+studio.OIDCCallbackPath) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	return f
}

var formAction = regexp.MustCompile(`<form[^>]*action="([^"]+)"`)

// signIn starts a sign-in and signs login in at the provider; it returns
// the callback URL the provider sent the browser to and the sign-in
// cookie Studio set.
func (f *flowClient) signIn(login string) (callback string, flow *http.Cookie) {
	t := f.t
	t.Helper()
	noFollow := &http.Client{Jar: f.c.Jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noFollow.Get(f.env.URL + studio.OIDCLoginPath)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusFound {
		t.Fatalf("login: %d", res.StatusCode)
	}
	for _, c := range res.Cookies() {
		if c.Name == "stackbone_studio_oidc" {
			flow = c
		}
	}
	auth, _ := url.Parse(res.Header.Get("Location"))
	q := auth.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("state") == "" || q.Get("nonce") == "" ||
		q.Get("redirect_uri") != f.env.URL+studio.OIDCCallbackPath || q.Get("client_id") != "studio" || q.Get("response_type") != "code" {
		t.Fatalf("authorize URL %s", auth)
	}
	if flow == nil || !flow.HttpOnly {
		t.Fatalf("no HttpOnly sign-in cookie: %v", res.Cookies())
	}
	page := f.get(auth.String())
	for _, form := range []url.Values{{"prompt": {"login"}, "login": {login}, "password": {"x"}}, {"prompt": {"consent"}}} {
		m := formAction.FindStringSubmatch(page.body)
		if m == nil {
			t.Fatalf("no form on %s:\n%s", page.url, page.body)
		}
		action, _ := page.url.Parse(m[1])
		res, err := f.c.PostForm(action.String(), form)
		if err != nil {
			t.Fatal(err)
		}
		page = read(t, res)
		if page.status == http.StatusSeeOther || page.status == http.StatusFound {
			return res.Header.Get("Location"), flow
		}
	}
	t.Fatalf("the provider did not send the browser back: %d %s", page.status, page.body)
	return "", nil
}

type flowPage struct {
	status int
	url    *url.URL
	body   string
}

func read(t *testing.T, res *http.Response) flowPage {
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return flowPage{res.StatusCode, res.Request.URL, string(b)}
}

func (f *flowClient) get(u string) flowPage {
	res, err := f.c.Get(u)
	if err != nil {
		f.t.Fatal(err)
	}
	return read(f.t, res)
}

// callback visits Studio's callback with the sign-in cookie (nil: none).
func callback(t *testing.T, u string, flow *http.Cookie) (int, string, *http.Cookie) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if flow != nil {
		req.AddCookie(&http.Cookie{Name: flow.Name, Value: flow.Value})
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var session *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == studio.CookieName && c.Value != "" {
			session = c
		}
	}
	return res.StatusCode, string(b), session
}

// TestStudioOIDCCallbackRefusals: the callback takes only the sign-in this
// browser started (its state, within its cookie), once: a wrong state, a
// missing sign-in cookie, or a code used again set no session. A public
// client (no secret) signs in with PKCE alone.
func TestStudioOIDCCallbackRefusals(t *testing.T) {
	t.Parallel()
	env, _ := oidcStack(t, "") // a public client
	f := newFlowClient(t, env)
	cb, flow := f.signIn("alice")

	wrong, _ := url.Parse(cb)
	q := wrong.Query()
	q.Set("state", "not-the-state")
	wrong.RawQuery = q.Encode()
	if status, body, session := callback(t, wrong.String(), flow); status != http.StatusBadRequest || session != nil || !strings.Contains(body, "not the one this browser started") {
		t.Fatalf("wrong state: %d %v %s", status, session, body)
	}
	if status, _, session := callback(t, cb, nil); status != http.StatusBadRequest || session != nil {
		t.Fatalf("no sign-in cookie: %d %v", status, session)
	}
	// Another browser's sign-in cookie does not fit this state either.
	_, other := newFlowClient(t, env).signIn("bob")
	if status, _, session := callback(t, cb, other); status != http.StatusBadRequest || session != nil {
		t.Fatalf("another sign-in's cookie: %d %v", status, session)
	}

	status, body, session := callback(t, cb, flow)
	if status != http.StatusOK || session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode {
		t.Fatalf("sign-in: %d %+v %s", status, session, body)
	}
	r := do(t, "GET", env.URL+"/studio/api/session", "", "Cookie", studio.CookieName+"="+session.Value)
	var info studio.SessionInfo
	if err := json.Unmarshal(r.body, &info); err != nil || !info.SignedIn || info.Tenant != "acme" || info.Role != "caller" || info.User != "alice@example.com" {
		t.Fatalf("session: %d %s", r.status, r)
	}

	// The session is Studio's usual one: signing out (with its CSRF token)
	// revokes it.
	ck := studio.CookieName + "=" + session.Value
	if r := do(t, "POST", env.URL+"/studio/api/logout", "", "Cookie", ck, "x-csrf-token", info.CSRF); r.status != 200 {
		t.Fatalf("sign out: %d %s", r.status, r)
	}
	if r := do(t, "GET", env.URL+"/v1/threads", "", "Cookie", ck); r.status != 401 {
		t.Fatalf("a signed-out user session: %d %s", r.status, r)
	}

	// The same callback again, even with its sign-in cookie: the provider
	// refuses a code used once.
	if status, body, session := callback(t, cb, flow); status != http.StatusUnauthorized || session != nil || !strings.Contains(body, "invalid_grant") {
		t.Fatalf("replayed code: %d %v %s", status, session, body)
	}
	// The signed-out page offers the provider.
	r = do(t, "GET", env.URL+"/studio/api/session", "")
	if err := json.Unmarshal(r.body, &info); err != nil || info.SignedIn || info.OIDC == nil || info.OIDC.Name != "Acme ID" || !info.Keys {
		t.Fatalf("signed-out session: %s", r)
	}
}

// TestStudioLiveFeedOfAUser: an end user's live feed (what their Studio
// refreshes by) tells of their own threads and decisions (also of a turn
// without a session), and of no other user's.
func TestStudioLiveFeedOfAUser(t *testing.T) {
	t.Parallel()
	env, o := oidcStack(t, "studio-secret-0123456789abcdef0123456789")
	alice := o.Token(t, o.Issuer, "alice", oidcAudience)
	bob := o.Token(t, o.Issuer, "bob", oidcAudience)
	feed := openLive(t, env, "Authorization", "Bearer "+alice)
	nextLive(t, feed, "hello")
	turn := func(tok, session string) {
		t.Helper()
		body := `{"model":"assistant","messages":[{"role":"user","content":"draft something"}]}`
		if r := do(t, "POST", env.URL+"/v1/chat/completions", body, "x-stackbone-session", session, "Authorization", "Bearer "+tok); r.status != 200 {
			t.Fatalf("turn on %s: %d %s", session, r.status, r)
		}
	}
	turn(bob, "bob-draft")
	// Bob's refund in a turn without a session: its decision record (no
	// thread) is his.
	if r := do(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"please refund my order"}]}`,
		"Authorization", "Bearer "+bob); r.status != 200 {
		t.Fatalf("bob's stateless refund: %d %s", r.status, r)
	}
	turn(alice, "alice-draft")
	for _, e := range nextLive(t, feed, "alice-draft") {
		if strings.Contains(e, "bob-draft") || strings.Contains(e, `"kind":"decision"`) {
			t.Fatalf("alice's feed tells of bob's thread or decision: %s", e)
		}
	}
	// Her own stateless decision reaches her feed.
	if r := do(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"please refund my order"}]}`,
		"Authorization", "Bearer "+alice); r.status != 200 {
		t.Fatalf("alice's stateless refund: %d %s", r.status, r)
	}
	nextLive(t, feed, `"kind":"decision"`)
}

// TestStudioOIDCAcrossReplicas: without any API key (end users only), a
// confidential client's sign-in on one replica is a session on the other
// (the signing key comes from the client secret), and signing out on one
// ends it on both. On PostgreSQL.
func TestStudioOIDCAcrossReplicas(t *testing.T) {
	t.Parallel()
	o := stacktest.StartOIDCUsers(t, oidcUsers)
	a, b := stacktest.Replicas(t, true, stacktest.Options{Mode: config.Start, Configure: func(cfg *config.Config) {
		cfg.JWT = config.JWT{Issuer: o.Issuer, Audiences: []string{oidcAudience}, StudioClientID: "studio",
			StudioClientSecret: "studio-secret-0123456789abcdef0123456789"}
	}})
	o.AddApps(t, stacktest.OIDCApp{ID: "studio", Secret: "studio-secret-0123456789abcdef0123456789",
		RedirectURIs: []string{a.URL + studio.OIDCCallbackPath}})
	cb, flow := newFlowClient(t, a).signIn("dave")
	status, body, session := callback(t, cb, flow)
	if status != http.StatusOK || session == nil {
		t.Fatalf("sign-in on a: %d %s", status, body)
	}
	ck := studio.CookieName + "=" + session.Value
	r := do(t, "GET", b.URL+"/studio/api/session", "", "Cookie", ck)
	var info studio.SessionInfo
	if err := json.Unmarshal(r.body, &info); err != nil || !info.SignedIn || info.Role != "approver" || info.User != "Dave" || info.Keys {
		t.Fatalf("the session on b: %s", r)
	}
	if r := do(t, "GET", b.URL+"/v1/hitl", "", "Cookie", ck); r.status != 200 {
		t.Fatalf("b's API under the session: %d %s", r.status, r)
	}
	if r := do(t, "POST", b.URL+"/studio/api/logout", "", "Cookie", ck, "x-csrf-token", info.CSRF); r.status != 200 {
		t.Fatalf("sign out on b: %d %s", r.status, r)
	}
	if r := do(t, "GET", a.URL+"/v1/hitl", "", "Cookie", ck); r.status != 401 {
		t.Fatalf("a after signing out on b: %d %s", r.status, r)
	}
}

package studio_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/studio"
)

var (
	acme  = config.Key{Tenant: "acme", Secret: "sk-acme-0123456789"}
	globx = config.Key{Tenant: "globex", Secret: "sk-globex-0123456789"}
)

func startEnv(t *testing.T) *stacktest.Env {
	return stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: []config.Key{acme, globx}})
}

func TestStudioServedOfflineFromTheBinary(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Get(env.URL + "/studio")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusFound || res.Header.Get("Location") != "/studio/" {
		t.Fatalf("GET /studio: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	page := do(t, "GET", env.URL+"/studio/", "")
	if page.status != 200 || !strings.HasPrefix(page.header.Get("Content-Type"), "text/html") ||
		!strings.Contains(page.String(), `src="/studio/app.js"`) {
		t.Fatalf("shell: %d %s", page.status, page)
	}
	if csp := page.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Fatalf("CSP %q", csp)
	}
	// Every asset the page references is served from the binary, and none
	// reaches for the network (no CDN, no web fonts).
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/`)
	for _, p := range []string{"index.html", "app.js", "schema.js", "charts.js", "branches.js", "style.css", "favicon.svg"} {
		r := do(t, "GET", env.URL+"/studio/"+p, "")
		if r.status != 200 || len(r.body) == 0 {
			t.Fatalf("%s: %d", p, r.status)
		}
		if p == "app.js" && r.header.Get("Content-Type") != "text/javascript; charset=utf-8" {
			t.Fatalf("app.js content type %q", r.header.Get("Content-Type"))
		}
		for _, m := range external.FindAllString(r.String(), -1) {
			if m != "http://www.w3.org/" { // the SVG namespace name, not a fetch
				t.Fatalf("%s references %s", p, m)
			}
		}
		again := do(t, "GET", env.URL+"/studio/"+p, "", "If-None-Match", r.header.Get("ETag"))
		if again.status != http.StatusNotModified {
			t.Fatalf("%s with its ETag: %d", p, again.status)
		}
	}
	if r := do(t, "GET", env.URL+"/studio/nope.js", ""); r.status != 404 {
		t.Fatalf("unknown asset: %d", r.status)
	}
	if r := do(t, "GET", env.URL+"/studio/api/nope", ""); r.status != 404 {
		t.Fatalf("unknown api route: %d", r.status)
	}
}

func TestDevSessionIsOpen(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	var s studio.SessionInfo
	r := do(t, "GET", env.URL+"/studio/api/session", "")
	if err := json.Unmarshal(r.body, &s); err != nil || !s.SignedIn || s.Tenant != "dev" || s.Mode != "dev" || s.Cookie {
		t.Fatalf("dev session: %s", r)
	}
}

func login(t *testing.T, env *stacktest.Env, key string) (cookie *http.Cookie, info studio.SessionInfo) {
	t.Helper()
	r := do(t, "POST", env.URL+"/studio/api/login", `{"apiKey":`+jsonString(key)+`}`)
	if r.status != 200 {
		t.Fatalf("login: %d %s", r.status, r)
	}
	if err := json.Unmarshal(r.body, &info); err != nil {
		t.Fatal(err)
	}
	res := http.Response{Header: r.header}
	for _, c := range res.Cookies() {
		if c.Name == studio.CookieName {
			cookie = c
		}
	}
	if cookie == nil {
		t.Fatalf("no session cookie in %v", r.header)
	}
	return cookie, info
}

func TestSignInSetsASignedSessionCookie(t *testing.T) {
	t.Parallel()
	env := startEnv(t)

	var s studio.SessionInfo
	_ = json.Unmarshal(do(t, "GET", env.URL+"/studio/api/session", "").body, &s)
	if s.SignedIn || s.Mode != "start" {
		t.Fatalf("start mode without a cookie must ask for sign-in: %+v", s)
	}
	if r := do(t, "POST", env.URL+"/studio/api/login", `{"apiKey":"sk-wrong-0123456789"}`); r.status != 401 || !strings.Contains(r.String(), "Invalid API key") {
		t.Fatalf("wrong key: %d %s", r.status, r)
	}
	if r := do(t, "POST", env.URL+"/studio/api/login", `apiKey=`+acme.Secret, "Content-Type", "application/x-www-form-urlencoded"); r.status != 400 {
		t.Fatalf("a form post (cross-site shape) must be refused: %d %s", r.status, r)
	}
	if r := do(t, "POST", env.URL+"/studio/api/login", `{"apiKey":`+jsonString(acme.Secret)+`}`, "Origin", "https://evil.example"); r.status != 403 {
		t.Fatalf("a cross-origin sign-in must be refused: %d %s", r.status, r)
	}

	cookie, info := login(t, env, acme.Secret)
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" || cookie.MaxAge <= 0 {
		t.Fatalf("cookie attributes %+v", cookie)
	}
	if strings.Contains(cookie.Value, acme.Secret) || strings.Contains(cookie.Value, "sk-") {
		t.Fatal("the cookie must not hold the API key")
	}
	if info.Tenant != "acme" || info.CSRF == "" || !info.SignedIn || !info.Cookie {
		t.Fatalf("login answer %+v", info)
	}
	ck := "stackbone_studio=" + cookie.Value

	_ = json.Unmarshal(do(t, "GET", env.URL+"/studio/api/session", "", "Cookie", ck).body, &s)
	if !s.SignedIn || s.Tenant != "acme" || s.CSRF != info.CSRF {
		t.Fatalf("session with cookie %+v", s)
	}
	if r := do(t, "GET", env.URL+"/v1/threads", "", "Cookie", ck); r.status != 200 {
		t.Fatalf("cookie GET: %d %s", r.status, r)
	}
	if r := do(t, "GET", env.URL+"/v1/threads", ""); r.status != 401 {
		t.Fatalf("no cookie: %d", r.status)
	}
	tampered := ck[:len(ck)-3] + "AAA"
	if r := do(t, "GET", env.URL+"/v1/threads", "", "Cookie", tampered); r.status != 401 {
		t.Fatalf("tampered cookie: %d", r.status)
	}

	// Logging out (with the session's token) clears the cookie.
	r := do(t, "POST", env.URL+"/studio/api/logout", "", "Cookie", ck, studio.CSRFHeader, info.CSRF)
	res := http.Response{Header: r.header}
	cleared := false
	for _, c := range res.Cookies() {
		cleared = cleared || (c.Name == studio.CookieName && c.Value == "" && c.MaxAge < 0)
	}
	if r.status != 200 || !cleared {
		t.Fatalf("logout: %d %v", r.status, r.header)
	}
}

// TestSignOutNeedsTheTokenAndRevokesTheSession: signing out without the
// CSRF token is refused and changes nothing; with it, the old cookie stops
// working at once, on this server and on another replica of the same store.
func TestSignOutNeedsTheTokenAndRevokesTheSession(t *testing.T) {
	t.Parallel()
	env := startEnv(t)
	replica := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: []config.Key{acme, globx}, Store: env.Store})
	cookie, info := login(t, env, acme.Secret)
	ck := studio.CookieName + "=" + cookie.Value
	other, _ := login(t, env, acme.Secret) // a second tab or browser of the same tenant
	ck2 := studio.CookieName + "=" + other.Value

	r := do(t, "POST", env.URL+"/studio/api/logout", "", "Cookie", ck)
	if r.status != 403 || !strings.Contains(r.String(), "csrf_failed") {
		t.Fatalf("sign-out without the token: %d %s", r.status, r)
	}
	if r := do(t, "POST", env.URL+"/studio/api/logout", "", "Cookie", ck, studio.CSRFHeader, "not-the-token"); r.status != 403 {
		t.Fatalf("sign-out with a wrong token: %d %s", r.status, r)
	}
	for _, base := range []string{env.URL, replica.URL} {
		if r := do(t, "GET", base+"/v1/threads", "", "Cookie", ck); r.status != 200 {
			t.Fatalf("the session must survive a refused sign-out: %d %s", r.status, r)
		}
	}

	if r := do(t, "POST", env.URL+"/studio/api/logout", "", "Cookie", ck, studio.CSRFHeader, info.CSRF); r.status != 200 {
		t.Fatalf("sign-out: %d %s", r.status, r)
	}
	for _, base := range []string{env.URL, replica.URL} {
		if r := do(t, "GET", base+"/v1/threads", "", "Cookie", ck); r.status != 401 {
			t.Fatalf("%s: the old cookie still works after sign-out: %d %s", base, r.status, r)
		}
		if r := do(t, "GET", base+"/studio/api/live", "", "Cookie", ck); r.status != 401 {
			t.Fatalf("%s: the old cookie still opens the live feed: %d", base, r.status)
		}
		var s studio.SessionInfo
		if err := json.Unmarshal(do(t, "GET", base+"/studio/api/session", "", "Cookie", ck).body, &s); err != nil || s.SignedIn {
			t.Fatalf("%s: session after sign-out %+v %v", base, s, err)
		}
		if r := do(t, "GET", base+"/v1/threads", "", "Cookie", ck2); r.status != 200 {
			t.Fatalf("signing out one session ended another: %d %s", r.status, r)
		}
	}
	// Signing out again with the dead cookie only clears it.
	if r := do(t, "POST", replica.URL+"/studio/api/logout", "", "Cookie", ck); r.status != 200 {
		t.Fatalf("sign-out of a signed-out session: %d %s", r.status, r)
	}
}

func TestCookiePostNeedsCSRFToken(t *testing.T) {
	t.Parallel()
	env := startEnv(t)
	pause(t, env, acme.Secret, "csrf-1", "please refund my order")
	it := onePending(t, env, acme.Secret, "csrf-1")
	cookie, info := login(t, env, acme.Secret)
	ck := "stackbone_studio=" + cookie.Value

	r := do(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "", "Cookie", ck)
	if r.status != 403 || !strings.Contains(r.String(), "csrf") {
		t.Fatalf("cookie POST without token: %d %s", r.status, r)
	}
	r = do(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "", "Cookie", ck, studio.CSRFHeader, "not-the-token")
	if r.status != 403 {
		t.Fatalf("cookie POST with a wrong token: %d %s", r.status, r)
	}
	if got := decision(t, env, "acme", it.ID); got.Status != store.Pending {
		t.Fatalf("a refused request decided: %+v", got)
	}
	r = do(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "", "Cookie", ck, studio.CSRFHeader, info.CSRF, "x-stackbone-client", "studio")
	if r.status != 200 {
		t.Fatalf("cookie POST with token: %d %s", r.status, r)
	}
	waitIdle(t, env, "acme", "csrf-1")
	got := decision(t, env, "acme", it.ID)
	if got.Decision == nil || got.Decision.Via != "studio" || got.Decision.By != "acme" || env.Calls.Get("refund") != 1 {
		t.Fatalf("decision %+v, refund ran %d", got.Decision, env.Calls.Get("refund"))
	}
}

func TestTenantSeesOnlyItsOwnDecisions(t *testing.T) {
	t.Parallel()
	env := startEnv(t)
	pause(t, env, acme.Secret, "acme-thread", "please refund my order")
	it := onePending(t, env, acme.Secret, "acme-thread")
	cookie, info := login(t, env, globx.Secret)
	ck := "stackbone_studio=" + cookie.Value
	if r := do(t, "GET", env.URL+"/v1/hitl", "", "Cookie", ck); r.status != 200 || strings.Contains(r.String(), it.ID) {
		t.Fatalf("globex sees acme's decision: %s", r)
	}
	if r := do(t, "GET", env.URL+"/v1/threads/acme-thread", "", "Cookie", ck); r.status != 404 {
		t.Fatalf("globex reads acme's thread: %d", r.status)
	}
	if r := do(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "", "Cookie", ck, studio.CSRFHeader, info.CSRF); r.status != 404 {
		t.Fatalf("globex decides acme's call: %d %s", r.status, r)
	}
}

func TestAgentsAPI(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	r := do(t, "GET", env.URL+"/studio/api/agents", "")
	var page struct {
		Data []studio.AgentInfo `json:"data"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil || r.status != 200 {
		t.Fatalf("agents: %d %s", r.status, r)
	}
	if len(page.Data) != 2 || page.Data[0].Name != "assistant" || page.Data[1].Name != "other" {
		t.Fatalf("agents %+v", page.Data)
	}
	a := page.Data[0]
	if a.Model != "openai/test-model" || a.Instructions != "You are a test assistant." || string(a.EditableState["draft"]) != `{"type":"string"}` {
		t.Fatalf("assistant %+v", a)
	}
	tools := map[string]studio.ToolInfo{}
	for _, ti := range a.Tools {
		tools[ti.Name] = ti
	}
	if ap := tools["refund"].Approval; ap == nil || strings.Join(ap.AllowedDecisions, ",") != "approve,reject,edit" || !ap.Described {
		t.Fatalf("refund approval %+v", tools["refund"])
	}
	if ap := tools["delete_file"].Approval; ap == nil || strings.Join(ap.AllowedDecisions, ",") != "approve,reject" || ap.Described {
		t.Fatalf("delete_file approval %+v", tools["delete_file"])
	}
	if tools["get_weather"].Approval != nil || !strings.Contains(string(tools["get_weather"].Parameters), "city") {
		t.Fatalf("get_weather %+v", tools["get_weather"])
	}
	startEnvAgents := startEnv(t)
	if r := do(t, "GET", startEnvAgents.URL+"/studio/api/agents", ""); r.status != 401 {
		t.Fatalf("agents without auth in start mode: %d", r.status)
	}
}

// TestAgentsShowSourcesRelativeToTheProject: the page names an agent's file
// as the project knows it (agents/refunds.ts), never the host's absolute path.
func TestAgentsShowSourcesRelativeToTheProject(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: []config.Key{acme, globx},
		Agents: func(env *stacktest.Env) []*agent.Spec {
			specs := stacktest.DefaultAgents(env, "openai/test-model")
			specs[0].Source = filepath.Join(env.Config.Dir, "agents", "refunds.ts")
			specs[1].Source = filepath.Join(env.Config.Dir, "agents", "support", "other.ts")
			return specs
		}})
	r := do(t, "GET", env.URL+"/studio/api/agents", "", "Authorization", "Bearer "+globx.Secret)
	if r.status != 200 || strings.Contains(r.String(), env.Config.Dir) || strings.Contains(r.String(), filepath.Base(env.Config.Dir)) {
		t.Fatalf("agents reveal the project's host path %s: %d %s", env.Config.Dir, r.status, r)
	}
	var page struct {
		Data []studio.AgentInfo `json:"data"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil {
		t.Fatal(err)
	}
	if got := []string{page.Data[0].Source, page.Data[1].Source}; got[0] != "agents/refunds.ts" || got[1] != "agents/support/other.ts" {
		t.Fatalf("sources %q", got)
	}
}

// openLive opens /studio/api/live with the given headers (name/value pairs)
// and returns its messages as "<event> <data>" lines.
func openLive(t *testing.T, env *stacktest.Env, hdr ...string) <-chan string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", env.URL+"/studio/api/live", nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if ct := res.Header.Get("Content-Type"); res.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("live feed: %d %q", res.StatusCode, ct)
	}
	events := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(res.Body)
		name := ""
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				name = v
			} else if v, ok := strings.CutPrefix(line, "data: "); ok {
				events <- name + " " + v
			}
		}
		close(events)
	}()
	return events
}

// nextLive reads a feed until a message containing want and returns every
// message read, want's last.
func nextLive(t *testing.T, events <-chan string, want string) []string {
	t.Helper()
	var seen []string
	deadline := time.After(5 * time.Second)
	for {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatalf("feed closed waiting for %s (saw %q)", want, seen)
			}
			seen = append(seen, e)
			if strings.Contains(e, want) {
				return seen
			}
		case <-deadline:
			t.Fatalf("timed out waiting for %s (saw %q)", want, seen)
		}
	}
}

// TestLiveFeed reads the tenant-wide feed: a pause and a decision made over
// the API both reach it.
func TestLiveFeed(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	events := openLive(t, env)
	nextLive(t, events, `hello {"tenant":"dev"}`)
	pause(t, env, "", "live-1", "please refund my order")
	nextLive(t, events, `change {"kind":"run","type":"run_finished","threadId":"live-1"}`)
	it := onePending(t, env, "", "live-1")
	if r := do(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/reject", "", "x-stackbone-client", "cli"); r.status != 200 {
		t.Fatalf("reject: %d %s", r.status, r)
	}
	nextLive(t, events, `change {"kind":"decision","threadId":"live-1"}`)
}

// TestLiveFeedIsScopedToTheTenant: two tenants each have a Studio page open;
// a decision by acme reaches acme's feed and nothing of it reaches globex's.
// The gate is deterministic: after acme's decision (and its resumed run) are
// over, globex starts a turn of its own, and everything globex's feed carried
// up to that turn's end must be globex's.
func TestLiveFeedIsScopedToTheTenant(t *testing.T) {
	t.Parallel()
	env := startEnv(t)
	ca, _ := login(t, env, acme.Secret)
	cg, _ := login(t, env, globx.Secret)
	feedA := openLive(t, env, "Cookie", studio.CookieName+"="+ca.Value)
	feedG := openLive(t, env, "Cookie", studio.CookieName+"="+cg.Value)
	nextLive(t, feedA, `hello {"tenant":"acme"}`)
	nextLive(t, feedG, `hello {"tenant":"globex"}`)

	pause(t, env, acme.Secret, "acme-live", "please refund my order")
	it := onePending(t, env, acme.Secret, "acme-live")
	if r := do(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "", "Authorization", "Bearer "+acme.Secret); r.status != 200 {
		t.Fatalf("approve: %d %s", r.status, r)
	}
	seenA := nextLive(t, feedA, `change {"kind":"decision"`)
	waitIdle(t, env, "acme", "acme-live")

	body := `{"model":"assistant","messages":[{"role":"user","content":"hello"}]}`
	if r := do(t, "POST", env.URL+"/v1/chat/completions", body, "Authorization", "Bearer "+globx.Secret, "x-stackbone-session", "globex-live"); r.status != 200 {
		t.Fatalf("globex chat: %d %s", r.status, r)
	}
	seen := nextLive(t, feedG, `change {"kind":"run","type":"run_finished","threadId":"globex-live"}`)
	for _, e := range seen {
		if !strings.Contains(e, `"threadId":"globex-live"`) {
			t.Fatalf("globex's feed carried %q (all: %q)", e, seen)
		}
	}
	if got := seenA[len(seenA)-1]; got != `change {"kind":"decision","threadId":"acme-live"}` {
		t.Fatalf("acme's feed announced the decision as %q", got)
	}
}

// A Studio session has the role of the key it signed in with: a caller
// key's session reads decisions but cannot decide (403 forbidden_role, and
// the session tells the page its role); an approver's decides under its
// label, via studio.
func TestStudioSessionKeepsTheKeyRole(t *testing.T) {
	t.Parallel()
	callerKey := config.Key{Tenant: "acme", Secret: "sk-caller-0123456", Role: config.RoleCaller, Label: "acme"}
	approverKey := config.Key{Tenant: "acme", Secret: "sk-approver-01234", Role: config.RoleApprover, Label: "alice"}
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: []config.Key{callerKey, approverKey}})
	pause(t, env, callerKey.Secret, "studio-roles", "please refund my order")
	it := onePending(t, env, callerKey.Secret, "studio-roles")

	cookie, info := login(t, env, callerKey.Secret)
	if info.Role != "caller" {
		t.Fatalf("caller login answer %+v", info)
	}
	ck := cookie.Name + "=" + cookie.Value
	if r := do(t, "GET", env.URL+"/v1/hitl/"+it.ID, "", "Cookie", ck); r.status != 200 {
		t.Fatalf("caller session reading a decision: %d %s", r.status, r)
	}
	r := do(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "{}", "Cookie", ck, studio.CSRFHeader, info.CSRF)
	if r.status != 403 || !strings.Contains(r.String(), `"code":"forbidden_role"`) {
		t.Fatalf("caller session approving: %d %s", r.status, r)
	}
	if d := decision(t, env, "acme", it.ID); d.Status != store.Pending {
		t.Fatalf("a refused decision changed: %+v", d)
	}

	cookie, info = login(t, env, approverKey.Secret)
	if info.Role != "approver" {
		t.Fatalf("approver login answer %+v", info)
	}
	ck = cookie.Name + "=" + cookie.Value
	var s studio.SessionInfo
	_ = json.Unmarshal(do(t, "GET", env.URL+"/studio/api/session", "", "Cookie", ck).body, &s)
	if s.Role != "approver" || s.Tenant != "acme" {
		t.Fatalf("session %+v", s)
	}
	if r := do(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", "{}", "Cookie", ck, studio.CSRFHeader, info.CSRF); r.status != 200 {
		t.Fatalf("approver session approving: %d %s", r.status, r)
	}
	waitIdle(t, env, "acme", "studio-roles")
	if d := decision(t, env, "acme", it.ID); d.Status != store.Approved || d.Decision.By != "alice" || d.Decision.Via != "studio" {
		t.Fatalf("decision %+v", d.Decision)
	}
}

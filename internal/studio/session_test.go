package studio

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/server"
	"github.com/stackbone/stackbone/internal/store/sqlite"
)

func testStudio(t *testing.T, keys ...config.Key) (*Studio, *time.Time) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cfg := config.Defaults(config.Start)
	cfg.Keys = keys
	db, err := sqlite.Open(t.Context(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st := &Studio{srv: &server.Server{Config: &cfg, Store: db}, Now: func() time.Time { return now }, TTL: time.Hour,
		secret: deriveSecret(keys, "")}
	return st, &now
}

func TestSessionTokenExpiresAndResistsForgery(t *testing.T) {
	t.Parallel()
	acme := config.Key{Tenant: "acme", Secret: "sk-acme-0123456789"}
	st, now := testStudio(t, acme)
	tok, exp := st.Issue("acme")
	if strings.Contains(tok, acme.Secret) {
		t.Fatal("token holds the key")
	}
	if tenant, gotExp, err := st.Verify(tok); err != nil || tenant != "acme" || !gotExp.Equal(exp) {
		t.Fatalf("fresh token: %q %v %v", tenant, gotExp, err)
	}
	if other, _ := st.Issue("acme"); other == tok {
		t.Fatal("two sessions share a token")
	}

	// A token for another tenant cannot be made by editing the tenant part.
	parts := strings.Split(tok, ".")
	parts[1] = b64.EncodeToString([]byte("globex"))
	if _, _, err := st.Verify(strings.Join(parts, ".")); !errors.Is(err, ErrBadSession) {
		t.Fatalf("forged tenant accepted: %v", err)
	}
	// Nor can its expiry be pushed back.
	parts = strings.Split(tok, ".")
	parts[2] = "99999999999"
	if _, _, err := st.Verify(strings.Join(parts, ".")); !errors.Is(err, ErrBadSession) {
		t.Fatalf("forged expiry accepted: %v", err)
	}
	for _, bad := range []string{"", "v1", "v2.a.b.c.d", tok + "x", "v1....."} {
		if _, _, err := st.Verify(bad); err == nil {
			t.Fatalf("accepted %q", bad)
		}
	}

	*now = now.Add(time.Hour)
	if _, _, err := st.Verify(tok); !errors.Is(err, ErrBadSession) {
		t.Fatalf("expired token accepted: %v", err)
	}

	// Another server with other keys does not accept it, and rotating the
	// keys signs everyone out.
	*now = now.Add(-time.Hour)
	rotated, _ := testStudio(t, config.Key{Tenant: "acme", Secret: "sk-acme-rotated-01"})
	rotated.Now = st.Now
	if _, _, err := rotated.Verify(tok); !errors.Is(err, ErrBadSession) {
		t.Fatalf("a token survived key rotation: %v", err)
	}
	// A tenant whose keys were removed loses its sessions.
	removed, _ := testStudio(t, config.Key{Tenant: "globex", Secret: "sk-globex-0123456789"})
	removed.secret, removed.Now = st.secret, st.Now
	if _, _, err := removed.Verify(tok); !errors.Is(err, ErrBadSession) {
		t.Fatalf("a removed tenant's session accepted: %v", err)
	}
}

func TestCookieAuthChecksCSRFOnlyForStateChanges(t *testing.T) {
	t.Parallel()
	st, _ := testStudio(t, config.Key{Tenant: "acme", Secret: "sk-acme-0123456789"})
	tok, _ := st.Issue("acme")
	csrf := st.CSRFToken(tok)
	if csrf == "" || csrf == tok || strings.Contains(tok, csrf) {
		t.Fatalf("csrf token %q", csrf)
	}
	req := func(method, token, header string) (server.Principal, bool, error) {
		r := httptest.NewRequest(method, "/v1/hitl/x/approve", nil)
		if token != "" {
			r.Header.Set("Cookie", CookieName+"="+token)
		}
		if header != "" {
			r.Header.Set(CSRFHeader, header)
		}
		return st.CookieAuth(r)
	}
	if _, ok, err := req("GET", "", ""); ok || err != nil {
		t.Fatal("no cookie must not be handled")
	}
	if _, ok, err := req("GET", "garbage", ""); ok || err != nil {
		t.Fatal("a bad cookie must not be handled")
	}
	if p, ok, err := req("GET", tok, ""); !ok || err != nil || p.Tenant != "acme" {
		t.Fatalf("GET with cookie: %+v %v %v", p, ok, err)
	}
	if _, ok, err := req("POST", tok, ""); !ok || err == nil || !strings.Contains(err.Error(), "CSRF") {
		t.Fatalf("POST without token: %v %v", ok, err)
	}
	if _, _, err := req("POST", tok, csrf+"x"); err == nil {
		t.Fatal("POST with a wrong token accepted")
	}
	if p, ok, err := req("POST", tok, csrf); !ok || err != nil || p.Tenant != "acme" {
		t.Fatalf("POST with token: %+v %v %v", p, ok, err)
	}
}

func TestProjectPathNeverShowsAHostPath(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ dir, file, want string }{
		{"/srv/app", "/srv/app/agents/refunds.ts", "agents/refunds.ts"},
		{"/srv/app", "/srv/other/agents/x.ts", "x.ts"},
		{"/srv/app", "", ""},
	} {
		if got := projectPath(c.dir, c.file); got != c.want {
			t.Errorf("projectPath(%q, %q) = %q, want %q", c.dir, c.file, got, c.want)
		}
	}
}

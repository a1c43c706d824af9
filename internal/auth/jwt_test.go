package auth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/stackbone/stackbone/internal/auth"
	"github.com/stackbone/stackbone/internal/config"
)

// issuer serves a discovery document and a key set that can change.
type issuer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	keys    []jose.JSONWebKey // private
	fetches atomic.Int32
	down    atomic.Bool // every request fails with 502
}

func newIssuer(t *testing.T) *issuer {
	is := &issuer{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": is.srv.URL, "jwks_uri": is.srv.URL + "/jwks"})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		is.fetches.Add(1)
		is.mu.Lock()
		defer is.mu.Unlock()
		var set jose.JSONWebKeySet
		for _, k := range is.keys {
			set.Keys = append(set.Keys, k.Public())
		}
		_ = json.NewEncoder(w).Encode(set)
	})
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if is.down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(is.srv.Close)
	is.addKey(t, "k1")
	return is
}

func (is *issuer) addKey(t *testing.T, kid string) {
	pk, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is.mu.Lock()
	is.keys = append([]jose.JSONWebKey{{Key: pk, KeyID: kid, Algorithm: "ES256", Use: "sig"}}, is.keys...)
	is.mu.Unlock()
}

func (is *issuer) key(kid string) jose.JSONWebKey {
	is.mu.Lock()
	defer is.mu.Unlock()
	for _, k := range is.keys {
		if k.KeyID == kid {
			return k
		}
	}
	panic("no key " + kid)
}

func (is *issuer) sign(t *testing.T, kid string, claims map[string]any) string {
	k := is.key(kid)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func (is *issuer) claims(mod func(map[string]any)) map[string]any {
	c := map[string]any{"iss": is.srv.URL, "aud": "https://api.example", "sub": "u-1", "tenant": "acme",
		"email": "ann@example.com", "exp": t0.Add(5 * time.Minute).Unix(), "iat": t0.Unix()}
	if mod != nil {
		mod(c)
	}
	return c
}

func newVerifier(t *testing.T, is *issuer, now *time.Time) *auth.Verifier {
	v, err := auth.NewVerifier(auth.Config{Issuer: is.srv.URL, Now: func() time.Time { return *now }})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var aud = []string{"https://api.example"}

func TestVerifyMapsClaims(t *testing.T) {
	is := newIssuer(t)
	now := t0
	v := newVerifier(t, is, &now)
	id, err := v.Verify(context.Background(), is.sign(t, "k1", is.claims(nil)), aud)
	if err != nil {
		t.Fatal(err)
	}
	want := auth.Identity{Tenant: "acme", Role: config.RoleCaller, User: auth.User{ID: "u-1", Label: "ann@example.com"}}
	if *id != want {
		t.Fatalf("identity %+v, want %+v", *id, want)
	}
	for _, c := range []struct {
		role any
		want config.Role
	}{{"admin", config.RoleAdmin}, {"approver", config.RoleApprover}, {[]any{"offline_access", "approver"}, config.RoleApprover},
		{[]any{"caller", "admin"}, config.RoleAdmin}} {
		id, err := v.Verify(context.Background(), is.sign(t, "k1", is.claims(func(m map[string]any) { m["role"] = c.role })), aud)
		if err != nil || id.Role != c.want {
			t.Fatalf("role %v: %+v, %v; want %s", c.role, id, err, c.want)
		}
	}
	// A dotted claim name reads a nested claim (Keycloak's realm roles).
	v2, _ := auth.NewVerifier(auth.Config{Issuer: is.srv.URL, RoleClaim: "realm_access.roles", TenantClaim: "org", Now: func() time.Time { return now }})
	id, err = v2.Verify(context.Background(), is.sign(t, "k1", is.claims(func(m map[string]any) {
		m["realm_access"] = map[string]any{"roles": []any{"default-roles", "admin"}}
		m["org"] = "globex"
		delete(m, "email")
		m["name"] = "Ann"
	})), aud)
	if err != nil || id.Role != config.RoleAdmin || id.Tenant != "globex" || id.User.Label != "Ann" {
		t.Fatalf("nested: %+v, %v", id, err)
	}
}

// TestVerifyNamespacedClaims: claim names that are URLs (Auth0's and
// Okta's namespaced custom claims) hold dots, and are read whole, or as
// the first step of a path into an object claim.
func TestVerifyNamespacedClaims(t *testing.T) {
	is := newIssuer(t)
	now := t0
	v, _ := auth.NewVerifier(auth.Config{Issuer: is.srv.URL, TenantClaim: "https://acme.com/tenant", RoleClaim: "https://acme.com/app.roles",
		Now: func() time.Time { return now }})
	id, err := v.Verify(context.Background(), is.sign(t, "k1", is.claims(func(m map[string]any) {
		delete(m, "tenant")
		m["https://acme.com/tenant"] = "initech"
		m["https://acme.com/app"] = map[string]any{"roles": []any{"approver"}}
	})), aud)
	if err != nil || id.Tenant != "initech" || id.Role != config.RoleApprover {
		t.Fatalf("namespaced: %+v, %v", id, err)
	}
	// Without the namespaced claim there is no tenant (the plain
	// "tenant" claim is not it).
	_, err = v.Verify(context.Background(), is.sign(t, "k1", is.claims(nil)), aud)
	refusedFor(t, err, "https://acme.com/tenant")
}

// TestVerifyIDToken: an ID token is for the client, and for the sign-in
// whose nonce it carries.
func TestVerifyIDToken(t *testing.T) {
	is := newIssuer(t)
	now := t0
	v := newVerifier(t, is, &now)
	tok := is.sign(t, "k1", is.claims(func(m map[string]any) { m["aud"] = "studio"; m["nonce"] = "n-1" }))
	if id, err := v.VerifyIDToken(context.Background(), tok, "studio", "n-1"); err != nil || id.User.ID != "u-1" {
		t.Fatalf("id token: %+v, %v", id, err)
	}
	_, err := v.VerifyIDToken(context.Background(), tok, "studio", "n-2")
	refusedFor(t, err, "nonce")
	_, err = v.VerifyIDToken(context.Background(), tok, "other-client", "n-1")
	refusedFor(t, err, "audience")
}

func refusedFor(t *testing.T, err error, reason string) {
	t.Helper()
	var te *auth.TokenError
	if !errors.As(err, &te) {
		t.Fatalf("err %v, want a TokenError", err)
	}
	if !strings.Contains(te.Reason, reason) {
		t.Fatalf("reason %q, want %q", te.Reason, reason)
	}
}

func b64(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

func TestVerifyRefuses(t *testing.T) {
	is := newIssuer(t)
	now := t0
	v := newVerifier(t, is, &now)
	ctx := context.Background()
	good := is.sign(t, "k1", is.claims(nil))
	parts := strings.Split(good, ".")

	// alg none, with and without a signature part.
	none := b64(map[string]string{"alg": "none", "typ": "JWT"}) + "." + parts[1] + "."
	_, err := v.Verify(ctx, none, aud)
	refusedFor(t, err, "algorithm")

	// HS256 keyed with the issuer's public key (the classic confusion).
	k1 := is.key("k1")
	pub, _ := x509.MarshalPKIXPublicKey(k1.Public().Key)
	head := b64(map[string]string{"alg": "HS256", "typ": "JWT", "kid": "k1"})
	mac := hmac.New(sha256.New, pub)
	mac.Write([]byte(head + "." + parts[1]))
	_, err = v.Verify(ctx, head+"."+parts[1]+"."+base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), aud)
	refusedFor(t, err, "algorithm")

	// Tampered: another tenant in the payload, the signature kept.
	tampered := is.claims(func(m map[string]any) { m["tenant"] = "globex" })
	_, err = v.Verify(ctx, parts[0]+"."+b64(tampered)+"."+parts[2], aud)
	refusedFor(t, err, "signature")

	for name, c := range map[string]struct {
		mod    func(map[string]any)
		reason string
	}{
		"wrong issuer":   {func(m map[string]any) { m["iss"] = "https://evil.example" }, "issuer"},
		"wrong audience": {func(m map[string]any) { m["aud"] = "https://other.example" }, "audience"},
		"expired":        {func(m map[string]any) { m["exp"] = t0.Add(-31 * time.Second).Unix() }, "expired"},
		"not yet":        {func(m map[string]any) { m["nbf"] = t0.Add(31 * time.Second).Unix() }, "not valid yet"},
		"no exp":         {func(m map[string]any) { delete(m, "exp") }, "no exp"},
		"no sub":         {func(m map[string]any) { delete(m, "sub") }, "no sub"},
		"no tenant":      {func(m map[string]any) { delete(m, "tenant") }, "tenant"},
		"unknown role":   {func(m map[string]any) { m["role"] = "root" }, "not admin, caller or approver"},
		"two roles":      {func(m map[string]any) { m["role"] = []any{"caller", "approver"} }, "both"},
	} {
		_, err := v.Verify(ctx, is.sign(t, "k1", is.claims(c.mod)), aud)
		if err == nil {
			t.Fatalf("%s: accepted", name)
		}
		refusedFor(t, err, c.reason)
	}

	// Within the leeway: expired 29 s ago, valid from 29 s on.
	for _, mod := range []func(map[string]any){
		func(m map[string]any) { m["exp"] = t0.Add(-29 * time.Second).Unix() },
		func(m map[string]any) { m["nbf"] = t0.Add(29 * time.Second).Unix() },
	} {
		if _, err := v.Verify(ctx, is.sign(t, "k1", is.claims(mod)), aud); err != nil {
			t.Fatalf("within the leeway: %v", err)
		}
	}
	if auth.LooksLikeJWT("sk-a-static-key") || !auth.LooksLikeJWT(good) || !auth.LooksLikeJWT(none) {
		t.Fatal("LooksLikeJWT")
	}
}

// A token naming a key the verifier does not hold makes it fetch the keys
// again, at most every RefreshEvery.
func TestVerifyRotation(t *testing.T) {
	is := newIssuer(t)
	now := t0
	v := newVerifier(t, is, &now)
	ctx := context.Background()
	if _, err := v.Verify(ctx, is.sign(t, "k1", is.claims(nil)), aud); err != nil {
		t.Fatal(err)
	}
	if n := is.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches, want 1", n)
	}
	if _, err := v.Verify(ctx, is.sign(t, "k1", is.claims(nil)), aud); err != nil || is.fetches.Load() != 1 {
		t.Fatalf("cached: %v, %d fetches", err, is.fetches.Load())
	}
	// The provider rotates; the first token of the new key is within
	// RefreshEvery of the first fetch: refused without a fetch.
	is.addKey(t, "k2")
	_, err := v.Verify(ctx, is.sign(t, "k2", is.claims(nil)), aud)
	refusedFor(t, err, `key "k2"`)
	if n := is.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches within the refresh interval, want 1", n)
	}
	now = now.Add(auth.DefaultRefreshEvery)
	future := is.claims(func(m map[string]any) { m["exp"] = now.Add(time.Minute).Unix() })
	if _, err := v.Verify(ctx, is.sign(t, "k2", future), aud); err != nil {
		t.Fatalf("after rotation: %v", err)
	}
	if n := is.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches, want 2", n)
	}
	// A made-up kid right after is refused without another fetch.
	is.addKey(t, "k3")
	_, err = v.Verify(ctx, is.sign(t, "k3", future), aud)
	refusedFor(t, err, `key "k3"`)
	if n := is.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches, want 2", n)
	}
	// The old key still verifies (it is still in the set).
	if _, err := v.Verify(ctx, is.sign(t, "k1", future), aud); err != nil {
		t.Fatal(err)
	}
}

// A provider that cannot be reached is not the token's fault: the error
// says Unavailable, without a fetch storm, and past RefreshEvery the keys
// are fetched again.
func TestVerifyIssuerDown(t *testing.T) {
	is := newIssuer(t)
	now := t0
	v := newVerifier(t, is, &now)
	tok := is.sign(t, "k1", is.claims(nil))
	is.down.Store(true)
	for range 2 { // the second, within RefreshEvery, does not fetch
		_, err := v.Verify(context.Background(), tok, aud)
		var te *auth.TokenError
		if !errors.As(err, &te) || !te.Unavailable {
			t.Fatalf("issuer down: %v, want Unavailable", err)
		}
	}
	if n := is.fetches.Load(); n != 0 {
		t.Fatalf("%d key set fetches while discovery fails", n)
	}
	is.down.Store(false)
	now = now.Add(auth.DefaultRefreshEvery)
	if _, err := v.Verify(context.Background(), tok, aud); err != nil {
		t.Fatalf("the provider is back: %v", err)
	}
}

package studio

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/stackbone/stackbone/internal/auth"
	"github.com/stackbone/stackbone/internal/config"
)

// OpenID Connect sign-in (authorization code with PKCE): with an issuer
// and STACKBONE_STUDIO_OIDC_CLIENT_ID set, the sign-in page offers "Sign in
// with <provider>". GET OIDCLoginPath sends the browser to the provider's
// authorization endpoint with a fresh state, nonce and S256 code challenge,
// kept in a short-lived signed cookie; the provider sends it back to
// OIDCCallbackPath, which checks the state, exchanges the code (with the
// client secret when there is one), verifies the ID token (issuer, audience
// the client id, signature, expiry, nonce) with the server's verifier, maps
// its claims as an access token's (tenant, role, sub), and sets Studio's
// usual session cookie for that user.
const (
	// OIDCLoginPath starts a sign-in with the OpenID provider.
	OIDCLoginPath = "/studio/oidc/login"
	// OIDCCallbackPath is the redirect URI: register
	// {STACKBONE_PUBLIC_URL}/studio/oidc/callback with the provider.
	OIDCCallbackPath = "/studio/oidc/callback"
	// oidcCookie carries a sign-in's state, nonce and code verifier from
	// OIDCLoginPath to OIDCCallbackPath.
	oidcCookie = "stackbone_studio_oidc"
	// oidcFlowTTL is how long a sign-in may take at the provider.
	oidcFlowTTL = 10 * time.Minute
)

// OIDCInfo tells the sign-in page about the OpenID sign-in.
type OIDCInfo struct {
	// Name is the provider's name on the button.
	Name string `json:"name"`
	// URL starts the sign-in.
	URL string `json:"url"`
}

// oidcEnabled reports whether Studio signs people in with the provider.
func (st *Studio) oidcEnabled() bool {
	return st.srv.JWT() != nil && st.srv.Config.JWT.StudioClientID != ""
}

func (st *Studio) oidcInfo() *OIDCInfo {
	if !st.oidcEnabled() {
		return nil
	}
	name := st.srv.Config.JWT.StudioProvider
	if name == "" {
		name = st.srv.JWT().Issuer()
		if u, err := url.Parse(name); err == nil && u.Host != "" {
			name = u.Hostname()
		}
	}
	return &OIDCInfo{Name: name, URL: OIDCLoginPath}
}

// oauthConfig is the client Studio is, for the endpoints of the issuer.
func (st *Studio) oauthConfig(ep auth.Endpoints) *oauth2.Config {
	j := st.srv.Config.JWT
	style := oauth2.AuthStyleInHeader // client_secret_basic
	if j.StudioClientSecret == "" {
		style = oauth2.AuthStyleInParams // a public client: client_id in the body
	}
	return &oauth2.Config{ClientID: j.StudioClientID, ClientSecret: j.StudioClientSecret,
		Endpoint:    oauth2.Endpoint{AuthURL: ep.Authorization, TokenURL: ep.Token, AuthStyle: style},
		RedirectURL: st.srv.PublicURL() + OIDCCallbackPath,
		Scopes:      []string{"openid", "email", "profile"}}
}

// oidcFlow is what the sign-in cookie holds.
type oidcFlow struct {
	state, nonce, verifier string
	expires                time.Time
}

func randomString() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return b64.EncodeToString(b)
}

func (st *Studio) sealFlow(f oidcFlow) string {
	payload := f.state + "." + f.nonce + "." + f.verifier + "." + strconv.FormatInt(f.expires.Unix(), 10)
	return payload + "." + b64.EncodeToString(st.mac("oidc flow", payload))
}

func (st *Studio) openFlow(v string) (oidcFlow, bool) {
	parts := strings.Split(v, ".")
	if len(parts) != 5 {
		return oidcFlow{}, false
	}
	payload := strings.Join(parts[:4], ".")
	sig, err := b64.DecodeString(parts[4])
	if err != nil || subtle.ConstantTimeCompare(sig, st.mac("oidc flow", payload)) != 1 {
		return oidcFlow{}, false
	}
	exp, err := strconv.ParseInt(parts[3], 10, 64)
	if err != nil || !st.Now().Before(time.Unix(exp, 0)) {
		return oidcFlow{}, false
	}
	return oidcFlow{state: parts[0], nonce: parts[1], verifier: parts[2], expires: time.Unix(exp, 0)}, true
}

// oidcLogin sends the browser to the provider.
func (st *Studio) oidcLogin(w http.ResponseWriter, r *http.Request) error {
	if !st.oidcEnabled() {
		return st.oidcPage(w, http.StatusNotFound, "Studio has no OpenID sign-in: STACKBONE_STUDIO_OIDC_CLIENT_ID is not set.")
	}
	ep, err := st.endpoints(r.Context())
	if err != nil {
		st.logger.Warn("studio oidc: read the provider's discovery document", "issuer", st.srv.JWT().Issuer(), "err", err)
		return st.oidcPage(w, http.StatusServiceUnavailable, "The identity provider cannot be reached now. Try again shortly.")
	}
	f := oidcFlow{state: randomString(), nonce: randomString(), verifier: oauth2.GenerateVerifier(), expires: st.Now().Add(oidcFlowTTL).Truncate(time.Second)}
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: st.sealFlow(f), Path: "/studio/oidc/", MaxAge: int(oidcFlowTTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secureRequest(r)}) // Lax: the provider's redirect back is a cross-site navigation
	u := st.oauthConfig(ep).AuthCodeURL(f.state, oauth2.S256ChallengeOption(f.verifier), oauth2.SetAuthURLParam("nonce", f.nonce))
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, u, http.StatusFound)
	return nil
}

func (st *Studio) endpoints(ctx context.Context) (auth.Endpoints, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return st.srv.JWT().Endpoints(ctx)
}

// oidcCallback finishes a sign-in: the state must be the one of the
// browser's sign-in cookie (which is then spent), and the code must
// exchange for an ID token of this sign-in.
func (st *Studio) oidcCallback(w http.ResponseWriter, r *http.Request) error {
	if !st.oidcEnabled() {
		return st.oidcPage(w, http.StatusNotFound, "Studio has no OpenID sign-in: STACKBONE_STUDIO_OIDC_CLIENT_ID is not set.")
	}
	// The sign-in cookie is spent whatever happens next.
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: "", Path: "/studio/oidc/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: secureRequest(r)})
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		st.logger.Info("studio oidc sign-in refused by the provider", "error", e, "remote", r.RemoteAddr)
		return st.oidcPage(w, http.StatusUnauthorized, "The identity provider did not sign you in ("+e+").")
	}
	c, err := r.Cookie(oidcCookie)
	var f oidcFlow
	ok := err == nil
	if ok {
		f, ok = st.openFlow(c.Value)
	}
	if !ok || q.Get("state") == "" || subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.state)) != 1 {
		st.logger.Info("studio oidc sign-in refused: state", "remote", r.RemoteAddr)
		return st.oidcPage(w, http.StatusBadRequest, "This sign-in is not the one this browser started, or it took too long. Sign in again.")
	}
	code := q.Get("code")
	if code == "" {
		return st.oidcPage(w, http.StatusBadRequest, "The identity provider sent no code. Sign in again.")
	}
	ep, err := st.endpoints(r.Context())
	if err != nil {
		st.logger.Warn("studio oidc: read the provider's discovery document", "issuer", st.srv.JWT().Issuer(), "err", err)
		return st.oidcPage(w, http.StatusServiceUnavailable, "The identity provider cannot be reached now. Try again shortly.")
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	tok, err := st.oauthConfig(ep).Exchange(ctx, code, oauth2.VerifierOption(f.verifier))
	if err != nil {
		// The provider refuses a code used before, expired, or not bound
		// to this verifier.
		var re *oauth2.RetrieveError
		reason := "exchange"
		if errors.As(err, &re) && re.ErrorCode != "" {
			reason = re.ErrorCode
		}
		st.logger.Info("studio oidc sign-in refused: code", "reason", reason, "remote", r.RemoteAddr)
		return st.oidcPage(w, http.StatusUnauthorized, "The identity provider did not accept this sign-in ("+reason+"). Sign in again.")
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return st.oidcPage(w, http.StatusUnauthorized, "The identity provider sent no ID token (is the openid scope allowed for this client?).")
	}
	id, err := st.srv.JWT().VerifyIDToken(ctx, raw, st.srv.Config.JWT.StudioClientID, f.nonce)
	if err != nil {
		reason := "it is not valid"
		if te := (*auth.TokenError)(nil); errors.As(err, &te) {
			reason = te.Reason
		}
		st.logger.Info("studio oidc sign-in refused: id token", "reason", reason, "remote", r.RemoteAddr)
		return st.oidcPage(w, http.StatusUnauthorized, "The ID token was refused: "+reason+".")
	}
	token, exp := st.IssueUser(id)
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: token, Path: "/", Expires: exp, MaxAge: int(st.TTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secureRequest(r)})
	st.logger.Info("studio sign-in", "tenant", id.Tenant, "user", id.User.ID, "via", "oidc", "remote", r.RemoteAddr)
	// A page of our own rather than a redirect: the session cookie is
	// SameSite=Strict and this navigation started at the provider, so the
	// next request is made from Studio's own origin.
	return st.oidcPage(w, http.StatusOK, "")
}

// IssueUser returns a signed session token for the end user id (signed in
// with the OpenID provider) and when it expires.
func (st *Studio) IssueUser(id *auth.Identity) (token string, expires time.Time) {
	return st.issue(id.Tenant, id.Role, id.User.Label, id.User.ID)
}

var oidcTemplate = template.Must(template.New("oidc").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Stackbone Studio sign-in</title>
{{if not .Msg}}<meta http-equiv="refresh" content="0; url=/studio/#/inbox">{{end}}
<link rel="stylesheet" href="/studio/style.css"></head>
<body><main class="signin">{{if .Msg}}<h1>Sign-in failed</h1><p class="error" role="alert" id="oidc-error">{{.Msg}}</p>
<p><a href="/studio/">Back to the sign-in page</a></p>{{else}}<p>Signed in. <a href="/studio/#/inbox">Open Studio</a></p>{{end}}</main></body></html>
`))

// oidcPage answers the browser with a small page: msg is why the sign-in
// failed (empty: it worked, and the page moves on to Studio).
func (st *Studio) oidcPage(w http.ResponseWriter, status int, msg string) error {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", contentSecurityPolicy)
	w.WriteHeader(status)
	if err := oidcTemplate.Execute(w, struct{ Msg string }{msg}); err != nil {
		return fmt.Errorf("oidc page: %w", err)
	}
	return nil
}

// sessionUser is the end user a session names (zero for a key's).
func sessionUser(c claims) auth.User {
	if c.user == "" {
		return auth.User{}
	}
	return auth.User{ID: c.user, Label: c.label}
}

// userRole is the role of an end user's session: never empty (an empty
// role is an admin key's).
func userRole(r config.Role) config.Role {
	if r == "" {
		return auth.DefaultRole
	}
	return r
}

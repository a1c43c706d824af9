package studio

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/server"
	"github.com/stackbone/stackbone/internal/wire/httpjson"
)

// CookieName is the Studio session cookie.
const CookieName = "stackbone_studio"

// CSRFHeader carries the session's CSRF token on state-changing requests
// authenticated by the cookie.
const CSRFHeader = "x-csrf-token"

// Session errors.
var (
	// ErrBadSession is a session token that is malformed, forged, for a
	// tenant no longer configured, expired, or signed out.
	ErrBadSession = errors.New("invalid or expired Studio session")
)

var b64 = base64.RawURLEncoding

// deriveSecret derives the session signing key from every configured API
// key, so sessions survive restarts and work across replicas with the same
// configuration, and rotating any key signs everyone out. Without keys there
// is nothing to sign in with and the secret is random.
//
// With an OpenID client secret (STACKBONE_STUDIO_OIDC_CLIENT_SECRET) it
// goes into the key too, so a server with end users and no keys has a
// stable one; without keys or client secret it is random (sessions do not
// survive a restart or move between replicas).
func deriveSecret(keys []config.Key, oidcSecret string) []byte {
	if len(keys) == 0 && oidcSecret == "" {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		return b
	}
	entries := make([]string, 0, len(keys))
	for _, k := range keys {
		// The role and label too: a session carries them, so changing a
		// key's role signs its sessions out.
		entries = append(entries, k.Tenant+"\x00"+k.Secret+"\x00"+string(k.Role)+"\x00"+k.Label)
	}
	sort.Strings(entries)
	if oidcSecret != "" {
		entries = append(entries, "oidc client secret\x00"+oidcSecret)
	}
	m := hmac.New(sha256.New, []byte("stackbone studio session key v1"))
	for _, e := range entries {
		m.Write([]byte(e))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

func (st *Studio) mac(parts ...string) []byte {
	m := hmac.New(sha256.New, st.secret)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

// Issue returns a signed session token for an admin key of tenant and when
// it expires (IssueKey for a given key).
func (st *Studio) Issue(tenant string) (token string, expires time.Time) {
	return st.IssueKey(config.Key{Tenant: tenant, Role: config.RoleAdmin, Label: tenant})
}

// IssueKey returns a signed session token for the key k signed in with and
// when it expires. The token is "v1.<who>.<expiry>.<nonce>.<mac>"
// (base64url parts), who being the key's tenant, role and label; it holds
// no API key. The nonce is the session's id in the store's revocations.
func (st *Studio) IssueKey(k config.Key) (token string, expires time.Time) {
	return st.issue(k.Tenant, k.Role, k.Label, "")
}

// issue signs a session of tenant with role and label; user is the end
// user's id (sub) of an OpenID sign-in, empty for a key's session (who
// then has three parts, as before users).
func (st *Studio) issue(tenant string, role config.Role, label, user string) (token string, expires time.Time) {
	expires = st.Now().Add(st.TTL).Truncate(time.Second)
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	who := tenant + "\x00" + string(role) + "\x00" + label
	if user != "" {
		who += "\x00" + user
	}
	payload := "v1." + b64.EncodeToString([]byte(who)) + "." + strconv.FormatInt(expires.Unix(), 10) + "." + b64.EncodeToString(nonce)
	return payload + "." + b64.EncodeToString(st.mac("session", payload)), expires
}

// Verify checks a session token's signature and expiry and returns its
// tenant and expiry. It does not consult the store: Authenticate also
// refuses a session that was signed out.
func (st *Studio) Verify(token string) (tenant string, expires time.Time, err error) {
	c, err := st.parse(token)
	return c.tenant, c.expires, err
}

// claims are what a valid session token says.
type claims struct {
	tenant string
	// role and label are those of the key the session signed in with.
	role    config.Role
	label   string
	expires time.Time
	// id names the session in the store's revocations: its nonce.
	id string
	// user is the end user's id (sub) of an OpenID sign-in, empty for a
	// key's session; label is then the user's label.
	user string
}

func (st *Studio) parse(token string) (claims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 5 || parts[0] != "v1" {
		return claims{}, ErrBadSession
	}
	payload := strings.Join(parts[:4], ".")
	sig, err := b64.DecodeString(parts[4])
	if err != nil || !hmac.Equal(sig, st.mac("session", payload)) {
		return claims{}, ErrBadSession
	}
	t, err := b64.DecodeString(parts[1])
	if err != nil {
		return claims{}, ErrBadSession
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || parts[3] == "" {
		return claims{}, ErrBadSession
	}
	who := strings.Split(string(t), "\x00")
	if len(who) != 3 && len(who) != 4 {
		return claims{}, ErrBadSession
	}
	c := claims{tenant: who[0], role: config.Role(who[1]), label: who[2], expires: time.Unix(exp, 0), id: parts[3]}
	if len(who) == 4 {
		c.user = who[3]
		// A user's tenant comes from the provider, not the keys; the
		// session stands while the OpenID sign-in is configured.
		if c.user == "" || c.tenant == "" || !st.oidcEnabled() {
			return claims{}, ErrBadSession
		}
		c.role = userRole(c.role)
	}
	if !st.Now().Before(c.expires) || (c.user == "" && !st.hasTenant(c.tenant)) {
		return claims{}, ErrBadSession
	}
	return c, nil
}

// authenticate checks a session token like Verify and then asks the store
// whether it was signed out (on any replica). A store failure is returned
// as is, so the request fails rather than passing unchecked.
func (st *Studio) authenticate(ctx context.Context, token string) (claims, error) {
	c, err := st.parse(token)
	if err != nil {
		return claims{}, err
	}
	revoked, err := st.srv.Store.SessionRevoked(ctx, c.tenant, c.id, st.Now())
	if err != nil {
		return claims{}, fmt.Errorf("check Studio session: %w", err)
	}
	if revoked {
		return claims{}, ErrBadSession
	}
	return c, nil
}

func (st *Studio) hasTenant(tenant string) bool {
	for _, k := range st.srv.Config.Keys {
		if k.Tenant == tenant {
			return true
		}
	}
	return false
}

// CSRFToken is the CSRF token of a session token: an HMAC of it, so the page
// can be told it and a cross-site request cannot know it.
func (st *Studio) CSRFToken(token string) string {
	return b64.EncodeToString(st.mac("csrf", token))
}

// CookieAuth authenticates a request by the Studio session cookie (installed
// as Server.CookieAuth). A request without a valid cookie is not handled
// (ok false). A state-changing request with a valid cookie must carry the
// session's CSRF token in x-csrf-token, or it is refused with 403.
func (st *Studio) CookieAuth(r *http.Request) (server.Principal, bool, error) {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return server.Principal{}, false, nil
	}
	cl, err := st.authenticate(r.Context(), c.Value)
	if errors.Is(err, ErrBadSession) {
		return server.Principal{}, false, nil
	}
	if err != nil {
		return server.Principal{}, true, err
	}
	if !safeMethod(r.Method) {
		if err := st.checkCSRF(r, c.Value); err != nil {
			return server.Principal{}, true, err
		}
	}
	if u := sessionUser(cl); u.ID != "" {
		return server.Principal{Tenant: cl.tenant, Name: u.ID, Role: cl.role, User: u}.WithVia("studio"), true, nil
	}
	return server.KeyPrincipal(config.Key{Tenant: cl.tenant, Role: cl.role, Label: cl.label}).WithVia("studio"), true, nil
}

// checkCSRF refuses a request that does not carry the CSRF token of the
// session token it is authenticated by.
func (st *Studio) checkCSRF(r *http.Request, token string) error {
	got := r.Header.Get(CSRFHeader)
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(st.CSRFToken(token))) != 1 {
		return apierror.New(apierror.Permission, "csrf_failed",
			"This request needs the Studio session's CSRF token in the x-csrf-token header.")
	}
	return nil
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// SessionInfo is what the page learns about its session.
type SessionInfo struct {
	// Mode is dev or start.
	Mode string `json:"mode"`
	// SignedIn is true when the page may call the API (always in dev mode).
	SignedIn bool   `json:"signedIn"`
	Tenant   string `json:"tenant,omitempty"`
	// Role is the signed-in key's role (admin, caller or approver); the
	// page offers decisions only when it may decide.
	Role string `json:"role,omitempty"`
	// CSRF is the token to send in x-csrf-token with state-changing requests.
	CSRF      string     `json:"csrf,omitempty"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// Cookie is true when the session is a sign-in (so signing out means something).
	Cookie bool `json:"cookie"`
	// User is the signed-in end user's label (an OpenID sign-in; empty
	// for a key's session).
	User string `json:"user,omitempty"`
	// OIDC, when set, is the OpenID provider the sign-in page offers.
	OIDC *OIDCInfo `json:"oidc,omitempty"`
	// Keys is true when the sign-in page offers signing in with an API
	// key (keys are configured).
	Keys bool `json:"keys"`
	// Content is true when the server records model calls' request and
	// response content with their runs (dev mode, or
	// STACKBONE_TRACE_CONTENT=true), so the run waterfall can show it.
	Content bool `json:"content"`
}

// recordsContent reports whether the server stores model-call content
// with each run's steps (as app.NewRunner's KeepContent).
func (st *Studio) recordsContent() bool {
	return st.srv.Config.Mode == config.Dev || st.srv.Config.TraceContent
}

func (st *Studio) sessionInfo(r *http.Request) (SessionInfo, error) {
	if c, err := r.Cookie(CookieName); err == nil && c.Value != "" {
		cl, err := st.authenticate(r.Context(), c.Value)
		if err == nil {
			return SessionInfo{Mode: string(st.srv.Config.Mode), SignedIn: true, Tenant: cl.tenant, Role: string(roleOr(cl.role)), CSRF: st.CSRFToken(c.Value),
				ExpiresAt: &cl.expires, Cookie: true, Content: st.recordsContent(), User: sessionUser(cl).Label,
				OIDC: st.oidcInfo(), Keys: len(st.srv.Config.Keys) > 0}, nil
		}
		if !errors.Is(err, ErrBadSession) {
			return SessionInfo{}, err
		}
	}
	return st.signedOutInfo(), nil
}

// signedOutInfo is the session of a page without a sign-in: open in dev
// mode, asking for a key in start mode.
func (st *Studio) signedOutInfo() SessionInfo {
	info := SessionInfo{Mode: string(st.srv.Config.Mode), Content: st.recordsContent(), OIDC: st.oidcInfo(), Keys: len(st.srv.Config.Keys) > 0}
	if st.srv.Config.Open() {
		info.SignedIn, info.Tenant, info.Role = true, server.DevTenant, string(config.RoleAdmin)
	}
	return info
}

func (st *Studio) session(w http.ResponseWriter, r *http.Request) error {
	info, err := st.sessionInfo(r)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, info)
}

// sameOrigin refuses a browser request sent from another site.
func sameOrigin(r *http.Request) error {
	o := r.Header.Get("Origin")
	if o == "" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || u.Host != r.Host {
		return apierror.New(apierror.Permission, "cross_origin", "Sign-in is only accepted from Studio's own page.")
	}
	return nil
}

func (st *Studio) login(w http.ResponseWriter, r *http.Request) error {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return apierror.Invalid("", "Send the sign-in as JSON: {\"apiKey\":\"…\"}.")
	}
	if err := sameOrigin(r); err != nil {
		return err
	}
	body, err := httpjson.ReadBody(r)
	if err != nil {
		return err
	}
	var in struct {
		APIKey string `json:"apiKey"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return apierror.Invalid("", "The request body is not valid: %v", err)
	}
	key := strings.TrimSpace(in.APIKey)
	if key == "" {
		return apierror.Invalid("apiKey", "Enter an API key.")
	}
	var signed config.Key
	for _, k := range st.srv.Config.Keys {
		if subtle.ConstantTimeCompare([]byte(k.Secret), []byte(key)) == 1 {
			signed = k
		}
	}
	tenant := signed.Tenant
	if tenant == "" {
		st.logger.Info("studio sign-in refused", "remote", r.RemoteAddr)
		return apierror.New(apierror.Authentication, "invalid_api_key", "Invalid API key.")
	}
	token, exp := st.IssueKey(signed)
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: token, Path: "/", Expires: exp, MaxAge: int(st.TTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secureRequest(r)})
	st.logger.Info("studio sign-in", "tenant", tenant, "remote", r.RemoteAddr)
	return writeJSON(w, http.StatusOK, SessionInfo{Mode: string(st.srv.Config.Mode), SignedIn: true, Tenant: tenant, Role: string(roleOr(signed.Role)),
		CSRF: st.CSRFToken(token), ExpiresAt: &exp, Cookie: true, Content: st.recordsContent(), OIDC: st.oidcInfo(), Keys: true})
}

// logout signs the session out: with the session's CSRF token (403
// without it, and the session stays), it records the session as revoked in
// the store, so its cookie stops working at once on every replica, and
// clears the cookie. A request without a valid session only clears it.
func (st *Studio) logout(w http.ResponseWriter, r *http.Request) error {
	if c, err := r.Cookie(CookieName); err == nil && c.Value != "" {
		cl, err := st.authenticate(r.Context(), c.Value)
		switch {
		case err == nil:
			if err := st.checkCSRF(r, c.Value); err != nil {
				return err
			}
			if err := st.srv.Store.RevokeSession(r.Context(), cl.tenant, cl.id, cl.expires, st.Now()); err != nil {
				return fmt.Errorf("sign out: %w", err)
			}
			st.logger.Info("studio sign-out", "tenant", cl.tenant, "remote", r.RemoteAddr)
		case !errors.Is(err, ErrBadSession):
			return err
		}
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secureRequest(r)})
	return writeJSON(w, http.StatusOK, st.signedOutInfo())
}

// secureRequest reports whether the browser reached us over HTTPS (directly
// or through a proxy that says so), so the cookie gets the Secure flag.
func secureRequest(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// roleOr is r, or admin when r is empty (a key without a role).
func roleOr(r config.Role) config.Role {
	if r == "" {
		return config.RoleAdmin
	}
	return r
}

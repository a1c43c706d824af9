package studio

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
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
)

// CookieName is the Studio session cookie.
const CookieName = "stackbone_studio"

// CSRFHeader carries the session's CSRF token on state-changing requests
// authenticated by the cookie.
const CSRFHeader = "x-csrf-token"

// Session errors.
var (
	// ErrBadSession is a session token that is malformed, forged, for a
	// tenant no longer configured, or expired.
	ErrBadSession = errors.New("invalid or expired Studio session")
)

var b64 = base64.RawURLEncoding

// deriveSecret derives the session signing key from every configured API
// key, so sessions survive restarts and work across replicas with the same
// configuration, and rotating any key signs everyone out. Without keys there
// is nothing to sign in with and the secret is random.
func deriveSecret(keys []config.Key) []byte {
	if len(keys) == 0 {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		return b
	}
	entries := make([]string, 0, len(keys))
	for _, k := range keys {
		entries = append(entries, k.Tenant+"\x00"+k.Secret)
	}
	sort.Strings(entries)
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

// Issue returns a signed session token for tenant and when it expires. The
// token is "v1.<tenant>.<expiry>.<nonce>.<mac>" (base64url parts); it holds
// no API key.
func (st *Studio) Issue(tenant string) (token string, expires time.Time) {
	expires = st.Now().Add(st.TTL).Truncate(time.Second)
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	payload := "v1." + b64.EncodeToString([]byte(tenant)) + "." + strconv.FormatInt(expires.Unix(), 10) + "." + b64.EncodeToString(nonce)
	return payload + "." + b64.EncodeToString(st.mac("session", payload)), expires
}

// Verify checks a session token and returns its tenant and expiry.
func (st *Studio) Verify(token string) (tenant string, expires time.Time, err error) {
	parts := strings.Split(token, ".")
	if len(parts) != 5 || parts[0] != "v1" {
		return "", time.Time{}, ErrBadSession
	}
	payload := strings.Join(parts[:4], ".")
	sig, err := b64.DecodeString(parts[4])
	if err != nil || !hmac.Equal(sig, st.mac("session", payload)) {
		return "", time.Time{}, ErrBadSession
	}
	t, err := b64.DecodeString(parts[1])
	if err != nil {
		return "", time.Time{}, ErrBadSession
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return "", time.Time{}, ErrBadSession
	}
	expires = time.Unix(exp, 0)
	if !st.Now().Before(expires) {
		return "", time.Time{}, ErrBadSession
	}
	tenant = string(t)
	if !st.hasTenant(tenant) {
		return "", time.Time{}, ErrBadSession
	}
	return tenant, expires, nil
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
	tenant, _, err := st.Verify(c.Value)
	if err != nil {
		return server.Principal{}, false, nil
	}
	if !safeMethod(r.Method) {
		got := r.Header.Get(CSRFHeader)
		if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(st.CSRFToken(c.Value))) != 1 {
			return server.Principal{}, true, apierror.New(apierror.Permission, "csrf_failed",
				"This request needs the Studio session's CSRF token in the x-csrf-token header.")
		}
	}
	return server.Principal{Tenant: tenant, Name: tenant, Via: "studio"}, true, nil
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
	// CSRF is the token to send in x-csrf-token with state-changing requests.
	CSRF      string     `json:"csrf,omitempty"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// Cookie is true when the session is a sign-in (so signing out means something).
	Cookie bool `json:"cookie"`
}

func (st *Studio) sessionInfo(r *http.Request) SessionInfo {
	info := SessionInfo{Mode: string(st.srv.Config.Mode)}
	if c, err := r.Cookie(CookieName); err == nil && c.Value != "" {
		if tenant, exp, err := st.Verify(c.Value); err == nil {
			info.SignedIn, info.Tenant, info.CSRF, info.ExpiresAt, info.Cookie = true, tenant, st.CSRFToken(c.Value), &exp, true
			return info
		}
	}
	if st.srv.Config.Open() {
		info.SignedIn, info.Tenant = true, server.DevTenant
	}
	return info
}

func (st *Studio) session(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, st.sessionInfo(r))
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
	body, err := server.ReadBody(r)
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
	tenant := ""
	for _, k := range st.srv.Config.Keys {
		if subtle.ConstantTimeCompare([]byte(k.Secret), []byte(key)) == 1 {
			tenant = k.Tenant
		}
	}
	if tenant == "" {
		st.logger.Info("studio sign-in refused", "remote", r.RemoteAddr)
		return apierror.New(apierror.Authentication, "invalid_api_key", "Invalid API key.")
	}
	token, exp := st.Issue(tenant)
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: token, Path: "/", Expires: exp, MaxAge: int(st.TTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secureRequest(r)})
	st.logger.Info("studio sign-in", "tenant", tenant, "remote", r.RemoteAddr)
	return writeJSON(w, http.StatusOK, SessionInfo{Mode: string(st.srv.Config.Mode), SignedIn: true, Tenant: tenant,
		CSRF: st.CSRFToken(token), ExpiresAt: &exp, Cookie: true})
}

func (st *Studio) logout(w http.ResponseWriter, r *http.Request) error {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secureRequest(r)})
	info := SessionInfo{Mode: string(st.srv.Config.Mode)}
	if st.srv.Config.Open() {
		info.SignedIn, info.Tenant = true, server.DevTenant
	}
	return writeJSON(w, http.StatusOK, info)
}

// secureRequest reports whether the browser reached us over HTTPS (directly
// or through a proxy that says so), so the cookie gets the Secure flag.
func secureRequest(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

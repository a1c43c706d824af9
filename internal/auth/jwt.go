// Package auth checks end users' credentials: JWT bearer tokens an OpenID
// provider signed (its keys from its discovery document, or a JWKS URL),
// mapped to a tenant, a role and a user. Static API keys stay with the
// server (config.Key); this package knows nothing of HTTP routes.
package auth

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/stackbone/stackbone/internal/config"
)

// Algorithms are the signature algorithms a token may use: RS256, ES256
// and EdDSA. Anything else (none, HS*) is refused before any key is looked
// at, so a public key can never be used as an HMAC secret.
var Algorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA}

// Defaults of the settings.
const (
	// DefaultLeeway is the clock skew allowed on exp, nbf and iat.
	DefaultLeeway = 30 * time.Second
	// DefaultRefreshEvery is how often at most the key set is fetched again
	// for a token naming an unknown kid.
	DefaultRefreshEvery = 30 * time.Second
	// DefaultTenantClaim and DefaultRoleClaim name the claims read when the
	// settings name none.
	DefaultTenantClaim = "tenant"
	DefaultRoleClaim   = "role"
	// DefaultRole is the role of a token without a role claim: an end user
	// starts turns and reads their own threads, and decides nothing.
	DefaultRole = config.RoleCaller
)

// Config is what NewVerifier builds a Verifier from.
type Config struct {
	// Issuer is the exact iss of accepted tokens (STACKBONE_JWT_ISSUER).
	Issuer string
	// JWKSURL is where the signing keys are (STACKBONE_JWT_JWKS_URL); empty:
	// the jwks_uri of {Issuer}/.well-known/openid-configuration.
	JWKSURL string
	// TenantClaim and RoleClaim name the claims mapped to the tenant and
	// the role (DefaultTenantClaim, DefaultRoleClaim when empty); a dotted
	// name reads a nested claim (realm_access.roles).
	TenantClaim, RoleClaim string
	// Leeway is the clock skew allowed (DefaultLeeway when zero).
	Leeway time.Duration
	// RefreshEvery bounds key set fetches (DefaultRefreshEvery when zero).
	RefreshEvery time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Client fetches discovery and keys (a client with a 10 s timeout when
	// nil).
	Client *http.Client
	Logger *slog.Logger
}

// User is the end user a token names: ctx.user in tools.
type User struct {
	// ID is the token's sub.
	ID string `json:"id"`
	// Label is how people know the user: the token's email, else its
	// name, else the ID.
	Label string `json:"label"`
}

// Identity is what a valid token says of its caller.
type Identity struct {
	Tenant string
	Role   config.Role
	User   User
}

// TokenError is a token refused: Reason is safe to show the client (it
// never holds the token).
type TokenError struct {
	Reason string
	// Unavailable says the token could not be checked: the issuer's keys
	// could not be read (the provider is down), not the token's fault.
	Unavailable bool
	// Err is the underlying error, for logs.
	Err error
}

// Error says why the token was refused, with the underlying error.
func (e *TokenError) Error() string {
	if e.Err != nil {
		return "invalid token: " + e.Reason + ": " + e.Err.Error()
	}
	return "invalid token: " + e.Reason
}

// Unwrap returns the underlying error.
func (e *TokenError) Unwrap() error { return e.Err }

func refuse(reason string, err error) *TokenError { return &TokenError{Reason: reason, Err: err} }

// Verifier checks tokens against the issuer's keys, which it fetches when
// first needed and again (at most every RefreshEvery) when a token names a
// key it does not hold: the provider rotated its keys.
type Verifier struct {
	cfg    Config
	client *http.Client
	log    *slog.Logger

	mu      sync.Mutex
	keys    map[string]jose.JSONWebKey
	fetched time.Time // when the keys were last fetched (zero: never)
	jwksURL string    // resolved from discovery, once
	// endpoints are the discovery document's sign-in endpoints, once read.
	endpoints *Endpoints
	// fetching serialises fetches: one at a time, the others wait for it
	// and use what it got.
	fetching chan struct{}
}

// NewVerifier checks cfg and returns its verifier; it fetches nothing yet.
func NewVerifier(cfg Config) (*Verifier, error) {
	if cfg.Issuer == "" {
		return nil, errors.New("auth: an issuer is required")
	}
	if cfg.TenantClaim == "" {
		cfg.TenantClaim = DefaultTenantClaim
	}
	if cfg.RoleClaim == "" {
		cfg.RoleClaim = DefaultRoleClaim
	}
	if cfg.Leeway == 0 {
		cfg.Leeway = DefaultLeeway
	}
	if cfg.RefreshEvery == 0 {
		cfg.RefreshEvery = DefaultRefreshEvery
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Verifier{cfg: cfg, client: client, log: log, jwksURL: cfg.JWKSURL, fetching: make(chan struct{}, 1)}, nil
}

// Issuer is the issuer the verifier accepts.
func (v *Verifier) Issuer() string { return v.cfg.Issuer }

// LooksLikeJWT reports whether a bearer credential is a JWS in compact
// form (three base64url parts, the first a JSON header with an alg): such
// a credential is checked as a token, and refused as one.
func LooksLikeJWT(s string) bool {
	head, rest, ok := strings.Cut(s, ".")
	if !ok || strings.Count(rest, ".") != 1 || len(head) > 4096 {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return false
	}
	var h struct {
		Alg *string `json:"alg"`
	}
	return json.Unmarshal(b, &h) == nil && h.Alg != nil
}

// Verify checks a token's signature (RS256, ES256 or EdDSA, by a key of
// the issuer), its iss, its aud (one of audiences), exp (required) and nbf
// with the leeway, and maps its claims. Any failure is a *TokenError.
func (v *Verifier) Verify(ctx context.Context, raw string, audiences []string) (*Identity, error) {
	std, extra, err := v.verify(ctx, raw, audiences)
	if err != nil {
		return nil, err
	}
	return v.identity(std, extra)
}

// VerifyIDToken checks an OpenID Connect ID token as Verify checks an
// access token, for the audience clientID (the relying party it was
// issued to), and that it carries nonce: the one the sign-in it answers
// sent, so a token of another sign-in cannot be replayed into this one.
func (v *Verifier) VerifyIDToken(ctx context.Context, raw, clientID, nonce string) (*Identity, error) {
	std, extra, err := v.verify(ctx, raw, []string{clientID})
	if err != nil {
		return nil, err
	}
	got, _ := extra["nonce"].(string)
	if nonce == "" || subtle.ConstantTimeCompare([]byte(got), []byte(nonce)) != 1 {
		return nil, refuse("its nonce is not the one of this sign-in", nil)
	}
	return v.identity(std, extra)
}

func (v *Verifier) verify(ctx context.Context, raw string, audiences []string) (jwt.Claims, map[string]any, error) {
	var (
		std   jwt.Claims
		extra map[string]any
	)
	tok, err := jwt.ParseSigned(raw, Algorithms)
	if err != nil {
		if LooksLikeJWT(raw) && !allowedAlg(raw) {
			return std, nil, refuse("its signature algorithm is not one of RS256, ES256, EdDSA", err)
		}
		return std, nil, refuse("it is not a signed JWT", err)
	}
	if len(tok.Headers) != 1 {
		return std, nil, refuse("it must carry one signature", nil)
	}
	h := tok.Headers[0]
	key, err := v.key(ctx, h.KeyID, h.Algorithm)
	if err != nil {
		return std, nil, err
	}
	if err := tok.Claims(key.Key, &std, &extra); err != nil {
		return std, nil, refuse("its signature does not verify", err)
	}
	now := v.cfg.Now()
	switch err := std.ValidateWithLeeway(jwt.Expected{Issuer: v.cfg.Issuer, AnyAudience: audiences, Time: now}, v.cfg.Leeway); {
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return std, nil, refuse("its issuer is not "+v.cfg.Issuer, err)
	case errors.Is(err, jwt.ErrInvalidAudience):
		return std, nil, refuse("its audience is not this server", err)
	case errors.Is(err, jwt.ErrExpired):
		return std, nil, refuse("it expired", err)
	case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
		return std, nil, refuse("it is not valid yet", err)
	case err != nil:
		return std, nil, refuse("its claims are not valid", err)
	}
	if std.Expiry == nil {
		return std, nil, refuse("it has no exp", nil)
	}
	return std, extra, nil
}

// allowedAlg reports whether a compact JWS's header names one of
// Algorithms.
func allowedAlg(raw string) bool {
	head, _, _ := strings.Cut(raw, ".")
	b, _ := base64.RawURLEncoding.DecodeString(head)
	var h struct {
		Alg string `json:"alg"`
	}
	_ = json.Unmarshal(b, &h)
	for _, a := range Algorithms {
		if string(a) == h.Alg {
			return true
		}
	}
	return false
}

// identity maps a verified token's claims.
func (v *Verifier) identity(std jwt.Claims, extra map[string]any) (*Identity, error) {
	if std.Subject == "" {
		return nil, refuse("it has no sub", nil)
	}
	tenant, _ := claim(extra, v.cfg.TenantClaim).(string)
	if tenant == "" {
		return nil, refuse(fmt.Sprintf("it has no %q claim (the tenant)", v.cfg.TenantClaim), nil)
	}
	role, err := roleOf(claim(extra, v.cfg.RoleClaim))
	if err != nil {
		return nil, refuse(fmt.Sprintf("its %q claim: %v", v.cfg.RoleClaim, err), nil)
	}
	label := std.Subject
	for _, name := range []string{"email", "name"} {
		if s, _ := extra[name].(string); s != "" {
			label = s
			break
		}
	}
	return &Identity{Tenant: tenant, Role: role, User: User{ID: std.Subject, Label: label}}, nil
}

// claim reads a claim by name. A name with dots is first the claim of the
// whole name (providers namespace custom claims with URLs, such as
// "https://acme.com/tenant"), else a path into nested objects
// ("realm_access.roles"), where each step is the longest run of the
// remaining dotted parts that names a member ("https://acme.com/app.tenant":
// the member "tenant" of the claim "https://acme.com/app").
func claim(claims map[string]any, name string) any {
	if v, ok := claims[name]; ok {
		return v
	}
	return lookupPath(claims, strings.Split(name, "."))
}

func lookupPath(cur any, parts []string) any {
	if len(parts) == 0 {
		return cur
	}
	m, ok := cur.(map[string]any)
	if !ok {
		return nil
	}
	for j := len(parts); j > 0; j-- {
		if v, ok := m[strings.Join(parts[:j], ".")]; ok {
			if got := lookupPath(v, parts[j:]); got != nil {
				return got
			}
		}
	}
	return nil
}

// roleOf maps a role claim: absent is DefaultRole; a string must be
// admin, caller or approver; a list (an identity provider's roles) keeps
// the known values: admin wins, else the one known value.
func roleOf(v any) (config.Role, error) {
	known := func(s string) bool {
		r := config.Role(s)
		return r == config.RoleAdmin || r == config.RoleCaller || r == config.RoleApprover
	}
	switch v := v.(type) {
	case nil:
		return DefaultRole, nil
	case string:
		if !known(v) {
			return "", fmt.Errorf("%q is not admin, caller or approver", v)
		}
		return config.Role(v), nil
	case []any:
		var found []config.Role
		for _, x := range v {
			if s, ok := x.(string); ok && known(s) {
				if config.Role(s) == config.RoleAdmin {
					return config.RoleAdmin, nil
				}
				found = append(found, config.Role(s))
			}
		}
		switch {
		case len(found) == 0:
			return DefaultRole, nil
		case len(found) > 1 && found[0] != found[1]:
			return "", errors.New("it names both caller and approver")
		}
		return found[0], nil
	}
	return "", errors.New("it is neither a string nor a list")
}

// key returns the issuer's key kid for alg, fetching the keys when it has
// none yet or does not hold kid and the last fetch is RefreshEvery old.
func (v *Verifier) key(ctx context.Context, kid string, alg string) (jose.JSONWebKey, error) {
	if k, ok := v.lookup(kid, alg); ok {
		return k, nil
	}
	// One fetch at a time; a caller that waited finds what it got.
	unavailable := func(err error) *TokenError {
		e := refuse("the issuer's keys could not be read", err)
		e.Unavailable = true
		return e
	}
	select {
	case v.fetching <- struct{}{}:
	case <-ctx.Done():
		return jose.JSONWebKey{}, unavailable(ctx.Err())
	}
	defer func() { <-v.fetching }()
	if k, ok := v.lookup(kid, alg); ok {
		return k, nil
	}
	v.mu.Lock()
	due := v.fetched.IsZero() || !v.cfg.Now().Before(v.fetched.Add(v.cfg.RefreshEvery))
	none := v.keys == nil // no fetch has succeeded yet
	v.mu.Unlock()
	if !due && none {
		return jose.JSONWebKey{}, unavailable(errors.New("the last fetch failed"))
	}
	if !due {
		return jose.JSONWebKey{}, refuse(fmt.Sprintf("its key %q is not one of the issuer's", kid), nil)
	}
	if err := v.fetch(ctx); err != nil {
		v.log.Warn("jwt: fetch the issuer's keys", "issuer", v.cfg.Issuer, "err", err)
		return jose.JSONWebKey{}, unavailable(err)
	}
	if k, ok := v.lookup(kid, alg); ok {
		return k, nil
	}
	return jose.JSONWebKey{}, refuse(fmt.Sprintf("its key %q is not one of the issuer's", kid), nil)
}

// lookup finds kid among the keys held (a token without a kid: the one
// key of a set that holds one for alg).
func (v *Verifier) lookup(kid, alg string) (jose.JSONWebKey, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if kid != "" {
		k, ok := v.keys[kid]
		return k, ok && (k.Algorithm == "" || k.Algorithm == alg)
	}
	var (
		found jose.JSONWebKey
		n     int
	)
	for _, k := range v.keys {
		if k.Algorithm == "" || k.Algorithm == alg {
			found, n = k, n+1
		}
	}
	return found, n == 1
}

// fetch reads the key set (resolving its URL from discovery the first
// time) and replaces the keys held.
func (v *Verifier) fetch(ctx context.Context) error {
	v.mu.Lock()
	v.fetched = v.cfg.Now() // a failed fetch counts too: no storm on a down issuer
	u := v.jwksURL
	v.mu.Unlock()
	if u == "" {
		var doc struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := v.getJSON(ctx, strings.TrimRight(v.cfg.Issuer, "/")+"/.well-known/openid-configuration", &doc); err != nil {
			return fmt.Errorf("discovery: %w", err)
		}
		if doc.Issuer != v.cfg.Issuer {
			return fmt.Errorf("discovery names issuer %q, not %q", doc.Issuer, v.cfg.Issuer)
		}
		if doc.JWKSURI == "" {
			return errors.New("discovery names no jwks_uri")
		}
		u = doc.JWKSURI
	}
	var set jose.JSONWebKeySet
	if err := v.getJSON(ctx, u, &set); err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	keys := map[string]jose.JSONWebKey{}
	for _, k := range set.Keys {
		if (k.Use != "" && k.Use != "sig") || !k.Valid() {
			continue
		}
		if pub := k.Public(); pub.Key != nil && pub.IsPublic() {
			keys[k.KeyID] = pub // a symmetric key is never one to verify with
		}
	}
	v.mu.Lock()
	v.jwksURL, v.keys = u, keys
	v.mu.Unlock()
	v.log.Debug("jwt: fetched the issuer's keys", "issuer", v.cfg.Issuer, "keys", len(keys))
	return nil
}

func (v *Verifier) getJSON(ctx context.Context, u string, dst any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<20)).Decode(dst)
}

// Endpoints are where an OpenID provider signs people in and hands out
// tokens, from its discovery document.
type Endpoints struct {
	Authorization string `json:"authorization_endpoint"`
	Token         string `json:"token_endpoint"`
	// Methods are the PKCE methods it supports (code_challenge_methods_supported).
	Methods []string `json:"code_challenge_methods_supported"`
}

// Endpoints reads the issuer's discovery document for its authorization
// and token endpoints (a sign-in with the authorization code grant); a
// document read is kept.
func (v *Verifier) Endpoints(ctx context.Context) (Endpoints, error) {
	v.mu.Lock()
	got := v.endpoints
	v.mu.Unlock()
	if got != nil {
		return *got, nil
	}
	var doc struct {
		Issuer string `json:"issuer"`
		Endpoints
	}
	if err := v.getJSON(ctx, strings.TrimRight(v.cfg.Issuer, "/")+"/.well-known/openid-configuration", &doc); err != nil {
		return Endpoints{}, fmt.Errorf("discovery: %w", err)
	}
	if doc.Issuer != v.cfg.Issuer {
		return Endpoints{}, fmt.Errorf("discovery names issuer %q, not %q", doc.Issuer, v.cfg.Issuer)
	}
	if doc.Authorization == "" || doc.Token == "" {
		return Endpoints{}, errors.New("discovery names no authorization_endpoint or token_endpoint")
	}
	v.mu.Lock()
	v.endpoints = &doc.Endpoints
	v.mu.Unlock()
	return doc.Endpoints, nil
}

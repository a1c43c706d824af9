// Package config is Stackbone's one typed configuration: defaults, then
// environment variables, then flags, validated once at start with a clear
// message for every bad value.
package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/stackbone/stackbone/internal/clock"
	"github.com/stackbone/stackbone/internal/store"
)

// Mode is how the server runs.
type Mode string

// Modes.
const (
	// Dev binds loopback, needs no key, stores data under DIR/.stackbone and
	// reloads agents when files change.
	Dev Mode = "dev"
	// Start is production: API keys are required.
	Start Mode = "start"
)

// StatelessPolicy is what a stateless turn does with a call that needs
// approval: it has no thread an approval could resume.
type StatelessPolicy string

// Stateless-approval policies.
const (
	// StatelessRun runs the call without pausing (the default while no
	// key has a role).
	StatelessRun StatelessPolicy = "run"
	// StatelessRefuse does not run it; the model gets a tool error saying
	// the call needs a human decision and the conversation has no session.
	// It is the default once a key has the caller or approver role: a
	// caller must not dodge approvals by leaving out the session.
	StatelessRefuse StatelessPolicy = "refuse"
)

// Key is one API key and the tenant it belongs to.
type Key struct {
	Tenant string
	Secret string
	// Role is what the key may do (RoleAdmin when the entry names none).
	Role Role
	// Label is how decisions record the key (decidedBy); the tenant when
	// the entry names none.
	Label string
}

// Role is what a key may do.
type Role string

const (
	// RoleAdmin may do everything (the default).
	RoleAdmin Role = "admin"
	// RoleCaller starts turns and reads its tenant's threads and
	// decisions, but cannot decide.
	RoleCaller Role = "caller"
	// RoleApprover lists, reads and decides decisions, but cannot start
	// turns.
	RoleApprover Role = "approver"
)

// CanTurn reports whether a key of role r may start turns.
func (r Role) CanTurn() bool { return r == "" || r == RoleAdmin || r == RoleCaller }

// CanDecide reports whether a key of role r may decide decisions.
func (r Role) CanDecide() bool { return r == "" || r == RoleAdmin || r == RoleApprover }

// Refusal is the public message of a 403 to a caller of role r who cannot
// do what (a phrase such as "decide approvals"): the roles that can
// (needed, such as "approver or admin"), and where the role comes from, a
// key's configuration or, for an end user (endUser), the role claim of
// their access token.
func (r Role) Refusal(endUser bool, what, needed string) string {
	if endUser {
		return fmt.Sprintf("This access token has role %q, which cannot %s: that needs role %s (the token's role claim; ask the identity provider's admin).", r, what, needed)
	}
	return fmt.Sprintf("This API key has role %q, which cannot %s: use a key with role %s.", r, what, needed)
}

// Config is the server's configuration.
type Config struct {
	Mode Mode
	// Dir is the project folder holding agents/.
	Dir string
	// Addr is HOST:PORT to listen on (port 0 picks a free one).
	Addr string
	// DB is "sqlite:PATH" or "postgres://…".
	DB string
	// Keys are the accepted API keys (STACKBONE_API_KEYS="tenant:secret,…").
	Keys []Key
	// JWT accepts end users' bearer tokens next to the keys (set by
	// STACKBONE_JWT_ISSUER).
	JWT JWT
	// AuthHook is true when the project has an auth.ts (found when the
	// configuration is checked): requests no key or token authenticates
	// are asked to its authenticate(request).
	AuthHook bool
	// MaxBodyBytes bounds request bodies (STACKBONE_MAX_BODY_BYTES).
	MaxBodyBytes int64
	// LogLevel is debug, info, warn or error (STACKBONE_LOG_LEVEL).
	LogLevel string
	// LogFormat is text or json (STACKBONE_LOG_FORMAT).
	LogFormat string
	// Lease is how long a run holds its thread between checkpoints
	// (STACKBONE_LEASE, default 15 s as engine.DefaultLease). A running run
	// renews it every third of it, so a live run survives two missed
	// renewals (10 s of database trouble), and the thread of a replica that
	// died is free again within 15 s (its 409s carry retry-after with the
	// time left).
	Lease time.Duration
	// ShutdownTimeout is how long a stopping server lets runs in flight
	// finish (--shutdown-timeout, STACKBONE_SHUTDOWN_TIMEOUT); runs still
	// going then release their threads for the next start or another
	// replica to resume.
	ShutdownTimeout time.Duration
	// ModelTimeout bounds each attempt of a model call
	// (STACKBONE_MODEL_TIMEOUT, --model-timeout); ModelIdleTimeout bounds
	// the wait for its first chunk and between chunks
	// (STACKBONE_MODEL_IDLE_TIMEOUT, --model-idle-timeout). An agent's
	// modelSettings override both.
	ModelTimeout, ModelIdleTimeout time.Duration
	// Watch reloads agents when files under agents/ change.
	Watch bool
	// Slow clients: the time to send a request's headers, then its body
	// (408 after), and how long an idle keep-alive connection stays open;
	// MaxConnsPerIP caps one client address's open connections (0: none).
	HeaderTimeout, BodyTimeout, IdleTimeout time.Duration
	MaxConnsPerIP                           int
	// RetryWindow is how long a stateless turn's tool steps are kept so a
	// client retrying the turn does not run its tools again
	// (STACKBONE_RETRY_WINDOW; 0 keeps none).
	RetryWindow time.Duration
	// StatelessApproval is what a turn without a session does with a call
	// that needs approval (STACKBONE_STATELESS_APPROVAL, --stateless-approval):
	// StatelessRun runs it, StatelessRefuse refuses it. Either way the call
	// is recorded in the decisions audit. Empty (not set) is resolved by
	// Finish: StatelessRefuse when a key has the caller or approver role,
	// StatelessRun otherwise.
	StatelessApproval StatelessPolicy
	// OnDisconnect is what a durable turn does when its client goes away
	// before its end (STACKBONE_ON_DISCONNECT): "continue" (the default: it
	// goes on, a retry attaches to it, a new message on the thread stops
	// it) or "cancel" (it is cancelled at once).
	OnDisconnect string
	// ApprovalTTL is how long a pending approval waits before it expires
	// and is recorded as a rejection (decidedVia "expiry"), for tools whose
	// needsApproval sets no expiresAfter (STACKBONE_APPROVAL_TTL,
	// --approval-ttl); 0, the default, means never.
	ApprovalTTL time.Duration
	// ApprovalWait bounds how long a request that asked to wait for
	// decisions in-band (header x-stackbone-approval: wait, or the agent
	// file's approvalMode: 'wait') stays open while its turn waits on one
	// (STACKBONE_APPROVAL_WAIT, default 10 min); after it the request ends
	// as a paused turn's always does. 0 turns waiting off.
	ApprovalWait time.Duration
	// WebhookURLs are the endpoints every webhook notice is delivered to
	// (STACKBONE_WEBHOOK_URL, comma-separated; --webhook-url); none turns
	// webhooks off.
	WebhookURLs []string
	// WebhookSecret signs deliveries per Standard Webhooks: "whsec_" and
	// the base64 of the key (STACKBONE_WEBHOOK_SECRET, --webhook-secret).
	WebhookSecret string
	// WebhookFormat is WebhookStandard (the default) or WebhookSlack
	// (STACKBONE_WEBHOOK_FORMAT, --webhook-format).
	WebhookFormat string
	// PublicURL is where people reach this server, for the Studio links
	// of webhook notices (STACKBONE_PUBLIC_URL, --public-url; default
	// http:// and the listening address).
	PublicURL string
	// A2ADefaultAgent names the agent whose Agent Card the server's root
	// A2A well-known path serves (GET /.well-known/agent-card.json) when
	// it serves several agents (STACKBONE_A2A_DEFAULT_AGENT); with one
	// agent that agent's card is served without it.
	A2ADefaultAgent string
	// A2APushAllowPrivate lets A2A push notification URLs name loopback,
	// private, link-local, unspecified and multicast addresses, refused
	// otherwise at registration and at dial time
	// (STACKBONE_A2A_PUSH_ALLOW_PRIVATE=true: a private network, tests).
	A2APushAllowPrivate bool
	// TraceURL links a run's trace id to the operator's tracing UI: a URL
	// with {traceId} in it (STACKBONE_TRACE_URL), e.g. a Jaeger or Grafana
	// trace view.
	TraceURL string
	// TraceContent puts prompts, completions and tool arguments and
	// results on spans (STACKBONE_TRACE_CONTENT=true), redacted.
	TraceContent bool
	// KeepContent keeps what each model call sent and got back, redacted,
	// for Studio's run inspector: on in dev mode, else as TraceContent
	// (STACKBONE_TRACE_CONTENT=false turns it off in dev too).
	KeepContent bool

	// Clock is the time seam every part of the server reads (the real
	// clock when nil). It is not a setting: tests set it.
	Clock clock.Clock
	// WrapStore, when set, wraps the store the server opens before the
	// engine and the HTTP server use it (the replicas' bridge keeps the
	// driver itself). It is not a setting: the CLI tests set it, through
	// cli.MainWith, to fail the store at a chosen write.
	WrapStore func(store.Store) store.Store
	// Tracer makes the process's spans: the engine's and the HTTP server
	// spans. It is not a setting: app.Serve sets it, when nil, from the
	// OTEL_* environment (internal/telemetry); tests set it to trace into
	// a receiver. Nil elsewhere means no HTTP spans, and the global
	// provider for the engine.
	Tracer trace.TracerProvider

	OpenAIBaseURL    string
	OpenAIKey        string
	AnthropicBaseURL string
	AnthropicKey     string
	OllamaHost       string
}

// JWT is how end users' tokens are accepted: JWTs their OpenID provider
// signed. Empty Issuer turns them off.
type JWT struct {
	// Issuer is the tokens' exact iss (STACKBONE_JWT_ISSUER).
	Issuer string
	// Audiences are the aud values that name this server
	// (STACKBONE_JWT_AUDIENCE, comma-separated); a token must carry one of
	// them or the resource of the MCP route (the public URL and /mcp).
	Audiences []string
	// JWKSURL is where the signing keys are (STACKBONE_JWT_JWKS_URL);
	// empty: the issuer's OpenID discovery document names them.
	JWKSURL string
	// TenantClaim and RoleClaim name the claims that carry the tenant and
	// the role (STACKBONE_JWT_TENANT_CLAIM, default tenant;
	// STACKBONE_JWT_ROLE_CLAIM, default role).
	TenantClaim, RoleClaim string
	// StudioClientID is the OpenID client Studio signs people in as, with
	// the authorization code grant and PKCE
	// (STACKBONE_STUDIO_OIDC_CLIENT_ID; empty: Studio signs in with keys
	// only). StudioClientSecret is its secret (STACKBONE_STUDIO_OIDC_CLIENT_SECRET;
	// empty: a public client). StudioProvider is the name on the sign-in
	// button (STACKBONE_STUDIO_OIDC_NAME; default the issuer's host).
	StudioClientID, StudioClientSecret, StudioProvider string
	// Scopes are the OAuth scopes a client asks the issuer for to call
	// this server (STACKBONE_JWT_SCOPES, comma-separated): the protected
	// resource metadata's scopes_supported, which MCP clients request
	// (providers such as Entra ID, Okta and oidc-provider issue a token for
	// a resource only with one of its scopes). Tokens are not checked for
	// them.
	Scopes []string
	// ApproversReadThreads lets end users with the approver role read every
	// thread of their tenant, not only its decisions
	// (STACKBONE_APPROVERS_READ_THREADS=true).
	ApproversReadThreads bool
}

// Defaults returns the configuration of a mode before env and flags.
func Defaults(mode Mode) Config {
	c := Config{Mode: mode, Dir: ".", MaxBodyBytes: 4 << 20, LogLevel: "info", LogFormat: "text", Lease: 15 * time.Second,
		ShutdownTimeout: 30 * time.Second, OllamaHost: "http://127.0.0.1:11434", HeaderTimeout: 10 * time.Second, BodyTimeout: 30 * time.Second,
		IdleTimeout: 120 * time.Second, MaxConnsPerIP: 256, ModelTimeout: 10 * time.Minute, ModelIdleTimeout: 2 * time.Minute, RetryWindow: 10 * time.Minute,
		ApprovalWait: 10 * time.Minute}
	switch mode {
	case Dev:
		c.Addr = "127.0.0.1:7100"
		c.Watch = true
		c.KeepContent = true
	default:
		c.Addr = "0.0.0.0:7100"
	}
	return c
}

// FromEnv applies environment variables (getenv is os.Getenv in production).
func (c *Config) FromEnv(getenv func(string) string) error {
	var errs []error
	set := func(dst *string, name string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	set(&c.Addr, "STACKBONE_ADDR")
	set(&c.DB, "STACKBONE_DB")
	set(&c.LogLevel, "STACKBONE_LOG_LEVEL")
	set(&c.LogFormat, "STACKBONE_LOG_FORMAT")
	set(&c.OpenAIBaseURL, "OPENAI_BASE_URL")
	set(&c.OpenAIKey, "OPENAI_API_KEY")
	set(&c.AnthropicBaseURL, "ANTHROPIC_BASE_URL")
	set(&c.AnthropicKey, "ANTHROPIC_API_KEY")
	set(&c.OllamaHost, "OLLAMA_HOST")
	set(&c.WebhookSecret, "STACKBONE_WEBHOOK_SECRET")
	set(&c.WebhookFormat, "STACKBONE_WEBHOOK_FORMAT")
	set(&c.PublicURL, "STACKBONE_PUBLIC_URL")
	set(&c.A2ADefaultAgent, "STACKBONE_A2A_DEFAULT_AGENT")
	set(&c.TraceURL, "STACKBONE_TRACE_URL")
	if v := getenv("STACKBONE_TRACE_CONTENT"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("STACKBONE_TRACE_CONTENT=%q: want true or false", v))
		}
		c.TraceContent, c.KeepContent = b, b
	}
	if v := getenv("STACKBONE_A2A_PUSH_ALLOW_PRIVATE"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("STACKBONE_A2A_PUSH_ALLOW_PRIVATE=%q: want true or false", v))
		}
		c.A2APushAllowPrivate = b
	}
	if v := getenv("STACKBONE_WEBHOOK_URL"); v != "" {
		c.WebhookURLs = SplitList(v)
	}
	if v := getenv("STACKBONE_STATELESS_APPROVAL"); v != "" {
		c.StatelessApproval = StatelessPolicy(v)
	}
	if v := getenv("STACKBONE_ON_DISCONNECT"); v != "" {
		c.OnDisconnect = v
	}
	if v := getenv("STACKBONE_MAX_BODY_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("STACKBONE_MAX_BODY_BYTES=%q is not a whole number of bytes", v))
		}
		c.MaxBodyBytes = n
	}
	for name, dst := range map[string]*time.Duration{"STACKBONE_LEASE": &c.Lease, "STACKBONE_HEADER_TIMEOUT": &c.HeaderTimeout,
		"STACKBONE_BODY_TIMEOUT": &c.BodyTimeout, "STACKBONE_IDLE_TIMEOUT": &c.IdleTimeout, "STACKBONE_SHUTDOWN_TIMEOUT": &c.ShutdownTimeout,
		"STACKBONE_MODEL_TIMEOUT": &c.ModelTimeout, "STACKBONE_MODEL_IDLE_TIMEOUT": &c.ModelIdleTimeout,
		"STACKBONE_APPROVAL_TTL": &c.ApprovalTTL, "STACKBONE_APPROVAL_WAIT": &c.ApprovalWait} {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q is not a duration such as 30s", name, v))
			}
			*dst = d
		}
	}
	if v := getenv("STACKBONE_MAX_CONNS_PER_IP"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("STACKBONE_MAX_CONNS_PER_IP=%q is not a whole number", v))
		}
		c.MaxConnsPerIP = n
	}
	if v := getenv("STACKBONE_RETRY_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("STACKBONE_RETRY_WINDOW=%q is not a duration such as 10m (0 turns it off)", v))
		}
		c.RetryWindow = d
	}
	set(&c.JWT.Issuer, "STACKBONE_JWT_ISSUER")
	set(&c.JWT.JWKSURL, "STACKBONE_JWT_JWKS_URL")
	set(&c.JWT.TenantClaim, "STACKBONE_JWT_TENANT_CLAIM")
	set(&c.JWT.RoleClaim, "STACKBONE_JWT_ROLE_CLAIM")
	if v := getenv("STACKBONE_JWT_AUDIENCE"); v != "" {
		c.JWT.Audiences = SplitList(v)
	}
	if v := getenv("STACKBONE_JWT_SCOPES"); v != "" {
		c.JWT.Scopes = SplitList(v)
	}
	set(&c.JWT.StudioClientID, "STACKBONE_STUDIO_OIDC_CLIENT_ID")
	set(&c.JWT.StudioClientSecret, "STACKBONE_STUDIO_OIDC_CLIENT_SECRET")
	set(&c.JWT.StudioProvider, "STACKBONE_STUDIO_OIDC_NAME")
	if v := getenv("STACKBONE_APPROVERS_READ_THREADS"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("STACKBONE_APPROVERS_READ_THREADS=%q: want true or false", v))
		}
		c.JWT.ApproversReadThreads = b
	}
	if v := getenv("STACKBONE_API_KEYS"); v != "" {
		keys, err := ParseKeys(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("STACKBONE_API_KEYS: %w", err))
		}
		c.Keys = keys
	}
	if c.OllamaHost != "" && !strings.Contains(c.OllamaHost, "://") {
		c.OllamaHost = "http://" + c.OllamaHost
	}
	return errors.Join(errs...)
}

// Webhook formats (Config.WebhookFormat).
const (
	// WebhookStandard: a Standard Webhooks JSON body, signed.
	WebhookStandard = "standard"
	// WebhookSlack: a Slack incoming-webhook message ({"text": …}), signed
	// too when a secret is set.
	WebhookSlack = "slack"
)

// SplitList splits a comma-separated list, trimming spaces and dropping
// empty items.
func SplitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// finishWebhooks validates the webhook settings: absolute http(s) URLs, a
// whsec_ secret (required for the standard format), a known format.
func (c *Config) finishWebhooks() []error {
	var errs []error
	if c.WebhookFormat == "" {
		c.WebhookFormat = WebhookStandard
	}
	if c.WebhookFormat != WebhookStandard && c.WebhookFormat != WebhookSlack {
		errs = append(errs, fmt.Errorf("webhook format %q must be standard or slack (STACKBONE_WEBHOOK_FORMAT, --webhook-format)", c.WebhookFormat))
	}
	seen := map[string]bool{}
	for _, u := range c.WebhookURLs {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			errs = append(errs, fmt.Errorf("webhook URL %q must be an absolute http:// or https:// URL (STACKBONE_WEBHOOK_URL)", Redact(u)))
		}
		if seen[u] {
			errs = append(errs, fmt.Errorf("webhook URL %q is listed twice (STACKBONE_WEBHOOK_URL)", Redact(u)))
		}
		seen[u] = true
	}
	if c.WebhookSecret != "" {
		if _, err := WebhookKey(c.WebhookSecret); err != nil {
			errs = append(errs, err)
		}
	} else if len(c.WebhookURLs) > 0 && c.WebhookFormat == WebhookStandard {
		errs = append(errs, errors.New("STACKBONE_WEBHOOK_URL is set without STACKBONE_WEBHOOK_SECRET: set a secret (whsec_ and the base64 of 24 to 64 random bytes) so receivers can verify deliveries"))
	}
	if c.PublicURL != "" {
		p, err := url.Parse(c.PublicURL)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			errs = append(errs, fmt.Errorf("public URL %q must be an absolute http:// or https:// URL (STACKBONE_PUBLIC_URL, --public-url)", c.PublicURL))
		}
		c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	}
	return errs
}

// WebhookKey decodes a Standard Webhooks secret ("whsec_" and base64).
func WebhookKey(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return nil, errors.New("the webhook secret must start with whsec_ (STACKBONE_WEBHOOK_SECRET): whsec_ and the base64 of 24 to 64 random bytes")
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) < 24 || len(key) > 64 {
		return nil, errors.New("the webhook secret must be whsec_ and the base64 of 24 to 64 random bytes (STACKBONE_WEBHOOK_SECRET)")
	}
	return key, nil
}

// finishJWT checks the end users' token settings.
func (c *Config) finishJWT() []error {
	j := &c.JWT
	if j.Issuer == "" {
		if j.JWKSURL != "" || len(j.Audiences) > 0 || j.TenantClaim != "" || j.RoleClaim != "" || len(j.Scopes) > 0 {
			return []error{errors.New("STACKBONE_JWT_AUDIENCE, _JWKS_URL, _TENANT_CLAIM, _ROLE_CLAIM and _SCOPES need STACKBONE_JWT_ISSUER")}
		}
		if j.StudioClientID != "" || j.StudioClientSecret != "" || j.StudioProvider != "" {
			return []error{errors.New("STACKBONE_STUDIO_OIDC_CLIENT_ID, _CLIENT_SECRET and _NAME need STACKBONE_JWT_ISSUER")}
		}
		return nil
	}
	var errs []error
	for _, u := range [][2]string{{"STACKBONE_JWT_ISSUER", j.Issuer}, {"STACKBONE_JWT_JWKS_URL", j.JWKSURL}} {
		if u[1] == "" {
			continue
		}
		if p, err := url.Parse(u[1]); err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
			errs = append(errs, fmt.Errorf("%s=%q must be an absolute https:// URL", u[0], u[1]))
		}
	}
	if j.StudioClientID == "" && (j.StudioClientSecret != "" || j.StudioProvider != "") {
		errs = append(errs, errors.New("STACKBONE_STUDIO_OIDC_CLIENT_SECRET and _NAME need STACKBONE_STUDIO_OIDC_CLIENT_ID"))
	}
	if len(j.Audiences) == 0 && c.PublicURL == "" {
		errs = append(errs, errors.New("STACKBONE_JWT_ISSUER needs the audience tokens are for: set STACKBONE_JWT_AUDIENCE, or STACKBONE_PUBLIC_URL (tokens for its /mcp resource)"))
	}
	return errs
}

// Redact is a URL with its query and user info replaced by "…", for logs
// and listings (a webhook URL may carry a token).
func Redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparseable URL)"
	}
	hidden := p.User != nil
	p.User = nil
	if p.RawQuery != "" {
		p.RawQuery = "…"
	}
	// Only the path's first segment: later ones can be a token (Slack's
	// /services/T…/B…/<token>, Zapier-style /s/<token>/…).
	if segs := strings.Split(strings.TrimPrefix(p.Path, "/"), "/"); len(segs) > 1 {
		p.Path, p.RawPath = "/"+segs[0]+"/…", ""
	}
	// url.URL percent-encodes "…": the path's is put back, the user info's
	// written by hand.
	s := strings.ReplaceAll(p.String(), "%E2%80%A6", "…")
	if hidden {
		if scheme, rest, ok := strings.Cut(s, "://"); ok {
			s = scheme + "://…@" + rest
		}
	}
	return s
}

// HasRoles reports whether a key has the caller or approver role: turns
// and decisions are then separated, and a turn without a session refuses
// calls that need approval unless StatelessApproval is set to run.
func (c *Config) HasRoles() bool {
	if c.JWT.Issuer != "" || c.AuthHook {
		return true // end users are callers unless their token (or auth.ts) says otherwise
	}
	for _, k := range c.Keys {
		if k.Role == RoleCaller || k.Role == RoleApprover {
			return true
		}
	}
	return false
}

// SharedDeciderLabels lists, per tenant, the labels shared by two or more
// keys that may decide ("acme" for two unlabelled approver keys of acme):
// decisions record a key by its label, so those keys count as one
// principal for a quorum.
func (c *Config) SharedDeciderLabels() []string {
	count := map[[2]string]int{}
	var order [][2]string
	for _, k := range c.Keys {
		if !k.Role.CanDecide() {
			continue
		}
		id := [2]string{k.Tenant, k.Label}
		if count[id] == 0 {
			order = append(order, id)
		}
		count[id]++
	}
	var out []string
	for _, id := range order {
		if n := count[id]; n > 1 {
			out = append(out, fmt.Sprintf("tenant %q has %d keys that may decide labelled %q", id[0], n, id[1]))
		}
	}
	return out
}

// ParseKeys reads "tenant:secret[:role[:label]],…". The role is admin,
// caller or approver (admin when absent); the label defaults to the tenant.
func ParseKeys(s string) ([]Key, error) {
	var keys []Key
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		parts := strings.SplitN(item, ":", 4)
		if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
			return nil, fmt.Errorf("entry %d is not of the form tenant:secret[:role[:label]]", i+1)
		}
		tenant, secret := parts[0], parts[1]
		if len(secret) < 8 {
			return nil, fmt.Errorf("the secret of tenant %q is shorter than 8 characters", tenant)
		}
		k := Key{Tenant: tenant, Secret: secret, Role: RoleAdmin, Label: tenant}
		if len(parts) > 2 {
			switch r := Role(parts[2]); r {
			case RoleAdmin, RoleCaller, RoleApprover:
				k.Role = r
			default:
				return nil, fmt.Errorf("entry %d (tenant %q) has role %q: use admin, caller or approver", i+1, tenant, parts[2])
			}
		}
		if len(parts) > 3 {
			if parts[3] == "" {
				return nil, fmt.Errorf("entry %d (tenant %q) has an empty label: leave out the last ':' or name the key", i+1, tenant)
			}
			k.Label = parts[3]
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// Finish fills derived values and validates everything.
func (c *Config) Finish() error {
	var errs []error
	abs, err := filepath.Abs(c.Dir)
	if err != nil {
		errs = append(errs, fmt.Errorf("--dir %q: %w", c.Dir, err))
	}
	c.Dir = abs
	if st, err := os.Stat(filepath.Join(c.Dir, "agents")); err != nil || !st.IsDir() {
		errs = append(errs, fmt.Errorf("--dir %s has no agents/ folder: put agent files in %s", c.Dir, filepath.Join(c.Dir, "agents")))
	}
	if c.DB == "" {
		c.DB = "sqlite:" + filepath.Join(c.Dir, ".stackbone", "stackbone.db")
	}
	if !strings.HasPrefix(c.DB, "sqlite:") && !strings.HasPrefix(c.DB, "postgres://") && !strings.HasPrefix(c.DB, "postgresql://") {
		errs = append(errs, fmt.Errorf("--db %q must start with sqlite: or postgres://", c.DB))
	}
	if host, _, err := net.SplitHostPort(c.Addr); err != nil {
		errs = append(errs, fmt.Errorf("--addr %q is not HOST:PORT", c.Addr))
	} else if c.Mode == Dev && !loopback(host) && len(c.Keys) == 0 {
		errs = append(errs, fmt.Errorf("dev serves without API keys only on loopback; --addr %q is reachable from the network: bind 127.0.0.1, or set STACKBONE_API_KEYS", c.Addr))
	}
	seen := map[string]string{}
	for _, k := range c.Keys {
		if other, dup := seen[k.Secret]; dup {
			errs = append(errs, fmt.Errorf("STACKBONE_API_KEYS: tenants %q and %q share a secret; every key must be unique", other, k.Tenant))
		}
		seen[k.Secret] = k.Tenant
	}
	if st, err := os.Stat(filepath.Join(c.Dir, "auth.ts")); err == nil && !st.IsDir() {
		c.AuthHook = true
	}
	if c.Mode == Start && len(c.Keys) == 0 && c.JWT.Issuer == "" && !c.AuthHook {
		errs = append(errs, errors.New("start needs API keys or end users' tokens: set STACKBONE_API_KEYS=\"tenant:secret,…\" or STACKBONE_JWT_ISSUER, or write an auth.ts"))
	}
	errs = append(errs, c.finishJWT()...)
	if c.MaxBodyBytes < 1024 {
		errs = append(errs, fmt.Errorf("max body size %d is too small (at least 1024 bytes)", c.MaxBodyBytes))
	}
	if c.Lease < time.Second {
		errs = append(errs, fmt.Errorf("lease %s is too short (at least 1s)", c.Lease))
	}
	if c.HeaderTimeout <= 0 || c.BodyTimeout <= 0 || c.IdleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("header, body and idle timeouts (%s, %s, %s) must be positive", c.HeaderTimeout, c.BodyTimeout, c.IdleTimeout))
	}
	if c.ApprovalWait < 0 {
		errs = append(errs, fmt.Errorf("approval wait %s must not be negative (STACKBONE_APPROVAL_WAIT; 0 turns waiting off)", c.ApprovalWait))
	}
	if c.ApprovalTTL < 0 {
		errs = append(errs, fmt.Errorf("approval TTL %s must not be negative (STACKBONE_APPROVAL_TTL; 0 means approvals never expire)", c.ApprovalTTL))
	}
	if c.ModelTimeout <= 0 || c.ModelIdleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("model timeout %s and model idle timeout %s must be positive (STACKBONE_MODEL_TIMEOUT, STACKBONE_MODEL_IDLE_TIMEOUT)", c.ModelTimeout, c.ModelIdleTimeout))
	}
	if c.ShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("shutdown timeout %s is negative", c.ShutdownTimeout))
	}
	if c.MaxConnsPerIP < 0 {
		errs = append(errs, fmt.Errorf("max connections per IP %d is negative (0: no limit)", c.MaxConnsPerIP))
	}
	if c.StatelessApproval == "" {
		c.StatelessApproval = StatelessRun
		if c.HasRoles() {
			c.StatelessApproval = StatelessRefuse
		}
	}
	switch c.StatelessApproval {
	case StatelessRun, StatelessRefuse:
	default:
		errs = append(errs, fmt.Errorf("stateless approval %q must be run or refuse (STACKBONE_STATELESS_APPROVAL, --stateless-approval)", c.StatelessApproval))
	}
	switch c.OnDisconnect {
	case "":
		c.OnDisconnect = OnDisconnectContinue
	case OnDisconnectContinue, OnDisconnectCancel:
	default:
		errs = append(errs, fmt.Errorf("on disconnect %q must be continue or cancel (STACKBONE_ON_DISCONNECT)", c.OnDisconnect))
	}
	errs = append(errs, c.finishWebhooks()...)
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log level %q must be debug, info, warn or error", c.LogLevel))
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		errs = append(errs, fmt.Errorf("log format %q must be text or json", c.LogFormat))
	}
	return errors.Join(errs...)
}

// Open reports whether the server accepts calls without a key: dev mode on
// a loopback address only.
func (c *Config) Open() bool {
	host, _, err := net.SplitHostPort(c.Addr)
	return c.Mode == Dev && err == nil && loopback(host)
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// SQLitePath returns the file of a sqlite: DB, or "".
func (c *Config) SQLitePath() string {
	p, ok := strings.CutPrefix(c.DB, "sqlite:")
	if !ok {
		return ""
	}
	return p
}

// What a durable turn does when its client goes away (Config.OnDisconnect).
const (
	OnDisconnectContinue = "continue"
	OnDisconnectCancel   = "cancel"
)

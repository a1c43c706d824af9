package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func project(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestDefaultsEnvFlagsOrder(t *testing.T) {
	c := Defaults(Dev)
	if c.Addr != "127.0.0.1:7100" || c.MaxBodyBytes != 4<<20 {
		t.Fatalf("dev defaults %+v", c)
	}
	if c.HeaderTimeout != 10*time.Second || c.BodyTimeout != 30*time.Second || c.IdleTimeout != 120*time.Second || c.MaxConnsPerIP != 256 {
		t.Fatalf("slow-client defaults %+v", c)
	}
	if c.ModelTimeout != 10*time.Minute || c.ModelIdleTimeout != 2*time.Minute {
		t.Fatalf("model timeout defaults %s, %s", c.ModelTimeout, c.ModelIdleTimeout)
	}
	env := map[string]string{"STACKBONE_ADDR": "127.0.0.1:9000", "STACKBONE_MAX_BODY_BYTES": "2048", "STACKBONE_API_KEYS": "acme:secret-123456",
		"STACKBONE_HEADER_TIMEOUT": "2s", "STACKBONE_BODY_TIMEOUT": "3s", "STACKBONE_IDLE_TIMEOUT": "4s", "STACKBONE_MAX_CONNS_PER_IP": "0",
		"STACKBONE_MODEL_TIMEOUT": "90s", "STACKBONE_MODEL_IDLE_TIMEOUT": "15s"}
	if err := c.FromEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	c.Dir = project(t)
	c.Addr = "127.0.0.1:0" // a flag wins over the environment
	if err := c.Finish(); err != nil {
		t.Fatal(err)
	}
	if c.MaxBodyBytes != 2048 || c.Keys[0].Tenant != "acme" || c.Addr != "127.0.0.1:0" ||
		c.HeaderTimeout != 2*time.Second || c.BodyTimeout != 3*time.Second || c.IdleTimeout != 4*time.Second || c.MaxConnsPerIP != 0 ||
		c.ModelTimeout != 90*time.Second || c.ModelIdleTimeout != 15*time.Second {
		t.Fatalf("config %+v", c)
	}
	if c.DB != "sqlite:"+filepath.Join(c.Dir, ".stackbone", "stackbone.db") {
		t.Fatalf("db %q", c.DB)
	}
}

func TestEveryBadValueIsReported(t *testing.T) {
	c := Defaults(Start)
	env := map[string]string{"STACKBONE_MAX_BODY_BYTES": "lots", "STACKBONE_LEASE": "soon", "STACKBONE_API_KEYS": "nocolon",
		"STACKBONE_BODY_TIMEOUT": "slow", "STACKBONE_MAX_CONNS_PER_IP": "many", "STACKBONE_RETRY_WINDOW": "-1m",
		"STACKBONE_MODEL_TIMEOUT": "long", "STACKBONE_MODEL_IDLE_TIMEOUT": "2"}
	err := c.FromEnv(func(k string) string { return env[k] })
	for _, want := range []string{"STACKBONE_MAX_BODY_BYTES", "STACKBONE_LEASE", "STACKBONE_API_KEYS", "STACKBONE_BODY_TIMEOUT", "STACKBONE_MAX_CONNS_PER_IP",
		"STACKBONE_RETRY_WINDOW", "STACKBONE_MODEL_TIMEOUT", "STACKBONE_MODEL_IDLE_TIMEOUT"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("env error lacks %s: %v", want, err)
		}
	}
	c = Defaults(Start)
	c.Dir = t.TempDir() // no agents/
	c.Addr = "nope"
	c.DB = "mysql://x"
	c.LogLevel = "loud"
	c.IdleTimeout = 0
	c.MaxConnsPerIP = -1
	err = c.Finish()
	for _, want := range []string{"agents/", "--addr", "--db", "API keys", "log level", "timeouts", "per IP"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error lacks %q: %v", want, err)
		}
	}
}

func TestDevOffLoopbackNeedsKeysAndSecretsAreUnique(t *testing.T) {
	c := Defaults(Dev)
	c.Dir = project(t)
	c.Addr = "0.0.0.0:7100"
	if err := c.Finish(); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("dev on 0.0.0.0 without keys: %v", err)
	}
	c.Keys = []Key{{Tenant: "a", Secret: "secret-123"}, {Tenant: "b", Secret: "secret-123"}}
	if err := c.Finish(); err == nil || !strings.Contains(err.Error(), "share a secret") {
		t.Fatalf("duplicate secrets: %v", err)
	}
	c.Keys = []Key{{Tenant: "a", Secret: "secret-123"}}
	if err := c.Finish(); err != nil || c.Open() {
		t.Fatalf("dev off loopback with keys must run and require keys: %v open=%v", err, c.Open())
	}
	c.Addr = "127.0.0.1:0"
	if !c.Open() {
		t.Fatal("dev on loopback is open")
	}
}

func TestStatelessApprovalPolicy(t *testing.T) {
	for _, mode := range []Mode{Dev, Start} {
		c := Defaults(mode)
		c.Dir = project(t)
		c.Keys = []Key{{Tenant: "acme", Secret: "acme-secret-1", Role: RoleAdmin, Label: "acme"}}
		if err := c.Finish(); err != nil || c.StatelessApproval != StatelessRun {
			t.Fatalf("%s default stateless approval without roles %q, want run (%v)", mode, c.StatelessApproval, err)
		}
	}
	// Once a key has a role, the default refuses; an explicit run wins.
	for _, set := range []StatelessPolicy{"", StatelessRun} {
		c := Defaults(Start)
		c.Dir = project(t)
		c.StatelessApproval = set
		c.Keys = []Key{{Tenant: "acme", Secret: "acme-secret-1", Role: RoleCaller, Label: "acme"},
			{Tenant: "acme", Secret: "acme-secret-2", Role: RoleApprover, Label: "alice"}}
		want := StatelessRefuse
		if set == StatelessRun {
			want = StatelessRun
		}
		if err := c.Finish(); err != nil || c.StatelessApproval != want {
			t.Fatalf("with role keys and %q set: %q, want %q (%v)", set, c.StatelessApproval, want, err)
		}
	}
	c := Defaults(Dev)
	env := map[string]string{"STACKBONE_STATELESS_APPROVAL": "refuse"}
	if err := c.FromEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	c.Dir = project(t)
	if err := c.Finish(); err != nil || c.StatelessApproval != StatelessRefuse {
		t.Fatalf("env refuse: %q %v", c.StatelessApproval, err)
	}
	c = Defaults(Dev)
	env["STACKBONE_STATELESS_APPROVAL"] = "ask"
	if err := c.FromEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	c.Dir = project(t)
	err := c.Finish()
	if err == nil || !strings.Contains(err.Error(), `"ask" must be run or refuse`) || !strings.Contains(err.Error(), "STACKBONE_STATELESS_APPROVAL") {
		t.Fatalf("a bad policy: %v", err)
	}
}

func TestParseKeysRolesAndLabels(t *testing.T) {
	keys, err := ParseKeys("acme:secret-0001, acme:secret-0002:caller , acme:secret-0003:approver:alice,beta:secret-0004:admin:ops")
	if err != nil {
		t.Fatal(err)
	}
	want := []Key{
		{Tenant: "acme", Secret: "secret-0001", Role: RoleAdmin, Label: "acme"},
		{Tenant: "acme", Secret: "secret-0002", Role: RoleCaller, Label: "acme"},
		{Tenant: "acme", Secret: "secret-0003", Role: RoleApprover, Label: "alice"},
		{Tenant: "beta", Secret: "secret-0004", Role: RoleAdmin, Label: "ops"},
	}
	if len(keys) != len(want) {
		t.Fatalf("keys %+v", keys)
	}
	for i := range want {
		if keys[i] != want[i] {
			t.Fatalf("key %d = %+v, want %+v", i, keys[i], want[i])
		}
	}
	if !RoleAdmin.CanTurn() || !RoleAdmin.CanDecide() || !RoleCaller.CanTurn() || RoleCaller.CanDecide() ||
		RoleApprover.CanTurn() || !RoleApprover.CanDecide() {
		t.Fatal("role permissions")
	}
	for in, msg := range map[string]string{
		"acme:secret-0001:owner":   `role "owner": use admin, caller or approver`,
		"acme:secret-0001:":        `role "": use admin, caller or approver`,
		"acme:secret-0001:caller:": "empty label",
	} {
		if _, err := ParseKeys(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseKeys(%q) = %v, want an error with %q", in, err, msg)
		}
	}
	c := Defaults(Start)
	env := map[string]string{"STACKBONE_API_KEYS": "acme:secret-0001:root"}
	if err := c.FromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "STACKBONE_API_KEYS") || !strings.Contains(err.Error(), `"root"`) {
		t.Fatalf("env error %v", err)
	}
}

// TestApprovalTTL: STACKBONE_APPROVAL_TTL is a Go duration, unset means no
// expiry, a bad or negative value is reported.
func TestApprovalTTL(t *testing.T) {
	c := Defaults(Start)
	if c.ApprovalTTL != 0 {
		t.Fatalf("default ApprovalTTL %s, want 0 (never)", c.ApprovalTTL)
	}
	env := map[string]string{"STACKBONE_APPROVAL_TTL": "30m"}
	if err := c.FromEnv(func(k string) string { return env[k] }); err != nil || c.ApprovalTTL != 30*time.Minute {
		t.Fatalf("ApprovalTTL %s, %v", c.ApprovalTTL, err)
	}
	for _, v := range []string{"soon", "-1m"} {
		c := Defaults(Start)
		env := map[string]string{"STACKBONE_APPROVAL_TTL": v}
		err := c.FromEnv(func(k string) string { return env[k] })
		if err == nil {
			c.Dir = project(t)
			err = c.Finish()
		}
		if err == nil || !strings.Contains(err.Error(), "STACKBONE_APPROVAL_TTL") {
			t.Fatalf("STACKBONE_APPROVAL_TTL=%s: %v", v, err)
		}
	}
}

// TestApprovalWait: STACKBONE_APPROVAL_WAIT is a Go duration, 10 min by
// default, 0 allowed (no waiting); a bad or negative value is reported.
func TestApprovalWait(t *testing.T) {
	c := Defaults(Start)
	if c.ApprovalWait != 10*time.Minute {
		t.Fatalf("default ApprovalWait %s, want 10m", c.ApprovalWait)
	}
	for v, want := range map[string]time.Duration{"2s": 2 * time.Second, "0": 0} {
		c := Defaults(Start)
		env := map[string]string{"STACKBONE_APPROVAL_WAIT": v}
		if err := c.FromEnv(func(k string) string { return env[k] }); err != nil || c.ApprovalWait != want {
			t.Fatalf("STACKBONE_APPROVAL_WAIT=%s: %s, %v", v, c.ApprovalWait, err)
		}
	}
	for _, v := range []string{"later", "-1s"} {
		c := Defaults(Start)
		env := map[string]string{"STACKBONE_APPROVAL_WAIT": v}
		err := c.FromEnv(func(k string) string { return env[k] })
		if err == nil {
			c.Dir = project(t)
			err = c.Finish()
		}
		if err == nil || !strings.Contains(err.Error(), "STACKBONE_APPROVAL_WAIT") {
			t.Fatalf("STACKBONE_APPROVAL_WAIT=%s: %v", v, err)
		}
	}
}

// TestWebhookSettings: STACKBONE_WEBHOOK_URL takes a comma list; a URL
// needs a whsec_ secret (the slack format excepted); bad values are
// refused with the setting's name and without the URL's token.
func TestWebhookSettings(t *testing.T) {
	load := func(env map[string]string) (*Config, error) {
		c := Defaults(Start)
		c.Keys = []Key{{Tenant: "acme", Secret: "acme-secret-key", Role: RoleAdmin}}
		if err := c.FromEnv(func(k string) string { return env[k] }); err != nil {
			return &c, err
		}
		c.Dir = project(t)
		return &c, c.Finish()
	}
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	c, err := load(map[string]string{"STACKBONE_WEBHOOK_URL": "https://a.example/h, https://b.example/h?token=x",
		"STACKBONE_WEBHOOK_SECRET": secret, "STACKBONE_PUBLIC_URL": "https://sb.example/"})
	if err != nil || len(c.WebhookURLs) != 2 || c.WebhookURLs[1] != "https://b.example/h?token=x" ||
		c.WebhookFormat != WebhookStandard || c.PublicURL != "https://sb.example" {
		t.Fatalf("%+v, %v", c, err)
	}
	if _, err := load(map[string]string{"STACKBONE_WEBHOOK_URL": "https://hooks.slack.example/x", "STACKBONE_WEBHOOK_FORMAT": "slack"}); err != nil {
		t.Fatalf("slack without a secret: %v", err)
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"STACKBONE_WEBHOOK_URL": "https://a.example/h"}, "STACKBONE_WEBHOOK_SECRET"},
		{map[string]string{"STACKBONE_WEBHOOK_URL": "https://a.example/h", "STACKBONE_WEBHOOK_SECRET": "hunter2-hunter2"}, "whsec_"},
		{map[string]string{"STACKBONE_WEBHOOK_URL": "https://a.example/h", "STACKBONE_WEBHOOK_SECRET": "whsec_c2hvcnQ="}, "24 to 64"},
		{map[string]string{"STACKBONE_WEBHOOK_URL": "ftp://a.example/h?token=x", "STACKBONE_WEBHOOK_SECRET": secret}, "STACKBONE_WEBHOOK_URL"},
		{map[string]string{"STACKBONE_WEBHOOK_URL": "https://a.example/h", "STACKBONE_WEBHOOK_SECRET": secret,
			"STACKBONE_WEBHOOK_FORMAT": "teams"}, "STACKBONE_WEBHOOK_FORMAT"},
		{map[string]string{"STACKBONE_PUBLIC_URL": "agents.example.com"}, "STACKBONE_PUBLIC_URL"},
	} {
		_, err := load(tc.env)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "token=x") {
			t.Errorf("%v: %v, want an error naming %s", tc.env, err, tc.want)
		}
	}
}

// TestRedactHidesTokens: a webhook URL as the listing and the log show it
// keeps no part that can hold a token: user info, query, and path segments
// after the first (Slack's /services/T…/B…/<token>).
func TestRedactHidesTokens(t *testing.T) {
	for in, want := range map[string]string{
		"https://hooks.slack.com/services/T0001/B0002/XyZsecretTOKEN123": "https://hooks.slack.com/services/…",
		"https://user:pass@ops.example.com/hook?token=abc":               "https://…@ops.example.com/hook?…",
		"https://ops.example.com/stackbone":                              "https://ops.example.com/stackbone",
		"http://127.0.0.1:9/":                                            "http://127.0.0.1:9/",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestJWTSettings(t *testing.T) {
	c := Defaults(Start)
	env := map[string]string{"STACKBONE_JWT_ISSUER": "https://idp.example/", "STACKBONE_JWT_AUDIENCE": "https://api.example, stackbone",
		"STACKBONE_JWT_JWKS_URL": "https://idp.example/keys", "STACKBONE_JWT_TENANT_CLAIM": "org_id", "STACKBONE_JWT_ROLE_CLAIM": "roles"}
	if err := c.FromEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	c.Dir = project(t)
	// start takes end users' tokens without any key.
	if err := c.Finish(); err != nil {
		t.Fatal(err)
	}
	want := JWT{Issuer: "https://idp.example/", Audiences: []string{"https://api.example", "stackbone"},
		JWKSURL: "https://idp.example/keys", TenantClaim: "org_id", RoleClaim: "roles"}
	if c.JWT.Issuer != want.Issuer || strings.Join(c.JWT.Audiences, "|") != "https://api.example|stackbone" || c.JWT.JWKSURL != want.JWKSURL ||
		c.JWT.TenantClaim != want.TenantClaim || c.JWT.RoleClaim != want.RoleClaim {
		t.Fatalf("JWT %+v", c.JWT)
	}
	// End users are callers: turns without a session refuse approvals.
	if c.StatelessApproval != StatelessRefuse {
		t.Fatalf("stateless approval %q with end users", c.StatelessApproval)
	}

	for name, env := range map[string]map[string]string{
		"no audience":      {"STACKBONE_JWT_ISSUER": "https://idp.example"},
		"issuer not a URL": {"STACKBONE_JWT_ISSUER": "idp.example", "STACKBONE_JWT_AUDIENCE": "x"},
		"no issuer":        {"STACKBONE_JWT_AUDIENCE": "x", "STACKBONE_API_KEYS": "acme:secret-123456"},
	} {
		c := Defaults(Start)
		_ = c.FromEnv(func(k string) string { return env[k] })
		c.Dir = project(t)
		if err := c.Finish(); err == nil || !strings.Contains(err.Error(), "STACKBONE_JWT") {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// The public URL is an audience too.
	c = Defaults(Start)
	c.JWT.Issuer, c.PublicURL, c.Dir = "https://idp.example", "https://agents.example", project(t)
	if err := c.Finish(); err != nil {
		t.Fatal(err)
	}
}

// TestStudioOIDCAndAuthHookSettings: Studio's OpenID client, the scopes,
// and the approvers' switch are read from the env and need an issuer; an
// auth.ts alone lets start run without keys or issuer.
func TestStudioOIDCAndAuthHookSettings(t *testing.T) {
	env := map[string]string{"STACKBONE_JWT_ISSUER": "https://idp.example/", "STACKBONE_JWT_AUDIENCE": "x",
		"STACKBONE_STUDIO_OIDC_CLIENT_ID": "studio", "STACKBONE_STUDIO_OIDC_CLIENT_SECRET": "s3cret", "STACKBONE_STUDIO_OIDC_NAME": "Acme ID",
		"STACKBONE_JWT_SCOPES": "mcp, api://x/read", "STACKBONE_APPROVERS_READ_THREADS": "true"}
	c := Defaults(Start)
	if err := c.FromEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	c.Dir = project(t)
	if err := c.Finish(); err != nil {
		t.Fatal(err)
	}
	if j := c.JWT; j.StudioClientID != "studio" || j.StudioClientSecret != "s3cret" || j.StudioProvider != "Acme ID" || !j.ApproversReadThreads ||
		strings.Join(j.Scopes, "|") != "mcp|api://x/read" {
		t.Fatalf("JWT %+v", j)
	}
	c = Defaults(Start)
	if err := c.FromEnv(func(k string) string { return map[string]string{"STACKBONE_APPROVERS_READ_THREADS": "yes"}[k] }); err == nil {
		t.Fatal("STACKBONE_APPROVERS_READ_THREADS=yes accepted")
	}
	for name, env := range map[string]map[string]string{
		"studio client without issuer": {"STACKBONE_STUDIO_OIDC_CLIENT_ID": "studio", "STACKBONE_API_KEYS": "acme:secret-123456"},
		"secret without client":        {"STACKBONE_JWT_ISSUER": "https://idp.example/", "STACKBONE_JWT_AUDIENCE": "x", "STACKBONE_STUDIO_OIDC_CLIENT_SECRET": "s"},
		"scopes without issuer":        {"STACKBONE_JWT_SCOPES": "mcp", "STACKBONE_API_KEYS": "acme:secret-123456"},
	} {
		c := Defaults(Start)
		_ = c.FromEnv(func(k string) string { return env[k] })
		c.Dir = project(t)
		if err := c.Finish(); err == nil || !strings.Contains(err.Error(), "STACKBONE_") {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// start with neither keys nor issuer: refused, unless there is an auth.ts.
	c = Defaults(Start)
	c.Dir = project(t)
	if err := c.Finish(); err == nil {
		t.Fatal("start without keys, issuer or auth.ts")
	}
	c = Defaults(Start)
	c.Dir = project(t)
	if err := os.WriteFile(filepath.Join(c.Dir, "auth.ts"), []byte("export function authenticate() {}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(); err != nil || !c.AuthHook || !c.HasRoles() {
		t.Fatalf("start with auth.ts: %v (hook %v)", err, c.AuthHook)
	}
}

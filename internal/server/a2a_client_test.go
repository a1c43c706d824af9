package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/testwait"
)

// a2aKeys are the keys of the A2A client tests: acme's admin, caller and
// approver, and another tenant's admin.
var a2aKeys = []config.Key{
	{Tenant: "acme", Secret: "sk-a2a-admin", Role: config.RoleAdmin, Label: "acme"},
	{Tenant: "acme", Secret: "sk-a2a-caller", Role: config.RoleCaller, Label: "app"},
	{Tenant: "acme", Secret: "sk-a2a-approver", Role: config.RoleApprover, Label: "alice"},
	{Tenant: "beta", Secret: "sk-a2a-beta", Role: config.RoleAdmin, Label: "beta"},
}

// a2aControl is the test's side of tests/a2a/a2a.mjs: it holds the next
// model call of a user text until released (POST /hold?user=, GET /held
// waits until the held call arrived, POST /release), and reads the model
// and tool counts (GET /model, GET /calls?tool=).
func a2aControl(t *testing.T, env *stacktest.Env) *httptest.Server {
	var mu sync.Mutex
	var release func()
	var at int
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, v any) { _ = json.NewEncoder(w).Encode(v) }
	mux.HandleFunc("POST /hold", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		at = env.Upstream.Count()
		release = env.Upstream.HoldOnce(script.When{LastUser: r.URL.Query().Get("user")})
		reply(w, map[string]int{"count": at})
	})
	mux.HandleFunc("GET /held", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		from := at
		mu.Unlock()
		if !testwait.Poll(r.Context(), func() bool { return env.Upstream.Count() > from }) {
			http.Error(w, "the held call never came", http.StatusGatewayTimeout)
			return
		}
		reply(w, map[string]int{"count": env.Upstream.Count()})
	})
	mux.HandleFunc("POST /release", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if release != nil {
			release()
			release = nil
		}
		reply(w, map[string]bool{"ok": true})
	})
	mux.HandleFunc("GET /model", func(w http.ResponseWriter, r *http.Request) {
		reply(w, map[string]int{"count": env.Upstream.Count()})
	})
	mux.HandleFunc("GET /calls", func(w http.ResponseWriter, r *http.Request) {
		reply(w, map[string]int{"count": env.Calls.Get(r.URL.Query().Get("tool"))})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		mu.Lock()
		if release != nil {
			release()
		}
		mu.Unlock()
		srv.Close()
	})
	return srv
}

// TestA2AOfficialClient runs tests/a2a/a2a.mjs, the official @a2a-js/sdk
// 1.3 client (A2A 1.0), on each binding (JSON-RPC, HTTP+JSON) against the
// stack on SQLite and on PostgreSQL: card discovery, send, stream, get, list, cancel of a turn
// held at the model, subscribe after a dropped stream, approvals answered
// over A2A (a caller key refused) and with POST /v1/hitl, CancelTask of
// an INPUT_REQUIRED task (CANCELED, its decision closed, the tool not
// run), tenant isolation, the contextId as a thread. The refund tool runs exactly for
// the approved calls.
func TestA2AOfficialClient(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, binding string
		open          func(t *testing.T) store.Store
	}{
		{"sqlite/jsonrpc", "JSONRPC", func(*testing.T) store.Store { return nil }},
		{"postgres/jsonrpc", "JSONRPC", func(t *testing.T) store.Store { return stacktest.Postgres(t, "a2a") }},
		{"sqlite/http+json", "HTTP+JSON", func(*testing.T) store.Store { return nil }},
		{"postgres/http+json", "HTTP+JSON", func(t *testing.T) store.Store { return stacktest.Postgres(t, "a2a_rest") }},
	} {
		name, open := c.name, c.open
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: a2aKeys, Store: open(t)})
			ctl := a2aControl(t, env)
			node, dir := nodeFixture(t, "a2a", filepath.Join("@a2a-js", "sdk", "package.json"))
			var out struct {
				Results []struct {
					Name  string `json:"name"`
					OK    bool   `json:"ok"`
					Error string `json:"error"`
				} `json:"results"`
			}
			err := runNodeScript(t, node, dir, "a2a.mjs", &out, env.URL, ctl.URL, "a2a-"+strings.ReplaceAll(name, "/", "-"),
				"sk-a2a-admin", "sk-a2a-caller", "sk-a2a-approver", "sk-a2a-beta", c.binding)
			if err != nil && len(out.Results) == 0 {
				t.Fatal(err)
			}
			var names []string
			for _, r := range out.Results {
				names = append(names, r.Name)
				if !r.OK {
					t.Errorf("%s: %s", r.Name, r.Error)
				}
			}
			if len(out.Results) != 12 {
				t.Fatalf("ran %d cases (%s); want 12", len(out.Results), strings.Join(names, ", "))
			}
			// approvalOverA2A ran the refund once, approvalStreamed once
			// (with edited arguments); the rejected and the canceled ones
			// never.
			if n := env.Calls.Get("refund"); n != 2 {
				t.Errorf("refund ran %d times; want 2", n)
			}
		})
	}
}

// TestA2AOfficialClientPush runs tests/a2a/push.mjs, the official
// @a2a-js/sdk client, on each binding and store: push configs registered
// inline and with createTaskPushNotificationConfig, got, listed and
// deleted; a receiver in the script verifying every notification (token,
// Authorization, signature, task id) sees COMPLETED, and WORKING then
// COMPLETED after an approval, CANCELED after CancelTask of a task
// waiting on a decision; another tenant gets TaskNotFoundError.
func TestA2AOfficialClientPush(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, binding string
		open          func(t *testing.T) store.Store
	}{
		{"sqlite/jsonrpc", "JSONRPC", func(*testing.T) store.Store { return nil }},
		{"postgres/http+json", "HTTP+JSON", func(t *testing.T) store.Store { return stacktest.Postgres(t, "a2a_push_rest") }},
		{"sqlite/http+json", "HTTP+JSON", func(*testing.T) store.Store { return nil }},
		{"postgres/jsonrpc", "JSONRPC", func(t *testing.T) store.Store { return stacktest.Postgres(t, "a2a_push") }},
	} {
		name, open := c.name, c.open
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: a2aKeys, Store: open(t), Deliver: true,
				Configure: func(c *config.Config) { c.A2APushAllowPrivate, c.WebhookSecret = true, pushSecret }})
			node, dir := nodeFixture(t, "a2a", filepath.Join("@a2a-js", "sdk", "package.json"))
			var out struct {
				Results []struct {
					Name  string `json:"name"`
					OK    bool   `json:"ok"`
					Error string `json:"error"`
				} `json:"results"`
			}
			err := runNodeScript(t, node, dir, "push.mjs", &out, env.URL, "push-"+strings.ReplaceAll(name, "/", "-"),
				"sk-a2a-caller", "sk-a2a-approver", "sk-a2a-beta", pushSecret, c.binding)
			if err != nil && len(out.Results) == 0 {
				t.Fatal(err)
			}
			for _, r := range out.Results {
				if !r.OK {
					t.Errorf("%s: %s", r.Name, r.Error)
				}
			}
			if len(out.Results) != 4 {
				t.Fatalf("ran %d cases; want 4", len(out.Results))
			}
		})
	}
}

// TestA2AOfficialClientOIDC runs tests/a2a/oidc.mjs, the official
// @a2a-js/sdk client with end users' tokens a real OpenID provider signed,
// on each binding (SQLite and PostgreSQL): the card the SDK resolves names
// the provider (openIdConnectSecurityScheme, its discovery URL) beside the
// bearer scheme; alice's token sends a message; bob gets TaskNotFoundError
// for her task and does not list it; tokens for another audience or
// issuer, unsigned, HMAC-signed with the public key, tampered, and (with
// the server's clock past their exp) expired get 401 with a Bearer
// challenge in the binding's A2A error format, and start nothing.
func TestA2AOfficialClientOIDC(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, binding string
		open          func(t *testing.T) store.Store
	}{
		{"sqlite/jsonrpc", "JSONRPC", func(*testing.T) store.Store { return nil }},
		{"postgres/http+json", "HTTP+JSON", func(t *testing.T) store.Store { return stacktest.Postgres(t, "a2a_oidc") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newJWTStack(t, stacktest.Options{Store: c.open(t)})
			node, dir := nodeFixture(t, "a2a", filepath.Join("@a2a-js", "sdk", "package.json"))
			alice := s.token(t, "alice")
			run := func(phase string, bad map[string]string, want int) {
				t.Helper()
				arg, err := json.Marshal(map[string]any{"issuer": s.oidc.Issuer, "bad": bad,
					"tokens": map[string]string{"alice": alice, "bob": s.token(t, "bob")}})
				if err != nil {
					t.Fatal(err)
				}
				var out struct {
					Results []struct {
						Name  string `json:"name"`
						OK    bool   `json:"ok"`
						Error string `json:"error"`
					} `json:"results"`
				}
				calls := s.env.Upstream.Count()
				err = runNodeScript(t, node, dir, "oidc.mjs", &out, s.env.URL, c.binding, phase, string(arg))
				if err != nil && len(out.Results) == 0 {
					t.Fatal(err)
				}
				for _, r := range out.Results {
					if !r.OK {
						t.Errorf("%s: %s: %s", phase, r.Name, r.Error)
					}
				}
				if len(out.Results) != want {
					t.Fatalf("%s: ran %d cases; want %d", phase, len(out.Results), want)
				}
				if phase == "expired" && s.env.Upstream.Count() != calls {
					t.Errorf("an expired token reached the model")
				}
			}
			run("live", s.forged(t, alice), 4)
			if n := s.env.Upstream.Count(); n != 1 {
				t.Errorf("the model was called %d times; want once (alice's message; no refused token ran a turn)", n)
			}
			// Past the token's exp and the server's leeway.
			s.skew.Store(int64(10 * time.Minute))
			run("expired", map[string]string{"expired": alice}, 1)
		})
	}
}

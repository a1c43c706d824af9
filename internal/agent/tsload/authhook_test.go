package tsload_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/agent/tsload"
	"github.com/stackbone/stackbone/internal/auth"
)

func writeAuth(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "auth.ts"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestAuthHook: authenticate may be sync or async, named or the default
// export; what it returns is checked; a throw is a refusal whose message
// shows only when fit; a call that does not settle is cut off at its
// limit, and the pool's next call still works.
func TestAuthHook(t *testing.T) {
	ctx := context.Background()
	if h, err := tsload.LoadAuth(ctx, t.TempDir(), 0, tsload.Options{}); h != nil || err != nil {
		t.Fatalf("no auth.ts: %v %v", h, err)
	}
	if _, err := tsload.LoadAuth(ctx, writeAuth(t, `export const x = 1;`), 0, tsload.Options{}); err == nil || !strings.Contains(err.Error(), "no authenticate function") {
		t.Fatalf("no authenticate: %v", err)
	}
	dir := writeAuth(t, `
export default async function (req: any) {
  const tok = req.headers['authorization'] || '';
  if (tok === 'hang') return new Promise(() => setTimeout(() => {}, 60000));
  if (tok === 'long') throw new Error('x'.repeat(500));
  if (tok === 'none') return null;
  if (tok === 'bad-user') return { tenant: 't', user: 42 };
  if (tok === 'no-tenant') return { user: 'u' };
  if (tok === 'ok') return { tenant: 't', user: { id: 'u1', label: 'U One' }, role: 'admin' };
  if (tok === 'plain') return { tenant: 't', user: 'u2' };
  throw new Error('nope: ' + req.method + ' ' + req.path + ' ' + req.query.q);
}`)
	h, err := tsload.LoadAuth(ctx, dir, 200*time.Millisecond, tsload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	req := func(tok string) auth.Request {
		return auth.Request{Method: "GET", Path: "/v1/threads", Headers: map[string]string{"authorization": tok}, Query: map[string]string{"q": "1"}}
	}
	kind := func(err error) auth.HookErrorKind {
		he, ok := auth.IsHookError(err)
		if !ok {
			t.Fatalf("not a hook error: %v", err)
		}
		return he.Kind
	}
	if id, err := h.Authenticate(ctx, req("ok")); err != nil || id.Tenant != "t" || id.Role != "admin" || id.User.ID != "u1" || id.User.Label != "U One" {
		t.Fatalf("ok: %+v %v", id, err)
	}
	if id, err := h.Authenticate(ctx, req("plain")); err != nil || id.Role != auth.DefaultRole || id.User.ID != "u2" || id.User.Label != "u2" {
		t.Fatalf("plain: %+v %v", id, err)
	}
	if id, err := h.Authenticate(ctx, req("none")); id != nil || err != nil {
		t.Fatalf("none: %+v %v", id, err)
	}
	_, err = h.Authenticate(ctx, req("who"))
	if he, _ := auth.IsHookError(err); kind(err) != auth.HookRefused || he.Public != "nope: GET /v1/threads 1" {
		t.Fatalf("refused: %v", err)
	}
	_, err = h.Authenticate(ctx, req("long"))
	if he, _ := auth.IsHookError(err); kind(err) != auth.HookRefused || he.Public != "" {
		t.Fatalf("a long message is not shown: %v", err)
	}
	for _, tok := range []string{"bad-user", "no-tenant"} {
		if _, err := h.Authenticate(ctx, req(tok)); kind(err) != auth.HookInvalid {
			t.Fatalf("%s: %v", tok, err)
		}
	}
	start := time.Now()
	_, err = h.Authenticate(ctx, req("hang"))
	if kind(err) != auth.HookUnavailable || time.Since(start) > 5*time.Second {
		t.Fatalf("hang: %v after %s", err, time.Since(start))
	}
	if id, err := h.Authenticate(ctx, req("ok")); err != nil || id == nil {
		t.Fatalf("after a timeout: %v", err)
	}
}

// BenchmarkAuthHook measures one pooled authenticate call, sync and
// awaiting a timer (an async lookup).
func BenchmarkAuthHook(b *testing.B) {
	for _, c := range []struct{ name, src string }{
		{"sync", `export function authenticate(r: any) { return { tenant: 't', user: r.headers['authorization'] }; }`},
		{"async", `export async function authenticate(r: any) { await new Promise((ok) => setTimeout(ok, 0)); return { tenant: 't', user: r.headers['authorization'] }; }`},
	} {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "auth.ts"), []byte(c.src), 0o644); err != nil {
				b.Fatal(err)
			}
			h, err := tsload.LoadAuth(context.Background(), dir, 0, tsload.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			req := auth.Request{Method: "POST", Path: "/v1/chat/completions", Headers: map[string]string{"authorization": "Bearer sess-1",
				"content-type": "application/json", "user-agent": "OpenAI/Go 3.0"}, Query: map[string]string{}}
			b.ResetTimer()
			for b.Loop() {
				if _, err := h.Authenticate(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

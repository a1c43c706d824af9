// Package studio is Stackbone Studio: the web UI the binary serves at
// /studio/. It is plain HTML, CSS and JavaScript modules embedded in the
// binary (no Node build step, nothing loaded from the network), backed by the
// public HTTP API (/v1/hitl, /v1/threads) plus a few Studio routes: the
// session (sign-in with an API key in start mode), the agent registry, and a
// tenant-wide live change feed.
package studio

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/clock"
	"github.com/stackbone/stackbone/internal/server"
	"github.com/stackbone/stackbone/internal/wire/httpjson"
)

//go:embed web
var webFS embed.FS

// DefaultSessionTTL is how long a Studio sign-in lasts.
const DefaultSessionTTL = 12 * time.Hour

// Studio serves the web UI and its session. Build it with New; Register
// installs its routes and hooks on the server.
type Studio struct {
	srv    *server.Server
	logger *slog.Logger
	// Now is the clock sessions expire by.
	Now func() time.Time
	// TTL is the lifetime of a session.
	TTL time.Duration

	assets map[string]asset
	secret []byte
}

type asset struct {
	body  []byte
	ctype string
	etag  string
}

// Mount installs Stackbone Studio on a server, on the server's clock: its
// routes and the session cookie authentication (Server.CookieAuth).
func Mount(s *server.Server) error {
	st, err := New(Config{Server: s, Clock: s.Clock})
	if err != nil {
		return err
	}
	st.Register()
	return nil
}

// Config is what New builds a Studio from. Server is required.
type Config struct {
	Server *server.Server
	// Clock is the clock sessions expire by (the real one when nil).
	Clock clock.Clock
	// TTL is the lifetime of a session (DefaultSessionTTL when zero).
	TTL time.Duration
}

// New validates cfg and builds the Studio of a server without registering
// anything.
func New(cfg Config) (*Studio, error) {
	s := cfg.Server
	if s == nil || s.Config == nil {
		return nil, errors.New("studio: a Server with its Config is required")
	}
	if cfg.TTL < 0 {
		return nil, fmt.Errorf("studio: negative session TTL %s", cfg.TTL)
	}
	logger := s.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	st := &Studio{srv: s, logger: logger, Now: clock.Or(cfg.Clock).Now, TTL: cfg.TTL}
	if st.TTL == 0 {
		st.TTL = DefaultSessionTTL
	}
	st.assets = loadAssets()
	st.secret = deriveSecret(s.Config.Keys, s.Config.JWT.StudioClientSecret)
	return st, nil
}

// Register adds the Studio routes to the server and installs the cookie
// authentication. Open pages learn of decisions made anywhere (API, CLI,
// another tab, another replica) from the tenant's bus events.
func (st *Studio) Register() {
	s := st.srv
	s.Handle("GET /studio", server.WireOpenAI, false, func(w http.ResponseWriter, r *http.Request) error {
		http.Redirect(w, r, "/studio/", http.StatusFound)
		return nil
	})
	s.Handle("GET /studio/", server.WireOpenAI, false, st.static)
	s.Handle("GET /studio/api/session", server.WireOpenAI, false, st.session)
	s.Handle("POST /studio/api/login", server.WireOpenAI, false, st.login)
	s.Handle("POST /studio/api/logout", server.WireOpenAI, false, st.logout)
	s.Handle("GET "+OIDCLoginPath, server.WireOpenAI, false, st.oidcLogin)
	s.Handle("GET "+OIDCCallbackPath, server.WireOpenAI, false, st.oidcCallback)
	s.Handle("GET /studio/api/agents", server.WireOpenAI, true, st.agents)
	s.Handle("GET /studio/api/live", server.WireOpenAI, true, st.live)
	s.CookieAuth = st.CookieAuth
}

// loadAssets reads the embedded web folder once, with a content hash as ETag.
func loadAssets() map[string]asset {
	out := map[string]asset{}
	_ = fs.WalkDir(webFS, "web", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := webFS.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(p))
		switch path.Ext(p) {
		case ".js":
			ct = "text/javascript; charset=utf-8"
		case ".css":
			ct = "text/css; charset=utf-8"
		case ".html":
			ct = "text/html; charset=utf-8"
		case ".svg":
			ct = "image/svg+xml"
		}
		if ct == "" {
			ct = "application/octet-stream"
		}
		out[strings.TrimPrefix(p, "web/")] = asset{body: b, ctype: ct,
			etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	return out
}

// contentSecurityPolicy keeps the page to its own origin: no inline script,
// no third-party anything.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// static serves the embedded files; every path that is not a file is the
// app shell (the page routes with the URL fragment).
func (st *Studio) static(w http.ResponseWriter, r *http.Request) error {
	name := strings.TrimPrefix(r.URL.Path, "/studio/")
	if strings.HasPrefix(name, "api/") {
		return apierror.New(apierror.NotFound, "unknown_route", fmt.Sprintf("No route %s %s.", r.Method, r.URL.Path))
	}
	a, ok := st.assets[name]
	if !ok {
		if name != "" && path.Ext(name) != "" {
			return apierror.New(apierror.NotFound, "not_found", fmt.Sprintf("No Studio file %q.", name))
		}
		a = st.assets["index.html"]
	}
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", a.etag)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	if match := r.Header.Get("If-None-Match"); match != "" && match == a.etag {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(a.body)
	}
	return nil
}

// writeJSON writes v with a status.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Cache-Control", "no-store")
	return httpjson.Write(w, status, v)
}

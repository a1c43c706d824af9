// Package redact keeps secrets out of logs. A Redactor replaces the secrets
// it was given (provider keys, Stackbone API keys) and secret-shaped tokens
// (a bearer token, an "sk-…" key) in text with Placeholder; Handler applies
// it to every record a slog.Handler writes: the message, string attributes,
// errors and other values, inside groups too.
//
// A secret is replaced in every encoding it takes on its way out: as is,
// JSON-escaped once and twice (as Go's encoding/json, JavaScript's
// JSON.stringify and ASCII-only encoders such as Python's json write it),
// and base64-encoded on its own (standard and URL alphabets, padded or not).
// A value with a quote, a backslash, a tab or a newline (a JSON
// service-account key, a PEM key) is thus masked in a tool result that is
// JSON, in a request body that quotes that JSON again, and in a log line.
// So are its parts (Parts): the value trimmed, each line of a multi-line
// value, and the strings inside a value that is JSON.
package redact

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Placeholder replaces every secret.
const Placeholder = "[REDACTED]"

// MinSecretLen is the shortest known secret redacted by value; a shorter
// one (a misconfiguration) would blank out ordinary words.
const MinSecretLen = 8

// minTokenLen is the shortest token after "Bearer " or "sk-" taken for a
// secret by its shape.
const minTokenLen = 8

// Redactor replaces secrets in text. The zero value redacts only
// secret-shaped tokens. It is safe for concurrent use, Add included; a nil
// *Redactor redacts shapes only.
type Redactor struct {
	mu      sync.Mutex               // serialises Add
	secrets atomic.Pointer[[]string] // every encoding of every secret, longest first
}

// New returns a Redactor for the given secrets; empty, duplicate and too
// short (< MinSecretLen) ones are dropped.
func New(secrets ...string) *Redactor {
	r := &Redactor{}
	r.Add(secrets...)
	return r
}

// Add adds secrets (configuration read after the Redactor was made, such as
// an agent's MCP headers); empty, known and too short ones are dropped.
// Text redacted afterwards has them replaced too.
func (r *Redactor) Add(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.list()
	s := slices.Clone(old)
	for _, secret := range secrets {
		for _, v := range Parts(secret) {
			for _, e := range Encodings(v) {
				if !slices.Contains(s, e) {
					s = append(s, e)
				}
			}
		}
	}
	if len(s) == len(old) {
		return
	}
	slices.SortFunc(s, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	r.secrets.Store(&s)
}

// list is the current encodings, longest first.
func (r *Redactor) list() []string {
	if r == nil {
		return nil
	}
	if p := r.secrets.Load(); p != nil {
		return *p
	}
	return nil
}

// Parts returns the values secret shows up as, each at least MinSecretLen
// long, secret first: the secret trimmed of surrounding white space (a
// value with a trailing newline that comes back trimmed), every trimmed
// line of a multi-line secret (a PEM key logged line by line), and, for a
// secret that is a JSON object or array (a service-account key), its
// string leaves and their parts in turn (the private_key alone). A secret
// shorter than MinSecretLen has no parts.
func Parts(secret string) []string {
	var out []string
	var add func(v string, depth int)
	add = func(v string, depth int) {
		if len(v) < MinSecretLen || slices.Contains(out, v) {
			return
		}
		out = append(out, v)
		if depth > 4 {
			return
		}
		t := strings.TrimSpace(v)
		add(t, depth+1)
		if strings.ContainsAny(t, "\r\n") {
			for _, line := range strings.FieldsFunc(t, func(r rune) bool { return r == '\n' || r == '\r' }) {
				add(strings.TrimSpace(line), depth+1)
			}
		}
		if strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
			var doc any
			if json.Unmarshal([]byte(t), &doc) == nil {
				for _, leaf := range jsonLeaves(doc, nil) {
					add(leaf, depth+1)
				}
			}
		}
	}
	add(secret, 0)
	return out
}

// jsonLeaves appends the string values (not the keys) in doc to out.
func jsonLeaves(doc any, out []string) []string {
	switch x := doc.(type) {
	case string:
		out = append(out, x)
	case []any:
		for _, v := range x {
			out = jsonLeaves(v, out)
		}
	case map[string]any:
		for _, v := range x {
			out = jsonLeaves(v, out)
		}
	}
	return out
}

// Encodings returns the forms secret takes on its way out, secret first:
// JSON-escaped once and twice (Go's encoding/json, with and without HTML
// escaping; JSON.stringify; ASCII-only \uXXXX escaping) and base64 (standard
// and URL alphabets, padded and raw). Duplicates are left out.
func Encodings(secret string) []string {
	out := []string{secret}
	add := func(v string) {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	for _, esc := range []func(string) string{jsEscape, goEscape, goEscapeHTML, asciiEscape} {
		once := esc(secret)
		add(once)
		add(esc(once))
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		add(enc.EncodeToString([]byte(secret)))
	}
	return out
}

// jsEscape is JSON.stringify's string escaping, without the quotes: \", \\,
// \b \f \n \r \t, other control characters as \u00xx.
func jsEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 {
				fmt.Fprintf(&b, `\u%04x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	return b.String()
}

// goEscape is encoding/json's string escaping without HTML escaping.
func goEscape(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return unquote(buf.String())
}

// goEscapeHTML is json.Marshal's string escaping (<, > and & as \u00xx).
func goEscapeHTML(s string) string {
	b, _ := json.Marshal(s)
	return unquote(string(b))
}

// asciiEscape is jsEscape with every non-ASCII character as \uXXXX (UTF-16
// surrogate pairs above the BMP), as ASCII-only encoders write it.
func asciiEscape(s string) string {
	var b strings.Builder
	for _, r := range jsEscape(s) {
		switch {
		case r < utf8.RuneSelf:
			b.WriteRune(r)
		case r > 0xFFFF:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

func unquote(q string) string {
	q = strings.TrimSuffix(q, "\n")
	return strings.TrimSuffix(strings.TrimPrefix(q, `"`), `"`)
}

// String returns s with every secret replaced by Placeholder. Text without
// anything to replace is returned as is, without allocating.
func (r *Redactor) String(s string) string {
	if !r.suspect(s) {
		return s
	}
	return r.replace(s)
}

// replace redacts s, which suspect flagged.
func (r *Redactor) replace(s string) string {
	for _, k := range r.list() {
		s = strings.ReplaceAll(s, k, Placeholder)
	}
	return redactShapes(s)
}

// suspect reports whether s may hold something to replace: a known secret,
// "sk-" or "bearer" in any case. It is the cheap test of the hot path.
func (r *Redactor) suspect(s string) bool {
	for _, k := range r.list() {
		if strings.Contains(s, k) {
			return true
		}
	}
	return strings.Contains(s, "sk-") || hasBearer(s)
}

func hasBearer(s string) bool {
	for {
		i := strings.IndexAny(s, "bB")
		if i < 0 || len(s)-i < len("bearer") {
			return false
		}
		if strings.EqualFold(s[i:i+len("bearer")], "bearer") {
			return true
		}
		s = s[i+1:]
	}
}

// redactShapes replaces the token after a "Bearer" word and "sk-" keys
// (at the start of a word, minTokenLen or more key characters).
func redactShapes(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		if !wordStart(s, i) {
			continue
		}
		switch {
		case (s[i] == 'b' || s[i] == 'B') && len(s)-i > len("bearer") && strings.EqualFold(s[i:i+len("bearer")], "bearer"):
			j := i + len("bearer")
			for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
				j++
			}
			if j == i+len("bearer") {
				continue // "bearers", "bearer:" and such are words, not headers
			}
			k := j
			for k < len(s) && bearerChar(s[k]) {
				k++
			}
			if k-j >= minTokenLen {
				b.WriteString(s[last:j])
				b.WriteString(Placeholder)
				last, i = k, k-1
			}
		case s[i] == 's' && strings.HasPrefix(s[i:], "sk-"):
			k := i + len("sk-")
			for k < len(s) && keyChar(s[k]) {
				k++
			}
			if k-i-len("sk-") >= minTokenLen {
				b.WriteString(s[last:i])
				b.WriteString(Placeholder)
				last, i = k, k-1
			}
		}
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func wordStart(s string, i int) bool {
	return i == 0 || !keyChar(s[i-1])
}

func keyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// bearerChar is a character of an RFC 6750 token (base64, JWT).
func bearerChar(c byte) bool {
	return keyChar(c) || c == '.' || c == '~' || c == '+' || c == '/' || c == '='
}

// Handler wraps a slog.Handler so that nothing it writes holds a secret.
type Handler struct {
	next slog.Handler
	r    *Redactor
}

// NewHandler returns next with every record redacted by r.
func NewHandler(next slog.Handler, r *Redactor) *Handler {
	return &Handler{next: next, r: r}
}

// Redactor returns the Redactor h applies; Add to it reaches every logger
// built on h.
func (h *Handler) Redactor() *Redactor { return h.r }

// AddSecrets adds values to what logger redacts, when its handler is a
// Handler (a logger built some other way is left alone).
func AddSecrets(logger *slog.Logger, values ...string) {
	if h, ok := logger.Handler().(*Handler); ok && h.r != nil {
		h.r.Add(values...)
	}
}

// Enabled reports whether the wrapped handler handles level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle redacts the record's message and attributes and passes it on, in
// one pass over the attributes. A record with nothing to redact is passed
// on unchanged.
func (h *Handler) Handle(ctx context.Context, rec slog.Record) error {
	dirtyMsg := h.r.suspect(rec.Message)
	var out []slog.Attr // every attribute, redacted, once one changed
	n := 0
	rec.Attrs(func(a slog.Attr) bool {
		ra, changed := h.attr(a)
		if changed && out == nil {
			out = make([]slog.Attr, 0, rec.NumAttrs())
			rec.Attrs(func(b slog.Attr) bool { // the clean ones before it
				if len(out) == n {
					return false
				}
				out = append(out, b)
				return true
			})
		}
		if out != nil {
			out = append(out, ra)
		}
		n++
		return true
	})
	if !dirtyMsg && out == nil {
		return h.next.Handle(ctx, rec)
	}
	msg := rec.Message
	if dirtyMsg {
		msg = h.r.replace(msg)
	}
	red := slog.NewRecord(rec.Time, rec.Level, msg, rec.PC)
	if out != nil {
		red.AddAttrs(out...)
	} else {
		rec.Attrs(func(a slog.Attr) bool { red.AddAttrs(a); return true })
	}
	return h.next.Handle(ctx, red)
}

// WithAttrs redacts attrs once and hands them to the wrapped handler.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		out[i], _ = h.attr(a)
	}
	return &Handler{next: h.next.WithAttrs(out), r: h.r}
}

// WithGroup opens a group in the wrapped handler.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), r: h.r}
}

// attr returns a redacted, and whether anything changed.
func (h *Handler) attr(a slog.Attr) (slog.Attr, bool) {
	v, changed := h.value(a.Value)
	if changed {
		a.Value = v
	}
	return a, changed
}

func (h *Handler) value(v slog.Value) (slog.Value, bool) {
	v = v.Resolve()
	switch v.Kind() {
	case slog.KindString:
		if s := v.String(); h.r.suspect(s) {
			return slog.StringValue(h.r.replace(s)), true
		}
	case slog.KindGroup:
		as := v.Group()
		var out []slog.Attr
		for i, a := range as {
			ra, changed := h.attr(a)
			if changed && out == nil {
				out = slices.Clone(as)
			}
			if out != nil {
				out[i] = ra
			}
		}
		if out != nil {
			return slog.GroupValue(out...), true
		}
	case slog.KindAny:
		return h.any(v)
	}
	return v, false
}

// any redacts an arbitrary value by its text: an error by its message, bytes
// and JSON by their content, anything else as a handler would print it. A
// value with a secret is replaced by its redacted text.
func (h *Handler) any(v slog.Value) (slog.Value, bool) {
	var s string
	switch x := v.Any().(type) {
	case error:
		s = x.Error()
	case json.RawMessage:
		if h.r.suspect(string(x)) {
			return slog.AnyValue(json.RawMessage(h.r.replace(string(x)))), true
		}
		return v, false
	case []byte:
		s = string(x)
	case fmt.Stringer:
		s = x.String()
	default:
		s = fmt.Sprintf("%+v", x)
	}
	if h.r.suspect(s) {
		return slog.StringValue(h.r.replace(s)), true
	}
	return v, false
}

// URLSecrets returns the parts of a URL that may carry a credential: the
// user info (name and password), every query value and every path segment
// at least MinSecretLen long (a token in "/s/<token>/mcp"), each as written
// in the URL and decoded. An unparseable URL gives nothing.
func URLSecrets(raw string) []string {
	p, err := url.Parse(raw)
	if err != nil || raw == "" {
		return nil
	}
	var out []string
	add := func(vs ...string) {
		for _, v := range vs {
			if len(v) >= MinSecretLen && !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	if p.User != nil {
		pw, _ := p.User.Password()
		add(p.User.Username(), pw, url.QueryEscape(pw), url.PathEscape(pw))
	}
	for _, seg := range strings.Split(p.EscapedPath(), "/") {
		dec, _ := url.PathUnescape(seg)
		add(seg, dec)
	}
	for _, kv := range strings.Split(p.RawQuery, "&") {
		_, v, _ := strings.Cut(kv, "=")
		dec, _ := url.QueryUnescape(v)
		add(v, dec)
	}
	return out
}

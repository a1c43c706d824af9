package auth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode"
)

// The auth hook: a project's auth.ts exporting authenticate(request), for
// teams whose credentials are not JWTs. It is asked about a request that no
// configured key and no JWT (when an issuer is set) authenticated; it
// returns { tenant, user, role } or throws. The JavaScript side lives with
// the agents' runtimes (tsload.LoadAuth); this is what the server sees.

// HookFile is the project file of the hook, relative to the project folder.
const HookFile = "auth.ts"

// DefaultHookTimeout bounds one authenticate call.
const DefaultHookTimeout = 5 * time.Second

// Request is what authenticate(request) is given.
type Request struct {
	Method string `json:"method"`
	// Path is the URL path.
	Path string `json:"path"`
	// Headers are the request's headers, names lower-case, several values
	// of one name joined with ", ".
	Headers map[string]string `json:"headers"`
	// Query is the URL query, the first value of each name.
	Query map[string]string `json:"query"`
}

// NewRequest is the hook's view of an HTTP request.
func NewRequest(r *http.Request) Request {
	req := Request{Method: r.Method, Path: r.URL.Path, Headers: map[string]string{}, Query: map[string]string{}}
	for name, vs := range r.Header {
		req.Headers[strings.ToLower(name)] = strings.Join(vs, ", ")
	}
	if r.Host != "" {
		req.Headers["host"] = r.Host
	}
	for name, vs := range r.URL.Query() {
		if len(vs) > 0 {
			req.Query[name] = vs[0]
		}
	}
	return req
}

// Hook authenticates a request the keys and tokens did not. A nil
// Identity with a nil error means the hook has no opinion: the request is
// then refused as one without credentials. Errors are *HookError.
type Hook interface {
	Authenticate(ctx context.Context, req Request) (*Identity, error)
}

// HookErrorKind says why the hook did not authenticate a request.
type HookErrorKind int

const (
	// HookRefused: authenticate threw (the caller's credentials are not
	// good): 401.
	HookRefused HookErrorKind = iota
	// HookInvalid: authenticate returned something that is not an
	// identity (no tenant, an unknown role): the project's bug, 500.
	HookInvalid
	// HookUnavailable: authenticate did not answer in time, or failed
	// outside its code (a fetch it awaited timed out): 503.
	HookUnavailable
)

// HookError is a request the hook did not authenticate.
type HookError struct {
	Kind HookErrorKind
	// Public is what the client may be told (empty: a generic message).
	Public string
	// Err is the underlying error, for logs.
	Err error
}

// Error says what went wrong, with the underlying error.
func (e *HookError) Error() string {
	msg := "auth.ts: " + e.Public
	if e.Public == "" {
		msg = "auth.ts: refused"
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *HookError) Unwrap() error { return e.Err }

// maxPublicMessage bounds a thrown message shown to clients.
const maxPublicMessage = 200

// PublicMessage is the message of an error authenticate threw if it is fit
// to show the caller: an Error (or a subclass of the project's own) whose
// message is one short line of printable text; a JavaScript engine error
// (TypeError, ReferenceError, …: a bug, whose message may show code) or
// anything else is not ("").
func PublicMessage(name, message string) string {
	switch name {
	case "TypeError", "ReferenceError", "SyntaxError", "RangeError", "EvalError", "URIError", "InternalError", "AggregateError":
		return ""
	}
	if message == "" || len(message) > maxPublicMessage || strings.ContainsFunc(message, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return ""
	}
	return message
}

// ParseHookResult checks what authenticate returned (as JSON) and maps
// it: tenant a non-empty string, user a string (the id) or {id, label},
// role admin, caller or approver (caller when absent). null or undefined
// is no opinion (nil, nil).
func ParseHookResult(b []byte) (*Identity, error) {
	invalid := func(msg string) error {
		return &HookError{Kind: HookInvalid, Public: "authenticate() returned an invalid identity: " + msg}
	}
	s := strings.TrimSpace(string(b))
	if s == "" || s == "null" || s == "undefined" {
		return nil, nil
	}
	var out struct {
		Tenant *string          `json:"tenant"`
		User   json.RawMessage  `json:"user"`
		Role   *json.RawMessage `json:"role"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, invalid("want an object { tenant, user, role }")
	}
	if out.Tenant == nil || strings.TrimSpace(*out.Tenant) == "" {
		return nil, invalid("tenant must be a non-empty string")
	}
	id := &Identity{Tenant: *out.Tenant, Role: DefaultRole}
	if out.Role != nil && string(*out.Role) != "null" {
		var role string
		if err := json.Unmarshal(*out.Role, &role); err != nil {
			return nil, invalid("role must be a string: admin, caller or approver")
		}
		r, err := roleOf(role)
		if err != nil {
			return nil, invalid("role " + err.Error())
		}
		id.Role = r
	}
	switch u := strings.TrimSpace(string(out.User)); {
	case u == "" || u == "null":
	case strings.HasPrefix(u, `"`):
		_ = json.Unmarshal(out.User, &id.User.ID)
	case strings.HasPrefix(u, "{"):
		var v struct {
			ID    any `json:"id"`
			Label any `json:"label"`
		}
		_ = json.Unmarshal(out.User, &v)
		sid, ok := v.ID.(string)
		if !ok {
			return nil, invalid("user.id must be a string")
		}
		id.User.ID = sid
		if v.Label != nil {
			l, ok := v.Label.(string)
			if !ok {
				return nil, invalid("user.label must be a string")
			}
			id.User.Label = l
		}
	default:
		return nil, invalid("user must be a string (its id) or { id, label }")
	}
	if out.User != nil && string(out.User) != "null" && strings.TrimSpace(id.User.ID) == "" {
		return nil, invalid("user id must be a non-empty string")
	}
	if id.User.ID != "" && id.User.Label == "" {
		id.User.Label = id.User.ID
	}
	if len(id.Tenant) > 200 || len(id.User.ID) > 200 || len(id.User.Label) > 200 {
		return nil, invalid("tenant, user id and label are at most 200 bytes")
	}
	return id, nil
}

// IsHookError reports whether err is a *HookError and returns it.
func IsHookError(err error) (*HookError, bool) {
	var he *HookError
	ok := errors.As(err, &he)
	return he, ok
}

// Package upstream holds what the HTTP model providers share: their HTTP
// client, draining answers so connections are reused, and turning API and
// transport failures into *model.Error.
package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/telemetry"
)

// MaxIdleConnsPerHost bounds the idle connections a provider keeps to its
// upstream: enough for the concurrent calls of a busy server, where
// http.DefaultTransport keeps 2 and opens a new connection for most calls.
const MaxIdleConnsPerHost = 256

// NewHTTPClient returns the client a provider uses when it is given none:
// its own transport with an idle pool sized for concurrent calls, HTTP/2
// where the upstream offers it, the proxy from the environment
// (HTTPS_PROXY, NO_PROXY) and bounded dial and TLS handshake times. It has
// no overall timeout: an answer streams for as long as the model writes
// (model.Timeouts bound a call). Requests carry the trace context of their
// context (the engine's chat span) as traceparent (telemetry.Transport).
func NewHTTPClient() *http.Client {
	return &http.Client{Transport: telemetry.Transport(&http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4 * MaxIdleConnsPerHost,
		MaxIdleConnsPerHost:   MaxIdleConnsPerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	})}
}

// MaxEvent bounds one line (and one event's data) of a provider's stream,
// as the SDKs' scanners did.
const MaxEvent = 32 << 20

// maxDrain bounds what Drain reads.
const maxDrain = 64 << 10

// Drain reads what is left of an answer's body (at most 64 KiB), so that
// closing it returns the connection to the idle pool instead of closing it:
// after an SSE stream's last event the chunked terminator is often still in
// flight. Call it only once the answer is known to be over (its last event
// read, an error answer read), never on a stream the caller abandoned.
func Drain(body io.Reader) {
	_, _ = io.CopyN(io.Discard, body, maxDrain)
}

// StatusFunc recognises an SDK's API error and returns its HTTP status,
// public message and response headers (nil when unknown).
type StatusFunc func(err error) (status int, msg string, h http.Header, ok bool)

// MapError turns a failed attempt into the error a provider reports:
// the context's error when ctx is done, a *model.Error with the upstream
// status (and its retry-after) for an API error (502 for an error sent inside a 200 stream or an
// unreadable answer), and a *model.Error with status 0 for a connection
// failure.
func MapError(ctx context.Context, name string, err error, status StatusFunc) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if st, msg, h, ok := status(err); ok {
		if st < 400 {
			// An error event inside a stream that started with 200.
			st = http.StatusBadGateway
		}
		return &model.Error{Status: st, Message: msg, RetryAfter: model.RetryAfter(h, time.Now()), Err: err}
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syn) || errors.As(err, &typ) {
		return &model.Error{Status: http.StatusBadGateway, Message: name + ": unreadable answer from the model upstream", Err: err}
	}
	return &model.Error{Status: 0, Message: name + ": " + transportCause(err), Err: err}
}

// transportCause names a transport failure without the request URL.
func transportCause(err error) string {
	var op *net.OpError
	switch {
	case errors.As(err, &op) && op.Err != nil:
		return op.Op + ": " + op.Err.Error()
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "connection closed during the answer"
	case errors.Is(err, context.DeadlineExceeded):
		return "request timed out"
	default:
		return "connection failed"
	}
}

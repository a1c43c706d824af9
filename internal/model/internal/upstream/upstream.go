// Package upstream holds what the HTTP model providers share: turning API
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
)

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

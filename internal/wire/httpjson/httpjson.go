// Package httpjson holds the JSON-over-HTTP helpers every wire shares:
// reading a request body within its limits, writing a JSON body with the
// right Content-Type, and describing why a request body did not decode.
package httpjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/stackbone/stackbone/internal/apierror"
)

// ReadBody reads a request body within the size limit the server set: an
// over-limit body returns the *http.MaxBytesError (a 413 at the edge), one
// that did not arrive in time a 408.
func ReadBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			e := apierror.New(apierror.InvalidRequest, "request_timeout", "The request body did not arrive in time.")
			e.Status = http.StatusRequestTimeout
			e.Err = err
			return nil, e
		}
		return nil, apierror.Invalid("", "Could not read the request body.")
	}
	return b, nil
}

// Write writes v as a JSON body with status and Content-Type
// application/json (the SDKs return raw text without it).
func Write(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err = w.Write(b)
	return err
}

// Problem describes a JSON decoding error for a client: where the syntax
// broke, or which field had the wrong type.
func Problem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("%s at offset %d", se.Error(), se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q must be %s, not %s", te.Field, te.Type, te.Value)
	}
	return err.Error()
}

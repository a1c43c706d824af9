package apierror

import (
	"testing"

	"github.com/stackbone/stackbone/internal/engine"
)

// TestStoredFailureKeepsItsStatusAndAdvice: a retry that attached to a
// failed attempt knows the failure by its stored code only; it answers with
// the status the attempt answered with, and with retry advice from whether
// the turn had done work.
func TestStoredFailureKeepsItsStatusAndAdvice(t *testing.T) {
	for _, c := range []struct {
		code      string
		workDone  bool
		status    int
		noRetry   bool
		retryable bool
	}{
		{"upstream_timeout", false, 504, false, true},
		{"upstream_timeout", true, 504, true, false},
		{"upstream_rate_limited", false, 429, false, true},
		{"store_unavailable", false, 503, false, true},
		{engine.CodeFormatMismatch, false, 502, true, false},
		{"something_else", true, 500, true, false},
	} {
		e := From(&engine.RunFailedError{Err: &engine.StoredFailure{Code: c.code, Message: "m"}, WorkDone: c.workDone})
		if e.Status != c.status || e.Code != c.code || e.NoRetry != c.noRetry || (e.RetryAfter > 0) != c.retryable {
			t.Errorf("%s (work done %v): status %d code %s noRetry %v retryAfter %s", c.code, c.workDone, e.Status, e.Code, e.NoRetry, e.RetryAfter)
		}
	}
}

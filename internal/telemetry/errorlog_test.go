package telemetry

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestErrorLogRateLimit: the first error is logged, the ones within the
// interval after it are only counted, and the first one after the interval
// is logged with that count.
func TestErrorLogRateLimit(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	l := newErrorLog(slog.New(slog.NewTextHandler(&buf, nil)), func() time.Time { return now }, time.Minute)
	for range 5 {
		l.handle(errors.New("connection refused"))
		now = now.Add(10 * time.Second)
	}
	if n := strings.Count(buf.String(), "level=WARN"); n != 1 || strings.Contains(buf.String(), "suppressed") {
		t.Fatalf("after 5 errors in 50s: %d lines:\n%s", n, buf.String())
	}
	now = now.Add(11 * time.Second)
	l.handle(errors.New("connection refused"))
	if n := strings.Count(buf.String(), "level=WARN"); n != 2 || !strings.Contains(buf.String(), "suppressed=4") {
		t.Fatalf("after the minute: %d lines:\n%s", n, buf.String())
	}
}

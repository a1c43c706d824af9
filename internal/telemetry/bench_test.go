package telemetry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/stackbone/stackbone/internal/telemetry"
	"github.com/stackbone/stackbone/internal/telemetry/otlptest"
)

// discard is an exporter that drops every batch.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// nullWriter is a ResponseWriter that keeps nothing.
type nullWriter struct{ h http.Header }

func (w nullWriter) Header() http.Header         { return w.h }
func (w nullWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w nullWriter) WriteHeader(int)             {}

// BenchmarkHTTPMiddleware is the cost of the server span on a request
// that carries a traceparent: off (no endpoint: the no-op provider, the
// middleware is the handler itself) and on (the SDK, batching to an
// exporter that drops everything).
func BenchmarkHTTPMiddleware(b *testing.B) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	for _, c := range []struct {
		name string
		env  map[string]string
	}{
		{"off", map[string]string{}},
		{"on", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			tel, err := telemetry.Setup(b.Context(), nil, otlptest.Getenv(c.env), telemetry.WithExporter(discard{}))
			if err != nil {
				b.Fatal(err)
			}
			defer tel.Shutdown(context.Background())
			if tel.Enabled() != (c.name == "on") {
				b.Fatalf("enabled %v", tel.Enabled())
			}
			h := telemetry.NewHTTPServer(tel.TracerProvider()).Middleware("POST /v1/chat/completions", next)
			req := httptest.NewRequest("POST", "http://127.0.0.1:8080/v1/chat/completions", nil)
			req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
			req.Header.Set("User-Agent", "bench/1")
			w := nullWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, req)
			}
		})
	}
}

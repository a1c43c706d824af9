package server_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/telemetry"
)

// dropSpans is an exporter that drops every batch: the SDK's work on the
// hot path (spans made, recorded, batched) without the collector.
type dropSpans struct{}

func (dropSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (dropSpans) Shutdown(context.Context) error                             { return nil }

// BenchmarkDurableToolTurnTracing: the durable tool turn of
// BenchmarkDurableToolTurn with tracing off (no endpoint: the no-op
// provider), on (the SDK recording every span, exported to nowhere), and
// off with no model-call content kept (start mode's default).
func BenchmarkDurableToolTurnTracing(b *testing.B) {
	for _, c := range []struct {
		name    string
		env     map[string]string
		content bool
	}{
		{"off", nil, true},
		{"on", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{"off-nocontent", nil, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			tel, err := telemetry.Setup(b.Context(), nil, func(k string) string { return c.env[k] }, telemetry.WithExporter(dropSpans{}))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
			env := stacktest.New(b, stacktest.Options{Configure: func(cfg *config.Config) {
				cfg.Tracer, cfg.KeepContent = tel.TracerProvider(), c.content
			}})
			benchNewSessions(b, env.URL, "tool", "weather please")
		})
	}
}

package notify_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/stackbone/stackbone/internal/notify"
	"github.com/stackbone/stackbone/internal/telemetry"
	"github.com/stackbone/stackbone/internal/testwait"
)

// TestDeliverySpan: with a tracer, each delivery attempt is a CLIENT span
// whose trace context the request carries as traceparent, failed when the
// endpoint answers 5xx.
func TestDeliverySpan(t *testing.T) {
	otel.SetTextMapPropagator(telemetry.Propagators())
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	got := make(chan string, 4)
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("traceparent")
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	s := openStore(t, srv.URL+"/hook")
	start(t, notify.Config{Store: s, Endpoints: []string{srv.URL + "/hook"}, Tracer: tp, Schedule: []time.Duration{time.Millisecond}})
	pendingDecision(t, s, "t1")
	first := testwait.Recv(t, got, "the first attempt")
	second := testwait.Recv(t, got, "the retry")
	testwait.Until(t, "two spans", func() bool { return len(exp.GetSpans()) == 2 })
	spans := exp.GetSpans()
	for i, tp := range []string{first, second} {
		sp := spans[i]
		want := "00-" + sp.SpanContext.TraceID().String() + "-" + sp.SpanContext.SpanID().String() + "-01"
		if tp != want {
			t.Fatalf("attempt %d traceparent %q, want %q", i+1, tp, want)
		}
		if sp.Name != "POST webhook decision.pending" || sp.SpanKind != trace.SpanKindClient {
			t.Fatalf("span %q kind %v", sp.Name, sp.SpanKind)
		}
	}
	attrs := func(i int) map[attribute.Key]attribute.Value {
		m := map[attribute.Key]attribute.Value{}
		for _, kv := range spans[i].Attributes {
			m[kv.Key] = kv.Value
		}
		return m
	}
	if a := attrs(0); a["http.response.status_code"].AsInt64() != 503 || a["error.type"].AsString() != "503" || a["server.address"].AsString() != "127.0.0.1" {
		t.Fatalf("first attempt's attributes %v", a)
	}
	if a := attrs(1); a["http.response.status_code"].AsInt64() != 204 || a["http.request.resend_count"].AsInt64() != 1 {
		t.Fatalf("retry's attributes %v", a)
	}
}

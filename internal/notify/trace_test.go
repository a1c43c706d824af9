package notify_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/stackbone/stackbone/internal/notify"
	"github.com/stackbone/stackbone/internal/store"
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

// TestDeliveryContinuesTheRunsTrace: a notice stored in a run's span (its
// checkpoint's context) is delivered, later, in that run's trace: the
// delivery span is the child of the run's span, and the endpoint gets the
// run's trace id.
func TestDeliveryContinuesTheRunsTrace(t *testing.T) {
	otel.SetTextMapPropagator(telemetry.Propagators())
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("traceparent")
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	s := openStore(t, srv.URL+"/hook")
	runCtx, run := tp.Tracer("test").Start(t.Context(), "invoke_agent refunds")
	ctx := t.Context()
	if _, err := s.BeginRun(ctx, store.BeginRun{Tenant: "acme", ThreadID: "t1", Agent: "refunds", RunID: "run_t1",
		Owner: "o", Now: t0, LeaseUntil: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(runCtx, store.Checkpoint{Tenant: "acme", ThreadID: "t1", RunID: "run_t1",
		Interrupts: []store.Interrupt{{ID: "int_t1", ToolCallID: "call_1", Tool: "refund", Args: json.RawMessage(`{}`),
			AllowedDecisions: []string{"approve", "reject"}, CreatedAt: t0}}}); err != nil {
		t.Fatal(err)
	}
	run.End()
	start(t, notify.Config{Store: s, Endpoints: []string{srv.URL + "/hook"}, Tracer: tp, Schedule: []time.Duration{time.Millisecond}})
	header := testwait.Recv(t, got, "the delivery")
	if want := run.SpanContext().TraceID().String(); !strings.Contains(header, "-"+want+"-") {
		t.Fatalf("the delivery's traceparent %q is not in the run's trace %s", header, want)
	}
	testwait.Until(t, "the delivery span", func() bool { return len(exp.GetSpans()) == 2 })
	for _, sp := range exp.GetSpans() {
		if sp.Name == "POST webhook decision.pending" && sp.Parent.SpanID() != run.SpanContext().SpanID() {
			t.Fatalf("the delivery span's parent %s; want the run's span %s", sp.Parent.SpanID(), run.SpanContext().SpanID())
		}
	}
}

package telemetry_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/stackbone/stackbone/internal/redact"
	"github.com/stackbone/stackbone/internal/telemetry"
	"github.com/stackbone/stackbone/internal/telemetry/otlptest"
	"github.com/stackbone/stackbone/internal/testwait"
)

// The tests of this package are not parallel: Setup installs the global
// propagator and error handler.

// logBuffer is a logger's output, safe for the SDK's goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newLogger() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// setup runs Setup on env and shuts it down when the test ends.
func setup(t *testing.T, env map[string]string, opts ...telemetry.Option) (*telemetry.Telemetry, *logBuffer) {
	t.Helper()
	logger, logs := newLogger()
	tel, err := telemetry.Setup(t.Context(), logger, otlptest.Getenv(env), opts...)
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	return tel, logs
}

// emit starts and ends one span named name on tel's provider.
func emit(tel *telemetry.Telemetry, name string) trace.SpanContext {
	_, span := tel.TracerProvider().Tracer("test").Start(context.Background(), name)
	defer span.End()
	return span.SpanContext()
}

func assertNoop(t *testing.T, tel *telemetry.Telemetry) {
	t.Helper()
	if tel.Enabled() {
		t.Fatal("tracing is on")
	}
	if _, ok := tel.TracerProvider().(noop.TracerProvider); !ok {
		t.Fatalf("provider %T, want the no-op one", tel.TracerProvider())
	}
	if telemetry.NewHTTPServer(tel.TracerProvider()) != nil {
		t.Fatal("HTTP instrumentation on a no-op provider")
	}
	if sc := emit(tel, "x"); sc.IsValid() {
		t.Fatal("a no-op provider made a real span")
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestNoEndpointIsNoop: with no OTLP endpoint (whatever else is set) there
// is no exporter and the provider is the no-op one; so with
// OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none and an endpoint.
func TestNoEndpointIsNoop(t *testing.T) {
	rcv := otlptest.NewReceiver(t)
	for name, env := range map[string]map[string]string{
		"empty":       {},
		"no endpoint": {"OTEL_SERVICE_NAME": "x", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_TRACES_SAMPLER": "always_on"},
		"disabled":    rcv.Env(otlptest.HTTP, "OTEL_SDK_DISABLED=TRUE"),
		"exporter":    rcv.Env(otlptest.GRPC, "OTEL_TRACES_EXPORTER=none"),
		"not a URL":   {"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"},
	} {
		t.Run(name, func(t *testing.T) {
			tel, _ := setup(t, env)
			assertNoop(t, tel)
		})
	}
	if n := len(rcv.Exports()); n != 0 {
		t.Fatalf("%d exports reached the receiver", n)
	}
	// The propagator is installed either way.
	f := otel.GetTextMapPropagator().Fields()
	slices.Sort(f)
	if strings.Join(f, ",") != "baggage,traceparent,tracestate" {
		t.Fatalf("propagator fields %v", f)
	}
}

// TestExport: over both protocols spans reach a real receiver with the
// resource (service.name stackbone by default, OTEL_SERVICE_NAME over
// OTEL_RESOURCE_ATTRIBUTES' service.name, the other attributes decoded) and
// the export requests carry OTEL_EXPORTER_OTLP_HEADERS (the TRACES_ ones
// replacing them).
func TestExport(t *testing.T) {
	for _, proto := range []string{otlptest.HTTP, otlptest.GRPC} {
		t.Run(proto, func(t *testing.T) {
			t.Run("defaults", func(t *testing.T) {
				rcv := otlptest.NewReceiver(t)
				tel, _ := setup(t, rcv.Env(proto, "OTEL_EXPORTER_OTLP_HEADERS=x-team=core,authorization=Bearer%20tok-1"),
					telemetry.WithServiceVersion("1.2.3"))
				if !tel.Enabled() || tel.Protocol() != proto {
					t.Fatalf("enabled %v protocol %q", tel.Enabled(), tel.Protocol())
				}
				sc := emit(tel, "work")
				s := rcv.WaitForName(t, "work")
				if s.Protocol != proto || s.TraceID() != sc.TraceID().String() || s.SpanID() != sc.SpanID().String() {
					t.Fatalf("span %s/%s over %s, want %s/%s", s.TraceID(), s.SpanID(), s.Protocol, sc.TraceID(), sc.SpanID())
				}
				if got := s.ResourceString("service.name"); got != "stackbone" {
					t.Fatalf("service.name %q", got)
				}
				if got := s.ResourceString("service.version"); got != "1.2.3" {
					t.Fatalf("service.version %q", got)
				}
				if got := s.ResourceString("telemetry.sdk.language"); got != "go" {
					t.Fatalf("telemetry.sdk.language %q", got)
				}
				if s.Headers.Get("X-Team") != "core" || s.Headers.Get("Authorization") != "Bearer tok-1" {
					t.Fatalf("export headers %v", s.Headers)
				}
			})
			t.Run("service name and resource", func(t *testing.T) {
				rcv := otlptest.NewReceiver(t)
				tel, _ := setup(t, rcv.Env(proto, "OTEL_SERVICE_NAME=agents-eu",
					"OTEL_RESOURCE_ATTRIBUTES=service.name=ignored, deployment.environment.name=staging,team=a%2Cb,service.version=9",
					"OTEL_EXPORTER_OTLP_HEADERS=x-team=core", "OTEL_EXPORTER_OTLP_TRACES_HEADERS=x-traces=yes"),
					telemetry.WithServiceVersion("1.2.3"))
				emit(tel, "work")
				s := rcv.WaitForName(t, "work")
				for k, want := range map[string]string{"service.name": "agents-eu", "deployment.environment.name": "staging",
					"team": "a,b", "service.version": "9"} {
					if got := s.ResourceString(k); got != want {
						t.Errorf("resource %s = %q, want %q", k, got, want)
					}
				}
				if s.Headers.Get("X-Traces") != "yes" || s.Headers.Get("X-Team") != "" {
					t.Fatalf("export headers %v: want the TRACES_ ones only", s.Headers)
				}
			})
			t.Run("service name from the attributes", func(t *testing.T) {
				rcv := otlptest.NewReceiver(t)
				tel, _ := setup(t, rcv.Env(proto, "OTEL_RESOURCE_ATTRIBUTES=service.name=from-attrs"))
				emit(tel, "work")
				if got := rcv.WaitForName(t, "work").ResourceString("service.name"); got != "from-attrs" {
					t.Fatalf("service.name %q", got)
				}
			})
		})
	}
}

// TestEndpoints: the base endpoint gets /v1/traces appended over HTTP, the
// traces endpoint is used as it is and wins over the base one; gzip
// compression is honoured.
func TestEndpoints(t *testing.T) {
	rcv := otlptest.NewReceiver(t)
	for name, c := range map[string]struct {
		env  map[string]string
		path string
	}{
		"base":   {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.HTTPEndpoint + "/otlp"}, "/otlp/v1/traces"},
		"traces": {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": rcv.HTTPEndpoint + "/custom"}, "/custom"},
		"gzip":   {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.HTTPEndpoint, "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}, "/v1/traces"},
	} {
		t.Run(name, func(t *testing.T) {
			c.env["OTEL_BSP_SCHEDULE_DELAY"] = "10"
			tel, _ := setup(t, c.env)
			emit(tel, "span-"+name)
			rcv.WaitForName(t, "span-"+name)
			var paths []string
			for _, e := range rcv.Exports() {
				paths = append(paths, e.Path)
			}
			if paths[len(paths)-1] != c.path {
				t.Fatalf("export paths %v, want %s last", paths, c.path)
			}
		})
	}
}

// TestSampler: OTEL_TRACES_SAMPLER=always_off records and exports nothing;
// traceidratio with 0 neither; parentbased_traceidratio 0 follows a sampled
// parent.
func TestSampler(t *testing.T) {
	for _, sampler := range []string{"always_off", "traceidratio"} {
		t.Run(sampler, func(t *testing.T) {
			rcv := otlptest.NewReceiver(t)
			tel, _ := setup(t, rcv.Env(otlptest.HTTP, "OTEL_TRACES_SAMPLER="+sampler, "OTEL_TRACES_SAMPLER_ARG=0"))
			if !tel.Enabled() {
				t.Fatal("tracing is off")
			}
			for range 20 {
				_, span := tel.TracerProvider().Tracer("test").Start(context.Background(), "dropped")
				if span.IsRecording() || span.SpanContext().IsSampled() {
					t.Fatal("a span was sampled")
				}
				span.End()
			}
			// ForceFlush exports whatever ended, before it returns.
			if err := tel.ForceFlush(t.Context()); err != nil {
				t.Fatal(err)
			}
			if n := len(rcv.Spans()); n != 0 {
				t.Fatalf("%d spans exported", n)
			}
		})
	}
	t.Run("parentbased", func(t *testing.T) {
		rcv := otlptest.NewReceiver(t)
		tel, _ := setup(t, rcv.Env(otlptest.HTTP, "OTEL_TRACES_SAMPLER=parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG=0"))
		parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2},
			TraceFlags: trace.FlagsSampled, Remote: true})
		ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)
		_, span := tel.TracerProvider().Tracer("test").Start(ctx, "child")
		span.End()
		s := rcv.WaitForName(t, "child")
		if s.TraceID() != parent.TraceID().String() || s.ParentID() != parent.SpanID().String() {
			t.Fatalf("child %s parent %s", s.TraceID(), s.ParentID())
		}
	})
}

// TestUnreachableCollector: a collector that refuses connections or
// accepts them and never answers slows neither Setup nor span starts, and
// Shutdown returns within its bound, over both protocols.
func TestUnreachableCollector(t *testing.T) {
	const bound = 300 * time.Millisecond
	for _, proto := range []string{otlptest.HTTP, otlptest.GRPC} {
		for name, addr := range map[string]func(testing.TB) string{"refused": otlptest.ClosedPort, "silent": otlptest.Silent} {
			t.Run(proto+"/"+name, func(t *testing.T) {
				env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + addr(t), "OTEL_EXPORTER_OTLP_PROTOCOL": proto,
					"OTEL_BSP_SCHEDULE_DELAY": "1"}
				start := time.Now()
				tel, _ := setup(t, env, telemetry.WithShutdownTimeout(bound))
				if d := time.Since(start); d > time.Second {
					t.Fatalf("Setup took %v", d)
				}
				start = time.Now()
				// More than the queue holds: a full queue drops, it does
				// not block.
				for range 5000 {
					emit(tel, "lost")
				}
				if d := time.Since(start); d > 2*time.Second {
					t.Fatalf("5000 spans took %v", d)
				}
				start = time.Now()
				_ = tel.Shutdown(context.Background())
				if d := time.Since(start); d > bound+time.Second {
					t.Fatalf("Shutdown took %v, bound %v", d, bound)
				}
			})
		}
	}
}

// TestErrorsLoggedOnce: a collector that fails every export is logged
// through the injected logger once, not at every export.
func TestErrorsLoggedOnce(t *testing.T) {
	var posts atomic.Int32
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		http.Error(w, "no", http.StatusBadRequest) // not retried
	}))
	t.Cleanup(bad.Close)
	tel, logs := setup(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": bad.URL, "OTEL_BSP_SCHEDULE_DELAY": "1"})
	testwait.Until(t, "three failed exports", func() bool {
		emit(tel, "x")
		return posts.Load() >= 3
	})
	testwait.Until(t, "the error logged", func() bool { return strings.Contains(logs.String(), "OpenTelemetry error") })
	if n := strings.Count(logs.String(), "OpenTelemetry error"); n != 1 {
		t.Fatalf("%d error lines:\n%s", n, logs)
	}
}

// TestServerSpanAndTransport on real HTTP servers: a request with a
// traceparent and baggage gets a server span in the caller's trace, child
// of the caller's span, named by its route with the HTTP attributes; a
// call made with Transport under it carries the same trace (the server
// span as parent) and the baggage downstream; a 5xx marks the span failed.
func TestServerSpanAndTransport(t *testing.T) {
	rcv := otlptest.NewReceiver(t)
	tel, _ := setup(t, rcv.Env(otlptest.HTTP))
	downstream := make(chan http.Header, 1)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		downstream <- r.Header.Clone()
	}))
	t.Cleanup(down.Close)

	hs := telemetry.NewHTTPServer(tel.TracerProvider())
	client := telemetry.Client(nil)
	mux := http.NewServeMux()
	for _, pattern := range []string{"GET /items/{id}", "/"} {
		mux.Handle(pattern, hs.Middleware(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/fail" {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			req, _ := http.NewRequestWithContext(r.Context(), "GET", down.URL, nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			w.WriteHeader(http.StatusCreated)
		})))
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	const traceID, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, _ := http.NewRequest("GET", srv.URL+"/items/42", nil)
	req.Header.Set("traceparent", "00-"+traceID+"-"+callerSpan+"-01")
	req.Header.Set("tracestate", "vendor=x")
	req.Header.Set("baggage", "tenant=acme")
	req.Header.Set("User-Agent", "otel-test/1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	s := rcv.WaitForName(t, "GET /items/{id}")
	if s.TraceID() != traceID || s.ParentID() != callerSpan {
		t.Fatalf("server span in trace %s under %s, want %s under %s", s.TraceID(), s.ParentID(), traceID, callerSpan)
	}
	if s.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Fatalf("kind %v", s.GetKind())
	}
	for k, want := range map[string]string{"http.request.method": "GET", "url.path": "/items/42", "http.route": "/items/{id}",
		"server.address": "127.0.0.1", "user_agent.original": "otel-test/1", "url.scheme": "http"} {
		if got := s.StringAttr(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if s.IntAttr("http.response.status_code") != 201 || s.Has("error.type") {
		t.Errorf("status %d, error.type %q", s.IntAttr("http.response.status_code"), s.StringAttr("error.type"))
	}
	if s.GetTraceState() != "vendor=x" {
		t.Errorf("tracestate %q", s.GetTraceState())
	}
	h := testwait.Recv(t, downstream, "the downstream call")
	if want := "00-" + traceID + "-" + s.SpanID() + "-01"; h.Get("traceparent") != want {
		t.Fatalf("downstream traceparent %q, want %q", h.Get("traceparent"), want)
	}
	if h.Get("baggage") != "tenant=acme" || h.Get("tracestate") != "vendor=x" {
		t.Fatalf("downstream baggage %q tracestate %q", h.Get("baggage"), h.Get("tracestate"))
	}

	// A catch-all route: the span is named by the request's method; a 5xx
	// fails it. Without a traceparent it is a root span.
	resp, err = http.Post(srv.URL+"/fail", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	f := rcv.WaitForName(t, "POST /")
	if f.ParentID() != "" || f.StringAttr("error.type") != "502" || f.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Fatalf("failed span: parent %q error.type %q status %v", f.ParentID(), f.StringAttr("error.type"), f.GetStatus())
	}
}

// TestTransportWithoutSpan: a request whose context has no span goes out
// as it is: no headers added, the same request value.
func TestTransportWithoutSpan(t *testing.T) {
	otel.SetTextMapPropagator(telemetry.Propagators())
	var seen *http.Request
	rt := telemetry.Transport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		seen = r
		return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
	}))
	if telemetry.Transport(rt) != rt {
		t.Fatal("Transport wrapped itself twice")
	}
	req, _ := http.NewRequest("GET", "http://example.invalid/", nil)
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if seen != req || len(req.Header) != 0 {
		t.Fatalf("request copied or changed: %v", seen.Header)
	}
	// With a span: a copy carries it, the caller's request is untouched.
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{7}, SpanID: trace.SpanID{8}, TraceFlags: trace.FlagsSampled})
	req = req.WithContext(trace.ContextWithSpanContext(context.Background(), sc))
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if seen == req || len(req.Header) != 0 || !strings.Contains(seen.Header.Get("traceparent"), sc.TraceID().String()) {
		t.Fatalf("sent %v, caller's %v", seen.Header, req.Header)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestMeta: InjectMeta puts traceparent and tracestate in an MCP _meta
// (nothing without a span), and ExtractMeta reads them back.
func TestMeta(t *testing.T) {
	otel.SetTextMapPropagator(telemetry.Propagators())
	if m := telemetry.InjectMeta(context.Background(), nil); m != nil {
		t.Fatalf("meta %v without a span", m)
	}
	ts, _ := trace.ParseTraceState("k=v")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{7}, SpanID: trace.SpanID{8},
		TraceFlags: trace.FlagsSampled, TraceState: ts})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	m := telemetry.InjectMeta(ctx, map[string]any{"progressToken": 1})
	if m["traceparent"] != "00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-01" || m["tracestate"] != "k=v" || m["progressToken"] != 1 {
		t.Fatalf("meta %v", m)
	}
	back := trace.SpanContextFromContext(telemetry.ExtractMeta(context.Background(), m))
	if back.TraceID() != sc.TraceID() || back.SpanID() != sc.SpanID() || !back.IsRemote() {
		t.Fatalf("extracted %v", back)
	}
}

// TestHeadersAreSecrets: the exporter's header values (collector API keys)
// never reach a redacting log.
func TestHeadersAreSecrets(t *testing.T) {
	const key = "otel-key-7Hq2Wm9Zt4"
	rcv := otlptest.NewReceiver(t)
	b := &logBuffer{}
	logger := slog.New(redact.NewHandler(slog.NewTextHandler(b, nil), redact.New()))
	tel, err := telemetry.Setup(t.Context(), logger, otlptest.Getenv(rcv.Env(otlptest.HTTP, "OTEL_EXPORTER_OTLP_HEADERS=x-honeycomb-team="+key)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	logger.Info("collector said", "body", "bad key "+key)
	if strings.Contains(b.String(), key) {
		t.Fatalf("the header's value was logged:\n%s", b)
	}
	emit(tel, "work")
	if got := rcv.WaitForName(t, "work").Headers.Get("X-Honeycomb-Team"); got != key {
		t.Fatalf("header %q", got)
	}
}

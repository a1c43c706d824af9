// Package otlptest is a real OTLP trace receiver for tests: OTLP/HTTP
// (protobuf, POST /v1/traces or any path) and OTLP/gRPC (the collector's
// TraceService) on loopback listeners, collecting every span it is sent
// with its resource, scope and the headers of the export that carried it,
// plus helpers to wait for spans and check their attributes and parents.
package otlptest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/stackbone/stackbone/internal/telemetry"
	"github.com/stackbone/stackbone/internal/testwait"
)

// Protocols a span can arrive by (Span.Protocol, Export.Protocol).
const (
	HTTP = "http/protobuf"
	GRPC = "grpc"
)

// Receiver collects the spans exported to it. Build it with NewReceiver.
type Receiver struct {
	// HTTPEndpoint is the OTLP/HTTP base URL ("http://127.0.0.1:port"),
	// for OTEL_EXPORTER_OTLP_ENDPOINT; spans go to its /v1/traces.
	HTTPEndpoint string
	// GRPCEndpoint is the OTLP/gRPC URL ("http://127.0.0.1:port").
	GRPCEndpoint string

	mu      sync.Mutex
	spans   []Span
	exports []Export
}

// Export is one export request the receiver answered.
type Export struct {
	Protocol string
	// Path is the URL path of an OTLP/HTTP export ("" for gRPC).
	Path string
	// Headers are the request's HTTP headers or gRPC metadata (canonical
	// keys either way: Headers.Get works for both).
	Headers http.Header
	// Spans is how many spans it carried.
	Spans int
}

// Span is one received span with where it came from.
type Span struct {
	*tracepb.Span
	Resource *resourcepb.Resource
	Scope    *commonpb.InstrumentationScope
	Protocol string
	// Headers are those of the export that carried the span.
	Headers http.Header
}

// NewReceiver starts both listeners; they stop when the test ends.
func NewReceiver(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	hs := httptest.NewServer(http.HandlerFunc(r.serveHTTP))
	t.Cleanup(hs.Close)
	r.HTTPEndpoint = hs.URL

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("otlptest: listen: %v", err)
	}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, grpcService{r: r})
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(ln) }()
	t.Cleanup(func() { gs.Stop(); <-done })
	r.GRPCEndpoint = "http://" + ln.Addr().String()
	return r
}

// Env is the environment that points Setup at the receiver over protocol
// (HTTP or GRPC), exporting every 10 ms; more are name=value pairs added
// to it (overriding).
func (r *Receiver) Env(protocol string, more ...string) map[string]string {
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": r.HTTPEndpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
		"OTEL_BSP_SCHEDULE_DELAY": "10"}
	if protocol == GRPC {
		env["OTEL_EXPORTER_OTLP_ENDPOINT"] = r.GRPCEndpoint
	}
	for _, kv := range more {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

// Tracing sets up the process's tracing (telemetry.Setup) exporting to r
// over OTLP/HTTP every 10 ms, more as in Env, shut down when the test
// ends; pass its TracerProvider to what makes spans.
func (r *Receiver) Tracing(t testing.TB, more ...string) *telemetry.Telemetry {
	t.Helper()
	tel, err := telemetry.Setup(context.Background(), nil, Getenv(r.Env(HTTP, more...)))
	if err != nil {
		t.Fatalf("otlptest: set up tracing: %v", err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	return tel
}

// Getenv returns a getenv func reading env.
func Getenv(env map[string]string) func(string) string {
	return func(name string) string { return env[name] }
}

// Spans returns the spans received so far, in arrival order.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Exports returns the export requests received so far.
func (r *Receiver) Exports() []Export {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Export(nil), r.exports...)
}

// Find returns the first received span match accepts.
func (r *Receiver) Find(match func(Span) bool) (Span, bool) {
	for _, s := range r.Spans() {
		if match(s) {
			return s, true
		}
	}
	return Span{}, false
}

// WaitFor waits (testwait.Deadline at most, then fails t) for a span
// match accepts and returns it; what names it in the failure.
func (r *Receiver) WaitFor(t testing.TB, what string, match func(Span) bool) Span {
	t.Helper()
	var got Span
	testwait.Until(t, "span "+what+" (received: "+r.names()+")", func() bool {
		s, ok := r.Find(match)
		got = s
		return ok
	})
	return got
}

// WaitForName waits for a span called name.
func (r *Receiver) WaitForName(t testing.TB, name string) Span {
	t.Helper()
	return r.WaitFor(t, "named "+name, Named(name))
}

// Named matches spans called name.
func Named(name string) func(Span) bool {
	return func(s Span) bool { return s.GetName() == name }
}

func (r *Receiver) names() string {
	var names []string
	for _, s := range r.Spans() {
		names = append(names, s.GetName())
	}
	return strings.Join(names, ", ")
}

func (r *Receiver) add(e Export, req *coltracepb.ExportTraceServiceRequest) {
	var spans []Span
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				spans = append(spans, Span{Span: sp, Resource: rs.GetResource(), Scope: ss.GetScope(),
					Protocol: e.Protocol, Headers: e.Headers})
			}
		}
	}
	e.Spans = len(spans)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, spans...)
	r.exports = append(r.exports, e)
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "content type "+ct+" is not application/x-protobuf", http.StatusUnsupportedMediaType)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add(Export{Protocol: HTTP, Path: req.URL.Path, Headers: req.Header.Clone()}, &msg)
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

type grpcService struct {
	coltracepb.UnimplementedTraceServiceServer
	r *Receiver
}

// Export records a gRPC export.
func (g grpcService) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	h := http.Header{}
	md, _ := metadata.FromIncomingContext(ctx)
	for k, vs := range md {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	g.r.add(Export{Protocol: GRPC, Headers: h}, req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// TraceID is the span's trace id in hex (32 digits).
func (s Span) TraceID() string { return hex.EncodeToString(s.GetTraceId()) }

// SpanID is the span's id in hex (16 digits).
func (s Span) SpanID() string { return hex.EncodeToString(s.GetSpanId()) }

// ParentID is the span's parent span id in hex ("" for a root span).
func (s Span) ParentID() string { return hex.EncodeToString(s.GetParentSpanId()) }

// ChildOf reports whether s is a child of p: same trace, p's span id as
// its parent.
func (s Span) ChildOf(p Span) bool { return s.TraceID() == p.TraceID() && s.ParentID() == p.SpanID() }

// Attr returns the value of the span attribute key.
func (s Span) Attr(key string) (*commonpb.AnyValue, bool) { return lookup(s.GetAttributes(), key) }

// StringAttr returns the span attribute key as a string ("" when absent;
// numbers and booleans as the proto text of their value).
func (s Span) StringAttr(key string) string {
	v, _ := s.Attr(key)
	return text(v)
}

// IntAttr returns the integer span attribute key (0 when absent).
func (s Span) IntAttr(key string) int64 {
	v, _ := s.Attr(key)
	return v.GetIntValue()
}

// Has reports whether the span has the attribute key.
func (s Span) Has(key string) bool {
	_, ok := s.Attr(key)
	return ok
}

// ResourceString returns the resource attribute key as a string.
func (s Span) ResourceString(key string) string {
	v, _ := lookup(s.Resource.GetAttributes(), key)
	return text(v)
}

func lookup(kvs []*commonpb.KeyValue, key string) (*commonpb.AnyValue, bool) {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			return kv.GetValue(), true
		}
	}
	return nil, false
}

func text(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case nil:
		return ""
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	default:
		return strings.TrimSpace(v.String())
	}
}

// Silent returns the address ("127.0.0.1:port") of a listener that
// accepts connections and never answers on them: a collector that hangs.
func Silent(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("otlptest: listen: %v", err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// ClosedPort returns a loopback address nothing listens on (connections
// are refused).
func ClosedPort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("otlptest: listen: %v", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

package telemetry

import (
	"net"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of the spans this package makes.
const ScopeName = "github.com/stackbone/stackbone/internal/telemetry"

// HTTPServer makes the SERVER span of each request a route serves, as the
// HTTP semantic conventions describe it, parented on the trace context the
// caller sent (traceparent, tracestate, baggage; the global propagator).
// A nil *HTTPServer makes none.
type HTTPServer struct {
	tracer trace.Tracer
}

// NewHTTPServer returns the instrumentation for spans of tp, or nil when tp
// is nil or the no-op provider (tracing is off): callers check once, when
// they build their routes, and do no span work per request.
func NewHTTPServer(tp trace.TracerProvider) *HTTPServer {
	switch tp.(type) {
	case nil, noop.TracerProvider, *noop.TracerProvider:
		return nil
	}
	return &HTTPServer{tracer: tp.Tracer(ScopeName)}
}

// Route is the span maker of one ServeMux pattern.
type Route struct {
	tracer trace.Tracer
	method string // the pattern's method, "" for any
	path   string // http.route
	name   string // the span name when the pattern names a method
}

// Route returns the span maker of pattern, a ServeMux pattern such as
// "POST /v1/chat/completions" or "/" (nil when h is nil).
func (h *HTTPServer) Route(pattern string) *Route {
	if h == nil {
		return nil
	}
	rt := &Route{tracer: h.tracer}
	p := pattern
	if m, rest, ok := strings.Cut(pattern, " "); ok {
		rt.method, p = m, strings.TrimLeft(rest, " ")
	}
	if i := strings.IndexByte(p, '/'); i > 0 {
		p = p[i:] // drop a host
	}
	if trimmed := strings.TrimSuffix(p, "{$}"); trimmed != "" {
		p = trimmed
	}
	rt.path = p
	if rt.method != "" {
		rt.name = rt.method + " " + p
	}
	return rt
}

// ServerSpan is a request's server span; End it once the response is
// written. Its zero value does nothing.
type ServerSpan struct {
	span trace.Span
}

// knownMethods are the methods the conventions name; any other is _OTHER.
var knownMethods = map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "DELETE": true,
	"CONNECT": true, "OPTIONS": true, "TRACE": true, "PATCH": true, "QUERY": true}

// Start extracts the caller's trace context from r and starts the route's
// server span; it returns r with the span in its context (the parent of
// everything the request does) and the span to End. A nil route returns r
// as it is.
func (rt *Route) Start(r *http.Request) (*http.Request, ServerSpan) {
	if rt == nil {
		return r, ServerSpan{}
	}
	ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	method := r.Method
	attrs := make([]attribute.KeyValue, 0, 10)
	if !knownMethods[method] {
		attrs = append(attrs, semconv.HTTPRequestMethodOriginalKey.String(method))
		method = "_OTHER"
	}
	name := rt.name
	if name == "" || method != rt.method {
		name = method + " " + rt.path
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	attrs = append(attrs, semconv.HTTPRequestMethodKey.String(method), semconv.URLPathKey.String(r.URL.Path),
		semconv.URLSchemeKey.String(scheme), semconv.HTTPRouteKey.String(rt.path))
	host, port := r.Host, ""
	if h, p, err := net.SplitHostPort(r.Host); err == nil {
		host, port = h, p
	}
	if host != "" {
		attrs = append(attrs, semconv.ServerAddressKey.String(host))
	}
	if n, err := strconv.Atoi(port); err == nil {
		attrs = append(attrs, semconv.ServerPortKey.Int(n))
	}
	if ua := r.UserAgent(); ua != "" {
		attrs = append(attrs, semconv.UserAgentOriginalKey.String(ua))
	}
	if client, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		attrs = append(attrs, semconv.ClientAddressKey.String(client))
	}
	switch r.ProtoMajor {
	case 1:
		attrs = append(attrs, semconv.NetworkProtocolVersionKey.String("1."+strconv.Itoa(r.ProtoMinor)))
	case 2, 3:
		attrs = append(attrs, semconv.NetworkProtocolVersionKey.String(strconv.Itoa(r.ProtoMajor)))
	}
	ctx, span := rt.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	return r.WithContext(ctx), ServerSpan{span: span}
}

// End records the response's status (0 counts as 200) and ends the span;
// a 5xx marks it failed, with error.type the status code.
func (s ServerSpan) End(status int) {
	if s.span == nil {
		return
	}
	if status == 0 {
		status = http.StatusOK
	}
	if status < 500 {
		s.span.SetAttributes(semconv.HTTPResponseStatusCodeKey.Int(status))
	} else {
		code := strconv.Itoa(status)
		s.span.SetAttributes(semconv.HTTPResponseStatusCodeKey.Int(status), semconv.ErrorTypeKey.String(code))
		s.span.SetStatus(codes.Error, code)
	}
	s.span.End()
}

// Middleware serves next within the server span of pattern, recording the
// status next writes (next itself when h is nil).
func (h *HTTPServer) Middleware(pattern string, next http.Handler) http.Handler {
	rt := h.Route(pattern)
	if rt == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, span := rt.Start(r)
		sw := &statusWriter{ResponseWriter: w}
		defer func() { span.End(sw.status) }()
		next.ServeHTTP(sw, r)
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

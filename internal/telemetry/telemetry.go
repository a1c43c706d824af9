// Package telemetry is Stackbone's OpenTelemetry tracing outside the
// engine: the SDK set up from the standard OTEL_* environment (Setup), the
// HTTP server span every route starts with the caller's trace context
// extracted (HTTPServer), and the trace context carried on outgoing calls
// (Transport for HTTP clients, InjectMeta for MCP's _meta).
//
// With no OTLP endpoint configured (or OTEL_SDK_DISABLED=true) there is no
// exporter, the tracer provider is the no-op one and the HTTP middleware
// does no span work at all. With one, spans are batched and exported in the
// background: an unreachable collector never slows or fails a request, and
// its errors reach the injected logger at most once a minute.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/stackbone/stackbone/internal/redact"
)

// DefaultServiceName is the service.name of Stackbone's spans when neither
// OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES names one.
const DefaultServiceName = "stackbone"

// DefaultExportTimeout bounds one export to the collector, retries
// included, when OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT sets none.
const DefaultExportTimeout = 10 * time.Second

// DefaultShutdownTimeout bounds Shutdown's final flush (and ForceFlush)
// when the caller's context allows longer.
const DefaultShutdownTimeout = 5 * time.Second

// ErrorLogInterval is how often, at most, exporter and SDK errors are
// logged; the ones in between are counted in the next line.
const ErrorLogInterval = time.Minute

// Protocols of OTEL_EXPORTER_OTLP_PROTOCOL.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Telemetry is the process's tracing set-up. Its zero value is not usable;
// Setup builds it.
type Telemetry struct {
	tp       trace.TracerProvider
	sdk      *sdktrace.TracerProvider // nil when tracing is off
	prop     propagation.TextMapPropagator
	protocol string
	endpoint string
	timeout  time.Duration
	once     sync.Once
	shutErr  error
}

// Option adjusts Setup.
type Option func(*options)

type options struct {
	version         string
	shutdownTimeout time.Duration
	exporter        sdktrace.SpanExporter
}

// WithServiceVersion sets service.version on the resource (unless
// OTEL_RESOURCE_ATTRIBUTES sets it).
func WithServiceVersion(v string) Option { return func(o *options) { o.version = v } }

// WithShutdownTimeout replaces DefaultShutdownTimeout.
func WithShutdownTimeout(d time.Duration) Option {
	return func(o *options) { o.shutdownTimeout = d }
}

// WithExporter exports to e instead of the OTLP exporter the environment
// names, when the environment enables tracing (an endpoint is set and the
// SDK is not disabled): for benchmarks and tests.
func WithExporter(e sdktrace.SpanExporter) Option { return func(o *options) { o.exporter = e } }

// Setup builds the tracing the environment asks for; getenv reads it
// (os.Getenv when nil). It installs the W3C trace-context and baggage
// propagator as the global one (otel.SetTextMapPropagator, which Transport
// and the HTTP middleware use) and routes the SDK's errors to logger, rate
// limited. It leaves the global tracer provider alone: pass
// TracerProvider() to what makes spans (the process sets it global too).
//
// Honoured: OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER (otlp or none),
// OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (no
// endpoint: no exporter and the no-op provider), …_PROTOCOL
// (http/protobuf, the default, or grpc), …_HEADERS, …_TIMEOUT,
// …_COMPRESSION and …_INSECURE (each also as …_TRACES_…, which wins),
// OTEL_SERVICE_NAME (default "stackbone"), OTEL_RESOURCE_ATTRIBUTES,
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, and OTEL_BSP_*
// (schedule delay, export timeout, queue and batch sizes). TLS
// certificates (…_CERTIFICATE, …_CLIENT_*) are read by the exporter from
// the process environment itself. A value that does not parse is logged
// and its default used; an endpoint that does not parse turns tracing off.
// The headers' values and the endpoint's credentials become secrets of
// logger (internal/redact).
func Setup(ctx context.Context, logger *slog.Logger, getenv func(string) string, opts ...Option) (*Telemetry, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	o := options{shutdownTimeout: DefaultShutdownTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	env := envReader{getenv: getenv, logger: logger}
	t := &Telemetry{tp: noop.NewTracerProvider(), timeout: o.shutdownTimeout, prop: Propagators()}
	otel.SetTextMapPropagator(t.prop)
	errs := newErrorLog(logger, time.Now, ErrorLogInterval)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(errs.handle))
	// The SDK's own diagnostics (logr verbosity 1 and up) are below Info.
	otel.SetLogger(logr.FromSlogHandler(logger.Handler()))

	if strings.EqualFold(env.get("OTEL_SDK_DISABLED"), "true") {
		return t, nil
	}
	if !env.otlpExporter() {
		return t, nil
	}
	exp, err := t.exporter(ctx, env, logger, o.exporter)
	if err != nil || exp == nil {
		return t, err
	}
	res, err := env.resource(ctx, o.version)
	if err != nil {
		return nil, err
	}
	bsp := []sdktrace.BatchSpanProcessorOption{sdktrace.WithExportTimeout(env.millis("OTEL_BSP_EXPORT_TIMEOUT", env.exportTimeout()))}
	if d := env.millis("OTEL_BSP_SCHEDULE_DELAY", 0); d > 0 {
		bsp = append(bsp, sdktrace.WithBatchTimeout(d))
	}
	if n := env.int("OTEL_BSP_MAX_QUEUE_SIZE"); n > 0 {
		bsp = append(bsp, sdktrace.WithMaxQueueSize(n))
	}
	if n := env.int("OTEL_BSP_MAX_EXPORT_BATCH_SIZE"); n > 0 {
		bsp = append(bsp, sdktrace.WithMaxExportBatchSize(n))
	}
	t.sdk = sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSampler(env.sampler()),
		sdktrace.WithBatcher(exp, bsp...))
	t.tp = t.sdk
	logger.Info("tracing: exporting spans over OTLP", "protocol", t.protocol, "endpoint", redactURL(t.endpoint))
	return t, nil
}

// Enabled reports whether spans are recorded and exported; when false the
// tracer provider is the no-op one.
func (t *Telemetry) Enabled() bool { return t != nil && t.sdk != nil }

// TracerProvider is the provider of the process's spans (the no-op one when
// tracing is off).
func (t *Telemetry) TracerProvider() trace.TracerProvider {
	if t == nil {
		return noop.NewTracerProvider()
	}
	return t.tp
}

// Propagator is the W3C trace-context and baggage propagator Setup made
// global.
func (t *Telemetry) Propagator() propagation.TextMapPropagator {
	if t == nil {
		return Propagators()
	}
	return t.prop
}

// Propagators is the W3C trace-context (traceparent, tracestate) and
// baggage propagator.
func Propagators() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// Protocol is the OTLP protocol spans are exported with ("" when off).
func (t *Telemetry) Protocol() string { return t.protocol }

// ForceFlush exports the spans that ended and were not exported yet,
// within ctx and the shutdown bound.
func (t *Telemetry) ForceFlush(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	return t.sdk.ForceFlush(ctx)
}

// Shutdown flushes the spans not yet exported and stops the exporter,
// within ctx and the shutdown bound (DefaultShutdownTimeout): a collector
// that does not answer costs at most that. Later calls return the first
// call's result.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	t.once.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, t.timeout)
		defer cancel()
		t.shutErr = t.sdk.Shutdown(ctx)
	})
	return t.shutErr
}

// exporter builds the OTLP exporter of env (nil when the endpoint is
// unusable, which env logged), or returns override.
func (t *Telemetry) exporter(ctx context.Context, env envReader, logger *slog.Logger, override sdktrace.SpanExporter) (sdktrace.SpanExporter, error) {
	t.protocol = ProtocolHTTP
	switch p := strings.ToLower(env.signal("PROTOCOL")); p {
	case "", ProtocolHTTP:
	case ProtocolGRPC:
		t.protocol = ProtocolGRPC
	default:
		logger.Warn("tracing: unsupported OTEL_EXPORTER_OTLP_PROTOCOL, using http/protobuf", "protocol", p)
	}
	endpoint, ok := env.endpoint(t.protocol)
	if !ok {
		return nil, nil
	}
	t.endpoint = endpoint
	redact.AddSecrets(logger, redact.URLSecrets(endpoint)...)
	if override != nil {
		return override, nil
	}
	headers := env.headers()
	for _, v := range headers {
		redact.AddSecrets(logger, v)
	}
	timeout := env.exportTimeout()
	gzip := strings.EqualFold(env.signal("COMPRESSION"), "gzip")
	var client otlptrace.Client
	if t.protocol == ProtocolGRPC {
		o := []otlptracegrpc.Option{otlptracegrpc.WithTimeout(timeout), otlptracegrpc.WithHeaders(headers),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: time.Second,
				MaxInterval: 5 * time.Second, MaxElapsedTime: timeout})}
		if strings.Contains(endpoint, "://") {
			o = append(o, otlptracegrpc.WithEndpointURL(endpoint))
		} else {
			o = append(o, otlptracegrpc.WithEndpoint(endpoint))
			if env.insecure() {
				o = append(o, otlptracegrpc.WithInsecure())
			}
		}
		if gzip {
			o = append(o, otlptracegrpc.WithCompressor("gzip"))
		}
		client = otlptracegrpc.NewClient(o...)
	} else {
		o := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(endpoint), otlptracehttp.WithTimeout(timeout),
			otlptracehttp.WithHeaders(headers),
			otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: time.Second,
				MaxInterval: 5 * time.Second, MaxElapsedTime: timeout})}
		if gzip {
			o = append(o, otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
		} else {
			o = append(o, otlptracehttp.WithCompression(otlptracehttp.NoCompression))
		}
		client = otlptracehttp.NewClient(o...)
	}
	// New starts the client: gRPC dials lazily, HTTP not at all, so an
	// unreachable collector does not fail or delay the start.
	exp, err := otlptrace.New(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("tracing: start the OTLP exporter: %w", err)
	}
	return exp, nil
}

// redactURL is u without its userinfo and query, for the log.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || !strings.Contains(u, "://") {
		return u
	}
	p.User, p.RawQuery = nil, ""
	return p.String()
}

// envReader reads the OTEL_* environment, logging values it cannot use.
type envReader struct {
	getenv func(string) string
	logger *slog.Logger
}

func (e envReader) get(name string) string { return strings.TrimSpace(e.getenv(name)) }

// signal is OTEL_EXPORTER_OTLP_TRACES_name, else OTEL_EXPORTER_OTLP_name.
func (e envReader) signal(name string) string {
	if v := e.get("OTEL_EXPORTER_OTLP_TRACES_" + name); v != "" {
		return v
	}
	return e.get("OTEL_EXPORTER_OTLP_" + name)
}

// otlpExporter reports whether OTEL_TRACES_EXPORTER asks for OTLP (the
// default) rather than none.
func (e envReader) otlpExporter() bool {
	v := e.get("OTEL_TRACES_EXPORTER")
	if v == "" {
		return true
	}
	otlp := false
	for _, name := range strings.Split(v, ",") {
		switch name = strings.ToLower(strings.TrimSpace(name)); name {
		case "otlp":
			otlp = true
		case "none", "":
		default:
			e.logger.Warn("tracing: unsupported OTEL_TRACES_EXPORTER entry ignored", "exporter", name)
		}
	}
	return otlp
}

// endpoint is the URL (for gRPC, possibly host:port) spans go to: the
// traces endpoint as given, or the base endpoint with /v1/traces for
// OTLP/HTTP. ok is false when none is set or it does not parse.
func (e envReader) endpoint(protocol string) (string, bool) {
	name := "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	v := e.get(name)
	if v == "" {
		name = "OTEL_EXPORTER_OTLP_ENDPOINT"
		v = e.get(name)
	}
	if v == "" {
		return "", false
	}
	if !strings.Contains(v, "://") {
		if protocol == ProtocolGRPC {
			return v, true // host:port
		}
		e.logger.Warn("tracing: "+name+" is not a URL (http://host:port): tracing is off", "value", redactURL(v))
		return "", false
	}
	u, err := url.Parse(v)
	if err != nil || u.Host == "" {
		e.logger.Warn("tracing: "+name+" does not parse: tracing is off", "err", err)
		return "", false
	}
	if protocol == ProtocolHTTP {
		switch {
		case name == "OTEL_EXPORTER_OTLP_ENDPOINT":
			u.Path = path.Join("/", u.Path, "v1/traces")
		case u.Path == "":
			u.Path = "/"
		}
	}
	return u.String(), true
}

// headers parses …_HEADERS ("k=v,k2=v2", values percent-decoded).
func (e envReader) headers() map[string]string {
	out := map[string]string{}
	for _, kv := range e.keyValues("OTEL_EXPORTER_OTLP_HEADERS", e.signal("HEADERS")) {
		out[kv[0]] = kv[1]
	}
	return out
}

// keyValues parses a list of the OpenTelemetry environment ("k=v,k2=v2",
// values percent-decoded and trimmed); an entry without a key is logged
// (as of name) and skipped.
func (e envReader) keyValues(name, list string) [][2]string {
	var out [][2]string
	for _, kv := range strings.Split(list, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			e.logger.Warn("tracing: " + name + " entry without key=value ignored")
			continue
		}
		if dec, err := url.PathUnescape(strings.TrimSpace(v)); err == nil {
			v = dec
		}
		out = append(out, [2]string{k, strings.TrimSpace(v)})
	}
	return out
}

func (e envReader) insecure() bool { return strings.EqualFold(e.signal("INSECURE"), "true") }

// exportTimeout is …_TIMEOUT (milliseconds) or DefaultExportTimeout.
func (e envReader) exportTimeout() time.Duration {
	if v := e.signal("TIMEOUT"); v != "" {
		if ms, err := strconv.Atoi(v); err == nil && ms > 0 {
			return time.Duration(ms) * time.Millisecond
		}
		e.logger.Warn("tracing: OTEL_EXPORTER_OTLP_TIMEOUT is not a positive number of milliseconds", "value", v)
	}
	return DefaultExportTimeout
}

// millis is the variable name in milliseconds, or def.
func (e envReader) millis(name string, def time.Duration) time.Duration {
	if v := e.get(name); v != "" {
		if ms, err := strconv.Atoi(v); err == nil && ms > 0 {
			return time.Duration(ms) * time.Millisecond
		}
		e.logger.Warn("tracing: "+name+" is not a positive number of milliseconds", "value", v)
	}
	return def
}

// int is the variable name as a positive integer, or 0.
func (e envReader) int(name string) int {
	if v := e.get(name); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return n
		}
		e.logger.Warn("tracing: "+name+" is not a positive integer", "value", v)
	}
	return 0
}

// sampler is OTEL_TRACES_SAMPLER(_ARG)'s sampler, parent-based always-on
// by default.
func (e envReader) sampler() sdktrace.Sampler {
	def := sdktrace.ParentBased(sdktrace.AlwaysSample())
	name := strings.ToLower(e.get("OTEL_TRACES_SAMPLER"))
	arg := e.get("OTEL_TRACES_SAMPLER_ARG")
	ratio := func() sdktrace.Sampler {
		if arg == "" {
			return sdktrace.TraceIDRatioBased(1)
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			e.logger.Warn("tracing: OTEL_TRACES_SAMPLER_ARG is not a ratio between 0 and 1, using 1", "value", arg)
			r = 1
		}
		return sdktrace.TraceIDRatioBased(r)
	}
	switch name {
	case "", "parentbased_always_on":
		return def
	case "always_on":
		return sdktrace.AlwaysSample()
	case "always_off":
		return sdktrace.NeverSample()
	case "traceidratio":
		return ratio()
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(ratio())
	default:
		e.logger.Warn("tracing: unsupported OTEL_TRACES_SAMPLER, using parentbased_always_on", "sampler", name)
		return def
	}
}

// resource is the SDK's attributes, then OTEL_RESOURCE_ATTRIBUTES, then
// service.name: OTEL_SERVICE_NAME, else the attributes' one, else
// DefaultServiceName; version is service.version unless the attributes
// set one.
func (e envReader) resource(ctx context.Context, version string) (*resource.Resource, error) {
	var attrs []attribute.KeyValue
	named, versioned := false, false
	for _, kv := range e.keyValues("OTEL_RESOURCE_ATTRIBUTES", e.get("OTEL_RESOURCE_ATTRIBUTES")) {
		k, v := kv[0], kv[1]
		named = named || k == string(semconv.ServiceNameKey)
		versioned = versioned || k == string(semconv.ServiceVersionKey)
		attrs = append(attrs, attribute.String(k, v))
	}
	if name := e.get("OTEL_SERVICE_NAME"); name != "" {
		attrs = append(attrs, semconv.ServiceName(name))
	} else if !named {
		attrs = append(attrs, semconv.ServiceName(DefaultServiceName))
	}
	if version != "" && !versioned {
		attrs = append(attrs, semconv.ServiceVersion(version))
	}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithAttributes(attrs...))
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	return res, nil
}

// errorLog logs the SDK's errors, at most one line per interval; the line
// after a quiet spell counts the errors it left out.
type errorLog struct {
	logger *slog.Logger
	now    func() time.Time
	every  time.Duration

	mu      sync.Mutex
	next    time.Time
	dropped int
}

func newErrorLog(logger *slog.Logger, now func() time.Time, every time.Duration) *errorLog {
	return &errorLog{logger: logger, now: now, every: every}
}

func (l *errorLog) handle(err error) {
	l.mu.Lock()
	now := l.now()
	if now.Before(l.next) {
		l.dropped++
		l.mu.Unlock()
		return
	}
	dropped := l.dropped
	l.dropped, l.next = 0, now.Add(l.every)
	l.mu.Unlock()
	args := []any{"err", err}
	if dropped > 0 {
		args = append(args, "suppressed", dropped)
	}
	l.logger.Warn("tracing: OpenTelemetry error (spans may be dropped; requests are unaffected)", args...)
}

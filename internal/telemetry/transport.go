package telemetry

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// Transport wraps base (http.DefaultTransport when nil) so that every
// request carries the trace context of its own context (traceparent,
// tracestate, baggage; the global propagator Setup installs). A request
// whose context holds no span and no baggage goes out untouched, without
// a copy; one that has is cloned before its headers change, as a
// RoundTripper must. It makes no client spans: the span in the context
// (the engine's chat or execute_tool span, a webhook delivery's) is the
// parent the downstream sees.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if _, ok := base.(*transport); ok {
		return base
	}
	return &transport{base: base}
}

// Client returns a copy of c (a new client when nil) whose transport is
// wrapped with Transport.
func Client(c *http.Client) *http.Client {
	out := &http.Client{}
	if c != nil {
		cp := *c
		out = &cp
	}
	out.Transport = Transport(out.Transport)
	return out
}

type transport struct {
	base http.RoundTripper
}

// RoundTrip injects the context's trace context and sends the request.
func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	c := lazyCarrier{r: r}
	otel.GetTextMapPropagator().Inject(r.Context(), &c)
	return t.base.RoundTrip(c.r)
}

// CloseIdleConnections closes the wrapped transport's idle connections
// (http.Client.CloseIdleConnections reaches it through the wrapper).
func (t *transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Unwrap returns the wrapped transport.
func (t *transport) Unwrap() http.RoundTripper { return t.base }

// lazyCarrier writes into a clone of its request, made on the first Set.
type lazyCarrier struct {
	r      *http.Request
	cloned bool
}

func (c *lazyCarrier) Get(key string) string { return c.r.Header.Get(key) }

func (c *lazyCarrier) Set(key, value string) {
	if !c.cloned {
		c.r = c.r.Clone(c.r.Context())
		c.cloned = true
	}
	c.r.Header.Set(key, value)
}

func (c *lazyCarrier) Keys() []string { return propagation.HeaderCarrier(c.r.Header).Keys() }

// InjectMeta adds the trace context of ctx to an MCP request's _meta
// (traceparent, tracestate, baggage, as MCP 2026-07-28 carries them) and
// returns it: meta itself, or a new map when meta is nil and there is
// something to add.
func InjectMeta(ctx context.Context, meta map[string]any) map[string]any {
	c := metaCarrier{m: meta}
	otel.GetTextMapPropagator().Inject(ctx, &c)
	return c.m
}

// ExtractMeta returns ctx with the trace context an MCP request's _meta
// carries (the counterpart of InjectMeta, for a server of MCP calls).
func ExtractMeta(ctx context.Context, meta map[string]any) context.Context {
	if len(meta) == 0 {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, &metaCarrier{m: meta})
}

type metaCarrier struct {
	m map[string]any
}

func (c *metaCarrier) Get(key string) string {
	s, _ := c.m[key].(string)
	return s
}

func (c *metaCarrier) Set(key, value string) {
	if c.m == nil {
		c.m = map[string]any{}
	}
	c.m[key] = value
}

func (c *metaCarrier) Keys() []string {
	keys := make([]string, 0, len(c.m))
	for k := range c.m {
		keys = append(keys, k)
	}
	return keys
}

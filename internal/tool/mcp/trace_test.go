package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/telemetry"
	"github.com/stackbone/stackbone/internal/tool"
)

// TestCallCarriesTraceContext: a tools/call made under a span carries its
// trace context twice: in the HTTP request's traceparent header and in
// the request's _meta (traceparent, tracestate), as MCP 2026-07-28 says.
func TestCallCarriesTraceContext(t *testing.T) {
	otel.SetTextMapPropagator(telemetry.Propagators())
	var mu sync.Mutex
	var meta map[string]any
	var headers []string
	srv := sdk.NewServer(&sdk.Implementation{Name: "fx", Version: "1"}, nil)
	srv.AddTool(&sdk.Tool{Name: "lookup", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			mu.Lock()
			meta = req.Params.Meta
			mu.Unlock()
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ok"}}}, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		headers = append(headers, r.Header.Get("traceparent"))
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)

	spec := &agent.Spec{Name: "a", MCPServers: []agent.MCPServer{{Name: "fx", URL: hs.URL, Approval: agent.MCPApproval{Mode: agent.MCPApprovalNever}}}}
	if err := Start(t.Context(), []*agent.Spec{spec}, Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(spec.Close)
	lookup := spec.Tool("fx_lookup")
	if lookup == nil {
		t.Fatal("no fx_lookup tool")
	}
	ts, _ := trace.ParseTraceState("sb=1")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xab, 1}, SpanID: trace.SpanID{0xcd, 2},
		TraceFlags: trace.FlagsSampled, TraceState: ts})
	res, err := lookup.Execute(trace.ContextWithSpanContext(t.Context(), sc), tool.Call{ToolCallID: "call_1"})
	if err != nil || res.Content != "ok" {
		t.Fatalf("call: %v %+v", err, res)
	}
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	mu.Lock()
	defer mu.Unlock()
	if meta["traceparent"] != want || meta["tracestate"] != "sb=1" {
		t.Fatalf("_meta %v, want traceparent %s", meta, want)
	}
	found := false
	for _, h := range headers {
		found = found || h == want
	}
	if !found {
		t.Fatalf("no request carried traceparent %s: %q", want, headers)
	}
}

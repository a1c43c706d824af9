package tsload

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/stackbone/stackbone/internal/telemetry"
	"github.com/stackbone/stackbone/internal/tool"
)

// TestFetchCarriesTraceContext: with the host's client wrapped by
// telemetry.Transport (as the app does), a tool's ctx.fetch carries the
// trace context of the call it runs under (the engine's execute_tool span).
func TestFetchCarriesTraceContext(t *testing.T) {
	otel.SetTextMapPropagator(telemetry.Propagators())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Header.Get("traceparent"))
	}))
	defer srv.Close()
	s := loadOne(t, map[string]string{"agents/fetcher.ts": fetchAgent}, Options{HTTPClient: telemetry.Client(srv.Client())})
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9, 9}, SpanID: trace.SpanID{3, 3}, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	res, err := mustTool(t, s, "missing").Execute(ctx, tool.Call{ToolCallID: "call_1", Args: json.RawMessage(`{}`),
		State: json.RawMessage(`{"base":"` + srv.URL + `"}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	if !strings.Contains(res.Content, `"text":"`+want+`"`) {
		t.Fatalf("result %s, want the traceparent %s", res.Content, want)
	}
}

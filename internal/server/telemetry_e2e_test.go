package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/telemetry/otlptest"
)

// TestTraceparentReachesTheModel on the whole stack, traced into a real
// OTLP receiver: a chat completion sent with a traceparent gets a server
// span in the caller's trace, child of the caller's span, named by its
// route; the model upstream is called in that same trace, under a span of
// it; and the routes outside the turn handler (/metrics) are traced too.
func TestTraceparentReachesTheModel(t *testing.T) {
	t.Parallel()
	rcv := otlptest.NewReceiver(t)
	tel := rcv.Tracing(t)
	env := stacktest.New(t, stacktest.Options{Configure: func(c *config.Config) { c.Tracer = tel.TracerProvider() }})

	const traceID, caller = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	req, _ := http.NewRequest("POST", env.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"assistant","messages":[{"role":"user","content":"hello"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+caller+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "echo: hello") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}

	s := rcv.WaitForName(t, "POST /v1/chat/completions")
	if s.TraceID() != traceID || s.ParentID() != caller || s.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Fatalf("server span in %s under %s (kind %v), want %s under %s", s.TraceID(), s.ParentID(), s.GetKind(), traceID, caller)
	}
	if s.StringAttr("http.route") != "/v1/chat/completions" || s.IntAttr("http.response.status_code") != 200 ||
		s.ResourceString("service.name") != "stackbone" {
		t.Fatalf("route %q status %d service %q", s.StringAttr("http.route"), s.IntAttr("http.response.status_code"),
			s.ResourceString("service.name"))
	}

	reqs := env.Upstream.Requests()
	if len(reqs) == 0 {
		t.Fatal("the model was not called")
	}
	tp := reqs[len(reqs)-1].Header.Get("traceparent")
	parts := strings.Split(tp, "-")
	if len(parts) != 4 || parts[1] != traceID {
		t.Fatalf("the model upstream got traceparent %q, want trace %s", tp, traceID)
	}
	// Its parent is a span of the trace: the server span, or one of the
	// engine's under it.
	rcv.WaitFor(t, "the model call's parent "+parts[2], func(sp otlptest.Span) bool {
		return sp.TraceID() == traceID && sp.SpanID() == parts[2]
	})

	resp, err = http.Get(env.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if m := rcv.WaitForName(t, "GET /metrics"); m.ParentID() != "" || m.IntAttr("http.response.status_code") != 200 {
		t.Fatalf("metrics span: parent %q status %d", m.ParentID(), m.IntAttr("http.response.status_code"))
	}
}

package cli_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/app"
	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/telemetry/otlptest"
)

// TestTracingFromEnv runs `stackbone dev` with the OTEL_* environment
// pointing at a real OTLP receiver, and spans batched for ten minutes: a
// stateless turn sent with a traceparent carries that trace to the model
// upstream and to the tool's ctx.fetch, and the server span (service.name
// from OTEL_SERVICE_NAME, service.version the build's) reaches the receiver
// only through the flush at SIGTERM.
func TestTracingFromEnv(t *testing.T) {
	t.Parallel()
	rcv := otlptest.NewReceiver(t)
	fetched := make(chan string, 1)
	side := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case fetched <- r.Header.Get("traceparent"):
		default:
		}
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer side.Close()
	mock := modeltest.Handler(modeltest.OpenAI, script.MustParse(`[
	 {"when":{"lastTool":"refund"},"reply":{"text":"Refunded."}},
	 {"when":{"lastUser":"refund"},"reply":{"toolCalls":[{"name":"refund","arguments":{"orderId":"o1","amount":5}}]}},
	 {"reply":{"text":"echo: {{lastUser}}"}}
	]`))
	up := httptest.NewServer(mock)
	defer up.Close()
	env := []string{"OPENAI_BASE_URL=" + up.URL + "/v1", "OPENAI_API_KEY=sk-test",
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.HTTPEndpoint, "OTEL_SERVICE_NAME=shop-dev", "OTEL_BSP_SCHEDULE_DELAY=600000"}
	p := startServer(t, env, "dev", "--dir", shopDir(t, side.URL), "--addr", "127.0.0.1:0")

	const traceID, caller = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"
	req, _ := http.NewRequest("POST", p.URL()+"/v1/chat/completions",
		strings.NewReader(`{"model":"shop","messages":[{"role":"user","content":"refund order o1"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+caller+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "Refunded.") {
		t.Fatalf("turn: %d %s", resp.StatusCode, b)
	}
	inTrace := func(what, tp string) {
		t.Helper()
		if parts := strings.Split(tp, "-"); len(parts) != 4 || parts[1] != traceID {
			t.Fatalf("%s got traceparent %q, want trace %s", what, tp, traceID)
		}
	}
	for _, r := range mock.Requests() {
		inTrace("the model upstream", r.Header.Get("traceparent"))
	}
	select {
	case tp := <-fetched:
		inTrace("the tool's ctx.fetch", tp)
	default:
		t.Fatal("the tool did not fetch")
	}
	if n := len(rcv.Spans()); n != 0 {
		t.Fatalf("%d spans exported before the batch delay", n)
	}

	if code, _ := p.stop(t, 20*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	s, ok := rcv.Find(otlptest.Named("POST /v1/chat/completions"))
	if !ok {
		t.Fatalf("no server span after the stop; received %d spans\n%s", len(rcv.Spans()), p.Logs.String())
	}
	if s.TraceID() != traceID || s.ParentID() != caller || s.ResourceString("service.name") != "shop-dev" ||
		s.ResourceString("service.version") != app.Version {
		t.Fatalf("span trace %s parent %s service %q version %q", s.TraceID(), s.ParentID(),
			s.ResourceString("service.name"), s.ResourceString("service.version"))
	}
}

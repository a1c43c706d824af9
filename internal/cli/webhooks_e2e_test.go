package cli_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/store"
)

const webhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// hookReceiver is the operator's webhook endpoint: it verifies every
// request with the Standard Webhooks library and, while down, answers 503.
type hookReceiver struct {
	*httptest.Server
	t        *testing.T
	down     atomic.Bool
	mu       sync.Mutex
	attempts map[string]int
	received map[string][]hookMessage // 2xx-answered deliveries per webhook-id
}

type hookMessage struct {
	Type string `json:"type"`
	Data struct {
		Tenant, Agent, ThreadID, RunID, DecisionID, Tool, StudioURL string
		Args                                                        json.RawMessage
		Decision                                                    *store.Decision
	} `json:"data"`
}

func newHookReceiver(t *testing.T) *hookReceiver {
	wh, err := standardwebhooks.NewWebhook(webhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	h := &hookReceiver{t: t, attempts: map[string]int{}, received: map[string][]hookMessage{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := wh.Verify(body, r.Header); err != nil {
			t.Errorf("a delivery does not verify: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		id := r.Header.Get("webhook-id")
		h.mu.Lock()
		defer h.mu.Unlock()
		h.attempts[id]++
		if h.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var m hookMessage
		if err := json.Unmarshal(body, &m); err != nil {
			t.Errorf("delivery %s: %v: %s", id, err, body)
		}
		h.received[id] = append(h.received[id], m)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.Close)
	return h
}

// types lists the received messages' types, sorted.
func (h *hookReceiver) types() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, ms := range h.received {
		for _, m := range ms {
			out = append(out, m.Type)
		}
	}
	slices.Sort(out)
	return out
}

type deliveryPage struct {
	Data []struct {
		ID         string `json:"id"`
		Type       string `json:"type"`
		Status     string `json:"status"`
		Attempts   int    `json:"attempts"`
		LastStatus int    `json:"lastStatus"`
		Endpoint   string `json:"endpoint"`
	} `json:"data"`
	Endpoints []string `json:"endpoints"`
}

// TestWebhooksSurviveDowntimeAndRestart: an operator's endpoint is down
// while decisions are asked and made; Stackbone is killed (SIGKILL) and
// started again; then the endpoint is up. Every fact is delivered, once per
// webhook-id, signed so that the Standard Webhooks library verifies it:
// two decision.pending, a decision.decided, a decision.expired (expired by
// the restarted server) and the two runs' run.completed.
func TestWebhooksSurviveDowntimeAndRestart(t *testing.T) {
	t.Parallel()
	for _, st := range []struct {
		name string
		env  func(t *testing.T) []string
	}{
		{"sqlite", func(t *testing.T) []string { return nil }},
		{"postgres", func(t *testing.T) []string { return []string{"STACKBONE_DB=" + postgresURL(t)} }},
	} {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			testWebhooksRestart(t, st.env(t))
		})
	}
}

func testWebhooksRestart(t *testing.T, dbEnv []string) {
	led := newLedger(t)
	led.free()
	sc := script.MustParse(`[
	 {"when":{"lastTool":"refund"},"reply":{"text":"Finished: {{lastTool}}"}},
	 {"when":{"lastUser":"refund order o1"},"reply":{"toolCalls":[{"name":"refund","arguments":{"orderId":"o1"}}]}},
	 {"when":{"lastUser":"refund order o2"},"reply":{"toolCalls":[{"name":"refund","arguments":{"orderId":"o2"}}]}},
	 {"reply":{"text":"echo: {{lastUser}}"}}
	]`)
	up := httptest.NewServer(modeltest.Handler(modeltest.OpenAI, sc))
	defer up.Close()
	hook := newHookReceiver(t)
	hook.down.Store(true)

	const key = "acme-secret-key"
	dir := ledgerDir(t, led.URL)
	env := append([]string{"OPENAI_BASE_URL=" + up.URL + "/v1", "OPENAI_API_KEY=sk-test", "STACKBONE_API_KEYS=acme:" + key,
		"STACKBONE_WEBHOOK_URL=" + hook.URL + "/hooks?token=t0ps3cret", "STACKBONE_WEBHOOK_SECRET=" + webhookSecret,
		"STACKBONE_PUBLIC_URL=https://agents.example.com", "STACKBONE_APPROVAL_TTL=12s"}, dbEnv...)
	args := []string{"start", "--dir", dir, "--addr", "127.0.0.1:0"}
	cliEnv := []string{"STACKBONE_API_KEY=" + key}

	a := startServer(t, env, args...)
	if code, body := post(t, a.URL(), key, "s1", "refund order o1"); code != 200 {
		t.Fatalf("turn: %d %s", code, body)
	}
	var page struct {
		Data []store.Interrupt `json:"data"`
	}
	authed(t, "GET", a.URL()+"/v1/hitl", key, nil, &page)
	if len(page.Data) != 1 {
		t.Fatalf("pending: %+v", page.Data)
	}
	if r := run(t, cliEnv, "hitl", "approve", page.Data[0].ID, "--yes", "--url", a.URL()); r.code != 0 {
		t.Fatalf("approve: %s", r.stderr)
	}
	waitUntil(t, "the approved turn to finish", 20*time.Second, func() bool {
		var th struct{ Status string }
		authed(t, "GET", a.URL()+"/v1/threads/s1", key, nil, &th)
		return th.Status == "idle"
	})
	if code, body := post(t, a.URL(), key, "s2", "refund order o2"); code != 200 {
		t.Fatalf("turn: %d %s", code, body)
	}
	// Four facts so far, each attempted once against the endpoint that is
	// down (503), and listed with their status.
	var dp deliveryPage
	waitUntil(t, "four failed first attempts", 20*time.Second, func() bool {
		authed(t, "GET", a.URL()+"/v1/webhooks/deliveries", key, nil, &dp)
		if len(dp.Data) != 4 {
			return false
		}
		for _, d := range dp.Data {
			if d.Status != "pending" || d.Attempts < 1 || d.LastStatus != 503 {
				return false
			}
		}
		return true
	})
	if len(dp.Endpoints) != 1 || strings.Contains(dp.Endpoints[0], "t0ps3cret") || strings.Contains(dp.Data[0].Endpoint, "t0ps3cret") {
		t.Fatalf("the endpoint's token is shown: %+v", dp)
	}
	if got := hook.types(); len(got) != 0 {
		t.Fatalf("received while down: %v", got)
	}
	a.Kill(t)
	hook.down.Store(false)

	b := startServer(t, env, args...)
	want := []string{"decision.decided", "decision.expired", "decision.pending", "decision.pending", "run.completed", "run.completed"}
	waitUntil(t, "every fact delivered", 40*time.Second, func() bool { return slices.Equal(hook.types(), want) })
	time.Sleep(300 * time.Millisecond) // nothing more arrives
	if got := hook.types(); !slices.Equal(got, want) {
		t.Fatalf("received %v, want %v", got, want)
	}
	hook.mu.Lock()
	for id, ms := range hook.received {
		if len(ms) != 1 {
			t.Errorf("webhook-id %s received %d times", id, len(ms))
		}
		d := ms[0].Data
		if d.Tenant != "acme" || d.Agent != "shop" || d.RunID == "" || !strings.HasPrefix(d.StudioURL, "https://agents.example.com/studio/#/threads/s") {
			t.Errorf("%s: %+v", ms[0].Type, d)
		}
		if strings.HasPrefix(ms[0].Type, "decision.") && (d.Tool != "refund" || d.DecisionID == "" || !strings.Contains(string(d.Args), `"orderId"`)) {
			t.Errorf("%s: %+v", ms[0].Type, d)
		}
		if ms[0].Type == "decision.expired" && (d.Decision == nil || d.Decision.Via != store.ViaExpiry || d.ThreadID != "s2") {
			t.Errorf("expired: %+v", d)
		}
		if ms[0].Type == "decision.decided" && (d.Decision == nil || !d.Decision.Approved || d.ThreadID != "s1") {
			t.Errorf("decided: %+v", d)
		}
	}
	hook.mu.Unlock()
	waitUntil(t, "the deliveries listed as delivered", 10*time.Second, func() bool {
		authed(t, "GET", b.URL()+"/v1/webhooks/deliveries", key, nil, &dp)
		if len(dp.Data) != 6 {
			return false
		}
		for _, d := range dp.Data {
			if d.Status != "delivered" {
				return false
			}
		}
		return true
	})
	for _, p := range []*proc{a, b} {
		if logs := p.Logs.String(); strings.Contains(logs, strings.TrimPrefix(webhookSecret, "whsec_")) || strings.Contains(logs, "t0ps3cret") {
			t.Fatalf("the webhook secret or the endpoint's token reached the log:\n%s", logs)
		}
	}
}

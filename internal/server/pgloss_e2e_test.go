package server_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestDatabaseLossIs503AndRecovers: with PostgreSQL unreachable, requests
// fail with a clean 503 in the wire's envelope and nothing is half-written;
// when it returns the server works again by itself.
func TestDatabaseLossIs503AndRecovers(t *testing.T) {
	t.Parallel()
	u, _ := url.Parse(stacktest.PostgresURL())
	proxy := stacktest.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	ctx := context.Background()
	st := stacktest.PostgresAt(t, u.String(), "loss")
	env := stacktest.New(t, stacktest.Options{Store: st})
	body := `{"model":"assistant","messages":[{"role":"user","content":"hello"}]}`
	if r := call(t, "POST", env.URL+"/v1/chat/completions", body, "x-stackbone-session", "loss"); r.status != 200 {
		t.Fatalf("before the loss: %d %s", r.status, r.body)
	}

	proxy.Refuse()
	r := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"lost"}]}`, "x-stackbone-session", "loss")
	if r.status != 503 || !strings.Contains(string(r.body), `"code":"store_unavailable"`) {
		t.Fatalf("during the loss: %d %s", r.status, r.body)
	}
	if h := call(t, "GET", env.URL+"/healthz", ""); h.status != 503 {
		t.Fatalf("healthz during the loss: %d", h.status)
	}
	ar := call(t, "POST", env.URL+"/v1/messages", `{"model":"assistant","max_tokens":10,"messages":[{"role":"user","content":"lost"}]}`, "x-stackbone-session", "loss")
	if ar.status != 503 || !strings.Contains(string(ar.body), `"type":"error"`) {
		t.Fatalf("anthropic wire during the loss: %d %s", ar.status, ar.body)
	}

	proxy.Heal()
	stacktest.WaitFor(t, "the server to recover", func() bool {
		return call(t, "GET", env.URL+"/healthz", "").status == 200
	})
	if r := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"back"}]}`, "x-stackbone-session", "loss"); r.status != 200 {
		t.Fatalf("after recovery: %d %s", r.status, r.body)
	}
	msgs, err := st.Messages(ctx, "dev", "loss")
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range msgs {
		texts = append(texts, m.Content)
	}
	if strings.Join(texts, "|") != "hello|echo: hello|back|echo: back" {
		t.Fatalf("the thread after the loss: %q", texts)
	}
}

// TestHealthzWhenPostgresDropsPackets: with the database's packets dropped
// (connections open, no answer), /healthz answers 503 within a second, so a
// load balancer sees the replica down instead of a timeout; it is 200 again
// once the packets flow.
func TestHealthzWhenPostgresDropsPackets(t *testing.T) {
	t.Parallel()
	u, _ := url.Parse(stacktest.PostgresURL())
	proxy := stacktest.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	st := stacktest.PostgresAt(t, u.String(), "blackhole")
	env := stacktest.New(t, stacktest.Options{Store: st})
	if h := call(t, "GET", env.URL+"/healthz", ""); h.status != 200 {
		t.Fatalf("healthy: %d %s", h.status, h.body)
	}
	proxy.Partition()
	start := time.Now()
	h := call(t, "GET", env.URL+"/healthz", "")
	if took := time.Since(start); h.status != 503 || took > time.Second {
		t.Fatalf("packets dropped: %d after %s %s", h.status, took, h.body)
	}
	proxy.Drop() // the stalled connections are lost; new ones work
	proxy.Heal()
	stacktest.WaitFor(t, "healthz to recover", func() bool { return call(t, "GET", env.URL+"/healthz", "").status == 200 })
}

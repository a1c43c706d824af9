package server_test

import (
	"context"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/stacktest"
)

// tcpProxy forwards to PostgreSQL and can drop every connection on demand,
// or black-hole them (stalled: bytes are read and dropped, connections stay
// open, as on a network that loses packets).
type tcpProxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	conns   []net.Conn
	down    bool
	stalled atomic.Bool
}

// pipe copies src to dst, dropping what it reads while the proxy is stalled.
func (p *tcpProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.stalled.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func newProxy(t *testing.T, target string) *tcpProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.setDown(true) })
	return p
}

func (p *tcpProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go p.pipe(up, c)
		go p.pipe(c, up)
	}
}

func (p *tcpProxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// TestDatabaseLossIs503AndRecovers: with PostgreSQL unreachable, requests
// fail with a clean 503 in the wire's envelope and nothing is half-written;
// when it returns the server works again by itself.
func TestDatabaseLossIs503AndRecovers(t *testing.T) {
	t.Parallel()
	u, _ := url.Parse(stacktest.PostgresURL())
	proxy := newProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
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

	proxy.setDown(true)
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

	proxy.setDown(false)
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
	proxy := newProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	st := stacktest.PostgresAt(t, u.String(), "blackhole")
	env := stacktest.New(t, stacktest.Options{Store: st})
	if h := call(t, "GET", env.URL+"/healthz", ""); h.status != 200 {
		t.Fatalf("healthy: %d %s", h.status, h.body)
	}
	proxy.stalled.Store(true)
	start := time.Now()
	h := call(t, "GET", env.URL+"/healthz", "")
	if took := time.Since(start); h.status != 503 || took > time.Second {
		t.Fatalf("packets dropped: %d after %s %s", h.status, took, h.body)
	}
	proxy.stalled.Store(false)
	proxy.setDown(true) // the stalled connections are lost; new ones work
	proxy.setDown(false)
	stacktest.WaitFor(t, "healthz to recover", func() bool { return call(t, "GET", env.URL+"/healthz", "").status == 200 })
}

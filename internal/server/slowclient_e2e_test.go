package server_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// slowEnv is a stack with short slow-client limits.
func slowEnv(t *testing.T, opts stacktest.Options, body, idle time.Duration, maxConns int) *stacktest.Env {
	t.Helper()
	opts.Configure = func(c *config.Config) {
		c.HeaderTimeout, c.BodyTimeout, c.IdleTimeout, c.MaxConnsPerIP = 5*time.Second, body, idle, maxConns
	}
	return stacktest.New(t, opts)
}

// dial opens a raw connection to the stack, closed when the test ends.
func dial(t *testing.T, env *stacktest.Env) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(env.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // the test's own bound
	return c
}

// closedByServer reports whether the server closed c (a read ends in EOF
// or a reset rather than the test's deadline).
func closedByServer(r io.Reader) bool {
	_, err := io.Copy(io.Discard, r)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// TestStalledBodyIs408AndClosed: a body that stops arriving (a short
// Content-Length, a chunked body that stalls) is answered 408 once the
// body timeout passes, and the connection is closed.
func TestStalledBodyIs408AndClosed(t *testing.T) {
	t.Parallel()
	env := slowEnv(t, stacktest.Options{}, 300*time.Millisecond, time.Minute, 0)
	for name, req := range map[string]string{
		"short Content-Length": "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":",
		"stalled chunked":      "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n9\r\n{\"model\":\r\n",
	} {
		c := dial(t, env)
		start := time.Now()
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: no answer: %v", name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		took := time.Since(start)
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "request_timeout") {
			t.Fatalf("%s: %d %s", name, resp.StatusCode, b)
		}
		if took < 300*time.Millisecond || took > 5*time.Second {
			t.Fatalf("%s: answered after %s with a 300ms body timeout", name, took)
		}
		if !closedByServer(br) {
			t.Fatalf("%s: the connection stayed open after the 408", name)
		}
	}
}

// TestUnauthenticatedBodyIsNotWaitedFor: a request without a valid key is
// answered 401 before its body is read, at once, and its connection closed,
// however slowly the body arrives.
func TestUnauthenticatedBodyIsNotWaitedFor(t *testing.T) {
	t.Parallel()
	env := slowEnv(t, stacktest.Options{Mode: config.Start, Keys: []config.Key{{Tenant: "acme", Secret: "sk-acme-123"}}},
		time.Minute, time.Minute, 0)
	for _, auth := range []string{"", "Authorization: Bearer wrong-key\r\n"} {
		c := dial(t, env)
		start := time.Now()
		io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"+auth+
			"Content-Length: 100000\r\n\r\n{\"model\":")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if !closedByServer(br) {
			t.Fatal("the connection stayed open after the 401")
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("401 and close took %s with a 1m body timeout", took)
		}
	}
	// A valid key still gets its turn.
	r := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"hi"}]}`,
		"Authorization", "Bearer sk-acme-123")
	if r.status != 200 {
		t.Fatalf("authenticated turn: %d %s", r.status, r.body)
	}
}

// TestIdleKeepAliveIsClosed: a keep-alive connection left idle is closed
// after the idle timeout.
func TestIdleKeepAliveIsClosed(t *testing.T) {
	t.Parallel()
	env := slowEnv(t, stacktest.Options{}, time.Minute, 300*time.Millisecond, 0)
	c := dial(t, env)
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	start := time.Now()
	if !closedByServer(br) {
		t.Fatal("the idle connection stayed open")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("closed after %s with a 300ms idle timeout", took)
	}
}

// TestStreamOutlivesBodyTimeout: the body timeout bounds only the body; an
// answer that streams for longer runs to its end, stateless and durable.
func TestStreamOutlivesBodyTimeout(t *testing.T) {
	t.Parallel()
	env := slowEnv(t, stacktest.Options{Script: `[{"reply": {"text": "one two three four five six seven", "chunkDelayMs": 150}}]`},
		200*time.Millisecond, time.Minute, 0)
	for _, session := range []string{"", "long"} {
		start := time.Now()
		r := call(t, "POST", env.URL+"/v1/chat/completions",
			`{"model":"assistant","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "x-stackbone-session", session)
		if took := time.Since(start); took < 600*time.Millisecond {
			t.Fatalf("the stream took only %s: the test does not outlive the body timeout", took)
		}
		body := string(r.body)
		if r.status != 200 || !strings.Contains(body, "seven") || !strings.HasSuffix(strings.TrimSpace(body), "data: [DONE]") {
			t.Fatalf("session %q: %d %s", session, r.status, body)
		}
	}
}

// TestConnectionCapPerIP: one address holds at most MaxConnsPerIP open
// connections; a request on one more is answered at once in its route's
// wire envelope (a 503 too_many_connections, OpenAI's or Anthropic's, with
// retry advice) and the connection closed, except GET /healthz, which is
// served; a freed slot serves again.
func TestConnectionCapPerIP(t *testing.T) {
	t.Parallel()
	env := slowEnv(t, stacktest.Options{}, time.Minute, time.Minute, 3)
	held := []net.Conn{dial(t, env), dial(t, env), dial(t, env)}
	// The held connections are accepted and served.
	for _, c := range held {
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("held connection: %v %v", resp, err)
		}
		io.Copy(io.Discard, resp.Body)
	}
	over := func(req, wantType string, wantStatus int) {
		t.Helper()
		extra := dial(t, env)
		io.WriteString(extra, req)
		br := bufio.NewReader(extra)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != wantStatus {
			t.Fatalf("%q over the cap: %v %v", req, resp, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if wantType != "" && (resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(string(b), `"too_many_connections"`) ||
			!strings.Contains(string(b), wantType) || resp.Header.Get("retry-after") != "1") {
			t.Fatalf("%q over the cap: %s %v", req, b, resp.Header)
		}
		if !closedByServer(br) {
			t.Fatalf("%q: the connection over the cap stayed open", req)
		}
	}
	over("GET /v1/models HTTP/1.1\r\nHost: localhost\r\n\r\n", `"error":{"message"`, http.StatusServiceUnavailable)
	over("POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nanthropic-version: 2023-06-01\r\nContent-Length: 2\r\n\r\n{}",
		`{"type":"error","error":{"type":`, http.StatusServiceUnavailable)
	over("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n", "", http.StatusOK)
	held[0].Close()
	stacktest.WaitFor(t, "a freed slot", func() bool {
		c := dial(t, env)
		io.WriteString(c, "GET /v1/models HTTP/1.1\r\nHost: localhost\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		return err == nil && resp.StatusCode == 200
	})
}

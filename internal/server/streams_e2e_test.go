package server_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/stacktest"
)

// openStream opens an SSE stream and reads its first frame.
func openStream(t *testing.T, url string) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatalf("first frame: %v", err)
	}
	return resp, br
}

// Event streams are taken off net/http while they idle; the server's
// shutdown (CloseStreams) still ends them, each with a clean end of body,
// and a stream opened afterwards is served by net/http as before.
func TestEventStreamsEndCleanlyAtShutdown(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{KeepAliveInterval: 10 * time.Millisecond})
	if r := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"hi"}]}`,
		"x-stackbone-session", "s1"); r.status != http.StatusOK {
		t.Fatalf("turn: %d %s", r.status, r.body)
	}
	type open struct {
		resp *http.Response
		br   *bufio.Reader
	}
	var streams []open
	for range 3 {
		resp, br := openStream(t, env.URL+"/v1/threads/s1/events")
		t.Cleanup(func() { resp.Body.Close() })
		// A keepalive: the stream is past its replay, in its idle loop.
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if line == ": ping\n" {
				break
			}
		}
		streams = append(streams, open{resp, br})
	}
	ended := make(chan error, len(streams))
	for _, s := range streams {
		go func() {
			defer s.resp.Body.Close()
			_, err := io.ReadAll(s.br) // nil only at a clean end of the chunked body
			ended <- err
		}()
	}
	env.Server.CloseStreams()
	for range streams {
		select {
		case err := <-ended:
			if err != nil {
				t.Fatalf("a stream ended with %v, want a clean end of body", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a stream is still open 10 s after CloseStreams")
		}
	}
	resp, br := openStream(t, env.URL+"/v1/threads/s1/events")
	defer resp.Body.Close()
	line, err := br.ReadString('\n')
	for err == nil && strings.TrimSpace(line) == "" {
		line, err = br.ReadString('\n')
	}
	if err != nil || !strings.HasPrefix(line, "id: 1") {
		t.Fatalf("a stream opened after CloseStreams: %q, %v", line, err)
	}
}

// A client that opens event streams and hangs up, again and again, gets
// its connections back: the server notices the hang-up, ends the stream and
// frees its slot (at most MaxConnsPerIP, 256, per address).
func TestHungUpStreamsGiveTheirConnectionsBack(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{KeepAliveInterval: 10 * time.Millisecond})
	if r := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"hi"}]}`,
		"x-stackbone-session", "s1"); r.status != http.StatusOK {
		t.Fatalf("turn: %d %s", r.status, r.body)
	}
	for i := range 2 * env.Config.MaxConnsPerIP {
		tr := &http.Transport{} // a connection of its own, closed below
		c := &http.Client{Transport: tr}
		path := "/v1/threads/s1/events"
		if i%2 == 1 {
			path = "/studio/api/live"
		}
		req, _ := http.NewRequest("GET", env.URL+path, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("stream %d (%s): %d %s", i, path, resp.StatusCode, b)
		}
		resp.Body.Close()
		tr.CloseIdleConnections()
		if i%64 == 63 { // a few keepalives: the server notices the hang-ups
			stacktest.WaitFor(t, "the server to end the hung-up streams", func() bool { return env.Server.OpenStreams() == 0 })
		}
	}
}

// TestHungUpStreamsAreNoticedAtOnce: with the usual 15 s keepalive, 300
// thread event streams (more than MaxConnsPerIP, 256) opened and dropped
// one at a time each get their stream, because the server notices a hang-up on the
// connection's read side, not at the next keepalive; then every route
// still answers at once.
func TestHungUpStreamsAreNoticedAtOnce(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	if r := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"hi"}]}`,
		"x-stackbone-session", "s1"); r.status != http.StatusOK {
		t.Fatalf("turn: %d %s", r.status, r.body)
	}
	addr := strings.TrimPrefix(env.URL, "http://")
	// Each stream is read to its last frame before the hang-up (no replay:
	// Last-Event-ID is past the end), so the server has nothing to write
	// until the next keepalive: only the read side can tell it.
	for i := range env.Config.MaxConnsPerIP + 44 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "GET /v1/threads/s1/events HTTP/1.1\r\nHost: localhost\r\nLast-Event-ID: 1000000\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %v %v", i, resp, err)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || !strings.Contains(line, "stream open") {
			t.Fatalf("stream %d: first frame %q %v", i, line, err)
		}
		c.Close()
	}
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 2 * time.Second}
	for _, rt := range []struct{ method, path, body string }{
		{"GET", "/healthz", ""}, {"GET", "/v1/models", ""}, {"GET", "/v1/threads/s1", ""},
		{"POST", "/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"hi"}]}`},
		{"POST", "/v1/messages", `{"model":"assistant","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		req, _ := http.NewRequest(rt.method, env.URL+rt.path, strings.NewReader(rt.body))
		resp, err := fresh.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", rt.method, rt.path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s after the dropped streams: %d %s", rt.method, rt.path, resp.StatusCode, b)
		}
	}
}

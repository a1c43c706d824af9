package server_test

import (
	"bufio"
	"io"
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
// its connections back: the server notices at the next keepalive, ends the
// stream and frees its slot (at most MaxConnsPerIP, 256, per address).
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
		if i%64 == 63 {
			time.Sleep(50 * time.Millisecond) // a few keepalives: the server notices
		}
	}
}

package sse_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/wire/sse"
)

// streamHandler writes one event, hijacks (reporting whether it could) and
// writes two more from another goroutine after the handler returned, then
// closes the stream.
func streamHandler(hijacked chan<- bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		returned := make(chan struct{})
		defer close(returned) // the last thing the handler does
		sw := sse.New(w)
		if err := sw.Data([]byte(`{"n":1}`)); err != nil {
			return
		}
		ok := sw.Hijack(r)
		hijacked <- ok
		rest := func() {
			_ = sw.IDData("2", []byte(`{"n":2}`))
			_ = sw.Comment("ping")
			_ = sw.Event("last", []byte(strings.Repeat("x", 5000)))
			_ = sw.Close()
		}
		if !ok {
			rest()
			return
		}
		go func() {
			<-returned // the handler has returned; net/http goes on with its end of the request meanwhile
			rest()
		}()
	}
}

const wantBody = "data: {\"n\":1}\n\nid: 2\ndata: {\"n\":2}\n\n: ping\n\nevent: last\ndata: "

// A hijacked stream reads, for net/http's client, exactly like one that
// net/http served to its end: the same headers, every frame, a clean end
// of the chunked body.
func TestHijackedStreamReadsTheSame(t *testing.T) {
	hijacked := make(chan bool, 1)
	srv := httptest.NewServer(streamHandler(hijacked))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !<-hijacked {
		t.Fatal("an HTTP/1.1 GET stream was not hijacked")
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	if te := resp.TransferEncoding; len(te) != 1 || te[0] != "chunked" {
		t.Fatalf("Transfer-Encoding %v, want chunked", te)
	}
	body, err := io.ReadAll(resp.Body) // fails on a malformed chunk or an unexpected EOF
	if err != nil {
		t.Fatalf("reading the body: %v (read %q)", err, body)
	}
	if want := wantBody + strings.Repeat("x", 5000) + "\n\n"; string(body) != want {
		t.Fatalf("body:\n%q\nwant:\n%q", body, want)
	}
}

// HTTP/1.0 has no chunked bodies and HTTP/2 no connection to take: such
// streams stay with net/http and still work.
func TestStreamsThatCannotBeHijacked(t *testing.T) {
	t.Run("HTTP/1.0", func(t *testing.T) {
		hijacked := make(chan bool, 1)
		srv := httptest.NewServer(streamHandler(hijacked))
		defer srv.Close()
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET / HTTP/1.0\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if <-hijacked {
			t.Fatal("an HTTP/1.0 stream was hijacked")
		}
		if !strings.HasPrefix(string(body), wantBody) {
			t.Fatalf("body %q", body)
		}
	})
	t.Run("HTTP/2", func(t *testing.T) {
		hijacked := make(chan bool, 1)
		srv := httptest.NewUnstartedServer(streamHandler(hijacked))
		srv.EnableHTTP2 = true
		srv.StartTLS()
		defer srv.Close()
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("proto %s", resp.Proto)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if <-hijacked {
			t.Fatal("an HTTP/2 stream was hijacked")
		}
		if !strings.HasPrefix(string(body), wantBody) {
			t.Fatalf("body %q", body)
		}
	})
}

// A client that stops reading is cut off: frames fail once its socket is
// full and the write deadline passed, instead of blocking for ever.
func TestHijackedStreamFailsWhenTheClientHangsUp(t *testing.T) {
	got := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := sse.New(w)
		_ = sw.Comment("open")
		if !sw.Hijack(r) {
			got <- fmt.Errorf("not hijacked")
			return
		}
		go func() {
			defer sw.Close()
			for {
				if err := sw.Comment("ping"); err != nil {
					got <- err
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // hang up
	select {
	case err := <-got:
		if err == nil {
			t.Fatal("no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("frames to a closed connection still succeed after 10 s")
	}
}

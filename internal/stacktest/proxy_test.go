package stacktest_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/stacktest"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := c.Write([]byte(sc.Text() + "\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestProxyPartitionHealDrop checks what a peer behind the proxy notices: a
// partition holds a request without an error, Heal delivers it, Drop resets
// the connection and a new one works.
func TestProxyPartitionHealDrop(t *testing.T) {
	t.Parallel()
	px := stacktest.NewProxy(t, echoServer(t))
	c, err := net.Dial("tcp", px.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	roundTrip := func(line string) {
		t.Helper()
		if _, err := c.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
		got, err := r.ReadString('\n')
		if err != nil || got != line+"\n" {
			t.Fatalf("echo of %q: %q, %v", line, got, err)
		}
	}
	roundTrip("before")

	px.Partition()
	if _, err := c.Write([]byte("held\n")); err != nil {
		t.Fatal(err)
	}
	answered := make(chan string, 1)
	go func() {
		got, _ := r.ReadString('\n')
		answered <- got
	}()
	// A partition is silence, not an error: nothing comes back while it lasts.
	select {
	case got := <-answered:
		t.Fatalf("answer %q crossed the partition", got)
	case <-time.After(200 * time.Millisecond):
	}
	px.Heal()
	if got := <-answered; got != "held\n" {
		t.Fatalf("after heal: %q", got)
	}
	roundTrip("after")

	px.Drop()
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("the dropped connection still reads")
	}
	c2, err := net.Dial("tcp", px.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Write([]byte("again\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := bufio.NewReader(c2).ReadString('\n'); err != nil || got != "again\n" {
		t.Fatalf("new connection after drop: %q, %v", got, err)
	}
}

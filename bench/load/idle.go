package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stackbone/stackbone/bench/internal/benchproc"
)

// idleResult is what n idle SSE streams cost the server.
type idleResult struct {
	n                       int
	rssBefore, rssWith      int64
	goroutines, goroutines0 int
	// stack and heap in use (go_memstats_*_inuse_bytes), before and with.
	stack0, stack, heap0, heap float64
}

// raiseFileLimit lets the harness (and the server it starts, which
// inherits the limit) hold tens of thousands of connections.
func raiseFileLimit(n uint64) {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil {
		return
	}
	if l.Cur < n {
		l.Cur = min(n, l.Max)
		if l.Max < n {
			l.Max, l.Cur = n, n // root may raise the hard limit
		}
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

// idleStreams opens n event streams that stay open with nothing to say,
// half a thread's events (GET /v1/threads/{id}/events) and half Studio's
// live feed (GET /studio/api/live), and measures the server's RSS and
// goroutines before them and once they are all open. The client side holds
// bare connections (no goroutine each), so only the server is measured.
func idleStreams(ctx context.Context, base, thread string, pid, n int) (*idleResult, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	res := &idleResult{n: n}
	if res.goroutines0, res.stack0, res.heap0, err = goroutines(ctx, base); err != nil {
		return nil, err
	}
	if res.rssBefore, err = benchproc.RSS(pid); err != nil {
		return nil, err
	}
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	paths := []string{"/v1/threads/" + thread + "/events", "/studio/api/live"}
	d := net.Dialer{Timeout: 10 * time.Second}
	for i := range n {
		c, err := d.DialContext(ctx, "tcp", u.Host)
		if err != nil {
			return nil, fmt.Errorf("stream %d: %w", i, err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", paths[i%2], u.Host)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return nil, fmt.Errorf("stream %d: %w", i, err)
		}
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			return nil, fmt.Errorf("stream %d (%s): %d %s", i, paths[i%2], resp.StatusCode, b)
		}
	}
	time.Sleep(2 * time.Second) // let the server settle
	if res.rssWith, err = benchproc.RSS(pid); err != nil {
		return nil, err
	}
	if res.goroutines, res.stack, res.heap, err = goroutines(ctx, base); err != nil {
		return nil, err
	}
	return res, nil
}

// goroutines reads go_goroutines and the stack and heap in use from the
// server's /metrics.
func goroutines(ctx context.Context, base string) (n int, stack, heap float64, err error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	found := false
	for sc.Scan() {
		name, v, _ := strings.Cut(sc.Text(), " ")
		f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
		switch name {
		case "go_goroutines":
			n, found = int(f), true
		case "go_memstats_stack_inuse_bytes":
			stack = f
		case "go_memstats_heap_inuse_bytes":
			heap = f
		}
	}
	if !found {
		return 0, 0, 0, fmt.Errorf("no go_goroutines in /metrics")
	}
	return n, stack, heap, nil
}

func (r *idleResult) write(w io.Writer) {
	per := float64(r.rssWith-r.rssBefore) / float64(r.n)
	fmt.Fprintf(w, "\n%d idle SSE streams (half thread events, half Studio live): RSS %.1f → %.1f MiB (%.1f KB per stream), goroutines %d → %d (%.2f per stream).\n",
		r.n, float64(r.rssBefore)/(1<<20), float64(r.rssWith)/(1<<20), per/1024, r.goroutines0, r.goroutines,
		float64(r.goroutines-r.goroutines0)/float64(r.n))
	fmt.Fprintf(w, "Per stream: %.1f KB of goroutine stacks, %.1f KB of heap in use (the Go runtime's view).\n",
		(r.stack-r.stack0)/float64(r.n)/1024, (r.heap-r.heap0)/float64(r.n)/1024)
}

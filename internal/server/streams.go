package server

import (
	"context"
	"net/http"
	"sync"

	"github.com/stackbone/stackbone/internal/wire/sse"
)

// streamSet holds the event streams served off net/http (Server.Stream),
// which http.Server's Shutdown and Close do not know about.
type streamSet struct {
	mu     sync.Mutex
	closed bool
	m      map[*sse.Writer]context.CancelFunc
	wg     sync.WaitGroup
}

// Stream runs loop, the rest of a long-lived event stream whose frames go
// through sw, until loop returns. Where the connection can be taken over
// from net/http (sse.Writer.Hijack) the handler's goroutine and net/http's
// buffers are let go: loop runs on a goroutine of its own, with a context
// that ends at CloseStreams, and Stream returns at once; the stream ends
// when loop returns. Otherwise loop runs here with r's context. Either
// way, loop must watch its context and stop when a frame fails.
func (s *Server) Stream(r *http.Request, sw *sse.Writer, loop func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	set := &s.streams
	set.mu.Lock()
	ok := !set.closed
	if ok {
		if set.m == nil {
			set.m = map[*sse.Writer]context.CancelFunc{}
		}
		set.m[sw] = cancel
		set.wg.Add(1)
	}
	set.mu.Unlock()
	if ok && sw.Hijack(r) {
		go func() {
			defer set.done(sw, cancel)
			loop(ctx)
		}()
		return
	}
	if ok {
		set.done(sw, cancel)
	} else {
		cancel()
	}
	loop(r.Context())
}

// done forgets sw and ends its body and connection.
func (set *streamSet) done(sw *sse.Writer, cancel context.CancelFunc) {
	cancel()
	_ = sw.Close()
	set.mu.Lock()
	delete(set.m, sw)
	set.mu.Unlock()
	set.wg.Done()
}

// CloseStreams ends the event streams Stream took off net/http, and waits
// for them; streams opened afterwards stay on net/http. Call it when the
// server stops, beside http.Server's Shutdown or Close.
func (s *Server) CloseStreams() {
	set := &s.streams
	set.mu.Lock()
	set.closed = true
	for _, cancel := range set.m {
		cancel()
	}
	set.mu.Unlock()
	set.wg.Wait()
}

package server

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/stackbone/stackbone/internal/bus"
	"github.com/stackbone/stackbone/internal/event"
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

// Feed is what an event stream follows once it is past its replay: a bus
// subscription, what to do when the bus dropped events for the stream
// (Resync: the buffered ones are stale; Drain was called) and with each
// live event (Deliver). Either returns false to end the stream (a failed
// frame). Stream closes Sub when the stream ends.
type Feed struct {
	Sub     *bus.Subscription
	Resync  func(ctx context.Context) bool
	Deliver func(ctx context.Context, e *event.Event) bool
}

// Stream serves the rest of a long-lived event stream whose frames go
// through sw: f's live events, a keepalive comment every keep-alive
// interval, until a frame fails, the client is gone or the server closes
// its streams. Where the connection can be taken over from net/http
// (sse.Writer.Hijack) the handler's goroutine and net/http's buffers are
// let go: the stream goes on on a goroutine of its own, with a context
// that ends at CloseStreams, and Stream returns at once. Otherwise it runs
// here under r's context.
func (s *Server) Stream(r *http.Request, sw *sse.Writer, f Feed) {
	loop := func(ctx context.Context) {
		defer f.Sub.Close()
		ping := time.NewTicker(s.keepAliveEvery())
		defer ping.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-sw.Gone(): // the client hung up: free its connection now
				return
			case <-ping.C:
				if sw.Comment("ping") != nil {
					return
				}
			case <-f.Sub.Dropped:
				f.Sub.Drain()
				if !f.Resync(ctx) {
					return
				}
			case e := <-f.Sub.C:
				if !f.Deliver(ctx, e) {
					return
				}
			}
		}
	}
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

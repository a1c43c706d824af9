package tsload

import (
	"context"
	"sync"
)

// pool holds the runtimes of one agent. At most size runtimes exist (or are
// in use) at once; they are created on demand. A runtime that was
// interrupted or timed out is dropped and a fresh one is made the next time
// one is needed.
type pool struct {
	sh    *shared
	slots chan struct{} // one token per runtime in use

	mu     sync.Mutex
	idle   []*jsRuntime
	closed bool
}

func newPool(sh *shared, size int, first *jsRuntime) *pool {
	p := &pool{sh: sh, slots: make(chan struct{}, size)}
	if first != nil {
		p.idle = append(p.idle, first)
	}
	return p
}

// get returns an idle runtime or creates one, waiting for a free slot.
func (p *pool) get(ctx context.Context) (*jsRuntime, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		r := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return r, nil
	}
	p.mu.Unlock()
	r, err := newRuntime(ctx, p.sh)
	if err != nil {
		<-p.slots
		return nil, err
	}
	return r, nil
}

// put returns r to the pool, or drops it if it is poisoned or the pool is
// closed.
func (p *pool) put(r *jsRuntime) {
	p.mu.Lock()
	if !r.poisoned && !p.closed {
		p.idle = append(p.idle, r)
	}
	p.mu.Unlock()
	<-p.slots
}

// close drops the idle runtimes. Calls still running finish normally; later
// calls still work, on runtimes that are dropped after use.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	p.idle = nil
	p.mu.Unlock()
}

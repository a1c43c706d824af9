package stacktest

import (
	"net"
	"sync"
	"testing"
)

// Proxy is a loopback TCP proxy a test controls, to cut one process off from
// a server (a replica from its PostgreSQL database) without stopping either:
//
//	px := stacktest.NewProxy(t, "127.0.0.1:5432")
//	// point the process at px.Addr() instead of the server
//	px.Partition() // packets are dropped: nothing arrives, nothing is closed
//	px.Heal()      // what was held is delivered, traffic flows again
//	px.Drop()      // every open connection is reset (new ones still work)
//	px.Refuse()    // the server is gone: connections reset, new ones refused until Heal
//
// A partition behaves like a network dropping packets, not like a refused
// connection: bytes in flight and new connections are held (the peers see a
// silent link and wait until their own deadlines), and Heal delivers them in
// order. The proxy is closed when the test ends.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	healed chan struct{} // closed while traffic flows
	conns  map[net.Conn]struct{}
	closed bool
	// refusing: new connections are closed at once (Refuse, until Heal).
	refusing bool
	stopped  chan struct{} // closed by Close
}

// NewProxy listens on a loopback port and forwards every connection to
// target (host:port); it is closed when the test ends.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("proxy listen: %v", err)
	}
	p := &Proxy{ln: ln, target: target, healed: make(chan struct{}), conns: map[net.Conn]struct{}{}, stopped: make(chan struct{})}
	close(p.healed)
	go p.accept()
	tb.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port, to use in place of the target's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Partition stops forwarding: from now on bytes read from either side and
// new connections are held until Heal. Nothing is closed.
func (p *Proxy) Partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.healed:
		p.healed = make(chan struct{})
	default: // already partitioned
	}
}

// Heal ends a partition or a Refuse: what was held is delivered, in order,
// and traffic flows again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusing = false
	select {
	case <-p.healed:
	default:
		close(p.healed)
	}
}

// Drop closes every connection open through the proxy, both sides, as a
// reset would; later connections are forwarded as usual.
func (p *Proxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// Refuse makes the target look gone: every open connection is closed and
// new ones are closed as soon as they are accepted, until Heal.
func (p *Proxy) Refuse() {
	p.mu.Lock()
	p.refusing = true
	p.mu.Unlock()
	p.Drop()
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.stopped)
	p.mu.Unlock()
	_ = p.ln.Close()
	p.Drop()
}

// flowing waits until traffic may flow; false once the proxy is closed.
func (p *Proxy) flowing() bool {
	p.mu.Lock()
	healed := p.healed
	p.mu.Unlock()
	select {
	case <-healed:
		return true
	case <-p.stopped:
		return false
	}
}

// track registers an open connection; false (and the connection closed)
// once the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.refusing {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

// serve connects one client to the target (once traffic flows) and copies
// both ways until either side closes.
func (p *Proxy) serve(client net.Conn) {
	if !p.track(client) {
		return
	}
	defer p.untrack(client)
	if !p.flowing() {
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)
	done := make(chan struct{}, 2)
	go func() { p.pipe(server, client); done <- struct{}{} }()
	go func() { p.pipe(client, server); done <- struct{}{} }()
	<-done // one side ended: the deferred closes end the other copy
}

// pipe copies src to dst, holding each chunk while the proxy is partitioned.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.flowing() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // io.EOF or a closed connection: either way done
			return
		}
	}
}

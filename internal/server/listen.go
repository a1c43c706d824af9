package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/stackbone/stackbone/internal/config"
)

// HTTPServer returns the http.Server that serves h with cfg's limits on
// slow clients: the time to send headers and idle keep-alive connections.
// A request's body has its own read deadline (Config.BodyTimeout, set per
// request by the middleware; net/http lifts it once the body is read, when
// it starts watching the idle connection for a hang-up), and there is no
// WriteTimeout, which would cut off answers that stream for minutes.
func HTTPServer(cfg *config.Config, h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: cfg.HeaderTimeout, IdleTimeout: cfg.IdleTimeout,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn), ConnContext: markOverCap}
}

// overCapKey marks the context of a request on a connection over the cap.
type overCapKey struct{}

// markOverCap is the http.Server's ConnContext: requests on a connection
// LimitConns let in over the cap carry the mark, for the middleware.
func markOverCap(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := c.(*limitedConn); ok && lc.over {
		return context.WithValue(ctx, overCapKey{}, true)
	}
	return ctx
}

// overCap reports whether r came on a connection over its address's cap.
func overCap(r *http.Request) bool {
	over, _ := r.Context().Value(overCapKey{}).(bool)
	return over
}

// overflowConns is how many connections over the cap an address may have
// in flight, each answered once (GET /healthz served, anything else a 503
// in the route's wire envelope) and closed; past it a connection gets a
// plain 503 without being read.
const overflowConns = 16

// LimitConns caps the connections one client IP address holds open at max
// (0: no cap). A connection over the cap is let in for one request, which
// the server answers with a 503 too_many_connections in the route's wire
// envelope (GET /healthz is served as usual), and then closed; past a few
// of those at once (overflowConns), a connection is answered a plain 503
// and closed at once, before anything is read from it.
func LimitConns(ln net.Listener, max int, logger *slog.Logger) net.Listener {
	if max <= 0 {
		return ln
	}
	return &connLimiter{Listener: ln, max: max, open: map[string]int{}, over: map[string]int{}, logger: logger}
}

type connLimiter struct {
	net.Listener
	max    int
	logger *slog.Logger
	mu     sync.Mutex
	open   map[string]int
	over   map[string]int // connections in flight over the cap
	warned time.Time      // the last refusal logged
}

// tooManyConns is the whole answer to a connection over the cap.
const tooManyConns = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n" +
	"Retry-After: 1\r\nContent-Length: 45\r\n\r\nToo many open connections from your address.\n"

// Accept returns the next connection under the cap.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := c.RemoteAddr().String()
		if host, _, err := net.SplitHostPort(ip); err == nil {
			ip = host
		}
		l.mu.Lock()
		over := l.open[ip] >= l.max
		overflow := over && l.over[ip] < overflowConns
		switch {
		case !over:
			l.open[ip]++
		case overflow:
			l.over[ip]++
		}
		warn := over && time.Since(l.warned) > 10*time.Second // no log flood
		if warn {
			l.warned = time.Now()
		}
		l.mu.Unlock()
		if warn {
			l.logger.Warn("connections refused: too many open connections from one address", "ip", ip, "max", l.max)
		}
		if !over {
			return &limitedConn{Conn: c, release: func() { l.release(l.open, ip) }}, nil
		}
		if overflow {
			return &limitedConn{Conn: c, over: true, release: func() { l.release(l.over, ip) }}, nil
		}
		// Answer off the accept loop, so a client that does not read
		// cannot slow down accepting everyone else's connections.
		go func(c net.Conn) {
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = io.WriteString(c, tooManyConns)
			_ = c.Close()
		}(c)
	}
}

func (l *connLimiter) release(count map[string]int, ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if count[ip]--; count[ip] <= 0 {
		delete(count, ip)
	}
}

// limitedConn gives its slot back when closed.
type limitedConn struct {
	net.Conn
	// over: the connection is over its address's cap (one answer, then
	// closed).
	over    bool
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

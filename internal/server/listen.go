package server

import (
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
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
}

// LimitConns caps the connections one client IP address holds open at max
// (0: no cap). A connection over the cap is answered 503 and closed at
// once, before anything is read from it.
func LimitConns(ln net.Listener, max int, logger *slog.Logger) net.Listener {
	if max <= 0 {
		return ln
	}
	return &connLimiter{Listener: ln, max: max, open: map[string]int{}, logger: logger}
}

type connLimiter struct {
	net.Listener
	max    int
	logger *slog.Logger
	mu     sync.Mutex
	open   map[string]int
	warned time.Time // the last refusal logged
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
		if !over {
			l.open[ip]++
		}
		warn := over && time.Since(l.warned) > 10*time.Second // no log flood
		if warn {
			l.warned = time.Now()
		}
		l.mu.Unlock()
		if !over {
			return &limitedConn{Conn: c, release: func() { l.release(ip) }}, nil
		}
		if warn {
			l.logger.Warn("connections refused: too many open connections from one address", "ip", ip, "max", l.max)
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

func (l *connLimiter) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip]--; l.open[ip] <= 0 {
		delete(l.open, ip)
	}
}

// limitedConn gives its slot back when closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

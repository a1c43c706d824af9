package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stackbone/stackbone/internal/bus"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/ids"
)

// Bridge limits.
const (
	// MaxNotifyPayload bounds one notification (PostgreSQL's limit is 8000
	// bytes). A larger stored event travels as its sequence number and is
	// read back from the events table; a larger live-only event travels in
	// parts.
	MaxNotifyPayload = 7900
	// bridgeQueue is how many events may wait to be sent; beyond it, events
	// are dropped as a slow subscriber's are.
	bridgeQueue = 4096
	// bridgeBatch is how many notifications one statement sends at most.
	bridgeBatch = 128
	// bridgePartials bounds the events being reassembled from parts.
	bridgePartials = 64
	// bridgeLinger is how long the sender waits for more events after the
	// first of a batch: the events of a burst (a step's text, tool call and
	// checkpoint events; a fast turn's steps) then go in one statement
	// instead of one each, for at most 5 ms more of latency to the other
	// replicas' live streams. (bench/load on PostgreSQL: 6 → 2 NOTIFY
	// statements per tool turn.)
	bridgeLinger = 5 * time.Millisecond
)

// Bridge carries live thread events between the buses of replicas that
// share one database, over LISTEN/NOTIFY on a channel of the store's schema.
//
// Every event published on the local bus (bus.Publish) is sent, in order, by
// one sender; a dedicated connection listens and republishes the other
// replicas' events on the local bus (bus.PublishLocal), skipping this
// bridge's own. Delivery is best effort, like the bus itself: events
// published while the database is unreachable, or while the listening
// connection reconnects, are lost live (stored events can be replayed from
// the thread's event log).
type Bridge struct {
	s       *Store
	bus     *bus.Bus
	logger  *slog.Logger
	origin  string
	channel string

	queue   chan outgoing
	counter atomic.Uint64
	closed  atomic.Bool
	dropped atomic.Uint64

	cancel context.CancelFunc
	stop   chan struct{}
	wg     sync.WaitGroup

	partials map[string]*partial // listener goroutine only
}

type outgoing struct {
	tenant, thread string
	e              event.Event
}

// note is one notification's payload.
type note struct {
	// O is the sending bridge; N numbers its events (identical payloads in
	// one transaction would be folded into one notification).
	O string `json:"o"`
	N uint64 `json:"n"`
	T string `json:"t"`
	H string `json:"h"`
	// One of: the event, the Seq of a stored event to read back, or a part
	// of the event's JSON.
	E json.RawMessage `json:"e,omitempty"`
	S int64           `json:"s,omitempty"`
	P *part           `json:"p,omitempty"`
}

// part is the I-th of K base64 pieces of an event's JSON.
type part struct {
	I int    `json:"i"`
	K int    `json:"k"`
	D string `json:"d"`
}

type partial struct {
	parts [][]byte
	got   int
}

// StartBridge connects the bus b to the other replicas of the store's
// database: it starts listening (failing when the database cannot be
// reached), then sets b.OnPublish. Start it before the bus is used, and
// Close it before the store.
func StartBridge(ctx context.Context, s *Store, b *bus.Bus, logger *slog.Logger) (*Bridge, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	br := &Bridge{s: s, bus: b, logger: logger, origin: ids.New("bridge"), channel: channelName(s.schema),
		queue: make(chan outgoing, bridgeQueue), stop: make(chan struct{}), partials: map[string]*partial{}}
	conn, err := br.connect(ctx)
	if err != nil {
		return nil, mapErr("start bridge", err)
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	br.cancel = cancel
	b.OnPublish = br.enqueue
	br.wg.Add(2)
	go br.listen(lctx, conn)
	go br.send()
	logger.Debug("postgres event bridge started", "channel", br.channel, "origin", br.origin)
	return br, nil
}

// channelName is the notification channel of a schema (at most 63 bytes,
// PostgreSQL's identifier length).
func channelName(schema string) string {
	const prefix = "stackbone_events."
	if len(prefix)+len(schema) <= 63 {
		return prefix + schema
	}
	sum := sha256.Sum256([]byte(schema))
	return prefix + hex.EncodeToString(sum[:16])
}

// Close stops listening, sends the events already queued, and stops. The bus
// keeps working locally.
func (br *Bridge) Close() error {
	if !br.closed.CompareAndSwap(false, true) {
		return nil
	}
	br.cancel()
	close(br.stop)
	br.wg.Wait()
	return nil
}

// enqueue is the bus's OnPublish hook: it never blocks.
func (br *Bridge) enqueue(tenant, thread string, e event.Event) {
	if br.closed.Load() {
		return
	}
	select {
	case br.queue <- outgoing{tenant, thread, e}:
	default:
		if br.dropped.Add(1)%1000 == 1 {
			br.logger.Warn("event bridge queue full; dropping live events for other replicas", "dropped", br.dropped.Load())
		}
	}
}

// send forwards queued events in batches, one statement each, in order.
func (br *Bridge) send() {
	defer br.wg.Done()
	failing := false
	var batch []string
	flush := func() {
		if len(batch) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := br.s.pool.Exec(ctx, `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`, br.channel, batch)
		cancel()
		switch {
		case err != nil && !failing:
			failing = true
			br.logger.Warn("event bridge cannot notify other replicas; dropping live events", "err", mapErr("notify", err))
		case err == nil && failing:
			failing = false
			br.logger.Info("event bridge notifies other replicas again")
		}
		batch = batch[:0]
	}
	for {
		select {
		case o := <-br.queue:
			batch = br.encode(batch, o)
			linger := time.NewTimer(bridgeLinger)
		gather:
			for len(batch) < bridgeBatch {
				select {
				case o := <-br.queue:
					batch = br.encode(batch, o)
				case <-linger.C:
					break gather
				case <-br.stop:
					break gather // flushed below; the loop then drains the rest
				}
			}
			linger.Stop()
			flush()
		case <-br.stop:
			for {
				select {
				case o := <-br.queue:
					batch = br.encode(batch, o)
					if len(batch) >= bridgeBatch {
						flush()
					}
				default:
					flush()
					return
				}
			}
		}
	}
}

// encode appends the payloads that carry o.
func (br *Bridge) encode(payloads []string, o outgoing) []string {
	ev, err := json.Marshal(o.e)
	if err != nil {
		br.logger.Warn("event bridge cannot encode an event", "type", o.e.Type, "err", err)
		return payloads
	}
	n := note{O: br.origin, N: br.counter.Add(1), T: o.tenant, H: o.thread, E: ev}
	if p, err := json.Marshal(n); err == nil && len(p) <= MaxNotifyPayload {
		return append(payloads, string(p))
	}
	n.E = nil
	if o.e.Seq > 0 {
		n.S = o.e.Seq
		if p, err := json.Marshal(n); err == nil && len(p) <= MaxNotifyPayload {
			return append(payloads, string(p))
		}
	}
	// A live-only event (or ids too long to fit beside a Seq) in parts.
	n.S = 0
	n.P = &part{I: 1 << 30, K: 1 << 30}
	head, _ := json.Marshal(n)
	room := (MaxNotifyPayload - len(head)) / 4 * 3
	if room < 512 {
		br.logger.Warn("event bridge cannot send an event: its tenant and thread ids are too long", "type", o.e.Type)
		return payloads
	}
	k := (len(ev) + room - 1) / room
	for i := range k {
		chunk := ev[i*room : min(len(ev), (i+1)*room)]
		n.P = &part{I: i, K: k, D: base64.StdEncoding.EncodeToString(chunk)}
		p, _ := json.Marshal(n)
		payloads = append(payloads, string(p))
	}
	return payloads
}

// connect opens the listening connection.
func (br *Bridge) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, br.s.cfg.ConnConfig.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{br.channel}.Sanitize()); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return conn, nil
}

// listen republishes other replicas' events until ctx ends, reconnecting
// when the connection is lost.
func (br *Bridge) listen(ctx context.Context, conn *pgx.Conn) {
	defer br.wg.Done()
	const minBackoff, maxBackoff = 100 * time.Millisecond, 5 * time.Second
	backoff := minBackoff
	closeConn := func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn.Close(cctx)
		cancel()
		conn = nil
	}
	for {
		if conn == nil {
			c, err := br.connect(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				br.logger.Debug("event bridge reconnect failed", "err", err, "retry", backoff)
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, maxBackoff)
				continue
			}
			conn, backoff = c, minBackoff
			br.partials = map[string]*partial{}
			br.logger.Info("event bridge listening again; live events of other replicas sent meanwhile were missed")
		}
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			closeConn()
			if ctx.Err() != nil {
				return
			}
			br.logger.Warn("event bridge lost its connection; reconnecting", "err", mapErr("listen", err))
			continue
		}
		br.deliver(ctx, n)
	}
}

// deliver republishes one notification of another replica locally.
func (br *Bridge) deliver(ctx context.Context, n *pgconn.Notification) {
	var nt note
	if err := json.Unmarshal([]byte(n.Payload), &nt); err != nil {
		br.logger.Warn("event bridge ignores a malformed notification", "err", err)
		return
	}
	if nt.O == br.origin {
		return
	}
	var data []byte
	switch {
	case nt.E != nil:
		data = nt.E
	case nt.S > 0:
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		evs, err := br.s.Events(fctx, nt.T, nt.H, nt.S-1, 1)
		cancel()
		if err != nil || len(evs) == 0 || evs[0].Seq != nt.S {
			br.logger.Warn("event bridge cannot read a stored event", "thread", nt.H, "seq", nt.S, "err", err)
			return
		}
		br.bus.PublishLocal(nt.T, nt.H, evs[0])
		return
	case nt.P != nil:
		if data = br.assemble(nt); data == nil {
			return
		}
	default:
		return
	}
	var e event.Event
	if err := json.Unmarshal(data, &e); err != nil {
		br.logger.Warn("event bridge ignores a malformed event", "err", err)
		return
	}
	br.bus.PublishLocal(nt.T, nt.H, e)
}

// assemble keeps a part and returns the whole event's JSON once every part
// arrived.
func (br *Bridge) assemble(nt note) []byte {
	p := nt.P
	if p.K <= 0 || p.K > 1<<16 || p.I < 0 || p.I >= p.K {
		return nil
	}
	chunk, err := base64.StdEncoding.DecodeString(p.D)
	if err != nil {
		return nil
	}
	key := fmt.Sprintf("%s/%d", nt.O, nt.N)
	a := br.partials[key]
	if a == nil {
		if len(br.partials) >= bridgePartials {
			br.logger.Warn("event bridge drops incomplete events", "count", len(br.partials))
			clear(br.partials)
		}
		a = &partial{parts: make([][]byte, p.K)}
		br.partials[key] = a
	}
	if len(a.parts) != p.K || a.parts[p.I] != nil {
		return nil
	}
	a.parts[p.I] = chunk
	a.got++
	if a.got < p.K {
		return nil
	}
	delete(br.partials, key)
	var out []byte
	for _, c := range a.parts {
		out = append(out, c...)
	}
	return out
}

package sqlite

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stackbone/stackbone/internal/clock"
)

// The WAL checkpoint policy. SQLite's own (wal_autocheckpoint, 1000 pages)
// runs the checkpoint inside the COMMIT that crosses the limit: that writer,
// and every writer queued behind it, waits while the pages are copied into
// the database file and both files are fsynced. Here a goroutine of the
// store checkpoints on a connection of its own instead, in PASSIVE mode,
// which takes no writer lock, so writes go on meanwhile.
const (
	// ckptCommits is how many commits start a checkpoint (~1000 pages at
	// the 4-6 pages of a turn's write).
	ckptCommits = 200
	// ckptIdle is how soon after the last commit a checkpoint runs when
	// fewer than ckptCommits came: it bounds what a power loss can take
	// (synchronous=NORMAL syncs the WAL only when it checkpoints).
	ckptIdle = time.Second
	// ckptBackstop is the writer's own wal_autocheckpoint, in pages: it
	// only runs when this goroutine cannot keep up or keeps failing.
	ckptBackstop = 16000
)

// checkpointer runs the store's WAL checkpoints off the write path.
type checkpointer struct {
	db      *sql.DB // one read-write connection, used only here
	logger  *slog.Logger
	pending atomic.Int64 // commits since the last checkpoint began
	kick    chan struct{}
	clocks  chan clockSwap // setClock's
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	err     error
	// runs counts the checkpoints that ran (tests read it).
	runs atomic.Int64
}

func newCheckpointer(db *sql.DB, logger *slog.Logger) *checkpointer {
	c := &checkpointer{
		db:     db,
		logger: logger,
		kick:   make(chan struct{}, 1),
		clocks: make(chan clockSwap),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go c.loop()
	return c
}

// committed notes a COMMIT of the writer connection.
func (c *checkpointer) committed() {
	if c.pending.Add(1) == ckptCommits {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

// clockSwap is a clock for the idle timer and what to close once it is
// armed on it.
type clockSwap struct {
	clk   clock.Clock
	armed chan struct{}
}

// setClock moves the idle timer onto clk (the real clock until then) and
// returns once it is armed there, ckptIdle from clk's now.
func (c *checkpointer) setClock(clk clock.Clock) {
	armed := make(chan struct{})
	select {
	case c.clocks <- clockSwap{clock.Or(clk), armed}:
		<-armed
	case <-c.done:
	}
}

func (c *checkpointer) loop() {
	defer close(c.done)
	idle := clock.Real.NewTimer(ckptIdle)
	defer func() { idle.Stop() }()
	for {
		select {
		case <-c.stop:
			return
		case sw := <-c.clocks:
			idle.Stop()
			idle = sw.clk.NewTimer(ckptIdle)
			close(sw.armed)
			continue
		case <-c.kick:
		case <-idle.C():
		}
		if c.pending.Load() > 0 {
			c.checkpoint()
		}
		idle.Reset(ckptIdle)
	}
}

// checkpoint copies what the WAL holds into the database file as far as
// the readers allow; the next write restarts the WAL from its beginning
// once all of it was copied.
func (c *checkpointer) checkpoint() {
	c.pending.Store(0)
	var busy, frames, copied int
	err := c.db.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
	c.runs.Add(1)
	if err != nil {
		c.logger.Warn("sqlite wal checkpoint failed", "err", err)
		c.pending.Add(1) // again at the next tick
		return
	}
	if busy == 1 || copied < frames {
		// A reader's snapshot held part of the WAL back: again at the
		// next tick, even if no write comes.
		c.pending.Add(1)
	}
	c.logger.Debug("sqlite wal checkpoint", "frames", frames, "copied", copied, "busy", busy == 1)
}

// close stops the goroutine and closes its connection; closing again
// returns the first close's error.
func (c *checkpointer) close() error {
	c.once.Do(func() {
		close(c.stop)
		<-c.done
		c.err = c.db.Close()
	})
	return c.err
}

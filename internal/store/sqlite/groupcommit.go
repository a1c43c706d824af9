package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/stackbone/stackbone/internal/store"
)

// maxBatch caps how many writes one group commit holds.
const maxBatch = 64

// groupCommit queues the writes that arrive while a transaction holds the
// writer connection, so the next transaction runs them all and commits
// once. There is no committer goroutine: the writer that finds the
// connection free leads a batch on its own goroutine (so a lone writer pays
// no hand-off), and when it is done it hands the lead to the first queued
// writer, which takes the queue as its batch.
type groupCommit struct {
	mu    sync.Mutex
	busy  bool // a leader is running a batch
	queue []*writeReq

	// commits and writes count the committed transactions and the writes
	// they held (tests and benchmarks read them).
	commits, writes atomic.Int64
	// beforeCommit, when set by a test, runs before each COMMIT with the
	// number of writes in the batch.
	beforeCommit func(n int)
}

// The states of a queued write.
const (
	reqQueued  int32 = iota
	reqClaimed       // a leader took it: it runs, or is skipped, and is told
	reqGone          // its writer gave up (context done) while it was queued
)

// writeReq is one call of Store.write.
type writeReq struct {
	ctx   context.Context
	op    string
	fn    func(tx *wtx) error
	state atomic.Int32
	wake  chan struct{} // closed when the result is set, or the lead passed
	lead  bool          // set before wake closes: lead the next batch
	ran   bool          // fn ran in the batch's transaction
	err   error
	panic any // what fn panicked with, raised again in its writer
}

// write runs fn in a BEGIN IMMEDIATE transaction on the writer connection,
// possibly with other writers' functions (each in a savepoint of its own),
// and returns once the transaction committed. fn must not call write. Its
// outcome is the store's LastWrite.
func (s *Store) write(ctx context.Context, op string, fn func(tx *wtx) error) error {
	if err := ctx.Err(); err != nil {
		return mapErr(op, err)
	}
	err := s.enqueue(ctx, op, fn)
	s.noteWrite(ctx, err)
	return err
}

// enqueue is write without the outcome's record.
func (s *Store) enqueue(ctx context.Context, op string, fn func(tx *wtx) error) error {
	r := &writeReq{ctx: ctx, op: op, fn: fn}
	g := &s.gc
	g.mu.Lock()
	if !g.busy {
		g.busy = true
		g.mu.Unlock()
		r.state.Store(reqClaimed)
		s.lead(r, false)
		return r.result()
	}
	r.wake = make(chan struct{})
	g.queue = append(g.queue, r)
	g.mu.Unlock()
	select {
	case <-r.wake:
	case <-ctx.Done():
		if r.state.CompareAndSwap(reqQueued, reqGone) {
			return mapErr(op, ctx.Err())
		}
		<-r.wake // a leader took it: wait for the commit
	}
	if r.lead {
		s.lead(r, true)
	}
	return r.result()
}

func (r *writeReq) result() error {
	if r.panic != nil {
		panic(r.panic)
	}
	return r.err
}

// lead runs first and the writes queued behind it in batches, tells each
// its result and passes the lead on. handed says the lead was passed, so
// writers are busy: yield once to let the ones just woken join the batch.
func (s *Store) lead(first *writeReq, handed bool) {
	g := &s.gc
	if handed {
		runtime.Gosched()
	}
	batch := []*writeReq{first}
	g.mu.Lock()
	i := 0
	for ; i < len(g.queue) && len(batch) < maxBatch; i++ {
		if r := g.queue[i]; r.state.CompareAndSwap(reqQueued, reqClaimed) {
			batch = append(batch, r)
		}
	}
	g.dequeue(i)
	g.mu.Unlock()

	for rest := batch; len(rest) > 0; {
		rest = s.runBatch(rest)
	}
	for _, r := range batch[1:] {
		close(r.wake)
	}
	s.wc.flush(first.ctx) // the connection is free again: prepare what the batch missed

	g.mu.Lock()
	var next *writeReq
	for len(g.queue) > 0 && next == nil {
		if r := g.queue[0]; r.state.CompareAndSwap(reqQueued, reqClaimed) {
			next = r
		}
		g.dequeue(1)
	}
	if next == nil {
		g.busy = false
	}
	g.mu.Unlock()
	if next != nil {
		next.lead = true
		close(next.wake)
	}
}

// dequeue drops the first n queued writes.
func (g *groupCommit) dequeue(n int) {
	k := copy(g.queue, g.queue[n:])
	clear(g.queue[k:])
	g.queue = g.queue[:k]
}

// runBatch runs batch in one transaction and sets each write's result. When
// the transaction breaks part way, the writes that ran fail and the ones
// not run yet are returned for another transaction.
func (s *Store) runBatch(batch []*writeReq) (rest []*writeReq) {
	// No writer's cancellation may roll back the others' work: the
	// transaction and its statements ignore it (wtx runs them under the
	// writer's context without its cancellation), and a writer whose context is done before its
	// turn is skipped.
	ctx := context.WithoutCancel(batch[0].ctx)
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		for _, r := range batch {
			r.err = mapErr(r.op, err)
		}
		return nil
	}
	wt := &wtx{Tx: tx, c: s.wc, ctx: ctx}
	alone := len(batch) == 1
	ran := 0
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = mapErr(r.op, err)
			continue
		}
		if alone {
			// No savepoint: a failure rolls the transaction back.
			if err := r.call(wt); err != nil {
				s.rollback(tx, r.op)
				r.err = mapErr(r.op, err)
				return nil
			}
			ran++
			continue
		}
		if err := s.inSavepoint(ctx, wt, r); err != nil {
			s.rollback(tx, r.op)
			s.logger.Warn("sqlite group commit aborted", "op", r.op, "writes", i+1, "err", err)
			for _, d := range batch[:i+1] {
				if (d == r && d.err == nil) || (d != r && d.ran) {
					d.err = fmt.Errorf("sqlite: %s: %w: group commit aborted by another write: %w", d.op, store.ErrUnavailable, err)
				}
			}
			return batch[i+1:]
		}
		ran++
	}
	if ran == 0 {
		s.rollback(tx, batch[0].op)
		return nil
	}
	if g := s.gc.beforeCommit; g != nil {
		g(ran)
	}
	if err := tx.Commit(); err != nil {
		for _, r := range batch {
			if r.ran {
				r.err = mapErr(r.op, err)
			}
		}
		return nil
	}
	s.gc.commits.Add(1)
	s.gc.writes.Add(int64(ran))
	if s.ckpt != nil {
		s.ckpt.committed()
	}
	return nil
}

// inSavepoint runs r inside a savepoint, rolled back when r fails. It
// returns an error only when the transaction cannot go on.
func (s *Store) inSavepoint(ctx context.Context, tx *wtx, r *writeReq) error {
	if _, err := tx.ExecContext(ctx, `SAVEPOINT w`); err != nil {
		return err
	}
	if err := r.call(tx); err != nil {
		r.err = mapErr(r.op, err)
		if _, rerr := tx.ExecContext(ctx, `ROLLBACK TO w`); rerr != nil {
			return errors.Join(err, rerr)
		}
	}
	_, err := tx.ExecContext(ctx, `RELEASE w`)
	return err
}

// rollback ends a transaction that is not to commit.
func (s *Store) rollback(tx *sql.Tx, op string) {
	if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		s.logger.Warn("sqlite rollback failed", "op", op, "err", err)
	}
}

// call runs r's fn, turning a panic into an error raised again in r's
// writer once the batch is over.
func (r *writeReq) call(tx *wtx) (err error) {
	r.ran = true
	tx.ctx = context.WithoutCancel(r.ctx)
	defer func() {
		if p := recover(); p != nil {
			r.panic = p
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return r.fn(tx)
}

// queued counts the writes waiting for a batch.
func (g *groupCommit) queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, r := range g.queue {
		if r.state.Load() == reqQueued {
			n++
		}
	}
	return n
}

package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache prepares each query text once per database handle (database/sql
// then keeps one prepared statement per connection), so hot queries are not
// parsed again on every call. The texts are the driver's own constants and
// the few filter variants of the list queries, so the cache stays small.
//
// The writer has a single connection, which a transaction holds: preparing
// on it from inside a transaction would wait for itself. So a write
// transaction only uses statements already prepared; a query it misses runs
// unprepared and is prepared after the transaction ends (flush).
type stmtCache struct {
	db      *sql.DB
	mu      sync.Mutex
	m       map[string]*sql.Stmt
	pending map[string]bool
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, m: map[string]*sql.Stmt{}, pending: map[string]bool{}}
}

// lookup returns a prepared statement, or notes q to be prepared by flush.
func (c *stmtCache) lookup(q string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.m[q]
	if !ok {
		c.pending[q] = true
	}
	return st
}

// flush prepares the queries lookup missed; call it while no transaction
// holds the connection. A failure only means the query stays unprepared.
func (c *stmtCache) flush(ctx context.Context) {
	c.mu.Lock()
	var qs []string
	for q := range c.pending {
		qs = append(qs, q)
	}
	clear(c.pending)
	c.mu.Unlock()
	for _, q := range qs {
		c.prepare(ctx, q) // a failure only means the query stays unprepared
	}
}

// prepare prepares q without holding the lock (preparing may wait for a
// connection that a transaction needing the lock holds) and caches it.
func (c *stmtCache) prepare(ctx context.Context, q string) (*sql.Stmt, error) {
	st, err := c.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[q]; ok {
		_ = st.Close()
		return old, nil
	}
	c.m[q] = st
	return st, nil
}

func (c *stmtCache) get(ctx context.Context, q string) (*sql.Stmt, error) {
	c.mu.Lock()
	st, ok := c.m[q]
	c.mu.Unlock()
	if ok {
		return st, nil
	}
	return c.prepare(ctx, q)
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		_ = st.Close()
	}
	c.m = map[string]*sql.Stmt{}
}

// QueryRowContext runs a cached statement on the pool.
func (c *stmtCache) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	st, err := c.get(ctx, q)
	if err != nil {
		return c.db.QueryRowContext(ctx, q, args...) // reports the error
	}
	return st.QueryRowContext(ctx, args...)
}

// QueryContext runs a cached statement on the pool.
func (c *stmtCache) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := c.get(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// wtx is a write transaction whose statements come from the writer's cache.
// A group commit holds several writers' work, so a statement runs under
// ctx, the writer's context without its cancellation, instead of the one
// it is given: an interrupted statement could roll back the whole
// transaction, the other writers' work with it.
type wtx struct {
	*sql.Tx
	c   *stmtCache
	ctx context.Context
	// err is the failure of a queued statement (Queue).
	err error
}

// QueryRowContext runs q in the transaction, prepared when cached.
func (t *wtx) QueryRowContext(_ context.Context, q string, args ...any) *sql.Row {
	ctx := t.ctx
	if st := t.c.lookup(q); st != nil {
		return t.Tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, q, args...)
}

// ExecContext runs q in the transaction, prepared when cached.
func (t *wtx) ExecContext(_ context.Context, q string, args ...any) (sql.Result, error) {
	ctx := t.ctx
	if st := t.c.lookup(q); st != nil {
		return t.Tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, q, args...)
}

// QueryContext runs q in the transaction, prepared when cached.
func (t *wtx) QueryContext(_ context.Context, q string, args ...any) (*sql.Rows, error) {
	ctx := t.ctx
	if st := t.c.lookup(q); st != nil {
		return t.Tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, q, args...)
}

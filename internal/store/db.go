package store

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/stackbone/stackbone/internal/clock"
)

// DB is the Store every driver shares: each durable transaction written
// once over a Driver. A driver package opens its database, builds its
// Driver and returns a DB around it (embedded in its own Store type).
//
// Beyond the Store contract: BeginRun, Checkpoint and FinishRun write the
// assigned Seq, ThreadID and RunID back into the caller's Events slice once
// the transaction commits, so the caller can publish the stored events live
// with their sequence numbers.
type DB struct {
	d      Driver
	name   string
	logger *slog.Logger
	now    func() time.Time
	// webhooks are the endpoints notices are written for (SetWebhooks).
	webhooks []string
	// push encodes A2A push notifications (SetPushEncoder); nil: none.
	push PushEncoder
	// vector indexes the memory store's embeddings (EnableVectorIndex);
	// nil: exact scans.
	vector *VectorIndex
}

var _ Store = (*DB)(nil)

// Open returns the store over d, once d's schema is up to date: it
// replaces the endpoint URLs of webhook deliveries written before they
// were stored by reference (WebhookRef). A nil logger discards logs.
func Open(ctx context.Context, d Driver, logger *slog.Logger) (*DB, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	db := &DB{d: d, name: d.Name(), logger: logger, now: time.Now}
	if err := db.refLegacyEndpoints(ctx); err != nil {
		return nil, d.MapErr("open", err)
	}
	return db, nil
}

// Driver returns the driver the store runs on.
func (db *DB) Driver() Driver { return db.d }

// SetClock makes the store read the time from c where a call leaves it
// unset (a zero Now or At). Call it before the store is used.
func (db *DB) SetClock(c clock.Clock) { db.now = clock.Or(c).Now }

// SetWebhooks sets the endpoints every notice is delivered to; with none,
// no notice is written. Call it before the store is used.
func (db *DB) SetWebhooks(endpoints []string) { db.webhooks = append([]string(nil), endpoints...) }

// Ping checks the database answers.
func (db *DB) Ping(ctx context.Context) error { return db.d.Ping(ctx) }

// LastWrite returns the outcome of the latest write transaction.
func (db *DB) LastWrite() WriteStatus { return db.d.LastWrite() }

// Close closes the database.
func (db *DB) Close() error { return db.d.Close() }

// ProbeWrite rewrites the health_probe row in a write transaction of its
// own.
func (db *DB) ProbeWrite(ctx context.Context) error {
	now := db.now()
	return db.d.Write(ctx, "probe write", func(tx Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO health_probe (id, probed_at) VALUES (1, $1)
			ON CONFLICT (id) DO UPDATE SET probed_at = excluded.probed_at`, now)
		return err
	})
}

// invalid prefixes a validation error with the driver's name.
func (db *DB) invalid(err error) error { return fmt.Errorf("%s: %w", db.name, err) }

// read maps an error of a read.
func (db *DB) read(op string, err error) error { return db.d.MapErr(op, err) }

// threadExists returns ErrNotFound unless the tenant has the thread.
func threadExists(ctx context.Context, q Querier, tenant, id string) error {
	var one int
	err := q.QueryRow(ctx, `SELECT 1 FROM threads WHERE tenant = $1 AND id = $2`, tenant, id).Scan(&one)
	if err == ErrNoRows {
		return fmt.Errorf("thread %q: %w", id, ErrNotFound)
	}
	return err
}

// leaseLost explains why a run's conditional update matched nothing.
func leaseLost(ctx context.Context, q Querier, tenant, id, runID string) error {
	if err := threadExists(ctx, q, tenant, id); err != nil {
		return err
	}
	return fmt.Errorf("run %q on thread %q: %w", runID, id, ErrLeaseLost)
}

// refLegacyEndpoints replaces the endpoint URLs of outbox rows written
// before rows named endpoints by reference (WebhookRef), so no row keeps a
// URL's token; pending rows of a still configured endpoint are then
// delivered as before. Replicas opening at once write the same values.
func (db *DB) refLegacyEndpoints(ctx context.Context) error {
	rows, err := db.d.Read().Query(ctx, `SELECT DISTINCT endpoint FROM webhook_outbox WHERE endpoint LIKE 'http://%' OR endpoint LIKE 'https://%'`)
	if err != nil {
		return fmt.Errorf("webhook outbox: %w", err)
	}
	urls, err := CollectRows(rows, func(r Rows) (*string, error) {
		var u string
		return &u, r.Scan(&u)
	})
	rows.Close()
	if err != nil {
		return fmt.Errorf("webhook outbox: %w", err)
	}
	var legacy []string
	for _, u := range urls {
		if LegacyEndpoint(u) {
			legacy = append(legacy, u)
		}
	}
	if len(legacy) == 0 {
		return nil
	}
	err = db.d.Write(ctx, "webhook outbox", func(tx Tx) error {
		for _, u := range legacy {
			tx.Queue(`UPDATE webhook_outbox SET endpoint = $1 WHERE endpoint = $2`, WebhookRef(u), u)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("webhook outbox: %w", err)
	}
	db.logger.Info("webhook outbox: endpoint URLs replaced by references", "endpoints", len(legacy))
	return nil
}

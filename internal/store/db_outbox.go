package store

import (
	"context"
	"fmt"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"time"
)

// notify writes the notices' delivery rows in tx, when webhooks are set.
func (db *DB) notify(ctx context.Context, tx Tx, notices ...Notice) error {
	if len(db.webhooks) == 0 || len(notices) == 0 {
		return nil
	}
	if tenant, thread, ok := NoticeThread(notices); ok {
		var last int64
		if err := tx.QueryRow(ctx, `UPDATE threads SET notice_seq = notice_seq + $1 WHERE tenant = $2 AND id = $3 RETURNING notice_seq`,
			len(notices), tenant, thread).Scan(&last); err != nil {
			return fmt.Errorf("webhook outbox: number the notices: %w", err)
		}
		Sequence(notices, last)
	}
	tp := traceParent(ctx)
	var rows [][]any
	for _, n := range notices {
		for _, ep := range db.webhooks {
			rows = append(rows, []any{n.ID, ep, n.Tenant, n.Type, string(n.Data), n.At, n.At, tp})
		}
	}
	queueInsert(tx, `INSERT INTO webhook_outbox (id, endpoint, tenant, type, data, created_at, next_at, traceparent)`, 8, rows)
	return nil
}

// traceParent is the W3C traceparent of the span in ctx ("" for none):
// the trace a notice stored in ctx's transaction belongs to.
func traceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// NotifyOnce queues n for every webhook endpoint unless a notice of its id
// was queued before: a fact several replicas may find (a spent budget)
// goes out once.
func (db *DB) NotifyOnce(ctx context.Context, n Notice) error {
	if len(db.webhooks) == 0 {
		return nil
	}
	return db.d.Write(ctx, "notify once", func(tx Tx) error {
		for _, ep := range db.webhooks {
			tx.Queue(`INSERT INTO webhook_outbox (id, endpoint, tenant, type, data, created_at, next_at, traceparent)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id, endpoint) DO NOTHING`,
				n.ID, ep, n.Tenant, n.Type, string(n.Data), n.At, n.At, traceParent(ctx))
		}
		return nil
	})
}

// notifyDecision writes the notice of a decided interrupt, when webhooks
// are set.
func (db *DB) notifyDecision(ctx context.Context, tx Tx, in *Interrupt, at time.Time) error {
	if len(db.webhooks) == 0 {
		return nil
	}
	n, err := DecisionNotice(in, at)
	if err != nil {
		return err
	}
	return db.notify(ctx, tx, n)
}

const deliveryCols = `id, endpoint, tenant, type, data::text, created_at, status, attempts, next_at, last_status, last_error, delivered_at, traceparent`

// scanDelivery scans deliveryCols.
func scanDelivery(row Row) (*Delivery, error) {
	var (
		d    Delivery
		data string
	)
	if err := row.Scan(&d.ID, &d.Endpoint, &d.Tenant, &d.Type, &data, ScanTime(&d.At), &d.Status, &d.Attempts,
		ScanTime(&d.NextAt), &d.LastStatus, &d.LastError, ScanTimePtr(&d.DeliveredAt), &d.TraceParent); err != nil {
		return nil, err
	}
	d.Data = []byte(data)
	return &d, nil
}

// collectDeliveries reads rows of deliveryCols and closes them.
func collectDeliveries(rows ClosingRows) ([]Delivery, error) {
	defer rows.Close()
	return CollectRows(rows, func(r Rows) (*Delivery, error) { return scanDelivery(r) })
}

// ClaimDeliveries leases due pending deliveries to c.Endpoints; rows
// another replica is claiming are skipped, not waited for (SKIP LOCKED).
func (db *DB) ClaimDeliveries(ctx context.Context, c ClaimDeliveries) ([]Delivery, error) {
	if len(c.Endpoints) == 0 && !c.Push {
		return nil, nil
	}
	args := append([]any{c.Owner, c.LeaseUntil, c.Now, Limit(c.Limit, DefaultLimit)}, anys(c.Endpoints)...)
	which := `endpoint IN (` + Params(5, len(c.Endpoints)) + `)`
	if c.Push {
		args, which = args[:4], `endpoint LIKE '`+PushEndpointPrefix+`%'`
	}
	var out []Delivery
	err := db.d.Write(ctx, "claim deliveries", func(tx Tx) error {
		rows, err := tx.Query(ctx, `UPDATE webhook_outbox SET lease_owner = $1, lease_until = $2
			WHERE (id, endpoint) IN (SELECT id, endpoint FROM webhook_outbox
				WHERE status = 'pending' AND next_at <= $3 AND (lease_until IS NULL OR lease_until < $3)
					AND `+which+`
				ORDER BY next_at, created_at LIMIT $4
				FOR UPDATE SKIP LOCKED)
			RETURNING `+deliveryCols, args...)
		if err != nil {
			return err
		}
		out, err = collectDeliveries(rows)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RecordAttempt records the outcome of an attempt of a leased delivery:
// ErrLeaseLost when the delivery is no longer leased to a.Owner.
func (db *DB) RecordAttempt(ctx context.Context, a DeliveryAttempt) error {
	status, next := AttemptOutcome(a)
	var delivered any
	if a.Delivered {
		delivered = a.At
	}
	return db.d.Write(ctx, "record attempt", func(tx Tx) error {
		n, err := tx.Exec(ctx, `UPDATE webhook_outbox SET status = $1, attempts = attempts + 1, next_at = $2,
				last_status = $3, last_error = $4, delivered_at = $5, lease_owner = '', lease_until = NULL
			WHERE id = $6 AND endpoint = $7 AND lease_owner = $8 AND status = 'pending'`,
			string(status), next, a.HTTPStatus, CleanText(a.Error), delivered, a.ID, a.Endpoint, a.Owner)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("delivery %s to %s: %w", a.ID, a.Endpoint, ErrLeaseLost)
		}
		return nil
	})
}

// ListDeliveries returns the tenant's deliveries, newest first.
func (db *DB) ListDeliveries(ctx context.Context, tenant string, limit int) ([]Delivery, error) {
	rows, err := db.d.Read().Query(ctx, `SELECT `+deliveryCols+` FROM webhook_outbox WHERE tenant = $1
		ORDER BY created_at DESC, id DESC, endpoint LIMIT $2`, tenant, Limit(limit, DefaultLimit))
	if err != nil {
		return nil, db.read("list deliveries", err)
	}
	out, err := collectDeliveries(rows)
	if err != nil {
		return nil, db.read("list deliveries", err)
	}
	return out, nil
}

// SweepDeliveries marks failed the deliveries pending since before
// staleBefore, then deletes the finished deliveries of notices from before
// before.
func (db *DB) SweepDeliveries(ctx context.Context, before, staleBefore time.Time) (int, error) {
	var n int64
	err := db.d.Write(ctx, "sweep deliveries", func(tx Tx) error {
		tx.Queue(`UPDATE webhook_outbox SET status = 'failed', last_error = $1, lease_owner = '', lease_until = NULL
			WHERE status = 'pending' AND created_at < $2`, StaleDelivery, staleBefore)
		var err error
		n, err = tx.Exec(ctx, `DELETE FROM webhook_outbox WHERE status <> 'pending' AND created_at < $1`, before)
		return err
	})
	if err != nil {
		return 0, err
	}
	return int(n), nil
}

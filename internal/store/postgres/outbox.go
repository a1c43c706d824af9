package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stackbone/stackbone/internal/store"
)

// SetWebhooks sets the endpoints every notice is delivered to; with none,
// no notice is written.
func (s *Store) SetWebhooks(endpoints []string) {
	s.webhooks = append([]string(nil), endpoints...)
	s.DB.SetWebhooks(endpoints)
}

// outboxRows are the delivery rows of notices to endpoints, as column
// arrays to unnest.
type outboxRows struct {
	ID, Endpoint, Tenant, Type, Data []string
	At                               []time.Time
}

// add appends n's delivery to every endpoint.
func (r *outboxRows) add(n store.Notice, endpoints []string) {
	for _, e := range endpoints {
		r.ID = append(r.ID, n.ID)
		r.Endpoint = append(r.Endpoint, e)
		r.Tenant = append(r.Tenant, n.Tenant)
		r.Type = append(r.Type, n.Type)
		r.Data = append(r.Data, string(n.Data))
		r.At = append(r.At, n.At)
	}
}

// notify writes the notices' delivery rows in tx, when webhooks are set.
func (s *Store) notify(ctx context.Context, tx pgx.Tx, notices ...store.Notice) error {
	if len(s.webhooks) == 0 || len(notices) == 0 {
		return nil
	}
	if tenant, thread, ok := store.NoticeThread(notices); ok {
		var last int64
		if err := tx.QueryRow(ctx, `UPDATE threads SET notice_seq = notice_seq + $1 WHERE tenant = $2 AND id = $3 RETURNING notice_seq`,
			len(notices), tenant, thread).Scan(&last); err != nil {
			return fmt.Errorf("webhook outbox: number the notices: %w", err)
		}
		store.Sequence(notices, last)
	}
	var rows outboxRows
	for _, n := range notices {
		rows.add(n, s.webhooks)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO webhook_outbox (id, endpoint, tenant, type, data, created_at, next_at)
		SELECT x.id, x.endpoint, x.tenant, x.type, x.data::json, x.at, x.at
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[])
			AS x(id, endpoint, tenant, type, data, at)`,
		rows.ID, rows.Endpoint, rows.Tenant, rows.Type, rows.Data, rows.At); err != nil {
		return fmt.Errorf("webhook outbox: %w", err)
	}
	return nil
}

// notifyDecision writes the notice of a decided interrupt.
func (s *Store) notifyDecision(ctx context.Context, tx pgx.Tx, in *store.Interrupt, at time.Time) error {
	if len(s.webhooks) == 0 {
		return nil
	}
	n, err := store.DecisionNotice(in, at)
	if err != nil {
		return err
	}
	return s.notify(ctx, tx, n)
}

const deliveryCols = `id, endpoint, tenant, type, data::text, created_at, status, attempts, next_at, last_status, last_error, delivered_at`

func scanDelivery(row pgx.Row) (*store.Delivery, error) {
	var (
		d         store.Delivery
		data      string
		delivered *time.Time
	)
	if err := row.Scan(&d.ID, &d.Endpoint, &d.Tenant, &d.Type, &data, &d.At, &d.Status, &d.Attempts, &d.NextAt,
		&d.LastStatus, &d.LastError, &delivered); err != nil {
		return nil, err
	}
	d.Data = []byte(data)
	d.At, d.NextAt = d.At.UTC(), d.NextAt.UTC()
	if delivered != nil {
		t := delivered.UTC()
		d.DeliveredAt = &t
	}
	return &d, nil
}

func (s *Store) queryDeliveries(ctx context.Context, op, query string, args ...any) ([]store.Delivery, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, mapErr(op, err)
	}
	defer rows.Close()
	out, err := store.CollectRows(rows, func(r store.Rows) (*store.Delivery, error) { return scanDelivery(r) })
	if err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}

// ClaimDeliveries leases due pending deliveries to c.Endpoints; rows
// another replica is claiming are skipped, not waited for.
func (s *Store) ClaimDeliveries(ctx context.Context, c store.ClaimDeliveries) (_ []store.Delivery, err error) {
	defer func() { s.noteWrite(ctx, err) }()
	if len(c.Endpoints) == 0 {
		return nil, nil
	}
	return s.queryDeliveries(ctx, "claim deliveries", `UPDATE webhook_outbox o SET lease_owner = $1, lease_until = $2
		FROM (SELECT id, endpoint FROM webhook_outbox
			WHERE status = 'pending' AND next_at <= $3 AND (lease_until IS NULL OR lease_until < $3)
				AND endpoint = ANY($4::text[])
			ORDER BY next_at, created_at LIMIT $5
			FOR UPDATE SKIP LOCKED) due
		WHERE o.id = due.id AND o.endpoint = due.endpoint
		RETURNING o.id, o.endpoint, o.tenant, o.type, o.data::text, o.created_at, o.status, o.attempts, o.next_at,
			o.last_status, o.last_error, o.delivered_at`,
		c.Owner, c.LeaseUntil, c.Now, c.Endpoints, store.Limit(c.Limit, store.DefaultLimit))
}

// RecordAttempt records the outcome of an attempt of a leased delivery.
func (s *Store) RecordAttempt(ctx context.Context, a store.DeliveryAttempt) (err error) {
	defer func() { s.noteWrite(ctx, err) }()
	status, next := store.AttemptOutcome(a)
	var delivered *time.Time
	if a.Delivered {
		delivered = &a.At
	}
	tag, err := s.pool.Exec(ctx, `UPDATE webhook_outbox SET status = $1, attempts = attempts + 1, next_at = $2,
			last_status = $3, last_error = $4, delivered_at = $5, lease_owner = '', lease_until = NULL
		WHERE id = $6 AND endpoint = $7 AND lease_owner = $8 AND status = 'pending'`,
		string(status), next, a.HTTPStatus, store.CleanText(a.Error), delivered, a.ID, a.Endpoint, a.Owner)
	if err != nil {
		return mapErr("record attempt", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: record attempt: delivery %s to %s: %w", a.ID, a.Endpoint, store.ErrLeaseLost)
	}
	return nil
}

// ListDeliveries returns the tenant's deliveries, newest first.
func (s *Store) ListDeliveries(ctx context.Context, tenant string, limit int) ([]store.Delivery, error) {
	return s.queryDeliveries(ctx, "list deliveries", `SELECT `+deliveryCols+` FROM webhook_outbox WHERE tenant = $1
		ORDER BY created_at DESC, id DESC, endpoint LIMIT $2`, tenant, store.Limit(limit, store.DefaultLimit))
}

// SweepDeliveries marks failed the deliveries pending since before
// staleBefore, then deletes the finished deliveries of notices from before
// before.
func (s *Store) SweepDeliveries(ctx context.Context, before, staleBefore time.Time) (_ int, err error) {
	defer func() { s.noteWrite(ctx, err) }()
	var n int64
	err = s.tx(ctx, "sweep deliveries", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE webhook_outbox SET status = 'failed', last_error = $2, lease_owner = '', lease_until = NULL
			WHERE status = 'pending' AND created_at < $1`, staleBefore, store.StaleDelivery); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM webhook_outbox WHERE status <> 'pending' AND created_at < $1`, before)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, err
	}
	return int(n), nil
}

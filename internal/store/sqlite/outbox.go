package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/stackbone/stackbone/internal/store"
)

// SetWebhooks sets the endpoints every notice is delivered to; with none,
// no notice is written.
func (s *Store) SetWebhooks(endpoints []string) {
	s.webhooks = append([]string(nil), endpoints...)
	s.DB.SetWebhooks(endpoints)
}

// notify writes the notices' delivery rows in tx, when webhooks are set.
func (s *Store) notify(ctx context.Context, tx *wtx, notices ...store.Notice) error {
	if len(s.webhooks) == 0 || len(notices) == 0 {
		return nil
	}
	if tenant, thread, ok := store.NoticeThread(notices); ok {
		var last int64
		if err := tx.QueryRowContext(ctx, `UPDATE threads SET notice_seq = notice_seq + ? WHERE tenant = ? AND id = ? RETURNING notice_seq`,
			len(notices), tenant, thread).Scan(&last); err != nil {
			return fmt.Errorf("webhook outbox: number the notices: %w", err)
		}
		store.Sequence(notices, last)
	}
	for _, n := range notices {
		at := n.At.UnixMicro()
		for _, ep := range s.webhooks {
			if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_outbox (id, endpoint, tenant, type, data, created_at, next_at)
				VALUES (?, ?, ?, ?, ?, ?, ?)`, n.ID, ep, n.Tenant, n.Type, string(n.Data), at, at); err != nil {
				return fmt.Errorf("webhook outbox: %w", err)
			}
		}
	}
	return nil
}

const deliveryCols = `id, endpoint, tenant, type, data, created_at, status, attempts, next_at, last_status, last_error, delivered_at`

func scanDelivery(sc scanner) (*store.Delivery, error) {
	var (
		d             store.Delivery
		data          string
		created, next int64
		delivered     sql.NullInt64
	)
	if err := sc.Scan(&d.ID, &d.Endpoint, &d.Tenant, &d.Type, &data, &created, &d.Status, &d.Attempts, &next,
		&d.LastStatus, &d.LastError, &delivered); err != nil {
		return nil, err
	}
	d.Data = []byte(data)
	d.At = time.UnixMicro(created).UTC()
	d.NextAt = time.UnixMicro(next).UTC()
	if delivered.Valid {
		t := time.UnixMicro(delivered.Int64).UTC()
		d.DeliveredAt = &t
	}
	return &d, nil
}

// ClaimDeliveries leases due pending deliveries to c.Endpoints.
func (s *Store) ClaimDeliveries(ctx context.Context, c store.ClaimDeliveries) ([]store.Delivery, error) {
	if len(c.Endpoints) == 0 {
		return nil, nil
	}
	now := c.Now.UnixMicro()
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(c.Endpoints)), ", ")
	args := []any{c.Owner, c.LeaseUntil.UnixMicro(), now, now}
	for _, e := range c.Endpoints {
		args = append(args, e)
	}
	args = append(args, store.Limit(c.Limit, store.DefaultLimit))
	var out []store.Delivery
	err := s.write(ctx, "claim deliveries", func(tx *wtx) error {
		rows, err := tx.QueryContext(ctx, `UPDATE webhook_outbox SET lease_owner = ?, lease_until = ?
			WHERE rowid IN (SELECT rowid FROM webhook_outbox
				WHERE status = 'pending' AND next_at <= ? AND (lease_until IS NULL OR lease_until < ?)
					AND endpoint IN (`+marks+`)
				ORDER BY next_at, created_at LIMIT ?)
			RETURNING `+deliveryCols, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		out, err = store.CollectRows(rows, func(r store.Rows) (*store.Delivery, error) { return scanDelivery(r) })
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RecordAttempt records the outcome of an attempt of a leased delivery.
func (s *Store) RecordAttempt(ctx context.Context, a store.DeliveryAttempt) error {
	status, next := store.AttemptOutcome(a)
	var delivered any
	if a.Delivered {
		delivered = a.At.UnixMicro()
	}
	return s.write(ctx, "record attempt", func(tx *wtx) error {
		r, err := tx.ExecContext(ctx, `UPDATE webhook_outbox SET status = ?, attempts = attempts + 1, next_at = ?,
				last_status = ?, last_error = ?, delivered_at = ?, lease_owner = '', lease_until = NULL
			WHERE id = ? AND endpoint = ? AND lease_owner = ? AND status = 'pending'`,
			string(status), next.UnixMicro(), a.HTTPStatus, store.CleanText(a.Error), delivered, a.ID, a.Endpoint, a.Owner)
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return err
			}
			return fmt.Errorf("delivery %s to %s: %w", a.ID, a.Endpoint, store.ErrLeaseLost)
		}
		return nil
	})
}

// ListDeliveries returns the tenant's deliveries, newest first.
func (s *Store) ListDeliveries(ctx context.Context, tenant string, limit int) ([]store.Delivery, error) {
	rows, err := s.rc.QueryContext(ctx, `SELECT `+deliveryCols+` FROM webhook_outbox WHERE tenant = ?
		ORDER BY created_at DESC, id DESC, endpoint LIMIT ?`, tenant, store.Limit(limit, store.DefaultLimit))
	if err != nil {
		return nil, mapErr("list deliveries", err)
	}
	defer rows.Close()
	out, err := store.CollectRows(rows, func(r store.Rows) (*store.Delivery, error) { return scanDelivery(r) })
	if err != nil {
		return nil, mapErr("list deliveries", err)
	}
	return out, nil
}

// SweepDeliveries marks failed the deliveries pending since before
// staleBefore, then deletes the finished deliveries of notices from before
// before.
func (s *Store) SweepDeliveries(ctx context.Context, before, staleBefore time.Time) (int, error) {
	var n int64
	err := s.write(ctx, "sweep deliveries", func(tx *wtx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE webhook_outbox SET status = 'failed', last_error = ?, lease_owner = '', lease_until = NULL
			WHERE status = 'pending' AND created_at < ?`, store.StaleDelivery, staleBefore.UnixMicro()); err != nil {
			return err
		}
		r, err := tx.ExecContext(ctx, `DELETE FROM webhook_outbox WHERE status <> 'pending' AND created_at < ?`, before.UnixMicro())
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	if err != nil {
		return 0, err
	}
	return int(n), nil
}

// notifyDecision writes the notice of a decided interrupt.
func (s *Store) notifyDecision(ctx context.Context, tx *wtx, in *store.Interrupt, at time.Time) error {
	if len(s.webhooks) == 0 {
		return nil
	}
	n, err := store.DecisionNotice(in, at)
	if err != nil {
		return err
	}
	return s.notify(ctx, tx, n)
}

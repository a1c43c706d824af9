package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

var _ ScheduleStore = (*DB)(nil)

const scheduleCols = `tenant, id, name, agent, cron, timezone, input, thread, catch_up, key_label, enabled, source,
	created_at, updated_at, next_at, last_due_at, last_status, last_error, last_thread_id, last_run_id`

// scanSchedule scans scheduleCols.
func scanSchedule(row Row) (*Schedule, error) {
	var s Schedule
	if err := row.Scan(&s.Tenant, &s.ID, &s.Name, &s.Agent, &s.Cron, &s.Timezone, &s.Input, &s.Thread, &s.CatchUp, &s.Key,
		&s.Enabled, &s.Source, ScanTime(&s.CreatedAt), ScanTime(&s.UpdatedAt), ScanTimePtr(&s.NextAt), ScanTimePtr(&s.LastDueAt),
		&s.LastStatus, &s.LastError, &s.LastThreadID, &s.LastRunID); err != nil {
		return nil, err
	}
	return &s, nil
}

func collectSchedules(rows ClosingRows) ([]Schedule, error) {
	defer rows.Close()
	return CollectRows(rows, func(r Rows) (*Schedule, error) { return scanSchedule(r) })
}

// micro is t at the stored precision.
func micro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

const insertScheduleSQL = `INSERT INTO schedules (tenant, id, name, agent, cron, timezone, input, thread, catch_up, key_label,
		enabled, source, created_at, updated_at, next_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
	ON CONFLICT DO NOTHING`

func insertScheduleArgs(s Schedule) []any {
	return []any{s.Tenant, s.ID, s.Name, s.Agent, s.Cron, s.Timezone, s.Input, s.Thread, s.CatchUp, s.Key,
		s.Enabled, s.Source, s.CreatedAt, s.UpdatedAt, TimePtrArg(s.NextAt)}
}

// fillTimes sets a schedule's zero CreatedAt and UpdatedAt to now.
func (db *DB) fillTimes(s *Schedule) {
	now := db.now()
	if s.CreatedAt.IsZero() {
		s.CreatedAt = now
	}
	if s.UpdatedAt.IsZero() {
		s.UpdatedAt = s.CreatedAt
	}
}

// CreateSchedule stores a new schedule (ErrScheduleExists for a taken id
// or agent and name).
func (db *DB) CreateSchedule(ctx context.Context, s Schedule) error {
	if err := s.Validate("create schedule"); err != nil {
		return db.invalid(err)
	}
	db.fillTimes(&s)
	return db.d.Write(ctx, "create schedule", func(tx Tx) error {
		n, err := tx.Exec(ctx, insertScheduleSQL, insertScheduleArgs(s)...)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("schedule %q (%s/%s): %w", s.ID, s.Agent, s.Name, ErrScheduleExists)
		}
		return nil
	})
}

// UpdateSchedule replaces a schedule's definition.
func (db *DB) UpdateSchedule(ctx context.Context, s Schedule) error {
	if s.Source == "" {
		s.Source = ScheduleAPI
	}
	if err := s.Validate("update schedule"); err != nil {
		return db.invalid(err)
	}
	db.fillTimes(&s)
	return db.d.Write(ctx, "update schedule", func(tx Tx) error {
		var taken int
		err := tx.QueryRow(ctx, `SELECT count(*) FROM schedules o JOIN schedules s ON s.tenant = o.tenant AND s.agent = o.agent
			WHERE o.tenant = $1 AND o.id = $2 AND s.name = $3 AND s.id <> $2`, s.Tenant, s.ID, s.Name).Scan(&taken)
		if err != nil {
			return err
		}
		if taken > 0 {
			return fmt.Errorf("schedule name %q: %w", s.Name, ErrScheduleExists)
		}
		n, err := tx.Exec(ctx, `UPDATE schedules SET name = $3, cron = $4, timezone = $5, input = $6, thread = $7, catch_up = $8,
				key_label = $9, enabled = $10, next_at = $11, updated_at = $12
			WHERE tenant = $1 AND id = $2`,
			s.Tenant, s.ID, s.Name, s.Cron, s.Timezone, s.Input, s.Thread, s.CatchUp, s.Key, s.Enabled, TimePtrArg(s.NextAt), s.UpdatedAt)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("schedule %q: %w", s.ID, ErrNotFound)
		}
		return nil
	})
}

// GetSchedule returns the tenant's schedule, or ErrNotFound.
func (db *DB) GetSchedule(ctx context.Context, tenant, id string) (*Schedule, error) {
	if err := CheckText("get schedule", "tenant", tenant, "id", id); err != nil {
		return nil, db.invalid(err)
	}
	s, err := scanSchedule(db.d.Read().QueryRow(ctx, `SELECT `+scheduleCols+` FROM schedules WHERE tenant = $1 AND id = $2`, tenant, id))
	if errors.Is(err, ErrNoRows) {
		return nil, fmt.Errorf("schedule %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, db.read("get schedule", err)
	}
	return s, nil
}

// ListSchedules lists the tenant's schedules by agent, then name.
func (db *DB) ListSchedules(ctx context.Context, tenant string) ([]Schedule, error) {
	if err := CheckText("list schedules", "tenant", tenant); err != nil {
		return nil, db.invalid(err)
	}
	rows, err := db.d.Read().Query(ctx, `SELECT `+scheduleCols+` FROM schedules WHERE tenant = $1 ORDER BY agent, name, id`, tenant)
	if err != nil {
		return nil, db.read("list schedules", err)
	}
	out, err := collectSchedules(rows)
	if err != nil {
		return nil, db.read("list schedules", err)
	}
	return out, nil
}

// DeleteSchedule deletes a schedule and its firings.
func (db *DB) DeleteSchedule(ctx context.Context, tenant, id string) error {
	if err := CheckText("delete schedule", "tenant", tenant, "id", id); err != nil {
		return db.invalid(err)
	}
	return db.d.Write(ctx, "delete schedule", func(tx Tx) error {
		tx.Queue(`DELETE FROM schedule_firings WHERE tenant = $1 AND schedule_id = $2`, tenant, id)
		n, err := tx.Exec(ctx, `DELETE FROM schedules WHERE tenant = $1 AND id = $2`, tenant, id)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("schedule %q: %w", id, ErrNotFound)
		}
		return nil
	})
}

// SyncFileSchedules makes the tenant's agent-file schedules exactly defs.
func (db *DB) SyncFileSchedules(ctx context.Context, tenant string, defs []Schedule, now time.Time) error {
	if err := CheckText("sync schedules", "tenant", tenant); err != nil {
		return db.invalid(err)
	}
	if now.IsZero() {
		now = db.now()
	}
	want := map[string]Schedule{}
	for _, d := range defs {
		d.Tenant, d.Source, d.CreatedAt, d.UpdatedAt = tenant, ScheduleFile, now, now
		if err := d.Validate("sync schedules"); err != nil {
			return db.invalid(err)
		}
		want[d.ID] = d
	}
	return db.d.Write(ctx, "sync schedules", func(tx Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+scheduleCols+` FROM schedules WHERE tenant = $1 AND source = 'file'`, tenant)
		if err != nil {
			return err
		}
		have, err := collectSchedules(rows)
		if err != nil {
			return err
		}
		stored := map[string]Schedule{}
		for _, h := range have {
			stored[h.ID] = h
			if _, ok := want[h.ID]; !ok {
				tx.Queue(`DELETE FROM schedule_firings WHERE tenant = $1 AND schedule_id = $2`, tenant, h.ID)
				tx.Queue(`DELETE FROM schedules WHERE tenant = $1 AND id = $2`, tenant, h.ID)
			}
		}
		for _, d := range defs {
			d = want[d.ID]
			h, ok := stored[d.ID]
			if !ok {
				tx.Queue(insertScheduleSQL, insertScheduleArgs(d)...)
				continue
			}
			if h.Name == d.Name && h.Cron == d.Cron && h.Timezone == d.Timezone && h.Input == d.Input && h.Thread == d.Thread &&
				h.CatchUp == d.CatchUp && h.Key == d.Key {
				continue // unchanged: its next firing and enabled flag stay
			}
			next := h.NextAt
			if h.Cron != d.Cron || h.Timezone != d.Timezone {
				next = d.NextAt
			}
			if !h.Enabled {
				next = nil
			}
			tx.Queue(`UPDATE schedules SET name = $3, cron = $4, timezone = $5, input = $6, thread = $7, catch_up = $8,
					key_label = $9, next_at = $10, updated_at = $11
				WHERE tenant = $1 AND id = $2`,
				tenant, d.ID, d.Name, d.Cron, d.Timezone, d.Input, d.Thread, d.CatchUp, d.Key, TimePtrArg(next), now)
		}
		return nil
	})
}

// DueSchedules lists, across tenants, the enabled schedules due at now.
func (db *DB) DueSchedules(ctx context.Context, now time.Time, limit int) ([]Schedule, error) {
	rows, err := db.d.Read().Query(ctx, `SELECT `+scheduleCols+` FROM schedules
		WHERE next_at IS NOT NULL AND enabled AND next_at <= $1 ORDER BY next_at, tenant, id LIMIT $2`,
		now, Limit(limit, DefaultLimit))
	if err != nil {
		return nil, db.read("due schedules", err)
	}
	out, err := collectSchedules(rows)
	if err != nil {
		return nil, db.read("due schedules", err)
	}
	return out, nil
}

// ClaimFiring claims one firing: exactly one of concurrent claims wins.
func (db *DB) ClaimFiring(ctx context.Context, c ClaimFiring) (bool, error) {
	f := c.Firing
	if f.Tenant == "" || f.ScheduleID == "" || f.DueAt.IsZero() || f.ThreadID == "" || f.RunID == "" {
		return false, db.invalid(fmt.Errorf("%w: claim firing: tenant, schedule, due time, thread and run are required", ErrInvalid))
	}
	if err := CheckText("claim firing", "tenant", f.Tenant, "scheduleID", f.ScheduleID, "owner", f.Owner,
		"threadID", f.ThreadID, "runID", f.RunID); err != nil {
		return false, db.invalid(err)
	}
	if f.ClaimedAt.IsZero() {
		f.ClaimedAt = db.now()
	}
	due := micro(f.DueAt)
	var claimed bool
	err := db.d.Write(ctx, "claim firing", func(tx Tx) error {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM schedules WHERE tenant = $1 AND id = $2 FOR UPDATE`, f.Tenant, f.ScheduleID).Scan(&one)
		if errors.Is(err, ErrNoRows) {
			return fmt.Errorf("schedule %q: %w", f.ScheduleID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		n, err := tx.Exec(ctx, `INSERT INTO schedule_firings (tenant, schedule_id, due_at, manual, owner, claimed_at, thread_id, run_id, status)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING`,
			f.Tenant, f.ScheduleID, due, f.Manual, f.Owner, f.ClaimedAt, f.ThreadID, f.RunID, FiringClaimed)
		if err != nil {
			return err
		}
		claimed = n == 1
		if claimed {
			tx.Queue(`UPDATE schedules SET last_due_at = $3, last_status = $4, last_error = '', last_thread_id = $5, last_run_id = $6
				WHERE tenant = $1 AND id = $2 AND (last_due_at IS NULL OR last_due_at <= $3)`,
				f.Tenant, f.ScheduleID, due, FiringClaimed, f.ThreadID, f.RunID)
		}
		if !c.NextAt.IsZero() {
			tx.Queue(`UPDATE schedules SET next_at = $3 WHERE tenant = $1 AND id = $2 AND next_at IS NOT NULL AND next_at < $3`,
				f.Tenant, f.ScheduleID, c.NextAt)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	return claimed, nil
}

// AdvanceSchedule moves a schedule's NextAt forward without a firing.
func (db *DB) AdvanceSchedule(ctx context.Context, tenant, id string, next time.Time) error {
	if err := CheckText("advance schedule", "tenant", tenant, "id", id); err != nil {
		return db.invalid(err)
	}
	return db.d.Write(ctx, "advance schedule", func(tx Tx) error {
		n, err := tx.Exec(ctx, `UPDATE schedules SET next_at = $3 WHERE tenant = $1 AND id = $2 AND next_at IS NOT NULL AND next_at < $3`,
			tenant, id, next)
		if err != nil || n > 0 {
			return err
		}
		var one int
		err = tx.QueryRow(ctx, `SELECT 1 FROM schedules WHERE tenant = $1 AND id = $2`, tenant, id).Scan(&one)
		if errors.Is(err, ErrNoRows) {
			return fmt.Errorf("schedule %q: %w", id, ErrNotFound)
		}
		return err
	})
}

// FinishFiring records a claimed firing's status.
func (db *DB) FinishFiring(ctx context.Context, f FinishFiring) error {
	switch f.Status {
	case FiringStarted, FiringCompleted, FiringWaiting, FiringFailed:
	default:
		return db.invalid(fmt.Errorf("%w: finish firing: status %q", ErrInvalid, f.Status))
	}
	if err := CheckText("finish firing", "tenant", f.Tenant, "scheduleID", f.ScheduleID); err != nil {
		return db.invalid(err)
	}
	if f.At.IsZero() {
		f.At = db.now()
	}
	var ended any
	if f.Status != FiringStarted {
		ended = f.At
	}
	due, msg := micro(f.DueAt), CleanText(f.Error)
	return db.d.Write(ctx, "finish firing", func(tx Tx) error {
		n, err := tx.Exec(ctx, `UPDATE schedule_firings SET status = $4, error = $5, ended_at = $6
			WHERE tenant = $1 AND schedule_id = $2 AND due_at = $3`, f.Tenant, f.ScheduleID, due, f.Status, msg, ended)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("firing of schedule %q at %s: %w", f.ScheduleID, due.Format(time.RFC3339), ErrNotFound)
		}
		tx.Queue(`UPDATE schedules SET last_status = $4, last_error = $5 WHERE tenant = $1 AND id = $2 AND last_due_at = $3`,
			f.Tenant, f.ScheduleID, due, f.Status, msg)
		return nil
	})
}

const firingCols = `tenant, schedule_id, due_at, manual, owner, claimed_at, thread_id, run_id, status, error, ended_at`

// collectFirings reads rows of firingCols and closes them.
func collectFirings(rows ClosingRows) ([]Firing, error) {
	defer rows.Close()
	return CollectRows(rows, func(r Rows) (*Firing, error) {
		var f Firing
		return &f, r.Scan(&f.Tenant, &f.ScheduleID, ScanTime(&f.DueAt), &f.Manual, &f.Owner, ScanTime(&f.ClaimedAt), &f.ThreadID,
			&f.RunID, &f.Status, &f.Error, ScanTimePtr(&f.EndedAt))
	})
}

// ListFirings lists a schedule's firings, latest due first.
func (db *DB) ListFirings(ctx context.Context, tenant, scheduleID string, limit int) ([]Firing, error) {
	if err := CheckText("list firings", "tenant", tenant, "scheduleID", scheduleID); err != nil {
		return nil, db.invalid(err)
	}
	rows, err := db.d.Read().Query(ctx, `SELECT `+firingCols+`
		FROM schedule_firings WHERE tenant = $1 AND schedule_id = $2 ORDER BY due_at DESC LIMIT $3`,
		tenant, scheduleID, Limit(limit, DefaultLimit))
	if err != nil {
		return nil, db.read("list firings", err)
	}
	out, err := collectFirings(rows)
	if err != nil {
		return nil, db.read("list firings", err)
	}
	return out, nil
}

// StaleFirings lists the firings claimed before before whose run never
// reported starting.
func (db *DB) StaleFirings(ctx context.Context, before time.Time, limit int) ([]Firing, error) {
	rows, err := db.d.Read().Query(ctx, `SELECT `+firingCols+` FROM schedule_firings
		WHERE status = $1 AND claimed_at < $2 ORDER BY claimed_at, tenant, schedule_id LIMIT $3`,
		FiringClaimed, before, Limit(limit, DefaultLimit))
	if err != nil {
		return nil, db.read("stale firings", err)
	}
	out, err := collectFirings(rows)
	if err != nil {
		return nil, db.read("stale firings", err)
	}
	return out, nil
}

// OpenFirings lists the started or waiting firings claimed at or before
// before whose outcome may have changed: not those whose thread still runs
// (or queues) a turn, nor the waiting ones whose thread still waits on its
// decision. Leaving those out in the query (not after the limit) keeps
// firings that wait for days from holding the limit against the rest.
func (db *DB) OpenFirings(ctx context.Context, before time.Time, limit int) ([]Firing, error) {
	rows, err := db.d.Read().Query(ctx, `SELECT `+prefixed("f.", firingCols)+` FROM schedule_firings f
		LEFT JOIN threads t ON t.tenant = f.tenant AND t.id = f.thread_id
		WHERE f.status IN ($1, $2) AND f.claimed_at <= $3
		AND coalesce(t.status, '') NOT IN ($5, $6)
		AND NOT (f.status = $2 AND coalesce(t.status, '') = $7)
		ORDER BY f.claimed_at, f.tenant, f.schedule_id LIMIT $4`,
		FiringStarted, FiringWaiting, before, Limit(limit, DefaultLimit), string(Running), string(Queued), string(Waiting))
	if err != nil {
		return nil, db.read("open firings", err)
	}
	out, err := collectFirings(rows)
	if err != nil {
		return nil, db.read("open firings", err)
	}
	return out, nil
}

// prefixed qualifies each of the comma-separated columns cols with p.
func prefixed(p, cols string) string {
	parts := strings.Split(cols, ", ")
	for i := range parts {
		parts[i] = p + parts[i]
	}
	return strings.Join(parts, ", ")
}

// RetakeFiring gives a stale firing to f.Owner: exactly one of concurrent
// retakes wins.
func (db *DB) RetakeFiring(ctx context.Context, f Firing, before time.Time) (bool, error) {
	if err := CheckText("retake firing", "tenant", f.Tenant, "scheduleID", f.ScheduleID, "owner", f.Owner); err != nil {
		return false, db.invalid(err)
	}
	if f.ClaimedAt.IsZero() {
		f.ClaimedAt = db.now()
	}
	var n int64
	err := db.d.Write(ctx, "retake firing", func(tx Tx) error {
		var err error
		n, err = tx.Exec(ctx, `UPDATE schedule_firings SET owner = $4, claimed_at = $5
			WHERE tenant = $1 AND schedule_id = $2 AND due_at = $3 AND status = $6 AND claimed_at < $7`,
			f.Tenant, f.ScheduleID, micro(f.DueAt), f.Owner, f.ClaimedAt, FiringClaimed, before)
		return err
	})
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

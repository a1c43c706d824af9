package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stackbone/stackbone/internal/store"
)

const interruptCols = `id, tenant, thread_id, run_id, agent, tool_call_id, tool, v, args, description, allowed,
	response_schema, subagent, status, created_at, decision, reason, expires_at, approvals_needed, approvals`

func scanInterrupt(sc scanner) (*store.Interrupt, error) {
	var (
		in      store.Interrupt
		c       store.InterruptColumns
		desc    sql.NullString
		created sql.NullInt64
		expires sql.NullInt64
	)
	if err := sc.Scan(&in.ID, &in.Tenant, &in.ThreadID, &in.RunID, &in.Agent, &in.ToolCallID, &in.Tool, &c.V,
		&c.Args, &desc, &c.Allowed, &c.Schema, &in.Subagent, &c.Status, &created, &c.Decision, &in.Reason, &expires, &c.Needed, &c.Approvals); err != nil {
		return nil, err
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	in.Description = desc.String
	in.CreatedAt = fromMicros(created)
	if expires.Valid {
		t := fromMicros(expires)
		in.ExpiresAt = &t
	}
	return &in, nil
}

// insertInterrupts stores rows as pending; an interrupt without an agent
// gets the thread's, an empty description or response schema is NULL.
func insertInterrupts(ctx context.Context, tx *wtx, agent string, rows []store.EncodedInterrupt) error {
	for _, r := range rows {
		a := r.In.Agent
		if a == "" {
			a = agent
		}
		var desc, schema any
		if r.In.Description != "" {
			desc = r.In.Description
		}
		if r.Schema != "" {
			schema = r.Schema
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO interrupts (`+interruptCols+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, NULL, ?, ?, ?, '[]')`,
			r.In.ID, r.In.Tenant, r.In.ThreadID, r.In.RunID, a, r.In.ToolCallID, r.In.Tool, store.FormatVersion,
			r.Args, desc, r.Allowed, schema, r.In.Subagent, r.CreatedAt.UnixMicro(), r.In.Reason, expiresArg(r.In.ExpiresAt),
			r.In.Needed()); err != nil {
			return fmt.Errorf("interrupt %s: %w", r.In.ID, err)
		}
	}
	return nil
}

// GetInterrupt returns an interrupt of the tenant, or store.ErrNotFound.
func (s *Store) GetInterrupt(ctx context.Context, tenant, id string) (*store.Interrupt, error) {
	if err := store.CheckText("get interrupt", "tenant", tenant, "id", id); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	in, err := scanInterrupt(s.rc.QueryRowContext(ctx,
		`SELECT `+interruptCols+` FROM interrupts WHERE id = ? AND tenant = ?`, id, tenant))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: get interrupt %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr("get interrupt", err)
	}
	return in, nil
}

// ListInterrupts lists the tenant's interrupts (pending ones unless
// f.Status says otherwise), newest first.
func (s *Store) ListInterrupts(ctx context.Context, tenant string, f store.InterruptFilter) ([]store.Interrupt, error) {
	if err := f.Validate(tenant); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	status := f.Status
	if status == "" {
		status = store.Pending
	}
	q := strings.Builder{}
	q.WriteString(`SELECT ` + interruptCols + ` FROM interrupts WHERE tenant = ? AND status = ?`)
	args := []any{tenant, string(status)}
	if f.ThreadID != "" {
		q.WriteString(` AND thread_id = ?`)
		args = append(args, f.ThreadID)
	}
	if f.Agent != "" {
		q.WriteString(` AND agent = ?`)
		args = append(args, f.Agent)
	}
	q.WriteString(` ORDER BY created_at DESC, id DESC LIMIT ?`)
	args = append(args, store.Limit(f.Limit, store.DefaultLimit))
	return s.queryInterrupts(ctx, "list interrupts", q.String(), args...)
}

// CallInterrupts returns the interrupts, in any status, of the given tool
// calls of a thread, oldest first.
func (s *Store) CallInterrupts(ctx context.Context, tenant, threadID string, toolCallIDs []string) ([]store.Interrupt, error) {
	if len(toolCallIDs) == 0 {
		return nil, nil
	}
	if err := store.CheckCallInterrupts(tenant, threadID, toolCallIDs); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	args := make([]any, 0, len(toolCallIDs)+2)
	args = append(args, tenant, threadID)
	for _, id := range toolCallIDs {
		args = append(args, id)
	}
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(toolCallIDs)), ", ")
	return s.queryInterrupts(ctx, "call interrupts", `SELECT `+interruptCols+` FROM interrupts
		WHERE tenant = ? AND thread_id = ? AND tool_call_id IN (`+marks+`)
		ORDER BY created_at, id`, args...)
}

// StartedCalls returns those of the given tool calls of a thread that have
// a started marker.
func (s *Store) StartedCalls(ctx context.Context, tenant, threadID string, toolCallIDs []string) ([]string, error) {
	if len(toolCallIDs) == 0 {
		return nil, nil
	}
	if err := store.CheckCallInterrupts(tenant, threadID, toolCallIDs); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	args := make([]any, 0, len(toolCallIDs)+2)
	args = append(args, tenant, threadID)
	for _, id := range toolCallIDs {
		args = append(args, id)
	}
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(toolCallIDs)), ", ")
	rows, err := s.rc.QueryContext(ctx, `SELECT tool_call_id FROM tool_starts
		WHERE tenant = ? AND thread_id = ? AND tool_call_id IN (`+marks+`)`, args...)
	if err != nil {
		return nil, mapErr("started calls", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, mapErr("started calls", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr("started calls", err)
	}
	return out, nil
}

// markStarts writes the started markers of c.Started and deletes those of
// the calls c settles (Checkpoint.Unmarked).
func markStarts(ctx context.Context, tx *wtx, c store.Checkpoint, now int64) error {
	for _, id := range c.Unmarked() {
		if _, err := tx.ExecContext(ctx, `DELETE FROM tool_starts WHERE tenant = ? AND thread_id = ? AND tool_call_id = ?`,
			c.Tenant, c.ThreadID, id); err != nil {
			return fmt.Errorf("clear started marker %s: %w", id, err)
		}
	}
	for _, id := range c.Started {
		if _, err := tx.ExecContext(ctx, `INSERT INTO tool_starts (tenant, thread_id, tool_call_id, run_id, started_at)
			VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (tenant, thread_id, tool_call_id) DO UPDATE SET run_id = excluded.run_id, started_at = excluded.started_at`,
			c.Tenant, c.ThreadID, id, c.RunID, now); err != nil {
			return fmt.Errorf("started marker %s: %w", id, err)
		}
	}
	return nil
}

func (s *Store) queryInterrupts(ctx context.Context, op, query string, args ...any) ([]store.Interrupt, error) {
	rows, err := s.rc.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, mapErr(op, err)
	}
	defer rows.Close()
	out, err := store.CollectRows(rows, func(r store.Rows) (*store.Interrupt, error) { return scanInterrupt(r) })
	if err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}

// Decide records a decision on a pending interrupt with one conditional
// update; when it was the last pending one of a Waiting thread, the thread
// becomes Queued in the same transaction. A zero d.At is now.
func (s *Store) Decide(ctx context.Context, tenant, id string, d store.Decision) (store.DecideResult, error) {
	if err := store.CheckText("decide", "tenant", tenant, "id", id); err != nil {
		return store.DecideResult{}, fmt.Errorf("sqlite: %w", err)
	}
	if d.At.IsZero() {
		d.At = s.now()
	}
	d.At = d.At.UTC()
	status, dj, err := store.EncodeDecision(d)
	if err != nil {
		return store.DecideResult{}, fmt.Errorf("sqlite: decide: %w", err)
	}
	var res store.DecideResult
	err = s.write(ctx, "decide", func(tx *wtx) error {
		// The write transaction serialises decisions, so the quorum read
		// here is the one the update below changes.
		cur, err := scanInterrupt(tx.QueryRowContext(ctx, `SELECT `+interruptCols+` FROM interrupts
			WHERE id = ? AND tenant = ? AND status = 'pending'`, id, tenant))
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if cur == nil {
			// Not pending: unknown, or decided already.
			var one int
			err := tx.QueryRowContext(ctx, `SELECT 1 FROM interrupts WHERE id = ? AND tenant = ?`, id, tenant).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("interrupt %q: %w", id, store.ErrNotFound)
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("interrupt %q: %w", id, store.ErrAlreadyDecided)
		}
		d := d
		approvals, final, err := store.Tally(cur, &d)
		if err != nil {
			return err
		}
		if !final {
			in, err := scanInterrupt(tx.QueryRowContext(ctx, `UPDATE interrupts SET approvals = ?
				WHERE id = ? AND tenant = ? AND status = 'pending' RETURNING `+interruptCols, approvals, id, tenant))
			if err != nil {
				return err
			}
			res = store.DecideResult{Interrupt: in}
			return nil
		}
		if cur.Needed() > 1 {
			// The approval that completes a quorum may carry the first
			// approval's edit (Tally).
			if status, dj, err = store.EncodeDecision(d); err != nil {
				return err
			}
		}
		// The write transaction serialises decisions: the row read above
		// is still pending.
		in, err := scanInterrupt(tx.QueryRowContext(ctx, `UPDATE interrupts SET status = ?, decision = ?, approvals = ?
			WHERE id = ? AND tenant = ? AND status = 'pending'
			RETURNING `+interruptCols, string(status), string(dj), approvals, id, tenant))
		if err != nil {
			return err
		}
		r, err := tx.ExecContext(ctx, `UPDATE threads SET status = 'queued', updated_at = ?
			WHERE tenant = ? AND id = ? AND status = 'waiting'
				AND NOT EXISTS (SELECT 1 FROM interrupts WHERE tenant = ? AND thread_id = ? AND status = 'pending')`,
			d.At.UnixMicro(), tenant, in.ThreadID, tenant, in.ThreadID)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		if err != nil {
			return err
		}
		res = store.DecideResult{Interrupt: in, Queued: n == 1}
		return s.notifyDecision(ctx, tx, in, d.At)
	})
	if err != nil {
		return store.DecideResult{}, err
	}
	return res, nil
}

// expiresArg is an expiry as stored: NULL for none, else microseconds.
func expiresArg(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

// ExpiredInterrupts lists, across tenants, the pending interrupts whose
// expiry is at or before now, soonest expiry first.
func (s *Store) ExpiredInterrupts(ctx context.Context, now time.Time, limit int) ([]store.Interrupt, error) {
	return s.queryInterrupts(ctx, "expired interrupts", `SELECT `+interruptCols+` FROM interrupts
		WHERE status = 'pending' AND expires_at IS NOT NULL AND expires_at <= ?
		ORDER BY expires_at, tenant, id LIMIT ?`, now.UnixMicro(), store.Limit(limit, store.DefaultLimit))
}

// CountPending counts pending decisions across all tenants.
func (s *Store) CountPending(ctx context.Context) (int, error) {
	var n int
	if err := s.rc.QueryRowContext(ctx, `SELECT count(*) FROM interrupts WHERE status = 'pending'`).Scan(&n); err != nil {
		return 0, mapErr("count pending", err)
	}
	return n, nil
}

// RecordDecided adds an already decided interrupt of no thread: the audit
// record of an approval-gated call in a stateless turn.
func (s *Store) RecordDecided(ctx context.Context, in store.Interrupt) error {
	r, status, dj, err := store.EncodeDecided(in, s.now)
	if err != nil {
		return fmt.Errorf("sqlite: record decided: %w", err)
	}
	var desc, schema any
	if r.In.Description != "" {
		desc = r.In.Description
	}
	if r.Schema != "" {
		schema = r.Schema
	}
	return s.write(ctx, "record decided", func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO interrupts (`+interruptCols+`)
			VALUES (?, ?, '', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, '[]')`,
			r.In.ID, r.In.Tenant, r.In.RunID, r.In.Agent, r.In.ToolCallID, r.In.Tool, store.FormatVersion,
			r.Args, desc, r.Allowed, schema, r.In.Subagent, string(status), r.CreatedAt.UnixMicro(), string(dj), r.In.Reason,
			expiresArg(r.In.ExpiresAt))
		return err
	})
}

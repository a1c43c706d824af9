package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

const interruptCols = `id, tenant, thread_id, run_id, agent, tool_call_id, tool, v, args, description, allowed,
	response_schema, subagent, status, created_at, decision, reason, expires_at, approvals_needed, approvals, owner`

// scanInterrupt scans interruptCols.
func scanInterrupt(row Row) (*Interrupt, error) {
	var (
		in   Interrupt
		c    InterruptColumns
		desc *string
	)
	if err := row.Scan(&in.ID, &in.Tenant, &in.ThreadID, &in.RunID, &in.Agent, &in.ToolCallID, &in.Tool, &c.V,
		&c.Args, &desc, &c.Allowed, &c.Schema, &in.Subagent, &c.Status, ScanTime(&in.CreatedAt), &c.Decision, &in.Reason,
		ScanTimePtr(&in.ExpiresAt), &c.Needed, &c.Approvals, &in.Owner); err != nil {
		return nil, err
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	if desc != nil {
		in.Description = *desc
	}
	return &in, nil
}

// nullText binds s, or NULL when s is empty.
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// insertInterrupts queues the inserts of rows as pending, when run runID
// holds the thread; an interrupt without an agent gets the thread's, an
// empty description or response schema is NULL.
func insertInterrupts(tx Tx, runID string, rows []EncodedInterrupt) {
	for _, r := range rows {
		tx.Queue(`INSERT INTO interrupts (`+interruptCols+`)
			SELECT $4::text, t.tenant, t.id, $5::text, coalesce(nullif($6::text, ''), t.agent), $7::text, $8::text, $9::integer,
				$10::json, $11::text, $12::json, $13::json, $14::text, 'pending', $15::timestamptz, NULL, $16::text,
				$17::timestamptz, $18::integer, '[]', t.owner
			FROM threads t WHERE `+runHeld,
			r.In.Tenant, r.In.ThreadID, runID,
			r.In.ID, r.In.RunID, r.In.Agent, r.In.ToolCallID, r.In.Tool, FormatVersion,
			r.Args, nullText(r.In.Description), r.Allowed, nullText(r.Schema), r.In.Subagent, r.CreatedAt, r.In.Reason,
			TimePtrArg(r.In.ExpiresAt), r.In.Needed())
	}
}

// GetInterrupt returns an interrupt of the tenant, or ErrNotFound.
func (db *DB) GetInterrupt(ctx context.Context, tenant, id string) (*Interrupt, error) {
	if err := CheckText("get interrupt", "tenant", tenant, "id", id); err != nil {
		return nil, db.invalid(err)
	}
	in, err := scanInterrupt(db.d.Read().QueryRow(ctx,
		`SELECT `+interruptCols+` FROM interrupts WHERE id = $1 AND tenant = $2`, id, tenant))
	if errors.Is(err, ErrNoRows) {
		return nil, fmt.Errorf("%s: get interrupt %q: %w", db.name, id, ErrNotFound)
	}
	if err != nil {
		return nil, db.read("get interrupt", err)
	}
	return in, nil
}

// ListInterrupts lists the tenant's interrupts (pending ones unless
// f.Status says otherwise), newest first.
func (db *DB) ListInterrupts(ctx context.Context, tenant string, f InterruptFilter) ([]Interrupt, error) {
	if err := f.Validate(tenant); err != nil {
		return nil, db.invalid(err)
	}
	status := f.Status
	if status == "" {
		status = Pending
	}
	q := strings.Builder{}
	q.WriteString(`SELECT ` + interruptCols + ` FROM interrupts WHERE tenant = $1 AND status = $2`)
	args := []any{tenant, string(status)}
	if f.ThreadID != "" {
		args = append(args, f.ThreadID)
		q.WriteString(` AND thread_id = $` + strconv.Itoa(len(args)))
	}
	if f.Agent != "" {
		args = append(args, f.Agent)
		q.WriteString(` AND agent = $` + strconv.Itoa(len(args)))
	}
	if f.Scoped {
		args = append(args, f.User)
		n := strconv.Itoa(len(args))
		q.WriteString(` AND ((thread_id = '' AND owner IN ('', $` + n + `)) OR EXISTS (SELECT 1 FROM threads t
			WHERE t.tenant = $1 AND t.id = interrupts.thread_id AND t.owner IN ('', $` + n + `)))`)
	}
	args = append(args, Limit(f.Limit, DefaultLimit))
	q.WriteString(` ORDER BY created_at DESC, id DESC LIMIT $` + strconv.Itoa(len(args)))
	return db.queryInterrupts(ctx, "list interrupts", q.String(), args...)
}

// CallInterrupts returns the interrupts, in any status, of the given tool
// calls of a thread, oldest first.
func (db *DB) CallInterrupts(ctx context.Context, tenant, threadID string, toolCallIDs []string) ([]Interrupt, error) {
	if len(toolCallIDs) == 0 {
		return nil, nil
	}
	if err := CheckCallInterrupts(tenant, threadID, toolCallIDs); err != nil {
		return nil, db.invalid(err)
	}
	args := append([]any{tenant, threadID}, anys(toolCallIDs)...)
	return db.queryInterrupts(ctx, "call interrupts", `SELECT `+interruptCols+` FROM interrupts
		WHERE tenant = $1 AND thread_id = $2 AND tool_call_id IN (`+Params(3, len(toolCallIDs))+`)
		ORDER BY created_at, id`, args...)
}

// StartedCalls returns those of the given tool calls of a thread that have
// a started marker.
func (db *DB) StartedCalls(ctx context.Context, tenant, threadID string, toolCallIDs []string) ([]string, error) {
	if len(toolCallIDs) == 0 {
		return nil, nil
	}
	if err := CheckCallInterrupts(tenant, threadID, toolCallIDs); err != nil {
		return nil, db.invalid(err)
	}
	args := append([]any{tenant, threadID}, anys(toolCallIDs)...)
	rows, err := db.d.Read().Query(ctx, `SELECT tool_call_id FROM tool_starts
		WHERE tenant = $1 AND thread_id = $2 AND tool_call_id IN (`+Params(3, len(toolCallIDs))+`)`, args...)
	if err != nil {
		return nil, db.read("started calls", err)
	}
	defer rows.Close()
	ids, err := CollectRows(rows, func(r Rows) (*string, error) {
		var id string
		return &id, r.Scan(&id)
	})
	if err != nil {
		return nil, db.read("started calls", err)
	}
	return ids, nil
}

// ExpiredInterrupts lists, across tenants, the pending interrupts whose
// expiry is at or before now, soonest expiry first.
func (db *DB) ExpiredInterrupts(ctx context.Context, now time.Time, limit int) ([]Interrupt, error) {
	return db.queryInterrupts(ctx, "expired interrupts", `SELECT `+interruptCols+` FROM interrupts
		WHERE status = 'pending' AND expires_at IS NOT NULL AND expires_at <= $1
		ORDER BY expires_at, tenant, id LIMIT $2`, now, Limit(limit, DefaultLimit))
}

// CountPending counts pending decisions across all tenants.
func (db *DB) CountPending(ctx context.Context) (int, error) {
	var n int
	if err := db.d.Read().QueryRow(ctx, `SELECT count(*) FROM interrupts WHERE status = 'pending'`).Scan(&n); err != nil {
		return 0, db.read("count pending", err)
	}
	return n, nil
}

func (db *DB) queryInterrupts(ctx context.Context, op, query string, args ...any) ([]Interrupt, error) {
	rows, err := db.d.Read().Query(ctx, query, args...)
	if err != nil {
		return nil, db.read(op, err)
	}
	defer rows.Close()
	out, err := CollectRows(rows, func(r Rows) (*Interrupt, error) { return scanInterrupt(r) })
	if err != nil {
		return nil, db.read(op, err)
	}
	return out, nil
}

// Decide records a decision on a pending interrupt; when it was the last
// pending one of a Waiting thread, the thread becomes Queued in the same
// transaction. The thread row is locked first (FOR UPDATE OF t), so
// concurrent decisions on interrupts of one thread, and the end of its run
// (FinishRun locks it too), take turns: the quorum read is the one the
// update changes, and the last of them sees that nothing else is pending. A
// zero d.At is now.
func (db *DB) Decide(ctx context.Context, tenant, id string, d Decision) (DecideResult, error) {
	if err := CheckText("decide", "tenant", tenant, "id", id); err != nil {
		return DecideResult{}, db.invalid(err)
	}
	if d.At.IsZero() {
		d.At = db.now()
	}
	d.At = d.At.UTC()
	status, dj, err := EncodeDecision(d)
	if err != nil {
		return DecideResult{}, fmt.Errorf("%s: decide: %w", db.name, err)
	}
	var res DecideResult
	err = db.d.Write(ctx, "decide", func(tx Tx) error {
		// A record of a stateless turn has no thread to lock; it was
		// decided when it was stored.
		tx.Queue(`SELECT 1 FROM interrupts i
			JOIN threads t ON t.tenant = i.tenant AND t.id = i.thread_id
			WHERE i.id = $1 AND i.tenant = $2 FOR UPDATE OF t`, id, tenant)
		cur, err := scanInterrupt(tx.QueryRow(ctx, `SELECT `+interruptCols+` FROM interrupts
			WHERE id = $1 AND tenant = $2 AND status = 'pending'`, id, tenant))
		if errors.Is(err, ErrNoRows) {
			// Not pending: unknown, or decided already.
			var one int
			err := tx.QueryRow(ctx, `SELECT 1 FROM interrupts WHERE id = $1 AND tenant = $2`, id, tenant).Scan(&one)
			if errors.Is(err, ErrNoRows) {
				return fmt.Errorf("interrupt %q: %w", id, ErrNotFound)
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("interrupt %q: %w", id, ErrAlreadyDecided)
		}
		if err != nil {
			return err
		}
		d := d
		approvals, final, err := Tally(cur, &d)
		if err != nil {
			return err
		}
		if !final {
			in, err := scanInterrupt(tx.QueryRow(ctx, `UPDATE interrupts SET approvals = $3::json
				WHERE id = $1 AND tenant = $2 AND status = 'pending' RETURNING `+interruptCols, id, tenant, approvals))
			if err != nil {
				return err
			}
			res = DecideResult{Interrupt: in}
			return nil
		}
		if cur.Needed() > 1 {
			// The approval that completes a quorum may carry the first
			// approval's edit (Tally).
			if status, dj, err = EncodeDecision(d); err != nil {
				return err
			}
		}
		in, err := scanInterrupt(tx.QueryRow(ctx, `UPDATE interrupts SET status = $3, decision = $4::json, approvals = $5::json
			WHERE id = $1 AND tenant = $2 AND status = 'pending'
			RETURNING `+interruptCols, id, tenant, string(status), string(dj), approvals))
		if errors.Is(err, ErrNoRows) {
			return fmt.Errorf("interrupt %q: %w", id, ErrAlreadyDecided)
		}
		if err != nil {
			return err
		}
		n, err := tx.Exec(ctx, `UPDATE threads SET status = 'queued', updated_at = $1
			WHERE tenant = $2 AND id = $3 AND status = 'waiting'
				AND NOT EXISTS (SELECT 1 FROM interrupts WHERE tenant = $2 AND thread_id = $3 AND status = 'pending')`,
			d.At, tenant, in.ThreadID)
		if err != nil {
			return err
		}
		res = DecideResult{Interrupt: in, Queued: n == 1}
		return db.notifyDecision(ctx, tx, in, d.At)
	})
	if err != nil {
		return DecideResult{}, err
	}
	return res, nil
}

// RecordDecided adds an already decided interrupt of no thread: the audit
// record of an approval-gated call in a stateless turn.
func (db *DB) RecordDecided(ctx context.Context, in Interrupt) error {
	r, status, dj, err := EncodeDecided(in, db.now)
	if err != nil {
		return fmt.Errorf("%s: record decided: %w", db.name, err)
	}
	return db.d.Write(ctx, "record decided", func(tx Tx) error {
		tx.Queue(`INSERT INTO interrupts (`+interruptCols+`)
			VALUES ($1, $2, '', $3, $4, $5, $6, $7, $8::json, $9, $10::json, $11::json, $12, $13, $14, $15::json, $16, $17, 1, '[]', $18)`,
			r.In.ID, r.In.Tenant, r.In.RunID, r.In.Agent, r.In.ToolCallID, r.In.Tool, FormatVersion,
			r.Args, nullText(r.In.Description), r.Allowed, nullText(r.Schema), r.In.Subagent, string(status), r.CreatedAt,
			string(dj), r.In.Reason, TimePtrArg(r.In.ExpiresAt), r.In.Owner)
		return nil
	})
}

package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stackbone/stackbone/internal/store"
)

const interruptCols = `id, tenant, thread_id, run_id, agent, tool_call_id, tool, v, args, description, allowed,
	response_schema, subagent, status, created_at, decision`

func scanInterrupt(sc scanner) (*store.Interrupt, error) {
	var (
		in                             store.Interrupt
		v                              int
		args, allowed, schema, decided []byte
		desc                           sql.NullString
		status                         string
		created                        sql.NullInt64
	)
	if err := sc.Scan(&in.ID, &in.Tenant, &in.ThreadID, &in.RunID, &in.Agent, &in.ToolCallID, &in.Tool, &v,
		&args, &desc, &allowed, &schema, &in.Subagent, &status, &created, &decided); err != nil {
		return nil, err
	}
	if err := store.CheckFormat(v); err != nil {
		return nil, fmt.Errorf("interrupt %s: %w", in.ID, err)
	}
	in.Args = json.RawMessage(args)
	in.Description = desc.String
	if err := json.Unmarshal(allowed, &in.AllowedDecisions); err != nil {
		return nil, fmt.Errorf("interrupt %s: allowed decisions: %w", in.ID, err)
	}
	if schema != nil {
		in.ResponseSchema = json.RawMessage(schema)
	}
	in.Status = store.InterruptStatus(status)
	in.CreatedAt = fromMicros(created)
	d, err := store.DecodeDecision(v, decided)
	if err != nil {
		return nil, fmt.Errorf("interrupt %s: %w", in.ID, err)
	}
	in.Decision = d
	return &in, nil
}

// interruptRow is an interrupt encoded for insertion.
type interruptRow struct {
	in            store.Interrupt
	args, allowed string
	desc, schema  any
	created       int64
}

// encodeInterrupts prepares a checkpoint's interrupts: they belong to its
// tenant, thread and run (unless the interrupt names another run) and start
// pending; a zero CreatedAt is now.
func encodeInterrupts(c store.Checkpoint, now func() time.Time) ([]interruptRow, error) {
	if len(c.Interrupts) == 0 {
		return nil, nil
	}
	out := make([]interruptRow, len(c.Interrupts))
	for i, in := range c.Interrupts {
		in.Tenant, in.ThreadID = c.Tenant, c.ThreadID
		if in.RunID == "" {
			in.RunID = c.RunID
		}
		r := interruptRow{in: in, args: "{}"}
		if len(in.Args) > 0 {
			if !json.Valid(in.Args) {
				return nil, fmt.Errorf("%w: interrupt %s: args are not JSON", store.ErrInvalid, in.ID)
			}
			r.args = string(in.Args)
		}
		if in.Description != "" {
			r.desc = in.Description
		}
		if len(in.ResponseSchema) > 0 {
			if !json.Valid(in.ResponseSchema) {
				return nil, fmt.Errorf("%w: interrupt %s: response schema is not JSON", store.ErrInvalid, in.ID)
			}
			r.schema = string(in.ResponseSchema)
		}
		allowed, err := json.Marshal(in.AllowedDecisions)
		if err != nil {
			return nil, fmt.Errorf("%w: interrupt %s: %w", store.ErrInvalid, in.ID, err)
		}
		r.allowed = string(allowed)
		created := in.CreatedAt
		if created.IsZero() {
			created = now()
		}
		r.created = created.UnixMicro()
		out[i] = r
	}
	return out, nil
}

// insertInterrupts stores rows as pending; an interrupt without an agent
// gets the thread's.
func insertInterrupts(ctx context.Context, tx *sql.Tx, agent string, rows []interruptRow) error {
	for _, r := range rows {
		a := r.in.Agent
		if a == "" {
			a = agent
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO interrupts (`+interruptCols+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, NULL)`,
			r.in.ID, r.in.Tenant, r.in.ThreadID, r.in.RunID, a, r.in.ToolCallID, r.in.Tool, store.FormatVersion,
			r.args, r.desc, r.allowed, r.schema, r.in.Subagent, r.created); err != nil {
			return fmt.Errorf("interrupt %s: %w", r.in.ID, err)
		}
	}
	return nil
}

// GetInterrupt returns an interrupt of the tenant, or store.ErrNotFound.
func (s *Store) GetInterrupt(ctx context.Context, tenant, id string) (*store.Interrupt, error) {
	in, err := scanInterrupt(s.r.QueryRowContext(ctx,
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

func (s *Store) queryInterrupts(ctx context.Context, op, query string, args ...any) ([]store.Interrupt, error) {
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, mapErr(op, err)
	}
	defer rows.Close()
	var out []store.Interrupt
	for rows.Next() {
		in, err := scanInterrupt(rows)
		if err != nil {
			return nil, mapErr(op, err)
		}
		out = append(out, *in)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}

// Decide records a decision on a pending interrupt with one conditional
// update; when it was the last pending one of a Waiting thread, the thread
// becomes Queued in the same transaction. A zero d.At is now.
func (s *Store) Decide(ctx context.Context, tenant, id string, d store.Decision) (store.DecideResult, error) {
	if d.At.IsZero() {
		d.At = s.now()
	}
	d.At = d.At.UTC()
	status := store.Rejected
	if d.Approved {
		status = store.Approved
	}
	dj, err := json.Marshal(d)
	if err != nil {
		return store.DecideResult{}, fmt.Errorf("sqlite: decide: %w: %w", store.ErrInvalid, err)
	}
	var res store.DecideResult
	err = s.write(ctx, "decide", func(tx *sql.Tx) error {
		in, err := scanInterrupt(tx.QueryRowContext(ctx, `UPDATE interrupts SET status = ?, decision = ?
			WHERE id = ? AND tenant = ? AND status = 'pending'
			RETURNING `+interruptCols, string(status), string(dj), id, tenant))
		if errors.Is(err, sql.ErrNoRows) {
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
		return nil
	})
	if err != nil {
		return store.DecideResult{}, err
	}
	return res, nil
}

// CountPending counts pending decisions across all tenants.
func (s *Store) CountPending(ctx context.Context) (int, error) {
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM interrupts WHERE status = 'pending'`).Scan(&n); err != nil {
		return 0, mapErr("count pending", err)
	}
	return n, nil
}

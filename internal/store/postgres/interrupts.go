package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stackbone/stackbone/internal/store"
)

const interruptCols = `id, tenant, thread_id, run_id, agent, tool_call_id, tool, v, args, description, allowed,
	response_schema, subagent, status, created_at, decision, reason, expires_at, approvals_needed, approvals`

func scanInterrupt(row pgx.Row, extra ...any) (*store.Interrupt, error) {
	var (
		in      store.Interrupt
		c       store.InterruptColumns
		desc    *string
		created time.Time
		expires *time.Time
	)
	dest := append([]any{&in.ID, &in.Tenant, &in.ThreadID, &in.RunID, &in.Agent, &in.ToolCallID, &in.Tool, &c.V,
		&c.Args, &desc, &c.Allowed, &c.Schema, &in.Subagent, &c.Status, &created, &c.Decision, &in.Reason, &expires, &c.Needed, &c.Approvals}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	if desc != nil {
		in.Description = *desc
	}
	in.CreatedAt = created.UTC()
	if expires != nil {
		t := expires.UTC()
		in.ExpiresAt = &t
	}
	return &in, nil
}

// interruptRows are a checkpoint's interrupts encoded as one array per
// column, inserted with unnest.
type interruptRows struct {
	id, runID, agent, call, tool, args, desc, allowed, schema, subagent, reason []string
	created                                                                     []time.Time
	// expires holds each expiry as RFC 3339 text, "" for none.
	expires []string
	// needed holds each quorum (approvals needed).
	needed []int32
	// encoded are the interrupts as encoded, for their notices.
	encoded []store.EncodedInterrupt
}

// args returns the arrays in the order checkpointSQL binds them.
func (r *interruptRows) params() []any {
	return []any{nonNil(r.id), nonNil(r.runID), nonNil(r.agent), nonNil(r.call), nonNil(r.tool), nonNil(r.args),
		nonNil(r.desc), nonNil(r.allowed), nonNil(r.schema), nonNil(r.subagent), nonNilTimes(r.created), nonNil(r.reason)}
}

func nonNilTimes(t []time.Time) []time.Time {
	if t == nil {
		return []time.Time{}
	}
	return t
}

// encodeInterrupts prepares a checkpoint's interrupts (store.EncodeInterrupts)
// as column arrays. An empty agent is the thread's, an empty description or
// response schema is NULL.
func encodeInterrupts(c store.Checkpoint, now func() time.Time) (*interruptRows, error) {
	encoded, err := store.EncodeInterrupts(c, now)
	if err != nil {
		return nil, err
	}
	r := &interruptRows{encoded: encoded}
	for _, e := range encoded {
		r.id = append(r.id, e.In.ID)
		r.runID = append(r.runID, e.In.RunID)
		r.agent = append(r.agent, e.In.Agent)
		r.call = append(r.call, e.In.ToolCallID)
		r.tool = append(r.tool, e.In.Tool)
		r.args = append(r.args, e.Args)
		r.desc = append(r.desc, e.In.Description)
		r.allowed = append(r.allowed, e.Allowed)
		r.schema = append(r.schema, e.Schema)
		r.subagent = append(r.subagent, e.In.Subagent)
		r.created = append(r.created, e.CreatedAt)
		r.reason = append(r.reason, e.In.Reason)
		r.expires = append(r.expires, expiresText(e.In.ExpiresAt))
		r.needed = append(r.needed, int32(e.In.Needed()))
	}
	return r, nil
}

// expiresText is an expiry as the checkpoint statement binds it: "" for
// none, else RFC 3339 text.
func expiresText(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// GetInterrupt returns an interrupt of the tenant, or store.ErrNotFound.
func (s *Store) GetInterrupt(ctx context.Context, tenant, id string) (*store.Interrupt, error) {
	if err := store.CheckText("get interrupt", "tenant", tenant, "id", id); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	in, err := scanInterrupt(s.pool.QueryRow(ctx,
		`SELECT `+interruptCols+` FROM interrupts WHERE id = $1 AND tenant = $2`, id, tenant))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: get interrupt %q: %w", id, store.ErrNotFound)
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
		return nil, fmt.Errorf("postgres: %w", err)
	}
	status := f.Status
	if status == "" {
		status = store.Pending
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
	args = append(args, store.Limit(f.Limit, store.DefaultLimit))
	q.WriteString(` ORDER BY created_at DESC, id DESC LIMIT $` + strconv.Itoa(len(args)))
	return s.queryInterrupts(ctx, "list interrupts", q.String(), args...)
}

// CallInterrupts returns the interrupts, in any status, of the given tool
// calls of a thread, oldest first.
func (s *Store) CallInterrupts(ctx context.Context, tenant, threadID string, toolCallIDs []string) ([]store.Interrupt, error) {
	if len(toolCallIDs) == 0 {
		return nil, nil
	}
	if err := store.CheckCallInterrupts(tenant, threadID, toolCallIDs); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return s.queryInterrupts(ctx, "call interrupts", `SELECT `+interruptCols+` FROM interrupts
		WHERE tenant = $1 AND thread_id = $2 AND tool_call_id = ANY($3::text[])
		ORDER BY created_at, id`, tenant, threadID, toolCallIDs)
}

// StartedCalls returns those of the given tool calls of a thread that have
// a started marker.
func (s *Store) StartedCalls(ctx context.Context, tenant, threadID string, toolCallIDs []string) ([]string, error) {
	if len(toolCallIDs) == 0 {
		return nil, nil
	}
	if err := store.CheckCallInterrupts(tenant, threadID, toolCallIDs); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT tool_call_id FROM tool_starts
		WHERE tenant = $1 AND thread_id = $2 AND tool_call_id = ANY($3::text[])`, tenant, threadID, toolCallIDs)
	if err != nil {
		return nil, mapErr("started calls", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, mapErr("started calls", err)
	}
	return out, nil
}

func (s *Store) queryInterrupts(ctx context.Context, op, query string, args ...any) ([]store.Interrupt, error) {
	rows, err := s.pool.Query(ctx, query, args...)
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
// becomes Queued in the same statement. The thread row is locked first, so
// concurrent decisions on interrupts of one thread (and the end of its run)
// take turns, and the last one sees that nothing else is pending. A zero
// d.At is now.
func (s *Store) Decide(ctx context.Context, tenant, id string, d store.Decision) (_ store.DecideResult, err error) {
	defer func() { s.noteWrite(ctx, err) }()
	if err := store.CheckText("decide", "tenant", tenant, "id", id); err != nil {
		return store.DecideResult{}, fmt.Errorf("postgres: %w", err)
	}
	if d.At.IsZero() {
		d.At = s.now()
	}
	d.At = d.At.UTC()
	status, dj, err := store.EncodeDecision(d)
	if err != nil {
		return store.DecideResult{}, fmt.Errorf("postgres: decide: %w", err)
	}
	var res store.DecideResult
	err = s.tx(ctx, "decide", func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM interrupts i
			JOIN threads t ON t.tenant = i.tenant AND t.id = i.thread_id
			WHERE i.id = $1 AND i.tenant = $2 FOR UPDATE OF t`, id, tenant).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			// A record of a stateless turn has no thread and was decided
			// when it was stored.
			err := tx.QueryRow(ctx, `SELECT 1 FROM interrupts WHERE id = $1 AND tenant = $2`, id, tenant).Scan(&one)
			if errors.Is(err, pgx.ErrNoRows) {
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
		// The thread row is locked: decisions on its interrupts take
		// turns, so the quorum read here is the one the update changes.
		cur, err := scanInterrupt(tx.QueryRow(ctx, `SELECT `+interruptCols+` FROM interrupts
			WHERE id = $1 AND tenant = $2 AND status = 'pending'`, id, tenant))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("interrupt %q: %w", id, store.ErrAlreadyDecided)
		}
		if err != nil {
			return err
		}
		d := d
		approvals, final, err := store.Tally(cur, &d)
		if err != nil {
			return err
		}
		if !final {
			in, err := scanInterrupt(tx.QueryRow(ctx, `UPDATE interrupts SET approvals = $3::json
				WHERE id = $1 AND tenant = $2 AND status = 'pending' RETURNING `+interruptCols, id, tenant, approvals))
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
		var queued bool
		in, err := scanInterrupt(tx.QueryRow(ctx, `WITH d AS (
				UPDATE interrupts SET status = $3, decision = $4::json, approvals = $6::json
				WHERE id = $1 AND tenant = $2 AND status = 'pending'
				RETURNING `+interruptCols+`
			), q AS (
				UPDATE threads t SET status = 'queued', updated_at = $5
				FROM d
				WHERE t.tenant = d.tenant AND t.id = d.thread_id AND t.status = 'waiting'
					AND NOT EXISTS (SELECT 1 FROM interrupts i
						WHERE i.tenant = d.tenant AND i.thread_id = d.thread_id AND i.status = 'pending' AND i.id <> d.id)
				RETURNING 1
			)
			SELECT `+interruptCols+`, EXISTS (SELECT 1 FROM q) FROM d`,
			id, tenant, string(status), string(dj), d.At, approvals), &queued)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("interrupt %q: %w", id, store.ErrAlreadyDecided)
		}
		if err != nil {
			return err
		}
		res = store.DecideResult{Interrupt: in, Queued: queued}
		return s.notifyDecision(ctx, tx, in, d.At)
	})
	if err != nil {
		return store.DecideResult{}, err
	}
	return res, nil
}

// CountPending counts pending decisions across all tenants.
func (s *Store) CountPending(ctx context.Context) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM interrupts WHERE status = 'pending'`).Scan(&n); err != nil {
		return 0, mapErr("count pending", err)
	}
	return n, nil
}

// ExpiredInterrupts lists, across tenants, the pending interrupts whose
// expiry is at or before now, soonest expiry first.
func (s *Store) ExpiredInterrupts(ctx context.Context, now time.Time, limit int) ([]store.Interrupt, error) {
	return s.queryInterrupts(ctx, "expired interrupts", `SELECT `+interruptCols+` FROM interrupts
		WHERE status = 'pending' AND expires_at IS NOT NULL AND expires_at <= $1
		ORDER BY expires_at, tenant, id LIMIT $2`, now, store.Limit(limit, store.DefaultLimit))
}

// RecordDecided adds an already decided interrupt of no thread: the audit
// record of an approval-gated call in a stateless turn.
func (s *Store) RecordDecided(ctx context.Context, in store.Interrupt) (err error) {
	defer func() { s.noteWrite(ctx, err) }()
	r, status, dj, err := store.EncodeDecided(in, s.now)
	if err != nil {
		return fmt.Errorf("postgres: record decided: %w", err)
	}
	var desc, schema *string
	if d := r.In.Description; d != "" {
		desc = &d
	}
	if r.Schema != "" {
		schema = &r.Schema
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO interrupts (`+interruptCols+`)
		VALUES ($1, $2, '', $3, $4, $5, $6, $7, $8::json, $9, $10::json, $11::json, $12, $13, $14, $15::json, $16, $17, 1, '[]')`,
		r.In.ID, r.In.Tenant, r.In.RunID, r.In.Agent, r.In.ToolCallID, r.In.Tool, store.FormatVersion,
		r.Args, desc, r.Allowed, schema, r.In.Subagent, string(status), r.CreatedAt, string(dj), r.In.Reason, r.In.ExpiresAt)
	return mapErr("record decided", err)
}

package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// waitHeld is the condition, on threads t, that thread $2 of tenant $1
// waits on decisions of run $3, or its resume is due and not started.
const waitHeld = `t.tenant = $1 AND t.id = $2 AND t.status IN ('waiting', 'queued') AND t.run_id = $3`

// CancelWait ends a waiting turn in one transaction: the thread row is
// locked first (as Decide and FinishRun lock it), so a decision or a claim
// either came before (the pending set or the status no longer matches:
// nothing changes) or comes after and finds nothing to decide or claim.
func (db *DB) CancelWait(ctx context.Context, c CancelWait) error {
	if err := required("CancelWait", "Tenant", c.Tenant, "ThreadID", c.ThreadID, "RunID", c.RunID); err != nil {
		return db.invalid(err)
	}
	if err := CheckText("CancelWait", "Tenant", c.Tenant, "ThreadID", c.ThreadID, "RunID", c.RunID); err != nil {
		return db.invalid(err)
	}
	msgs, err := EncodeMessages(c.Messages)
	if err != nil {
		return db.invalid(err)
	}
	evs, err := EncodeEvents(c.Events, c.ThreadID, c.RunID)
	if err != nil {
		return db.invalid(err)
	}
	if c.Now.IsZero() {
		c.Now = db.now()
	}
	c.Now = c.Now.UTC()
	type closing struct {
		id, status, decision string
	}
	var closes []closing
	for id, d := range c.Decisions {
		if d.At.IsZero() {
			d.At = c.Now
		}
		status, dj, err := EncodeDecision(d)
		if err != nil {
			return db.invalid(err)
		}
		closes = append(closes, closing{id, string(status), string(dj)})
	}
	slices.SortFunc(closes, func(a, b closing) int { return strings.Compare(a.id, b.id) })
	var calls []string
	for _, m := range c.Messages {
		if m.ToolCallID != "" {
			calls = append(calls, m.ToolCallID)
		}
	}
	var evSeq int64
	err = db.d.Write(ctx, "cancel wait", func(tx Tx) error {
		held := []any{c.Tenant, c.ThreadID, c.RunID}
		var agent string
		err := tx.QueryRow(ctx, `SELECT t.agent FROM threads t WHERE `+waitHeld+` FOR UPDATE`, held...).Scan(&agent)
		if errors.Is(err, ErrNoRows) {
			if err := threadExists(ctx, tx, c.Tenant, c.ThreadID); err != nil {
				return err
			}
			return fmt.Errorf("thread %q: %w", c.ThreadID, ErrNotWaiting)
		}
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT id FROM interrupts WHERE tenant = $1 AND thread_id = $2 AND status = 'pending'`,
			c.Tenant, c.ThreadID)
		if err != nil {
			return err
		}
		pending, err := CollectRows(rows, func(r Rows) (*string, error) {
			var id string
			return &id, r.Scan(&id)
		})
		rows.Close()
		if err != nil {
			return err
		}
		slices.Sort(pending)
		if !slices.EqualFunc(pending, closes, func(id string, cl closing) bool { return id == cl.id }) {
			return fmt.Errorf("thread %q: %w", c.ThreadID, ErrWaitChanged)
		}
		for _, cl := range closes {
			in, err := scanInterrupt(tx.QueryRow(ctx, `UPDATE interrupts SET status = $3, decision = $4::json
				WHERE id = $1 AND tenant = $2 AND status = 'pending' RETURNING `+interruptCols, cl.id, c.Tenant, cl.status, cl.decision))
			if err != nil {
				return err
			}
			if err := db.notifyDecision(ctx, tx, in, c.Now); err != nil {
				return err
			}
		}
		if len(calls) > 0 {
			tx.Queue(`DELETE FROM tool_starts WHERE tenant = $1 AND thread_id = $2 AND tool_call_id IN (`+Params(3, len(calls))+`)`,
				append([]any{c.Tenant, c.ThreadID}, anys(calls)...)...)
		}
		// The paused run's record reads cancelled, as a stopped run's
		// does (the run inspector no longer shows it waiting).
		tx.Queue(`UPDATE runs SET status = 'cancelled' WHERE tenant = $1 AND thread_id = $2 AND id = $3 AND status = 'waiting'`, held...)
		cond := `t.tenant = $1 AND t.id = $2 AND t.run_id = $3`
		appendWhere(tx, "messages", "message_seq", cond, held, 0, msgs)
		appendWhere(tx, "events", "event_seq", cond, held, 0, evs)
		db.queuePush(ctx, tx, c.Tenant, c.ThreadID, c.Events, c.Now)
		var backlog int64
		if err := tx.QueryRow(ctx, `UPDATE threads SET status = 'idle', last_error = '', lease_owner = '', lease_until = NULL,
				updated_at = $3, message_seq = message_seq + $4, event_seq = event_seq + $5
			WHERE tenant = $1 AND id = $2
			RETURNING event_seq, CASE WHEN EXISTS (SELECT 1 FROM turn_queue q WHERE q.tenant = $1 AND q.thread_id = $2) THEN 1 ELSE 0 END`,
			c.Tenant, c.ThreadID, c.Now, len(msgs), len(evs)).Scan(&evSeq, &backlog); err != nil {
			return err
		}
		if c.Backlog != nil {
			*c.Backlog = backlog != 0
		}
		n, ok, err := RunNotice(c.Tenant, agent, c.ThreadID, c.RunID, Failed, CleanText(c.Error), c.Now)
		if !ok {
			return err
		}
		return db.notify(ctx, tx, n)
	})
	if err != nil {
		return err
	}
	StampEvents(c.Events, c.ThreadID, c.RunID, evSeq)
	return nil
}

package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// RunControl is what is asked of a thread's runs from outside them, kept in
// the store (table run_control) so that a request through any replica
// reaches the replica that holds the run: a cancel request, and the pause
// an MCP caller was told the thread waits on. The zero value asks nothing.
type RunControl struct {
	// CancelRun is the run a cancel was requested for (the run that held
	// the thread when it was asked; "" when none was): that run stops
	// wherever it runs. A later run of the thread is not cancelled by it.
	CancelRun string
	// CancelAt is when the cancel was requested (zero when none was).
	CancelAt time.Time
	// WaitingSeq is the sequence number of the pause (the terminal event
	// of a run that paused on decisions) that an MCP call answered with
	// "waiting on a human decision", while no call has reported that
	// turn's outcome yet; 0 when none.
	WaitingSeq int64
}

// Cancels reports whether c asks the run runID to stop.
func (c *RunControl) Cancels(runID string) bool {
	return c != nil && runID != "" && c.CancelRun == runID
}

// RenewLease renews a run's lease on its thread (Store.RenewLease).
type RenewLease struct {
	Tenant     string
	ThreadID   string
	RunID      string
	LeaseUntil time.Time
}

// requestCancelSQL records a cancel for the thread's running run, naming
// it, in one conditional write: no row when the thread runs nothing.
const requestCancelSQL = `INSERT INTO run_control (tenant, thread_id, cancel_run, cancel_at)
	SELECT tenant, id, run_id, $3 FROM threads WHERE tenant = $1 AND id = $2 AND status = 'running'
	ON CONFLICT (tenant, thread_id) DO UPDATE SET cancel_run = excluded.cancel_run, cancel_at = excluded.cancel_at
	RETURNING cancel_run`

// RequestCancel records that the run holding the thread now (a Running
// thread's run, whichever replica drives it) is to stop, and returns its
// id; "" when the thread runs nothing (idle, waiting, queued or failed),
// and nothing is recorded. An unknown thread is ErrNotFound.
func (db *DB) RequestCancel(ctx context.Context, tenant, threadID string, now time.Time) (string, error) {
	if err := CheckText("request cancel", "tenant", tenant, "threadID", threadID); err != nil {
		return "", db.invalid(err)
	}
	if now.IsZero() {
		now = db.now()
	}
	var runID string
	err := db.d.Write(ctx, "request cancel", func(tx Tx) error {
		err := tx.QueryRow(ctx, requestCancelSQL, tenant, threadID, now).Scan(&runID)
		if errors.Is(err, ErrNoRows) {
			runID = ""
			return threadExists(ctx, tx, tenant, threadID)
		}
		return err
	})
	if err != nil {
		return "", err
	}
	return runID, nil
}

// GetRunControl returns the thread's run control: the zero RunControl when
// nothing was ever asked of it (an unknown thread included).
func (db *DB) GetRunControl(ctx context.Context, tenant, threadID string) (*RunControl, error) {
	if err := CheckText("run control", "tenant", tenant, "threadID", threadID); err != nil {
		return nil, db.invalid(err)
	}
	var c RunControl
	err := db.d.Read().QueryRow(ctx, `SELECT cancel_run, cancel_at, waiting_seq FROM run_control
		WHERE tenant = $1 AND thread_id = $2`, tenant, threadID).Scan(&c.CancelRun, ScanTime(&c.CancelAt), &c.WaitingSeq)
	if errors.Is(err, ErrNoRows) {
		return &RunControl{}, nil
	}
	if err != nil {
		return nil, db.read("run control", err)
	}
	return &c, nil
}

// renewLeaseSQL renews the lease and reads the thread's cancel request in
// the same statement.
const renewLeaseSQL = `UPDATE threads SET lease_until = $1
	WHERE tenant = $2 AND id = $3 AND status = 'running' AND run_id = $4
	RETURNING coalesce((SELECT cancel_run FROM run_control WHERE tenant = $2 AND thread_id = $3), '')`

// RenewLease extends the run's lease on its thread to r.LeaseUntil and
// returns the thread's run control as of the renewal (its CancelRun only),
// so a run that renews its lease learns of a cancel requested through any
// replica even when the request's notification was lost. ErrLeaseLost when
// the run no longer holds the thread (ErrNotFound for an unknown one).
func (db *DB) RenewLease(ctx context.Context, r RenewLease) (*RunControl, error) {
	if err := CheckText("renew lease", "tenant", r.Tenant, "threadID", r.ThreadID, "runID", r.RunID); err != nil {
		return nil, db.invalid(err)
	}
	if r.LeaseUntil.IsZero() {
		return nil, db.invalid(fmt.Errorf("%w: renew lease: LeaseUntil is required", ErrInvalid))
	}
	var c RunControl
	err := db.d.Write(ctx, "renew lease", func(tx Tx) error {
		err := tx.QueryRow(ctx, renewLeaseSQL, r.LeaseUntil, r.Tenant, r.ThreadID, r.RunID).Scan(&c.CancelRun)
		if errors.Is(err, ErrNoRows) {
			return leaseLost(ctx, tx, r.Tenant, r.ThreadID, r.RunID)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// SetWaiting records seq as the thread's WaitingSeq: the pause an MCP call
// answered "waiting on a human decision" about, whose outcome the next call
// on the session reports, through whichever replica it comes.
func (db *DB) SetWaiting(ctx context.Context, tenant, threadID string, seq int64) error {
	if err := CheckText("set waiting", "tenant", tenant, "threadID", threadID); err != nil {
		return db.invalid(err)
	}
	if seq <= 0 {
		return db.invalid(fmt.Errorf("%w: set waiting: seq must be positive", ErrInvalid))
	}
	return db.d.Write(ctx, "set waiting", func(tx Tx) error {
		tx.Queue(`INSERT INTO run_control (tenant, thread_id, waiting_seq) VALUES ($1, $2, $3)
			ON CONFLICT (tenant, thread_id) DO UPDATE SET waiting_seq = excluded.waiting_seq`, tenant, threadID, seq)
		return nil
	})
}

// ClearWaiting clears the thread's WaitingSeq when it is seq (a call
// reported that pause's outcome), with one conditional write: a pause
// recorded since is kept. It reports whether it cleared it.
func (db *DB) ClearWaiting(ctx context.Context, tenant, threadID string, seq int64) (bool, error) {
	if err := CheckText("clear waiting", "tenant", tenant, "threadID", threadID); err != nil {
		return false, db.invalid(err)
	}
	var n int64
	err := db.d.Write(ctx, "clear waiting", func(tx Tx) error {
		var err error
		n, err = tx.Exec(ctx, `UPDATE run_control SET waiting_seq = 0
			WHERE tenant = $1 AND thread_id = $2 AND waiting_seq = $3 AND waiting_seq > 0`, tenant, threadID, seq)
		return err
	})
	return n > 0, err
}

// AbandonRun records runID as the thread's abandoned run: its client went
// away before its end, so a new message may stop it (Thread.AbandonedRun).
// runID "" clears it (a client attached to the run again). Recording a run
// that no longer holds the thread is harmless: only the run holding it
// counts.
func (db *DB) AbandonRun(ctx context.Context, tenant, threadID, runID string) error {
	if err := CheckText("abandon run", "tenant", tenant, "threadID", threadID, "runID", runID); err != nil {
		return db.invalid(err)
	}
	return db.d.Write(ctx, "abandon run", func(tx Tx) error {
		tx.Queue(`INSERT INTO run_control (tenant, thread_id, abandoned_run) VALUES ($1, $2, $3)
			ON CONFLICT (tenant, thread_id) DO UPDATE SET abandoned_run = excluded.abandoned_run`, tenant, threadID, runID)
		return nil
	})
}

// RunControlStore is the run control part of Store (RunControl).
type RunControlStore interface {
	// RequestCancel records a cancel of the thread's running run and
	// returns its id ("" when the thread runs nothing; ErrNotFound for an
	// unknown thread).
	RequestCancel(ctx context.Context, tenant, threadID string, now time.Time) (string, error)
	// GetRunControl returns the thread's run control (the zero value when
	// nothing was asked).
	GetRunControl(ctx context.Context, tenant, threadID string) (*RunControl, error)
	// RenewLease extends a run's lease and returns the thread's cancel
	// request in the same statement; ErrLeaseLost when the run no longer
	// holds the thread.
	RenewLease(ctx context.Context, r RenewLease) (*RunControl, error)
	// SetWaiting records the pause an MCP caller was told the thread
	// waits on.
	SetWaiting(ctx context.Context, tenant, threadID string, seq int64) error
	// AbandonRun records the run whose client went away before its end
	// ("" clears it).
	AbandonRun(ctx context.Context, tenant, threadID, runID string) error
	// ClearWaiting clears that pause when it is seq (one conditional
	// write) and reports whether it did.
	ClearWaiting(ctx context.Context, tenant, threadID string, seq int64) (bool, error)
}

var _ RunControlStore = (*DB)(nil)

package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/store"
)

// RunDriver tests a driver's primitives, under the store's transactions:
// statements in the store's dialect, arguments and times as the store binds
// them, queued statements, rollback, and concurrent writers. newDriver
// returns the driver of a fresh, migrated, empty database for one subtest
// and registers its cleanup with t. The tests use the
// studio_revoked_sessions table (tenant, id, expires_at), which has no
// foreign keys.
func RunDriver(t *testing.T, newDriver func(t *testing.T) store.Driver) {
	tests := []struct {
		name string
		fn   func(t *testing.T, d store.Driver)
	}{
		{"TimesRoundTrip", testDriverTimes},
		{"NoRows", testDriverNoRows},
		{"QueuedRunInOrderBeforeTheNextRead", testDriverQueueOrder},
		{"FailedQueuedStatementRollsBackAll", testDriverQueueFailure},
		{"ErrorOfFnRollsBack", testDriverFnError},
		{"ExecCountsRows", testDriverExecCount},
		{"RowsThenMoreStatements", testDriverRowsThenMore},
		{"ParamsList", testDriverParams},
		{"QueryRowLastCommits", testDriverQueryRowLast},
		{"ConcurrentWritersLoseNothing", testDriverConcurrent},
		{"CancelledWriteStoresNothing", testDriverCancelled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newDriver(t))
		})
	}
}

const insertSession = `INSERT INTO studio_revoked_sessions (tenant, id, expires_at) VALUES ($1, $2, $3)`

// sessions returns the ids of tenant's rows, in id order.
func sessions(t *testing.T, d store.Driver, tenant string) []string {
	t.Helper()
	rows, err := d.Read().Query(t.Context(), `SELECT id FROM studio_revoked_sessions WHERE tenant = $1 ORDER BY id`, tenant)
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatalf("scan: %v", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("rows: %v", err)
	}
	return out
}

func testDriverTimes(t *testing.T, d store.Driver) {
	ctx := t.Context()
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("x", 3600))
	if err := d.Write(ctx, "t", func(tx store.Tx) error {
		_, err := tx.Exec(ctx, insertSession, "a", "s1", at)
		return err
	}); err != nil {
		t.Fatalf("write: %v", err)
	}
	var got time.Time
	var ptr *time.Time
	if err := d.Read().QueryRow(ctx, `SELECT expires_at, expires_at FROM studio_revoked_sessions WHERE tenant = $1 AND id = $2`, "a", "s1").
		Scan(store.ScanTime(&got), store.ScanTimePtr(&ptr)); err != nil {
		t.Fatalf("read: %v", err)
	}
	want := at.Truncate(time.Microsecond).UTC()
	if !got.Equal(want) || got.Location() != time.UTC || ptr == nil || !ptr.Equal(want) {
		t.Fatalf("time read back as %v / %v, want %v in UTC", got, ptr, want)
	}
	// A time compares as a time in a WHERE clause.
	var n int
	if err := d.Read().QueryRow(ctx, `SELECT count(*) FROM studio_revoked_sessions WHERE expires_at > $1 AND expires_at < $2`,
		at.Add(-time.Microsecond), at.Add(time.Microsecond)).Scan(&n); err != nil || n != 1 {
		t.Fatalf("range count = %d, %v; want 1", n, err)
	}
	// NULL reads as the zero time, or a nil pointer.
	if err := d.Read().QueryRow(ctx, `SELECT NULL, NULL`).Scan(store.ScanTime(&got), store.ScanTimePtr(&ptr)); err != nil {
		t.Fatalf("read NULL: %v", err)
	}
	if !got.IsZero() || ptr != nil {
		t.Fatalf("NULL read as %v / %v, want zero and nil", got, ptr)
	}
}

func testDriverNoRows(t *testing.T, d store.Driver) {
	ctx := t.Context()
	var id string
	if err := d.Read().QueryRow(ctx, `SELECT id FROM studio_revoked_sessions WHERE tenant = $1`, "none").Scan(&id); !errors.Is(err, store.ErrNoRows) {
		t.Fatalf("read of no row: %v, want ErrNoRows", err)
	}
	if err := d.Write(ctx, "t", func(tx store.Tx) error {
		err := tx.QueryRow(ctx, `UPDATE studio_revoked_sessions SET id = id WHERE tenant = $1 RETURNING id`, "none").Scan(&id)
		if !errors.Is(err, store.ErrNoRows) {
			t.Errorf("update of no row: %v, want ErrNoRows", err)
		}
		// The transaction goes on after a statement that matched nothing.
		_, err = tx.Exec(ctx, insertSession, "a", "after", time.Now())
		return err
	}); err != nil {
		t.Fatalf("write: %v", err)
	}
	if got := sessions(t, d, "a"); len(got) != 1 {
		t.Fatalf("rows = %v, want the one inserted after the empty update", got)
	}
}

func testDriverQueueOrder(t *testing.T, d store.Driver) {
	ctx := t.Context()
	now := time.Now()
	var n int
	if err := d.Write(ctx, "t", func(tx store.Tx) error {
		tx.Queue(insertSession, "a", "q1", now)
		tx.Queue(insertSession, "a", "q2", now)
		tx.Queue(`DELETE FROM studio_revoked_sessions WHERE tenant = $1 AND id = $2`, "a", "q1")
		return tx.QueryRow(ctx, `SELECT count(*) FROM studio_revoked_sessions WHERE tenant = $1`, "a").Scan(&n)
	}); err != nil {
		t.Fatalf("write: %v", err)
	}
	if n != 1 {
		t.Fatalf("the read after three queued statements counted %d rows, want 1 (they run first, in order)", n)
	}
	// Queued statements with no read after them run at the commit.
	if err := d.Write(ctx, "t", func(tx store.Tx) error {
		tx.Queue(insertSession, "a", "q3", now)
		return nil
	}); err != nil {
		t.Fatalf("write: %v", err)
	}
	if got := sessions(t, d, "a"); fmt.Sprint(got) != "[q2 q3]" {
		t.Fatalf("rows = %v, want [q2 q3]", got)
	}
}

func testDriverQueueFailure(t *testing.T, d store.Driver) {
	ctx := t.Context()
	now := time.Now()
	err := d.Write(ctx, "t", func(tx store.Tx) error {
		tx.Queue(insertSession, "a", "x1", now)
		tx.Queue(insertSession, "a", "x1", now) // the primary key refuses it
		tx.Queue(insertSession, "a", "x2", now)
		return nil
	})
	if err == nil {
		t.Fatal("a write whose queued statement failed committed")
	}
	if got := sessions(t, d, "a"); len(got) != 0 {
		t.Fatalf("rows = %v after a failed write, want none", got)
	}
	// The failure is the next statement's when one follows.
	err = d.Write(ctx, "t", func(tx store.Tx) error {
		tx.Queue(insertSession, "a", "y1", now)
		tx.Queue(insertSession, "a", "y1", now)
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM studio_revoked_sessions`).Scan(&n); err == nil {
			t.Errorf("the read after a failed queued statement succeeded (count %d)", n)
		}
		return nil
	})
	if err == nil {
		t.Fatal("a write whose queued statement failed committed")
	}
	if got := sessions(t, d, "a"); len(got) != 0 {
		t.Fatalf("rows = %v after a failed write, want none", got)
	}
	// The driver is usable after.
	if err := d.Write(ctx, "t", func(tx store.Tx) error {
		_, err := tx.Exec(ctx, insertSession, "a", "ok", now)
		return err
	}); err != nil {
		t.Fatalf("write after failures: %v", err)
	}
}

func testDriverFnError(t *testing.T, d store.Driver) {
	ctx := t.Context()
	boom := errors.New("boom")
	err := d.Write(ctx, "t", func(tx store.Tx) error {
		if _, err := tx.Exec(ctx, insertSession, "a", "e1", time.Now()); err != nil {
			return err
		}
		tx.Queue(insertSession, "a", "e2", time.Now())
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("write = %v, want fn's error", err)
	}
	if got := sessions(t, d, "a"); len(got) != 0 {
		t.Fatalf("rows = %v after fn failed, want none", got)
	}
}

func testDriverExecCount(t *testing.T, d store.Driver) {
	ctx := t.Context()
	var n int64
	if err := d.Write(ctx, "t", func(tx store.Tx) error {
		for _, id := range []string{"c1", "c2", "c3"} {
			tx.Queue(insertSession, "a", id, time.Now())
		}
		var err error
		n, err = tx.Exec(ctx, `DELETE FROM studio_revoked_sessions WHERE tenant = $1 AND id <> $2`, "a", "c2")
		return err
	}); err != nil {
		t.Fatalf("write: %v", err)
	}
	if n != 2 {
		t.Fatalf("Exec changed %d rows, want 2", n)
	}
}

func testDriverRowsThenMore(t *testing.T, d store.Driver) {
	ctx := t.Context()
	if err := d.Write(ctx, "t", func(tx store.Tx) error {
		tx.Queue(insertSession, "a", "r1", time.Now())
		tx.Queue(insertSession, "a", "r2", time.Now())
		rows, err := tx.Query(ctx, `SELECT id FROM studio_revoked_sessions WHERE tenant = $1 ORDER BY id`, "a")
		if err != nil {
			return err
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if fmt.Sprint(ids) != "[r1 r2]" {
			t.Errorf("rows in the transaction = %v, want [r1 r2]", ids)
		}
		_, err = tx.Exec(ctx, `DELETE FROM studio_revoked_sessions WHERE id = $1`, "r1")
		return err
	}); err != nil {
		t.Fatalf("write: %v", err)
	}
	if got := sessions(t, d, "a"); fmt.Sprint(got) != "[r2]" {
		t.Fatalf("rows = %v, want [r2]", got)
	}
}

func testDriverParams(t *testing.T, d store.Driver) {
	ctx := t.Context()
	ids := make([]any, 40)
	if err := d.Write(ctx, "t", func(tx store.Tx) error {
		for i := range ids {
			ids[i] = fmt.Sprintf("p%02d", i)
			tx.Queue(insertSession, "a", ids[i], time.Now())
		}
		return nil
	}); err != nil {
		t.Fatalf("write: %v", err)
	}
	var n int
	args := append([]any{"a"}, ids[:33]...)
	if err := d.Read().QueryRow(ctx, `SELECT count(*) FROM studio_revoked_sessions WHERE tenant = $1 AND id IN (`+store.Params(2, 33)+`)`,
		args...).Scan(&n); err != nil || n != 33 {
		t.Fatalf("IN list of 33 counted %d, %v", n, err)
	}
}

func testDriverConcurrent(t *testing.T, d store.Driver) {
	ctx := t.Context()
	const writers = 24
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Go(func() {
			errs <- d.Write(ctx, "t", func(tx store.Tx) error {
				var n int
				if err := tx.QueryRow(ctx, `SELECT count(*) FROM studio_revoked_sessions WHERE tenant = $1`, "a").Scan(&n); err != nil {
					return err
				}
				tx.Queue(insertSession, "a", fmt.Sprintf("w%02d", i), time.Now())
				return nil
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent write: %v", err)
		}
	}
	if got := sessions(t, d, "a"); len(got) != writers {
		t.Fatalf("%d rows after %d concurrent writes", len(got), writers)
	}
}

func testDriverCancelled(t *testing.T, d store.Driver) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := d.Write(ctx, "t", func(tx store.Tx) error {
		tx.Queue(insertSession, "a", "z", time.Now())
		return nil
	})
	if err == nil {
		t.Fatal("a write under a cancelled context committed")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled write = %v, want the context's error", err)
	}
	if got := sessions(t, d, "a"); len(got) != 0 {
		t.Fatalf("rows = %v after a cancelled write", got)
	}
}

func testDriverQueryRowLast(t *testing.T, d store.Driver) {
	ctx := t.Context()
	var n int
	if err := d.Write(ctx, "t", func(tx store.Tx) error {
		tx.Queue(insertSession, "a", "l1", time.Now())
		tx.Queue(insertSession, "a", "l2", time.Now())
		return tx.QueryRowLast(ctx, `SELECT count(*) FROM studio_revoked_sessions WHERE tenant = $1`, "a").Scan(&n)
	}); err != nil {
		t.Fatalf("write: %v", err)
	}
	if n != 2 {
		t.Fatalf("the last read counted %d rows, want the 2 queued before it", n)
	}
	if got := sessions(t, d, "a"); fmt.Sprint(got) != "[l1 l2]" {
		t.Fatalf("rows = %v, want [l1 l2] committed", got)
	}
	// A last read that finds nothing still commits what came before it.
	if err := d.Write(ctx, "t", func(tx store.Tx) error {
		tx.Queue(insertSession, "a", "l3", time.Now())
		var id string
		if err := tx.QueryRowLast(ctx, `SELECT id FROM studio_revoked_sessions WHERE tenant = $1`, "none").Scan(&id); !errors.Is(err, store.ErrNoRows) {
			t.Errorf("last read of no row: %v, want ErrNoRows", err)
		}
		return nil
	}); err != nil {
		t.Fatalf("write: %v", err)
	}
	if got := sessions(t, d, "a"); len(got) != 3 {
		t.Fatalf("rows = %v, want l3 committed too", got)
	}
	// A failed statement before the last read fails the write, and
	// nothing of it is stored.
	err := d.Write(ctx, "t", func(tx store.Tx) error {
		tx.Queue(insertSession, "b", "x", time.Now())
		tx.Queue(insertSession, "b", "x", time.Now())
		var n int
		return tx.QueryRowLast(ctx, `SELECT count(*) FROM studio_revoked_sessions`).Scan(&n)
	})
	if err == nil {
		t.Fatal("a write whose queued statement failed committed")
	}
	if got := sessions(t, d, "b"); len(got) != 0 {
		t.Fatalf("rows = %v after a failed write", got)
	}
}

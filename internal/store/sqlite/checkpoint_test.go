package sqlite

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stackbone/stackbone/internal/clock"
	"github.com/stackbone/stackbone/internal/store/storetest"
	"github.com/stackbone/stackbone/internal/testwait"
)

// idleClock puts s's checkpointer on a fake clock; the step it returns lets
// ckptIdle pass and waits until the checkpointer went round its loop (its
// idle timer fired and is armed again), so a checkpoint it was due has run.
func idleClock(t *testing.T, s *Store) (step func()) {
	t.Helper()
	clk := clock.NewFake(storetest.T0)
	s.ckpt.setClock(clk)
	return func() {
		t.Helper()
		clk.Advance(ckptIdle)
		if err := clk.AwaitTimers(testwait.Context(t), 1); err != nil {
			t.Fatalf("the checkpointer did not arm its idle timer again: %v", err)
		}
	}
}

// threadsInFile counts the threads the database file holds on its own,
// without its WAL: what survives losing the WAL's unsynced tail.
func threadsInFile(t *testing.T, path string) (int, error) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(cp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+cp+"?immutable=1")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	err = db.QueryRow(`SELECT count(*) FROM threads`).Scan(&n) // no such table: the schema is still in the WAL
	return n, err
}

// A few writes, then quiet: the store's own checkpoint moves them from the
// WAL into the database file ckptIdle after the last, while the store stays
// open (SQLite alone would wait for 1000 pages or the close). On a fake
// clock: before, the wait for the file raced the checkpointer's count of
// its runs (3 in 30 under load).
func TestIdleCheckpointMovesWritesIntoTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stackbone.db")
	s := openFile(t, path)
	step := idleClock(t, s)
	var ids []string
	for i := range 5 {
		ids = append(ids, fmt.Sprintf("t%d", i))
	}
	beginThreads(t, s, ids...)
	if n, _ := threadsInFile(t, path); n == len(ids) {
		t.Fatal("the writes are in the database file before any checkpoint")
	}
	step()
	if n, err := threadsInFile(t, path); n != len(ids) {
		t.Fatalf("the database file holds %d of %d threads once ckptIdle passed (%v)", n, len(ids), err)
	}
	if got := s.ckpt.runs.Load(); got != 1 {
		t.Fatalf("%d checkpoints ran on the store's goroutine, want 1", got)
	}
}

// Under a steady stream of writes the WAL is checkpointed by the store's
// goroutine every ckptCommits commits and reused from its start, so it
// stays far below the writer's backstop of ckptBackstop pages.
func TestBusyWritesKeepTheWALSmall(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stackbone.db")
	s := openFile(t, path)
	var ids []string
	for i := range 5 * ckptCommits {
		ids = append(ids, fmt.Sprintf("t%d", i))
	}
	step := idleClock(t, s)
	beginThreads(t, s, ids...)
	step() // the checkpointer went round once more: the checkpoint the first commits kicked has ended
	if s.ckpt.runs.Load() == 0 {
		t.Fatalf("%d checkpoints after %d commits", s.ckpt.runs.Load(), len(ids))
	}
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if max := int64(ckptBackstop) * 4096 / 4; fi.Size() > max {
		t.Fatalf("WAL is %d bytes after %d commits, want ≤ %d", fi.Size(), len(ids), max)
	}
}

// A read that holds an old snapshot keeps the checkpoint from copying the
// writes after it; once the read ends, the store checkpoints again by
// itself, with no further write to prompt it.
func TestCheckpointRetriesAfterAReadHeldItBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stackbone.db")
	s := openFile(t, path)
	step := idleClock(t, s)
	beginThreads(t, s, "t0")
	step()
	if n, err := threadsInFile(t, path); n != 1 {
		t.Fatalf("the first write is not in the database file after a checkpoint: %d threads (%v)", n, err)
	}
	reader := rawDB(t, path)
	tx, err := reader.Begin()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRow(`SELECT count(*) FROM threads`).Scan(&n); err != nil { // the snapshot: one thread
		t.Fatal(err)
	}
	beginThreads(t, s, "t1", "t2")
	step()
	step() // two checkpoints ran, held back by the read
	if n, _ := threadsInFile(t, path); n != 1 {
		t.Fatalf("the file holds %d threads while the read holds its snapshot, want 1", n)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	step() // no write since: the held-back checkpoint retries by itself
	if n, err := threadsInFile(t, path); n != 3 {
		t.Fatalf("the writes held back by the read are not in the database file at the next idle checkpoint: %d threads (%v)", n, err)
	}
}

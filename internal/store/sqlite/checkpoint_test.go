package sqlite

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

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
// WAL into the database file within about a second, while the store stays
// open (SQLite alone would wait for 1000 pages or the close).
func TestIdleCheckpointMovesWritesIntoTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stackbone.db")
	s := openFile(t, path)
	var ids []string
	for i := range 5 {
		ids = append(ids, fmt.Sprintf("t%d", i))
	}
	beginThreads(t, s, ids...)
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := threadsInFile(t, path)
		if n == len(ids) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the database file holds %d of %d threads 10 s after the writes (%v)", n, len(ids), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s.ckpt.runs.Load() == 0 {
		t.Fatal("no checkpoint ran on the store's goroutine")
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
	beginThreads(t, s, ids...)
	for deadline := time.Now().Add(10 * time.Second); s.ckpt.runs.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint after %d commits", len(ids))
		}
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
	beginThreads(t, s, "t0")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if n, _ := threadsInFile(t, path); n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first write never reached the database file")
		}
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
	time.Sleep(2*ckptIdle + 200*time.Millisecond) // checkpoints ran, held back by the read
	if n, _ := threadsInFile(t, path); n != 1 {
		t.Fatalf("the file holds %d threads while the read holds its snapshot, want 1", n)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if n, _ := threadsInFile(t, path); n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writes held back by the read never reached the database file")
		}
	}
}

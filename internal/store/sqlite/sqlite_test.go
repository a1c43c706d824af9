package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/store/storetest"
)

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func openFile(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, testLogger(t))
	if err != nil {
		t.Fatalf("Open %s: %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return openFile(t, filepath.Join(t.TempDir(), "data", "stackbone.db"))
	})
}

func TestConformanceInMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return openFile(t, ":memory:")
	})
}

// rawDB opens the database file directly, as another process would.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestOpenCreatesWALDatabaseAndReopens(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "a", "b", "stackbone.db")
	s, err := Open(ctx, path, testLogger(t))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if _, err := s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: "t", Agent: "x", RunID: "r", Now: storetest.T0,
		LeaseUntil: storetest.T0.Add(time.Minute), Input: []message.Message{{ID: "m", Role: message.User, Content: "hi"}}}); err != nil {
		t.Fatalf("BeginRun: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = openFile(t, path) // migrations are not applied twice
	ms, err := s.Messages(ctx, "a", "t")
	if err != nil || len(ms) != 1 || ms[0].Content != "hi" {
		t.Fatalf("messages after reopen: %+v, %v", ms, err)
	}

	db := rawDB(t, path)
	var mode string
	if err := db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode %q, %v", mode, err)
	}
	var versions int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM schema_version`).Scan(&versions); err != nil {
		t.Fatal(err)
	}
	ms2, _ := loadMigrations()
	if versions != len(ms2) {
		t.Fatalf("schema_version has %d rows, want %d", versions, len(ms2))
	}
}

func TestStoredJSONIsVersionedText(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "stackbone.db")
	s := openFile(t, path)
	if _, err := s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: "t", Agent: "x", RunID: "r", Now: storetest.T0,
		LeaseUntil: storetest.T0.Add(time.Minute), State: json.RawMessage(`{"k":"v"}`),
		Input:  []message.Message{{ID: "m", Role: message.Assistant, ToolCalls: []message.ToolCall{{ID: "c", Name: "n", Arguments: `{}`}}}},
		Events: []event.Event{{Type: event.RunStarted}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r",
		Interrupts: []store.Interrupt{{ID: "int_1", ToolCallID: "c", Tool: "n", Args: json.RawMessage(`{"x":1}`)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decide(ctx, "a", "int_1", store.Decision{Approved: true, Via: "api", By: "a/k", At: storetest.T0}); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	for _, q := range []string{
		`SELECT v, typeof(json), json FROM messages`,
		`SELECT v, typeof(json), json FROM events`,
		`SELECT v, typeof(state), state FROM threads`,
		`SELECT v, typeof(args), args FROM interrupts`,
		`SELECT v, typeof(decision), decision FROM interrupts`,
	} {
		var (
			v        int
			typ, val string
		)
		if err := db.QueryRowContext(ctx, q).Scan(&v, &typ, &val); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if v != store.FormatVersion || typ != "text" || !json.Valid([]byte(val)) {
			t.Fatalf("%s: v=%d type=%s value=%s", q, v, typ, val)
		}
	}
	var tc string
	if err := db.QueryRowContext(ctx, `SELECT json_extract(json, '$.toolCalls[0].name') FROM messages`).Scan(&tc); err != nil || tc != "n" {
		t.Fatalf("stored message is not queryable JSON: %q %v", tc, err)
	}

	// A row written by a newer release is refused, not misread.
	if _, err := db.ExecContext(ctx, `UPDATE messages SET v = 2`); err != nil {
		t.Fatal(err)
	}
	_, err := s.Messages(ctx, "a", "t")
	if !errors.Is(err, store.ErrUnknownFormat) {
		t.Fatalf("Messages of a newer format: %v", err)
	}
}

func TestNewerSchemaIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stackbone.db")
	s, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db := rawDB(t, path)
	if _, err := db.ExecContext(t.Context(), `INSERT INTO schema_version (version, name, applied_at) VALUES (9999, 'future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	_, err = Open(t.Context(), path, nil)
	if err == nil {
		t.Fatalf("Open of a database migrated by a newer build succeeded")
	}
}

func TestOpenRejectsBadPath(t *testing.T) {
	for _, p := range []string{"", "a?b.db"} {
		if _, err := Open(t.Context(), p, nil); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("Open(%q): %v", p, err)
		}
	}
}

// TestLockedDatabaseIsUnavailable holds the write lock from another
// connection beyond the busy timeout.
func TestLockedDatabaseIsUnavailable(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "stackbone.db")
	s, err := open(ctx, path, testLogger(t), options{busyTimeout: 20 * time.Millisecond, now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	conn, err := rawDB(t, path).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	_, err = s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: "t", Agent: "x", RunID: "r", Now: storetest.T0,
		LeaseUntil: storetest.T0.Add(time.Minute)})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("BeginRun on a locked database: %v", err)
	}
	// Reads go on under WAL while another connection writes.
	if _, err := s.ListThreads(ctx, "a", store.ThreadFilter{}); err != nil {
		t.Fatalf("ListThreads while locked: %v", err)
	}
	if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: "t", Agent: "x", RunID: "r", Now: storetest.T0,
		LeaseUntil: storetest.T0.Add(time.Minute)}); err != nil {
		t.Fatalf("BeginRun after the lock was released: %v", err)
	}
}

func TestClosedStoreIsUnavailable(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "stackbone.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := s.Ping(t.Context()); err == nil {
		t.Fatalf("Ping of a closed store succeeded")
	}
}

// TestTwoStoresOnOneFile is two processes sharing a database: their
// BEGIN IMMEDIATE transactions wait on each other instead of failing.
func TestTwoStoresOnOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stackbone.db")
	stores := []*Store{openFile(t, path), openFile(t, path)}
	ctx := t.Context()
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := stores[i%2].BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: "t", Agent: "x",
				RunID: fmt.Sprint("r", i), Now: storetest.T0, LeaseUntil: storetest.T0.Add(time.Minute)})
			errs <- err
		}()
	}
	won := 0
	for range n {
		err := <-errs
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrRunInProgress):
			t.Fatalf("BeginRun: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d BeginRuns won, want 1", won)
	}
	for i, s := range stores {
		if th, err := s.GetThread(ctx, "a", "t"); err != nil || th.Status != store.Running {
			t.Fatalf("store %d: %+v %v", i, th, err)
		}
	}
}

// BenchmarkCheckpoint measures one step checkpoint: an assistant message
// with a tool call and its tool result, about 600 bytes each.
func BenchmarkCheckpoint(b *testing.B) {
	ctx := context.Background()
	s := openFile(b, filepath.Join(b.TempDir(), "stackbone.db"))
	if _, err := s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: "t", Agent: "x", RunID: "r", Now: storetest.T0,
		LeaseUntil: storetest.T0.Add(time.Hour)}); err != nil {
		b.Fatal(err)
	}
	text := fmt.Sprintf("%0450d", 0)
	msgs := []message.Message{
		{ID: "msg_assistant", Role: message.Assistant, Content: text,
			ToolCalls: []message.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
		{ID: "msg_tool", Role: message.Tool, ToolCallID: "call_1", ToolName: "get_weather",
			Content: `{"city":"Paris","temperature":21,"conditions":"sunny","detail":"` + text + `"}`},
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r", Messages: msgs}); err != nil {
			b.Fatal(err)
		}
	}
}

// A database made before migration 0003 keeps its decisions when the
// interrupts table is rebuilt without its thread key.
func TestMigration0003KeepsDecisions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stackbone.db")
	db := rawDB(t, path)
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, `CREATE TABLE schema_version (version INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version >= 3 {
			break
		}
		if _, err := db.ExecContext(ctx, m.SQL); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO schema_version VALUES (?, ?, 0)`, m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO threads (tenant, id, agent, status, created_at, updated_at) VALUES ('a', 't', 'x', 'waiting', 1, 1)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO interrupts (id, tenant, thread_id, run_id, agent, tool_call_id, tool, v, args, description, allowed, status, created_at)
		VALUES ('int_old', 'a', 't', 'r1', 'x', 'c1', 'refund', 1, '{"orderId":"A1"}', 'Refund A1', '["approve","reject"]', 'pending', 1)`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s := openFile(t, path)
	it, err := s.GetInterrupt(ctx, "a", "int_old")
	if err != nil || it.ThreadID != "t" || it.Description != "Refund A1" || it.Status != store.Pending || string(it.Args) != `{"orderId":"A1"}` {
		t.Fatalf("after the migration: %+v %v", it, err)
	}
	res, err := s.Decide(ctx, "a", "int_old", store.Decision{Approved: true, Via: "api", By: "a/k"})
	if err != nil || !res.Queued {
		t.Fatalf("deciding a migrated interrupt: %+v %v", res, err)
	}
	if err := s.RecordDecided(ctx, store.Interrupt{ID: "int_new", Tenant: "a", Tool: "refund", AllowedDecisions: []string{"approve"},
		Decision: &store.Decision{Approved: true, Via: store.ViaStateless}}); err != nil {
		t.Fatalf("a stateless record after the migration: %v", err)
	}
}

func TestDriver(t *testing.T) {
	storetest.RunDriver(t, func(t *testing.T) store.Driver {
		return openFile(t, filepath.Join(t.TempDir(), "data", "stackbone.db"))
	})
}

// BenchmarkMessages reads a 20-message conversation: a thread that never
// branched (one line), and one whose head is a branch from its 10th
// message (its path: two segments).
func BenchmarkMessages(b *testing.B) {
	ctx := context.Background()
	s := openFile(b, filepath.Join(b.TempDir(), "stackbone.db"))
	seed := func(thread string, from int64) {
		for i := range 10 {
			run := fmt.Sprintf("%s-r%d", thread, i)
			f := int64(0)
			if i == 5 {
				f = from
			}
			if _, err := s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: thread, Agent: "x", RunID: run, Now: storetest.T0,
				LeaseUntil: storetest.T0.Add(time.Hour), From: f, Input: []message.Message{{ID: run + "u", Role: message.User, Content: "hello there"}}}); err != nil {
				b.Fatal(err)
			}
			if err := s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: thread, RunID: run,
				Messages: []message.Message{{ID: run + "a", Role: message.Assistant, Content: "hi, how can I help?"}}}); err != nil {
				b.Fatal(err)
			}
			if err := s.FinishRun(ctx, store.FinishRun{Tenant: "a", ThreadID: thread, RunID: run, Status: store.Idle}); err != nil {
				b.Fatal(err)
			}
		}
	}
	seed("line", 0)
	seed("branched", 6)
	for _, thread := range []string{"line", "branched"} {
		b.Run(thread, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ms, err := s.Messages(ctx, "a", thread); err != nil || len(ms) < 16 {
					b.Fatal(len(ms), err)
				}
			}
		})
	}
}

// A database that applied a later migration before an earlier one landed
// (two branches merged in the other order) gets the missing one on the next
// open: the runner applies every version schema_version lacks, not only
// those above its newest.
func TestOpenAppliesAMissingEarlierMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stackbone.db")
	s, err := Open(t.Context(), path, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db := rawDB(t, path)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, `ALTER TABLE threads DROP COLUMN owner`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM schema_version WHERE version = 28`); err != nil {
		t.Fatal(err)
	}
	openFile(t, path)
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('threads') WHERE name = 'owner'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("column of migration 0028 after reopening: %d %v, want it added again", n, err)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM schema_version WHERE version = 28`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("schema_version 28 after reopening: %d %v", n, err)
	}
}

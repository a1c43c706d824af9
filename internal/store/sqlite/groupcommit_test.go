package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/store/storetest"
	"github.com/stackbone/stackbone/internal/testwait"
)

// BenchmarkCheckpointParallel measures step checkpoints of 16 concurrent
// runs, each on its own thread (the shape of 16 concurrent clients).
func BenchmarkCheckpointParallel(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "stackbone.db")
	s := openFile(b, path)
	// The WAL is not checkpointed, so its size measures what was written.
	if err := s.ckpt.close(); err != nil {
		b.Fatal(err)
	}
	s.ckpt = nil
	if _, err := s.w.ExecContext(ctx, `PRAGMA wal_autocheckpoint = 0`); err != nil {
		b.Fatal(err)
	}
	text := fmt.Sprintf("%0450d", 0)
	msgs := []message.Message{
		{ID: "msg_assistant", Role: message.Assistant, Content: text,
			ToolCalls: []message.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
		{ID: "msg_tool", Role: message.Tool, ToolCallID: "call_1", ToolName: "get_weather",
			Content: `{"city":"Paris","temperature":21,"conditions":"sunny","detail":"` + text + `"}`},
	}
	var next atomic.Int64
	commits, writes := s.gc.commits.Load(), s.gc.writes.Load()
	b.SetParallelism(8) // 8 × GOMAXPROCS goroutines
	b.ResetTimer()
	walBefore := walSize(b, path)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		id := fmt.Sprintf("t%d.%d", b.N, next.Add(1))
		if _, err := s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: id, Agent: "x", RunID: "r", Now: storetest.T0,
			LeaseUntil: storetest.T0.Add(time.Hour)}); err != nil {
			b.Error(err)
			return
		}
		for pb.Next() {
			if err := s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: id, RunID: "r", Messages: msgs}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(walSize(b, path)-walBefore)/float64(b.N), "WAL-B/op")
	b.ReportMetric(float64(s.gc.writes.Load()-writes)/float64(s.gc.commits.Load()-commits), "writes/commit")
}

// holdWriter starts a checkpoint whose COMMIT waits until n other writes
// are queued behind it, so that they all go in the next batch. It returns
// once that checkpoint holds the writer; wait waits for its end.
func holdWriter(t *testing.T, s *Store, n int) (wait func()) {
	t.Helper()
	ctx := t.Context()
	if _, err := s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: "holder", Agent: "x", RunID: "r",
		Now: storetest.T0, LeaseUntil: storetest.T0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	held := make(chan struct{})
	var once sync.Once
	bound := testwait.Context(t)
	s.gc.beforeCommit = func(int) {
		once.Do(func() {
			close(held)
			testwait.Poll(bound, func() bool { return s.gc.queued() >= n })
		})
	}
	t.Cleanup(func() { s.gc.beforeCommit = nil })
	done := make(chan error, 1)
	go func() { done <- s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: "holder", RunID: "r"}) }()
	testwait.Recv(t, held, "the holding checkpoint to reach its COMMIT")
	return func() {
		if err := testwait.Recv(t, done, "the holding checkpoint to end"); err != nil {
			t.Errorf("holding Checkpoint: %v", err)
		}
	}
}

func msgIDs(ms []message.Message) []string {
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	return ids
}

// Writes that fail inside a group commit (a lost lease, an unknown thread,
// a second decision, a constraint violation, some after writing rows) get their own error and leave
// no trace, while the writes batched with them commit.
func TestGroupCommitFailuresStayTheirOwn(t *testing.T) {
	ctx := t.Context()
	s := openFile(t, filepath.Join(t.TempDir(), "stackbone.db"))
	const threads, decisions = 8, 4
	lease := storetest.T0.Add(time.Hour)
	for i := range threads {
		if _, err := s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: fmt.Sprintf("t%d", i), Agent: "x", RunID: "r",
			Now: storetest.T0, LeaseUntil: lease}); err != nil {
			t.Fatal(err)
		}
	}
	var ins []store.Interrupt
	for k := range decisions {
		ins = append(ins, store.Interrupt{ID: fmt.Sprintf("int_%d", k), ToolCallID: fmt.Sprintf("call_%d", k), Tool: "refund",
			Args: json.RawMessage(`{}`), AllowedDecisions: []string{"approve", "reject"}, CreatedAt: storetest.T0})
	}
	if _, err := s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: "w", Agent: "x", RunID: "rw",
		Now: storetest.T0, LeaseUntil: lease}); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: "w", RunID: "rw", Interrupts: ins}); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishRun(ctx, store.FinishRun{Tenant: "a", ThreadID: "w", RunID: "rw", Status: store.Waiting,
		Now: storetest.T0}); err != nil {
		t.Fatal(err)
	}

	type write struct {
		name string
		do   func() error
		want error // nil: must succeed; errAny: must fail
	}
	errAny := errors.New("any error")
	var writes []write
	for i := range threads {
		id := fmt.Sprintf("t%d", i)
		writes = append(writes,
			write{"checkpoint " + id, func() error {
				return s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: id, RunID: "r",
					Messages: []message.Message{{ID: "good-" + id, Role: message.User, Content: "kept"}}})
			}, nil},
			write{"checkpoint " + id + " with a wrong run", func() error {
				return s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: id, RunID: "wrong",
					Messages: []message.Message{{ID: "bad-" + id, Role: message.User, Content: "dropped"}}})
			}, store.ErrLeaseLost},
			// It writes its messages, then fails on the interrupt's taken id.
			write{"checkpoint " + id + " with a taken interrupt id", func() error {
				return s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: id, RunID: "r",
					Messages:   []message.Message{{ID: "dup-" + id, Role: message.User, Content: "dropped"}},
					Interrupts: ins[:1]})
			}, errAny})
	}
	writes = append(writes, write{"checkpoint of an unknown thread", func() error {
		return s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: "ghost", RunID: "r",
			Messages: []message.Message{{ID: "ghost-msg", Role: message.User, Content: "dropped"}}})
	}, store.ErrNotFound})
	writes = append(writes, write{"record decided with a taken id", func() error {
		return s.RecordDecided(ctx, store.Interrupt{ID: "int_0", Tenant: "a", RunID: "r9", Agent: "x", ToolCallID: "c",
			Tool: "refund", Args: json.RawMessage(`{}`), Status: store.Approved, CreatedAt: storetest.T0,
			Decision: &store.Decision{Approved: true, Via: "api", By: "someone-else", At: storetest.T0}})
	}, errAny})
	decided := make([][2]error, decisions)
	var wg sync.WaitGroup
	commits, batched := s.gc.commits.Load(), s.gc.writes.Load()
	held := holdWriter(t, s, len(writes)+2*decisions)
	errs := make([]error, len(writes))
	for i, w := range writes {
		wg.Go(func() { errs[i] = w.do() })
	}
	for k := range decisions {
		for j := range 2 {
			wg.Go(func() {
				_, decided[k][j] = s.Decide(ctx, "a", fmt.Sprintf("int_%d", k),
					store.Decision{Approved: j == 0, Via: "api", By: fmt.Sprintf("u%d", j), At: storetest.T0})
			})
		}
	}
	wg.Wait()
	held()

	for i, w := range writes {
		switch {
		case w.want == nil && errs[i] != nil:
			t.Errorf("%s: %v", w.name, errs[i])
		case w.want == errAny && errs[i] == nil:
			t.Errorf("%s succeeded; want an error", w.name)
		case w.want != nil && w.want != errAny && !errors.Is(errs[i], w.want):
			t.Errorf("%s: %v; want %v", w.name, errs[i], w.want)
		}
	}
	for k, e := range decided {
		won := 0
		for _, err := range e {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, store.ErrAlreadyDecided):
				t.Errorf("Decide int_%d: %v; want nil or ErrAlreadyDecided", k, err)
			}
		}
		if won != 1 {
			t.Errorf("int_%d: %d decisions won; want 1 (%v)", k, won, e)
		}
		in, err := s.GetInterrupt(ctx, "a", fmt.Sprintf("int_%d", k))
		if err != nil || in.Status == store.Pending || in.Decision == nil || in.Decision.By == "someone-else" {
			t.Errorf("int_%d after the writes: %+v, %v; want decided once by u0 or u1", k, in, err)
		}
	}
	for i := range threads {
		id := fmt.Sprintf("t%d", i)
		ms, err := s.Messages(ctx, "a", id)
		if got := msgIDs(ms); err != nil || len(got) != 1 || got[0] != "good-"+id {
			t.Errorf("messages of %s: %v, %v; want [good-%s]", id, got, err, id)
		}
	}
	if th, err := s.GetThread(ctx, "a", "w"); err != nil || th.Status != store.Queued {
		t.Errorf("thread w after its decisions: %+v, %v; want queued", th, err)
	}
	if _, err := s.GetThread(ctx, "a", "ghost"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("thread ghost: %v; want ErrNotFound", err)
	}
	n, c := s.gc.writes.Load()-batched, s.gc.commits.Load()-commits
	if c >= n {
		t.Errorf("%d writes took %d commits; want them batched", n, c)
	}
}

// Concurrent checkpoints share commits: 32 of them queued behind a commit
// take fewer than 32.
func TestGroupCommitBatchesConcurrentWrites(t *testing.T) {
	ctx := t.Context()
	s := openFile(t, filepath.Join(t.TempDir(), "stackbone.db"))
	const n = 32
	for i := range n {
		if _, err := s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: fmt.Sprintf("t%d", i), Agent: "x", RunID: "r",
			Now: storetest.T0, LeaseUntil: storetest.T0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	held := holdWriter(t, s, n)
	commits, writes := s.gc.commits.Load(), s.gc.writes.Load()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("t%d", i)
			if err := s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: id, RunID: "r",
				Messages: []message.Message{{ID: "m-" + id, Role: message.User, Content: "hi"}}}); err != nil {
				t.Errorf("Checkpoint %s: %v", id, err)
			}
		})
	}
	wg.Wait()
	held()
	w, c := s.gc.writes.Load()-writes-1, s.gc.commits.Load()-commits
	if w != n || c >= n {
		t.Errorf("%d checkpoints: %d writes in %d commits; want %d writes in fewer commits", n, w, c, n)
	}
	for i := range n {
		id := fmt.Sprintf("t%d", i)
		if ms, err := s.Messages(ctx, "a", id); err != nil || len(ms) != 1 {
			t.Errorf("messages of %s: %v, %v; want its checkpoint's", id, msgIDs(ms), err)
		}
	}
}

// A writer whose context ends while it waits for a batch gets the
// context's error and its write is not made.
func TestGroupCommitSkipsCancelledWriter(t *testing.T) {
	ctx := t.Context()
	s := openFile(t, filepath.Join(t.TempDir(), "stackbone.db"))
	beginThreads(t, s, "t1", "t2")
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.gc.beforeCommit = func(int) { once.Do(func() { close(held); <-release }) }
	t.Cleanup(func() { s.gc.beforeCommit = nil })
	checkpoint := func(ctx context.Context, id string) error {
		return s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: id, RunID: "r",
			Messages: []message.Message{{ID: "m-" + id, Role: message.User, Content: "hi"}}})
	}
	first := make(chan error, 1)
	go func() { first <- checkpoint(ctx, "t1") }()
	testwait.Recv(t, held, "the first writer to reach its COMMIT")
	cctx, cancel := context.WithCancel(ctx)
	late := make(chan error, 1)
	go func() { late <- checkpoint(cctx, "t2") }()
	testwait.Until(t, "the second writer to queue", func() bool { return s.gc.queued() >= 1 })
	cancel()
	if err := testwait.Recv(t, late, "the cancelled writer"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Checkpoint: %v; want context.Canceled", err)
	}
	close(release)
	if err := testwait.Recv(t, first, "the first writer"); err != nil {
		t.Errorf("first Checkpoint: %v", err)
	}
	if ms, err := s.Messages(ctx, "a", "t2"); err != nil || len(ms) != 0 {
		t.Errorf("messages of t2: %v, %v; want none", msgIDs(ms), err)
	}
	if err := checkpoint(ctx, "t2"); err != nil { // the writer is free again
		t.Errorf("Checkpoint after: %v", err)
	}
}

func walSize(b *testing.B, path string) int64 {
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}

// A write that panics inside a batch panics in its own writer, its rows
// rolled back, while the writes batched with it commit.
func TestGroupCommitPanicStaysInItsWriter(t *testing.T) {
	ctx := t.Context()
	s := openFile(t, filepath.Join(t.TempDir(), "stackbone.db"))
	beginThreads(t, s, "t1", "t2")
	held := holdWriter(t, s, 3)
	var wg sync.WaitGroup
	for _, id := range []string{"t1", "t2"} {
		wg.Go(func() {
			if err := s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: id, RunID: "r",
				Messages: []message.Message{{ID: "m-" + id, Role: message.User, Content: "hi"}}}); err != nil {
				t.Errorf("Checkpoint %s: %v", id, err)
			}
		})
	}
	var got any
	wg.Go(func() {
		defer func() { got = recover() }()
		_ = s.write(ctx, "boom", func(tx *wtx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO studio_revoked_sessions (tenant, id, expires_at) VALUES ('a', 's', 1)`); err != nil {
				return err
			}
			panic("boom")
		})
	})
	wg.Wait()
	held()
	if got != "boom" {
		t.Errorf("the panicking write's writer recovered %v; want boom", got)
	}
	var n int
	if err := s.rc.QueryRowContext(ctx, `SELECT count(*) FROM studio_revoked_sessions`).Scan(&n); err != nil || n != 0 {
		t.Errorf("rows of the panicking write: %d, %v; want 0", n, err)
	}
	for _, id := range []string{"t1", "t2"} {
		if ms, err := s.Messages(ctx, "a", id); err != nil || len(ms) != 1 {
			t.Errorf("messages of %s: %v, %v; want its checkpoint's", id, msgIDs(ms), err)
		}
	}
}

// beginThreads starts run "r" of tenant a's threads ids, agent x.
func beginThreads(t *testing.T, s *Store, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := s.BeginRun(t.Context(), store.BeginRun{Tenant: "a", ThreadID: id, Agent: "x", RunID: "r",
			Now: storetest.T0, LeaseUntil: storetest.T0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
}

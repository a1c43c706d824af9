package storetest

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
)

// queueTests are the turn queue cases (store.QueueStore) Run runs.
var queueTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"Queue/InOrder", testQueueInOrder},
	{"Queue/RetryFindsItsRow", testQueueRetry},
	{"Queue/DequeueOnce", testQueueDequeueOnce},
	{"Queue/DequeueRefusedWritesNothing", testQueueDequeueRefused},
	{"Queue/FinishTellsBacklog", testQueueBacklog},
	{"Queue/Unqueue", testQueueUnqueue},
	{"Queue/Bounded", testQueueBounded},
	{"Queue/TenantIsolation", testQueueTenants},
	{"Queue/Invalid", testQueueInvalid},
	{"Queue/QueuedTurnByID", testQueuedTurnByID},
}

func enqueue(t *testing.T, s store.Store, tenant, thread, id, digest string) (*store.QueuedTurn, bool) {
	t.Helper()
	q, added, err := s.Enqueue(t.Context(), store.QueuedTurn{Tenant: tenant, ThreadID: thread, ID: id,
		Turn: store.Turn{Digest: digest}, Input: json.RawMessage(`{"text":"` + id + `"}`), CreatedAt: at(time.Second)})
	if err != nil {
		t.Fatalf("Enqueue %s/%s %s: %v", tenant, thread, id, err)
	}
	return q, added
}

func queueIDs(t *testing.T, s store.Store, tenant, thread string) []string {
	t.Helper()
	qs, err := s.Queue(t.Context(), tenant, thread)
	if err != nil {
		t.Fatalf("Queue %s/%s: %v", tenant, thread, err)
	}
	var ids []string
	for _, q := range qs {
		ids = append(ids, q.ID)
	}
	return ids
}

func equalIDs(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// testQueueInOrder: queued turns are listed in the order they were queued,
// with their input as written.
func testQueueInOrder(t *testing.T, s store.Store) {
	begin(t, s, "acme", "t1", "bot", "r1", at(0), userMsg("m1", "hi"))
	for _, id := range []string{"q1", "q2", "q3"} {
		if _, added := enqueue(t, s, "acme", "t1", id, "d-"+id); !added {
			t.Fatalf("Enqueue %s: not added", id)
		}
	}
	qs, err := s.Queue(t.Context(), "acme", "t1")
	if err != nil || len(qs) != 3 {
		t.Fatalf("Queue: %v %+v", err, qs)
	}
	for i, q := range qs {
		if q.Seq <= 0 || (i > 0 && q.Seq <= qs[i-1].Seq) {
			t.Errorf("queue seqs out of order: %+v", qs)
		}
		if !jsonEq(q.Input, json.RawMessage(`{"text":"`+q.ID+`"}`)) || q.Turn.Digest != "d-"+q.ID || q.Tenant != "acme" || q.ThreadID != "t1" {
			t.Errorf("queued %s read back as %+v", q.ID, q)
		}
		if !q.CreatedAt.Equal(at(time.Second)) {
			t.Errorf("queued %s CreatedAt = %v", q.ID, q.CreatedAt)
		}
	}
	if got := queueIDs(t, s, "acme", "t1"); !equalIDs(got, []string{"q1", "q2", "q3"}) {
		t.Errorf("queue = %v", got)
	}
	if _, _, err := s.Enqueue(t.Context(), store.QueuedTurn{Tenant: "acme", ThreadID: "nope", ID: "q", Input: json.RawMessage(`{}`)}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Enqueue on an unknown thread: %v, want ErrNotFound", err)
	}
}

func jsonEq(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && string(mustJSON(x)) == string(mustJSON(y))
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// testQueueRetry: a request queued again (same key, else same digest) finds
// its row instead of queueing the message twice.
func testQueueRetry(t *testing.T, s store.Store) {
	begin(t, s, "acme", "t1", "bot", "r1", at(0), userMsg("m1", "hi"))
	enqueue(t, s, "acme", "t1", "q1", "d1")
	q, added := enqueue(t, s, "acme", "t1", "q1-retry", "d1")
	if added || q.ID != "q1" {
		t.Fatalf("retry of a queued request: added=%v id=%s, want its row q1", added, q.ID)
	}
	keyed := func(id, key, digest string) (*store.QueuedTurn, bool) {
		q, added, err := s.Enqueue(t.Context(), store.QueuedTurn{Tenant: "acme", ThreadID: "t1", ID: id,
			Turn: store.Turn{Key: key, Digest: digest}, Input: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		return q, added
	}
	if _, added := keyed("k1", "key-1", "d1"); !added {
		t.Fatal("a keyed request with another key than any queued is new, whatever its digest")
	}
	if q, added := keyed("k1-retry", "key-1", "other"); added || q.ID != "k1" {
		t.Fatalf("same key: added=%v id=%s, want k1", added, q.ID)
	}
	if got := queueIDs(t, s, "acme", "t1"); !equalIDs(got, []string{"q1", "k1"}) {
		t.Errorf("queue = %v", got)
	}
}

// testQueueDequeueOnce: of concurrent begins of the same queued turn (two
// replicas draining at once) exactly one begins; its row is gone.
func testQueueDequeueOnce(t *testing.T, s store.Store) {
	begin(t, s, "acme", "t1", "bot", "r1", at(0), userMsg("m1", "hi"))
	enqueue(t, s, "acme", "t1", "q1", "d1")
	enqueue(t, s, "acme", "t1", "q2", "d2")
	finish(t, s, "acme", "t1", "r1", store.Idle, at(time.Second))
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		won  int
		errs []error
	)
	for range 4 {
		wg.Go(func() {
			_, err := s.BeginRun(t.Context(), store.BeginRun{Tenant: "acme", ThreadID: "t1", Agent: "bot", RunID: "q1",
				Owner: "o", Now: at(2 * time.Second), LeaseUntil: at(time.Minute), Input: []message.Message{userMsg("", "second")}, Dequeue: "q1"})
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				won++
			} else {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d begins of one queued turn succeeded, want 1 (errors %v)", won, errs)
	}
	for _, err := range errs {
		if !errors.Is(err, store.ErrDequeued) && !errors.Is(err, store.ErrRunInProgress) {
			t.Errorf("a losing begin: %v, want ErrDequeued or ErrRunInProgress", err)
		}
	}
	if got := queueIDs(t, s, "acme", "t1"); !equalIDs(got, []string{"q2"}) {
		t.Errorf("queue after the begin = %v, want [q2]", got)
	}
	if th := getThread(t, s, "acme", "t1"); th.RunID != "q1" || th.Status != store.Running {
		t.Errorf("thread after the begin: run %s status %s", th.RunID, th.Status)
	}
}

// testQueueDequeueRefused: a begin of a turn no longer queued writes
// nothing: no message, no run.
func testQueueDequeueRefused(t *testing.T, s store.Store) {
	begin(t, s, "acme", "t1", "bot", "r1", at(0), userMsg("m1", "hi"))
	finish(t, s, "acme", "t1", "r1", store.Idle, at(time.Second))
	before := len(messages(t, s, "acme", "t1"))
	_, err := s.BeginRun(t.Context(), store.BeginRun{Tenant: "acme", ThreadID: "t1", Agent: "bot", RunID: "gone",
		Owner: "o", Now: at(2 * time.Second), LeaseUntil: at(time.Minute), Input: []message.Message{userMsg("", "late")}, Dequeue: "gone"})
	if !errors.Is(err, store.ErrDequeued) {
		t.Fatalf("begin of a turn not queued: %v, want ErrDequeued", err)
	}
	if n := len(messages(t, s, "acme", "t1")); n != before {
		t.Errorf("a refused begin appended %d messages", n-before)
	}
	if th := getThread(t, s, "acme", "t1"); th.RunID != "r1" || th.Status != store.Idle {
		t.Errorf("a refused begin changed the thread: run %s status %s", th.RunID, th.Status)
	}
	if _, err := s.BeginRun(t.Context(), store.BeginRun{Tenant: "acme", ThreadID: "new", Agent: "bot", RunID: "x",
		Now: at(0), LeaseUntil: at(time.Minute), New: true, Input: []message.Message{userMsg("", "x")}, Dequeue: "x"}); !errors.Is(err, store.ErrDequeued) {
		t.Errorf("begin of a queued turn on no thread: %v, want ErrDequeued", err)
	}
	if _, err := s.GetThread(t.Context(), "acme", "new"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused begin created its thread: %v", err)
	}
}

// testQueueBacklog: a run's end says whether the queue holds a turn, and
// Backlogged lists the idle threads that have one.
func testQueueBacklog(t *testing.T, s store.Store) {
	begin(t, s, "acme", "t1", "bot", "r1", at(0), userMsg("m1", "hi"))
	begin(t, s, "acme", "t2", "bot", "r2", at(0), userMsg("m2", "hi"))
	enqueue(t, s, "acme", "t1", "q1", "d1")
	end := func(thread, run string) bool {
		var backlog bool
		if err := s.FinishRun(t.Context(), store.FinishRun{Tenant: "acme", ThreadID: thread, RunID: run, Status: store.Idle,
			Now: at(time.Second), Backlog: &backlog}); err != nil {
			t.Fatal(err)
		}
		return backlog
	}
	if !end("t1", "r1") {
		t.Error("FinishRun of a thread with a queued turn: Backlog false")
	}
	if end("t2", "r2") {
		t.Error("FinishRun of a thread with no queue: Backlog true")
	}
	ths, err := s.Backlogged(t.Context(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ths) != 1 || ths[0].ID != "t1" || ths[0].Tenant != "acme" {
		t.Errorf("Backlogged = %+v, want t1 only", ths)
	}
	begin(t, s, "acme", "t1", "bot", "r3", at(2*time.Second), userMsg("m3", "again"))
	if ths, _ := s.Backlogged(t.Context(), 10); len(ths) != 0 {
		t.Errorf("Backlogged lists a running thread: %+v", ths)
	}
}

// testQueueUnqueue: a queued turn can be removed, once.
func testQueueUnqueue(t *testing.T, s store.Store) {
	begin(t, s, "acme", "t1", "bot", "r1", at(0), userMsg("m1", "hi"))
	enqueue(t, s, "acme", "t1", "q1", "d1")
	enqueue(t, s, "acme", "t1", "q2", "d2")
	for i, want := range []bool{true, false} {
		ok, err := s.Unqueue(t.Context(), "acme", "t1", "q1")
		if err != nil || ok != want {
			t.Errorf("Unqueue #%d: %v %v, want %v", i+1, ok, err, want)
		}
	}
	if got := queueIDs(t, s, "acme", "t1"); !equalIDs(got, []string{"q2"}) {
		t.Errorf("queue = %v", got)
	}
}

// testQueueBounded: a thread's queue holds at most store.MaxQueue turns.
func testQueueBounded(t *testing.T, s store.Store) {
	begin(t, s, "acme", "t1", "bot", "r1", at(0), userMsg("m1", "hi"))
	for i := range store.MaxQueue {
		if _, _, err := s.Enqueue(t.Context(), store.QueuedTurn{Tenant: "acme", ThreadID: "t1", ID: "q" + itoa(i), Input: json.RawMessage(`{}`)}); err != nil {
			t.Fatalf("Enqueue #%d: %v", i, err)
		}
	}
	_, _, err := s.Enqueue(t.Context(), store.QueuedTurn{Tenant: "acme", ThreadID: "t1", ID: "over", Input: json.RawMessage(`{}`)})
	if !errors.Is(err, store.ErrRunInProgress) {
		t.Fatalf("Enqueue beyond MaxQueue: %v, want ErrRunInProgress", err)
	}
}

func itoa(i int) string { return string(mustJSON(i)) }

// testQueueTenants: another tenant neither sees nor changes a queue, nor
// queues on a thread it does not own.
func testQueueTenants(t *testing.T, s store.Store) {
	begin(t, s, "acme", "t1", "bot", "r1", at(0), userMsg("m1", "hi"))
	enqueue(t, s, "acme", "t1", "q1", "d1")
	if got := queueIDs(t, s, "evil", "t1"); len(got) != 0 {
		t.Errorf("another tenant sees the queue: %v", got)
	}
	if ok, err := s.Unqueue(t.Context(), "evil", "t1", "q1"); ok || err != nil {
		t.Errorf("another tenant's Unqueue: %v %v", ok, err)
	}
	if _, _, err := s.Enqueue(t.Context(), store.QueuedTurn{Tenant: "evil", ThreadID: "t1", ID: "e", Input: json.RawMessage(`{}`)}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Enqueue on another tenant's thread: %v, want ErrNotFound", err)
	}
	if got := queueIDs(t, s, "acme", "t1"); !equalIDs(got, []string{"q1"}) {
		t.Errorf("queue = %v", got)
	}
}

// testQueueInvalid: bad arguments are ErrInvalid and write nothing.
func testQueueInvalid(t *testing.T, s store.Store) {
	begin(t, s, "acme", "t1", "bot", "r1", at(0), userMsg("m1", "hi"))
	for name, q := range map[string]store.QueuedTurn{
		"no id":    {Tenant: "acme", ThreadID: "t1", Input: json.RawMessage(`{}`)},
		"no input": {Tenant: "acme", ThreadID: "t1", ID: "q"},
		"bad json": {Tenant: "acme", ThreadID: "t1", ID: "q", Input: json.RawMessage(`{`)},
		"nul":      {Tenant: "acme", ThreadID: "t1", ID: "q\x00", Input: json.RawMessage(`{}`)},
	} {
		if _, _, err := s.Enqueue(t.Context(), q); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Enqueue %s: %v, want ErrInvalid", name, err)
		}
	}
	if got := queueIDs(t, s, "acme", "t1"); len(got) != 0 {
		t.Errorf("invalid Enqueues queued %v", got)
	}
}

// testQueuedTurnByID: QueuedTurn finds a queued turn by its id in its
// tenant only, and not once it started.
func testQueuedTurnByID(t *testing.T, s store.Store) {
	begin(t, s, "acme", "t1", "bot", "r1", at(0), userMsg("m1", "hi"))
	enqueue(t, s, "acme", "t1", "q1", "d1")
	q, err := s.QueuedTurn(t.Context(), "acme", "q1")
	if err != nil || q.ThreadID != "t1" || q.ID != "q1" {
		t.Fatalf("QueuedTurn: %+v %v", q, err)
	}
	for _, c := range [][2]string{{"beta", "q1"}, {"acme", "r1"}, {"acme", "nope"}} {
		if _, err := s.QueuedTurn(t.Context(), c[0], c[1]); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("QueuedTurn %v: %v, want ErrNotFound", c, err)
		}
	}
	finish(t, s, "acme", "t1", "r1", store.Idle, at(time.Second))
	if _, err := s.BeginRun(t.Context(), store.BeginRun{Tenant: "acme", ThreadID: "t1", Agent: "bot", RunID: "q1",
		Owner: "o", Now: at(2 * time.Second), LeaseUntil: at(time.Minute), Input: []message.Message{userMsg("", "second")}, Dequeue: "q1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.QueuedTurn(t.Context(), "acme", "q1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("QueuedTurn of a started turn: %v, want ErrNotFound", err)
	}
}

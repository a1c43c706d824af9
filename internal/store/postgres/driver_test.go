package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/store/storetest"
)

func beginRun(ctx context.Context, s *Store, thread, run string, input ...message.Message) (*store.Begun, error) {
	return s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: thread, Agent: "x", RunID: run, Owner: "o",
		Now: storetest.T0, LeaseUntil: storetest.T0.Add(time.Minute), Input: input})
}

func TestOpenMigratesOnceAndReopens(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)

	// Replicas starting together migrate the new schema once.
	const n = 4
	stores := make([]*Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = OpenSchema(ctx, testURL(), schema, testLogger(t)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent OpenSchema %d: %v", i, err)
		}
		if stores[i].Schema() != schema {
			t.Fatalf("store %d is on schema %q", i, stores[i].Schema())
		}
	}
	if _, err := beginRun(ctx, stores[0], "t", "r", message.Message{ID: "m", Role: message.User, Content: "hi"}); err != nil {
		t.Fatalf("BeginRun: %v", err)
	}
	for _, s := range stores {
		s.Close()
	}

	s := openSchema(t, schema)
	ms, err := s.Messages(ctx, "a", "t")
	if err != nil || len(ms) != 1 || ms[0].Content != "hi" {
		t.Fatalf("messages after reopen: %+v, %v", ms, err)
	}
	var versions int
	if err := rawConn(t, schema).QueryRow(ctx, `SELECT count(*) FROM schema_version`).Scan(&versions); err != nil {
		t.Fatal(err)
	}
	if ms, _ := loadMigrations(); versions != len(ms) {
		t.Fatalf("schema_version has %d rows, want %d", versions, len(ms))
	}
}

func TestOpenHonoursSearchPathInURL(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	first := openSchema(t, schema) // creates the schema
	if _, err := beginRun(ctx, first, "t", "r"); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(testURL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	s, err := Open(ctx, u.String(), testLogger(t))
	if err != nil {
		t.Fatalf("Open with search_path: %v", err)
	}
	defer s.Close()
	if s.Schema() != schema {
		t.Fatalf("schema %q, want %q", s.Schema(), schema)
	}
	if th, err := s.GetThread(ctx, "a", "t"); err != nil || th.RunID != "r" {
		t.Fatalf("thread through the URL's search_path: %+v %v", th, err)
	}

	q.Set("search_path", schema+"_missing")
	u.RawQuery = q.Encode()
	if _, err := Open(ctx, u.String(), nil); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Open on a missing schema: %v", err)
	}
}

func TestStoredJSONIsVersionedJSON(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	s := openSchema(t, schema)
	// A tool result may hold a NUL character, which jsonb would refuse.
	nul := "binary\x00output"
	if _, err := s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: "t", Agent: "x", RunID: "r", Now: storetest.T0,
		LeaseUntil: storetest.T0.Add(time.Minute), State: json.RawMessage(`{"k":"v","big":1e2}`),
		Input: []message.Message{
			{ID: "m", Role: message.Assistant, ToolCalls: []message.ToolCall{{ID: "c", Name: "n", Arguments: `{"b":2, "a":1}`}}},
			{ID: "m2", Role: message.Tool, ToolCallID: "c", Content: nul},
		},
		Events: []event.Event{{Type: event.ToolResult, Content: nul}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r",
		Interrupts: []store.Interrupt{{ID: "int_1", ToolCallID: "c", Tool: "n", Args: json.RawMessage(`{"x":1}`)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decide(ctx, "a", "int_1", store.Decision{Approved: true, Message: nul, Via: "api", By: "a/k", At: storetest.T0}); err != nil {
		t.Fatal(err)
	}
	ms, err := s.Messages(ctx, "a", "t")
	if err != nil || len(ms) != 2 || ms[1].Content != nul || ms[0].ToolCalls[0].Arguments != `{"b":2, "a":1}` {
		t.Fatalf("messages: %+v %v", ms, err)
	}
	if es, err := s.Events(ctx, "a", "t", 0, 0); err != nil || len(es) != 1 || es[0].Content != nul {
		t.Fatalf("events: %+v %v", es, err)
	}
	if in, err := s.GetInterrupt(ctx, "a", "int_1"); err != nil || in.Decision == nil || in.Decision.Message != nul {
		t.Fatalf("interrupt: %+v %v", in, err)
	}
	// The state is kept as written.
	if th, err := s.GetThread(ctx, "a", "t"); err != nil || string(th.State) != `{"k":"v","big":1e2}` {
		t.Fatalf("state: %s %v", th.State, err)
	}

	conn := rawConn(t, schema)
	for _, q := range []string{
		`SELECT v, pg_typeof(json)::text FROM messages`,
		`SELECT v, pg_typeof(json)::text FROM events`,
		`SELECT v, pg_typeof(state)::text FROM threads`,
		`SELECT v, pg_typeof(args)::text FROM interrupts`,
		`SELECT v, pg_typeof(decision)::text FROM interrupts`,
	} {
		rows, err := conn.Query(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for rows.Next() {
			var (
				v   int
				typ string
			)
			if err := rows.Scan(&v, &typ); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			if v != store.FormatVersion || typ != "json" {
				t.Fatalf("%s: v=%d type=%s", q, v, typ)
			}
		}
		rows.Close()
	}
	var tc string
	if err := conn.QueryRow(ctx, `SELECT json->'toolCalls'->0->>'name' FROM messages WHERE seq = 1`).Scan(&tc); err != nil || tc != "n" {
		t.Fatalf("stored message is not queryable JSON: %q %v", tc, err)
	}

	// A row written by a newer release is refused, not misread.
	if _, err := conn.Exec(ctx, `UPDATE messages SET v = 2`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Messages(ctx, "a", "t"); !errors.Is(err, store.ErrUnknownFormat) {
		t.Fatalf("Messages of a newer format: %v", err)
	}
}

func TestNewerSchemaIsRefused(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	openSchema(t, schema)
	if _, err := rawConn(t, schema).Exec(t.Context(), `INSERT INTO schema_version (version, name) VALUES (9999, 'future.sql')`); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSchema(t.Context(), testURL(), schema, nil); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open of a schema migrated by a newer build: %v", err)
	}
}

func TestTextTheDatabaseRefuses(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTest(t)
	// Free text is cleaned; an id the database cannot store is invalid.
	if _, err := beginRun(ctx, s, "t", "r"); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishRun(ctx, store.FinishRun{Tenant: "a", ThreadID: "t", RunID: "r", Status: store.Failed,
		Error: "bad \x00 bytes \xff", Now: storetest.T0}); err != nil {
		t.Fatalf("FinishRun with a NUL in its error: %v", err)
	}
	if th, err := s.GetThread(ctx, "a", "t"); err != nil || th.LastError != "bad  bytes \uFFFD" {
		t.Fatalf("last error: %q %v", th.LastError, err)
	}
	if _, err := beginRun(ctx, s, "t\x00", "r"); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("BeginRun on a thread id with a NUL: %v", err)
	}
	if _, err := beginRun(ctx, s, "t\xff", "r"); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("BeginRun on a thread id of invalid UTF-8: %v", err)
	}
}

// TestDecisionsRaceOnOneThread decides every interrupt of a waiting thread
// at once: the decisions take turns on the thread, so exactly one of them
// sees that nothing else is pending and queues it. SQLite serialises every
// write; PostgreSQL needs the thread lock for this.
func TestDecisionsRaceOnOneThread(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTest(t)
	const rounds, n = 10, 4
	for round := range rounds {
		thread := fmt.Sprint("t", round)
		if _, err := beginRun(ctx, s, thread, "r"); err != nil {
			t.Fatal(err)
		}
		var ins []store.Interrupt
		for i := range n {
			ins = append(ins, store.Interrupt{ID: fmt.Sprintf("int_%d_%d", round, i), ToolCallID: fmt.Sprint("c", i), Tool: "x"})
		}
		if err := s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: thread, RunID: "r", Interrupts: ins}); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishRun(ctx, store.FinishRun{Tenant: "a", ThreadID: thread, RunID: "r", Status: store.Waiting, Now: storetest.T0}); err != nil {
			t.Fatal(err)
		}
		queued := make([]bool, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				res, err := s.Decide(ctx, "a", ins[i].ID, store.Decision{Approved: true, At: storetest.T0})
				queued[i], errs[i] = res.Queued, err
			})
		}
		wg.Wait()
		count := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("round %d: Decide %d: %v", round, i, errs[i])
			}
			if queued[i] {
				count++
			}
		}
		th, err := s.GetThread(ctx, "a", thread)
		if err != nil {
			t.Fatal(err)
		}
		if count != 1 || th.Status != store.Queued {
			t.Fatalf("round %d: %d decisions queued the thread, status %s; want 1 and queued", round, count, th.Status)
		}
	}
}

// TestDecisionRacesEndOfRun makes the last decision while the run that
// paused is storing its end: whichever goes first, the thread ends Queued.
func TestDecisionRacesEndOfRun(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTest(t)
	for round := range 10 {
		thread := fmt.Sprint("t", round)
		if _, err := beginRun(ctx, s, thread, "r"); err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprint("int_", round)
		if err := s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: thread, RunID: "r",
			Interrupts: []store.Interrupt{{ID: id, ToolCallID: "c", Tool: "x"}}}); err != nil {
			t.Fatal(err)
		}
		var (
			wg         sync.WaitGroup
			derr, ferr error
			res        store.DecideResult
		)
		wg.Go(func() { res, derr = s.Decide(ctx, "a", id, store.Decision{Approved: true, At: storetest.T0}) })
		wg.Go(func() {
			ferr = s.FinishRun(ctx, store.FinishRun{Tenant: "a", ThreadID: thread, RunID: "r", Status: store.Waiting, Now: storetest.T0})
		})
		wg.Wait()
		if derr != nil || ferr != nil {
			t.Fatalf("round %d: Decide %v, FinishRun %v", round, derr, ferr)
		}
		th, err := s.GetThread(ctx, "a", thread)
		if err != nil {
			t.Fatal(err)
		}
		if th.Status != store.Queued {
			t.Fatalf("round %d: thread %s after the decision raced the end of its run (decision queued: %v)", round, th.Status, res.Queued)
		}
	}
}

// TestTwoStoresOnOneSchema is two replicas on one database: one BeginRun
// wins, and sequence numbers stay dense across them.
func TestTwoStoresOnOneSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	stores := []*Store{openSchema(t, schema), openSchema(t, schema)}
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := beginRun(ctx, stores[i%2], "t", fmt.Sprint("r", i))
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
	th, err := stores[1].GetThread(ctx, "a", "t")
	if err != nil {
		t.Fatal(err)
	}
	// The winning run checkpoints through both stores at once.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if err := stores[i%2].Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: th.RunID,
				Events: []event.Event{{Type: event.StepStarted}}}); err != nil {
				t.Errorf("Checkpoint: %v", err)
			}
		})
	}
	wg.Wait()
	es, err := stores[0].Events(ctx, "a", "t", 0, 0)
	if err != nil || len(es) != 20 {
		t.Fatalf("events: %d %v", len(es), err)
	}
	for i, e := range es {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
}

func TestUnreachableIsUnavailable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	start := time.Now()
	_, err = Open(t.Context(), "postgres://postgres@"+addr+"/test?sslmode=disable", nil)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open of an unreachable database: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Open took %v to fail", d)
	}
	if _, err := Open(t.Context(), "postgres://%zz", nil); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Open of a malformed URL: %v", err)
	}
}

// proxy is a TCP proxy to the test database that can drop every connection
// and refuse new ones, as a database that goes away and comes back.
type proxy struct {
	t      testing.TB
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

func newProxy(t testing.TB) *proxy {
	t.Helper()
	u, err := url.Parse(testURL())
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	if !strings.Contains(target, ":") {
		target += ":5432"
	}
	p := &proxy{t: t, target: target, conns: map[net.Conn]struct{}{}}
	p.start("127.0.0.1:0")
	t.Cleanup(p.stop)
	return p
}

// url is the test database's URL through the proxy.
func (p *proxy) url() string {
	u, _ := url.Parse(testURL())
	u.Host = p.addr
	return u.String()
}

func (p *proxy) start(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatalf("proxy listen: %v", err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[up] = struct{}{}, struct{}{}
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

// stop drops every connection and refuses new ones.
func (p *proxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// restart listens again on the same address.
func (p *proxy) restart() { p.start(p.addr) }

func TestLostDatabaseIsUnavailableThenReconnects(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	openSchema(t, schema) // migrate directly
	p := newProxy(t)
	s, err := OpenSchema(ctx, p.url(), schema, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := beginRun(ctx, s, "t", "r"); err != nil {
		t.Fatal(err)
	}

	p.stop()
	calls := map[string]func() error{
		"Ping":       func() error { return s.Ping(ctx) },
		"GetThread":  func() error { _, err := s.GetThread(ctx, "a", "t"); return err },
		"Checkpoint": func() error { return s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r"}) },
		"FinishRun": func() error {
			return s.FinishRun(ctx, store.FinishRun{Tenant: "a", ThreadID: "t", RunID: "r", Status: store.Idle})
		},
		"Decide": func() error { _, err := s.Decide(ctx, "a", "int", store.Decision{}); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("%s with the database gone: %v", name, err)
		}
	}
	// A request whose context ends while waiting is unavailable too.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.GetThread(cctx, "a", "t"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("GetThread with a cancelled context: %v", err)
	}

	p.restart()
	deadline := time.Now().Add(5 * time.Second)
	for {
		th, err := s.GetThread(ctx, "a", "t")
		if err == nil {
			if th.RunID != "r" {
				t.Fatalf("thread after reconnecting: %+v", th)
			}
			break
		}
		if !errors.Is(err, store.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("GetThread after the database came back: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := s.FinishRun(ctx, store.FinishRun{Tenant: "a", ThreadID: "t", RunID: "r", Status: store.Idle}); err != nil {
		t.Fatalf("FinishRun after reconnecting: %v", err)
	}
}

// BenchmarkCheckpoint measures one step checkpoint: an assistant message
// with a tool call and its tool result, about 600 bytes each.
func BenchmarkCheckpoint(b *testing.B) {
	ctx := context.Background()
	s := openTest(b)
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

package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// benchTurn posts one non-stream chat turn over real HTTP.
func benchTurn(b *testing.B, c *http.Client, url, session, text string) {
	body := []byte(`{"model":"assistant","messages":[{"role":"user","content":"` + text + `"}]}`)
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set("x-stackbone-session", session)
	}
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
}

// benchNewSessions is the benchmark loop of a turn sending text, each in a
// new durable session (prefix-N).
func benchNewSessions(b *testing.B, url, prefix, text string) {
	c := &http.Client{}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		benchTurn(b, c, url, fmt.Sprintf("%s-%d", prefix, i), text)
	}
}

// BenchmarkStatelessTurn: one text turn, no session, through
// /v1/chat/completions against the scripted OpenAI-wire upstream.
func BenchmarkStatelessTurn(b *testing.B) {
	env := stacktest.New(b, stacktest.Options{})
	c := &http.Client{}
	b.ReportAllocs()
	for b.Loop() {
		benchTurn(b, c, env.URL, "", "hello")
	}
}

// BenchmarkStatelessToolTurn: a 2-step turn (model → server tool → model)
// without a session; the tool step is journaled for client retries.
func BenchmarkStatelessToolTurn(b *testing.B) {
	env := stacktest.New(b, stacktest.Options{})
	c := &http.Client{}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		benchTurn(b, c, env.URL, "", fmt.Sprintf("weather please %d", i))
	}
}

// BenchmarkDurableTurn: one text turn in a new durable thread (stored on
// SQLite) per iteration.
func BenchmarkDurableTurn(b *testing.B) {
	env := stacktest.New(b, stacktest.Options{})
	benchNewSessions(b, env.URL, "bench", "hello")
}

// BenchmarkDurableToolTurn: a 2-step turn (model → server tool → model) in a
// new durable thread per iteration.
func BenchmarkDurableToolTurn(b *testing.B) {
	env := stacktest.New(b, stacktest.Options{})
	benchNewSessions(b, env.URL, "tool", "weather please")
}

// BenchmarkDurableTurnExistingThread: one text turn on a durable thread that
// already holds a conversation (20 threads, seeded untimed with 10 turns
// each, taken in turn), the path that reads the stored conversation.
func BenchmarkDurableTurnExistingThread(b *testing.B) {
	env := stacktest.New(b, stacktest.Options{})
	c := &http.Client{}
	const threads = 20
	for t := range threads {
		for range 10 {
			benchTurn(b, c, env.URL, fmt.Sprintf("old-%d", t), "hello")
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		benchTurn(b, c, env.URL, fmt.Sprintf("old-%d", i%threads), "hello")
	}
}

// BenchmarkApprovalRoundTrip: from the decision (POST /v1/hitl/{id}/approve)
// to the resumed turn stored (thread idle). The pause is set up untimed.
func BenchmarkApprovalRoundTrip(b *testing.B) {
	env := stacktest.New(b, stacktest.Options{})
	c := &http.Client{}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		b.StopTimer()
		i++
		sess := fmt.Sprintf("appr-%d", i)
		benchTurn(b, c, env.URL, sess, "refund please")
		its, err := env.Store.ListInterrupts(b.Context(), "dev", store.InterruptFilter{ThreadID: sess})
		if err != nil || len(its) != 1 {
			b.Fatalf("no pause: %v", err)
		}
		b.StartTimer()
		req, _ := http.NewRequest("POST", env.URL+"/v1/hitl/"+its[0].ID+"/approve", nil)
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		for {
			th, err := env.Store.GetThread(b.Context(), "dev", sess)
			if err != nil {
				b.Fatal(err)
			}
			if th.Status == store.Idle {
				break
			}
		}
	}
}

// BenchmarkDurableTurnPostgres is BenchmarkDurableTurn on the PostgreSQL
// store (STACKBONE_TEST_POSTGRES, default the local test database).
func BenchmarkDurableTurnPostgres(b *testing.B) {
	st := stacktest.Postgres(b, "bench")
	env := stacktest.New(b, stacktest.Options{Store: st})
	benchNewSessions(b, env.URL, "pg", "hello")
}

// parallelTurns runs durable text turns from 16 concurrent clients; ns/op is
// the inverse of throughput (turns/s = 1e9 / ns/op).
func parallelTurns(b *testing.B, env *stacktest.Env, prefix string) {
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var n atomic.Int64
	b.SetParallelism(8) // 8 × GOMAXPROCS(2) = 16 clients
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			benchTurn(b, c, env.URL, fmt.Sprintf("%s-%d", prefix, n.Add(1)), "hello")
		}
	})
}

// BenchmarkDurableTurnsParallel: durable turns/s on SQLite at concurrency 16.
func BenchmarkDurableTurnsParallel(b *testing.B) {
	parallelTurns(b, stacktest.New(b, stacktest.Options{}), "par")
}

// BenchmarkDurableTurnsParallelPostgres: the same on PostgreSQL.
func BenchmarkDurableTurnsParallelPostgres(b *testing.B) {
	st := stacktest.Postgres(b, "benchp")
	parallelTurns(b, stacktest.New(b, stacktest.Options{Store: st}), "parpg")
}

// BenchmarkUpstreamFloor posts the same text request straight to the mock
// upstream: the floor the turn benchmarks are measured against.
func BenchmarkUpstreamFloor(b *testing.B) {
	env := stacktest.New(b, stacktest.Options{})
	c := &http.Client{}
	body := []byte(`{"model":"test-model","messages":[{"role":"system","content":"You are a test assistant."},{"role":"user","content":"hello"}]}`)
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequest("POST", env.UpstreamURL+"/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

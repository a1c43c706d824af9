package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
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

// BenchmarkDurableTurn: one text turn in a new durable thread (stored on
// SQLite) per iteration.
func BenchmarkDurableTurn(b *testing.B) {
	env := stacktest.New(b, stacktest.Options{})
	c := &http.Client{}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		benchTurn(b, c, env.URL, fmt.Sprintf("bench-%d", i), "hello")
	}
}

// BenchmarkDurableToolTurn: a 2-step turn (model → server tool → model) in a
// new durable thread per iteration.
func BenchmarkDurableToolTurn(b *testing.B) {
	env := stacktest.New(b, stacktest.Options{})
	c := &http.Client{}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		benchTurn(b, c, env.URL, fmt.Sprintf("tool-%d", i), "weather please")
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

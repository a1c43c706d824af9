package cli_test

import (
	"context"
	"io"
	"net"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
)

// failover is a loopback TCP proxy standing for a load balancer in front of
// one server process at a time: a connection made while no server is up
// waits (up to 30 s) for the next one instead of being refused.
type failover struct {
	ln    net.Listener
	mu    sync.Mutex
	addr  string
	ready chan struct{} // closed when addr is set
	conns atomic.Int32
}

func newFailover(t *testing.T) *failover {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &failover{ln: ln, ready: make(chan struct{})}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.conns.Add(1)
			go f.serve(c)
		}
	}()
	return f
}

func (f *failover) url() string { return "http://" + f.ln.Addr().String() }

// route sends new connections to addr ("": hold them until the next call).
func (f *failover) route(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addr = addr
	if addr == "" {
		f.ready = make(chan struct{})
	} else {
		close(f.ready)
	}
}

func (f *failover) serve(c net.Conn) {
	defer c.Close()
	f.mu.Lock()
	ready := f.ready
	f.mu.Unlock()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		return
	}
	f.mu.Lock()
	addr := f.addr
	f.mu.Unlock()
	b, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer b.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(b, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, b); done <- struct{}{} }()
	<-done // either side closed (a killed server): drop both
}

// TestOpenAISDKRetryAcrossKilledServer: the official OpenAI SDK, with its
// default retries, sends a session turn; the server process is killed -9
// while the turn's model call is under way, and another process starts on
// the same data. The SDK's retry reaches the new process, which recovers
// the turn and answers the retry from it (SQLite, and PostgreSQL where the
// new process is a replica that takes the run over when the dead one's lease
// lapses): the user message is stored once
// and the model asked twice (the killed call and the recovered one), not
// once more for the retry.
func TestOpenAISDKRetryAcrossKilledServer(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		testRetryAcrossKill(t, nil)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		// Replicas share the database: the new process waits for the dead
		// one's lease to lapse (1 s here) before taking its run over.
		testRetryAcrossKill(t, []string{"STACKBONE_DB=" + postgresURL(t), "STACKBONE_LEASE=1s"})
	})
}

func testRetryAcrossKill(t *testing.T, extraEnv []string) {
	sc := script.MustParse(`[{"reply":{"text":"echo: {{lastUser}}"}}]`)
	mock := modeltest.Handler(modeltest.OpenAI, sc)
	mock.HoldOnce(script.When{LastUser: "hello"})
	up := httptest.NewServer(mock)
	defer up.Close()

	dir := shopDir(t, up.URL)
	env := append([]string{"OPENAI_BASE_URL=" + up.URL + "/v1", "OPENAI_API_KEY=sk-test"}, extraEnv...)
	args := []string{"dev", "--dir", dir, "--addr", "127.0.0.1:0"}
	a := startServer(t, env, args...)
	lb := newFailover(t)
	lb.route(a.Addr)

	type result struct {
		text string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		c := openai.NewClient(option.WithBaseURL(lb.url()+"/v1"), option.WithAPIKey("sk-local"),
			option.WithHeader("x-stackbone-session", "killed"))
		res, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "shop",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}})
		if err != nil {
			got <- result{err: err}
			return
		}
		got <- result{text: res.Choices[0].Message.Content}
	}()
	waitUntil(t, "the turn's model call", 10*time.Second, func() bool { return mock.Count() == 1 })
	lb.route("")
	a.Kill(t)
	b := startServer(t, env, args...)
	lb.route(b.Addr)

	r := <-got
	if r.err != nil || r.text != "echo: hello" {
		t.Fatalf("the SDK's call across the kill: %q, %v", r.text, r.err)
	}
	var th struct {
		Status   string `json:"status"`
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	getJSON(t, b.URL()+"/v1/threads/killed", &th)
	users, answers := 0, 0
	for _, m := range th.Messages {
		switch m.Role {
		case "user":
			users++
		case "assistant":
			answers++
		}
	}
	if th.Status != "idle" || users != 1 || answers != 1 {
		t.Fatalf("thread after the retry: %s, %d user messages, %d answers", th.Status, users, answers)
	}
	if n := mock.Count(); n != 2 {
		t.Fatalf("%d model calls, want 2 (the killed call and the recovered one)", n)
	}
	if n := lb.conns.Load(); n < 2 {
		t.Fatalf("the SDK made %d connections; it did not retry", n)
	}
}

package cli_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/store"
)

// killAfterBranchEnv names a folder: a stackbone process started with it
// kills itself (SIGKILL) right after the first BeginRun that made a branch
// committed, before the turn goes on (before the Responses wire records its
// response, before any model call). A marker file in the folder makes it
// happen once.
const killAfterBranchEnv = "STACKBONE_TEST_KILL_AFTER_BRANCH"

// killAfterBranch is the WrapStore of a stackbone process started with
// killAfterBranchEnv set to dir.
func killAfterBranch(dir string) func(store.Store) store.Store {
	return func(s store.Store) store.Store { return branchKiller{Store: s, marker: filepath.Join(dir, "killed")} }
}

// branchKiller is a store whose process dies once its first branch is
// stored.
type branchKiller struct {
	store.Store
	marker string
}

func (s branchKiller) BeginRun(ctx context.Context, b store.BeginRun) (*store.Begun, error) {
	begun, err := s.Store.BeginRun(ctx, b)
	if err == nil && begun.Branched {
		if m, err := os.OpenFile(s.marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err == nil {
			_ = m.Close()
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way; the turn never goes on
		}
	}
	return begun, err
}

// TestKillDuringBranchingTurn: a turn that branches its thread (a Chat
// Completions session request editing an earlier user message, or a
// Responses request continuing an older response) runs a tool with a side
// effect (the ledger's charge) and the server is killed -9 before the turn
// ends, at one of four points: as soon as BeginRun committed the branch
// and its input (killAfterBranch), with its first model call under way
// (nothing more stored), with its
// answer's model call under way (the tool's result stored too; no answer),
// or after its answer was stored and before the run's end (FinishRun). Started again on the same data, the server keeps what it had
// acknowledged (the first line's messages, GET …/branches lists both
// lines), the thread has one head, the branch, where the recovered turn
// answers; the client's retry (the same request, the official SDK) gets
// that answer: the tool ran once, and the model is asked again only for
// the answer the kill lost. On SQLite and on PostgreSQL.
func TestKillDuringBranchingTurn(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		for _, wire := range []string{"chat", "responses"} {
			for _, at := range []string{"at-branch", "after-begin", "mid-answer", "before-finish"} {
				t.Run(db+"/"+wire+"/"+at, func(t *testing.T) {
					t.Parallel()
					var dbEnv []string
					if db == "postgres" {
						// The restarted process takes the run over once the
						// dead one's lease lapses (1 s here).
						dbEnv = []string{"STACKBONE_DB=" + postgresURL(t), "STACKBONE_LEASE=1s"}
					}
					testKillDuringBranch(t, dbEnv, wire, at)
				})
			}
		}
	}
}

// branchingClient drives one wire for testKillDuringBranch: setup makes
// the thread's first line (two turns), branch sends the request that
// branches it and returns the answer's text; thread names the thread.
type branchingClient struct {
	setup  func(base string) error
	branch func(base string) (string, error)
	thread func() string
}

const branchCharge = `Charged: {"done":"charge","orderId":"o1","status":200}`

func chatBranching() *branchingClient {
	const session = "branch-kill"
	ask := func(base string, msgs ...openai.ChatCompletionMessageParamUnion) (string, error) {
		c := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("sk-local"),
			option.WithHeader("x-stackbone-session", session), option.WithMaxRetries(0))
		res, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "shop", Messages: msgs})
		if err != nil {
			return "", err
		}
		return res.Choices[0].Message.Content, nil
	}
	return &branchingClient{
		setup: func(base string) error {
			if _, err := ask(base, openai.UserMessage("hello")); err != nil {
				return err
			}
			_, err := ask(base, openai.UserMessage("hello"), openai.AssistantMessage("echo: hello"), openai.UserMessage("second"))
			return err
		},
		// The second question edited: the turn goes on from the first
		// answer.
		branch: func(base string) (string, error) {
			return ask(base, openai.UserMessage("hello"), openai.AssistantMessage("echo: hello"), openai.UserMessage("charge order o1"))
		},
		thread: func() string { return session },
	}
}

func responsesBranching() *branchingClient {
	var r1, thread string
	next := func(base, prev, input string) (*responses.Response, error) {
		c := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("sk-local"), option.WithMaxRetries(0))
		p := responses.ResponseNewParams{Model: "shop", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(input)}}
		if prev != "" {
			p.PreviousResponseID = openai.String(prev)
		}
		return c.Responses.New(context.Background(), p)
	}
	return &branchingClient{
		setup: func(base string) error {
			res, err := next(base, "", "hello")
			if err != nil {
				return err
			}
			r1, thread = res.ID, res.Conversation.ID
			_, err = next(base, r1, "second")
			return err
		},
		// r1 continued after r2: the turn goes on from r1's answer. The
		// response it answers is kept: a GET reads it the same.
		branch: func(base string) (string, error) {
			res, err := next(base, r1, "charge order o1")
			if err != nil {
				return "", err
			}
			c := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("sk-local"), option.WithMaxRetries(0))
			got, err := c.Responses.Get(context.Background(), res.ID, responses.ResponseGetParams{})
			if err != nil {
				return "", err
			}
			if got.Status != responses.ResponseStatusCompleted || got.OutputText() != res.OutputText() {
				return "", fmt.Errorf("GET %s: %s; answered %q", res.ID, got.RawJSON(), res.OutputText())
			}
			return res.OutputText(), nil
		},
		thread: func() string { return thread },
	}
}

// testKillDuringBranch is TestKillDuringBranchingTurn on one store (dbEnv)
// and wire, killed at one point (at).
func testKillDuringBranch(t *testing.T, dbEnv []string, wire, at string) {
	led := newLedger(t)
	led.free() // the ledger answers at once
	sc := script.MustParse(`[
	 {"when":{"lastTool":"charge"},"reply":{"text":"Charged: {{lastTool}}"}},
	 {"when":{"lastUser":"charge"},"reply":{"toolCalls":[{"name":"charge","arguments":{"orderId":"o1"}}]}},
	 {"reply":{"text":"echo: {{lastUser}}"}}
	]`)
	mock := modeltest.Handler(modeltest.OpenAI, sc)
	up := httptest.NewServer(mock)
	defer up.Close()
	dir := ledgerDir(t, led.URL)
	env := append([]string{"OPENAI_BASE_URL=" + up.URL + "/v1", "OPENAI_API_KEY=sk-test"}, dbEnv...)
	args := []string{"dev", "--dir", dir, "--addr", "127.0.0.1:0"}
	cl := chatBranching()
	if wire == "responses" {
		cl = responsesBranching()
	}

	// The first line: two turns, acknowledged.
	a := startServer(t, env, args...)
	if err := cl.setup(a.URL()); err != nil {
		t.Fatal(err)
	}
	thread := cl.thread()
	var line []string
	var th threadView
	getJSON(t, a.URL()+"/v1/threads/"+thread, &th)
	line = th.lines()
	if want := []string{"user:hello", "assistant:echo: hello", "user:second", "assistant:echo: second"}; !slices.Equal(line, want) {
		t.Fatalf("the first line %q; want %q", line, want)
	}
	before := mock.Count()

	// The branching turn, killed before it ends.
	beforeFinish := at == "before-finish"
	// The answers the model gives once the turn is under way (the tool
	// call and the answer), plus the one the kill lost; the ledger's
	// calls before the kill.
	calls, charged := 2, 1
	switch at {
	case "at-branch":
		calls, charged = 2, 0
	case "after-begin":
		calls, charged = 3, 0
	case "mid-answer":
		calls = 3
	}
	if hook := map[string]string{"at-branch": killAfterBranchEnv, "before-finish": killBeforeFinishEnv}[at]; hook != "" {
		// A process of its own that dies at the hook's store write: the
		// branching turn's.
		a.Kill(t)
		marker := t.TempDir()
		a = startServer(t, append(slices.Clone(env), hook+"="+marker), args...)
		if text, err := cl.branch(a.URL()); err == nil {
			t.Fatalf("the turn was answered (%q): the process did not die", text)
		}
		_ = a.Cmd.Wait()
		if ws, ok := a.Cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("the process ended with %v; want killed -9 by %s", a.Cmd.ProcessState, hook)
		}
		if _, err := os.Stat(filepath.Join(marker, "killed")); err != nil {
			t.Fatalf("the process did not die at its hook (%s): %v", hook, err)
		}
	} else {
		held := script.When{LastTool: "charge"}
		if at == "after-begin" {
			held = script.When{LastUser: "charge"}
		}
		release := mock.HoldOnce(held)
		defer release()
		done := make(chan error, 1)
		go func() {
			_, err := cl.branch(a.URL())
			done <- err
		}()
		waitUntil(t, "the held model call", 10*time.Second, func() bool {
			return len(led.calls()) == charged && mock.Count() == before+1+charged
		})
		a.Kill(t)
		if err := <-done; err == nil {
			t.Fatal("the branching request was answered by a killed process")
		}
	}
	if n := len(led.calls()); n != charged {
		t.Fatalf("the ledger saw %d calls before the kill; want %d", n, charged)
	}
	if n, want := mock.Count()-before, 1+charged; at == "at-branch" && n != 0 || at != "at-branch" && n != want {
		t.Fatalf("%d model calls for the branching turn before the kill", n)
	}

	b := startServer(t, env, args...)
	branch := []string{"user:hello", "assistant:echo: hello", "user:charge order o1", "assistant:", "tool:", "assistant:" + branchCharge}
	check := func(when string) {
		t.Helper()
		var th threadView
		waitUntil(t, when+": the thread to be idle", 20*time.Second, func() bool {
			th = threadView{}
			getJSON(t, b.URL()+"/v1/threads/"+thread, &th)
			return th.Status == "idle"
		})
		if got := th.lines(); !prefixes(got, branch) {
			t.Fatalf("%s: the head's conversation %q; want %q", when, got, branch)
		}
		var old threadView
		getJSON(t, b.URL()+"/v1/threads/"+thread+"?branch=0", &old)
		if got := old.lines(); !slices.Equal(got, line) {
			t.Fatalf("%s: the first line is %q; want %q", when, got, line)
		}
		var bs struct {
			Head int64 `json:"head"`
			Data []struct {
				ID      int64 `json:"id"`
				ForkSeq int64 `json:"forkSeq"`
				Head    bool  `json:"head"`
			} `json:"data"`
		}
		getJSON(t, b.URL()+"/v1/threads/"+thread+"/branches", &bs)
		heads := 0
		for _, br := range bs.Data {
			if br.Head {
				heads++
			}
		}
		if len(bs.Data) != 2 || heads != 1 || bs.Head != bs.Data[1].ID || !bs.Data[1].Head || th.Branch != bs.Head || bs.Data[1].ForkSeq != 2 {
			t.Fatalf("%s: branches %+v (thread on branch %d); want the first line and the branch from message 2, the branch the one head", when, bs, th.Branch)
		}
		if got := led.calls(); len(got) != 1 {
			t.Fatalf("%s: the ledger saw %q; want the charge once", when, got)
		}
		if n := mock.Count() - before; n != calls {
			t.Fatalf("%s: %d model calls for the branching turn; want %d", when, n, calls)
		}
	}
	retry := func() {
		t.Helper()
		text, err := cl.branch(b.URL())
		if err != nil || text != branchCharge {
			var apiErr *openai.Error
			if errors.As(err, &apiErr) {
				err = fmt.Errorf("%w: %s", err, strings.TrimSpace(apiErr.RawJSON()))
			}
			t.Fatalf("the client's retry: %q, %v", text, err)
		}
	}
	if beforeFinish {
		// The restarted server ends the run from what is stored; the
		// client's retry comes after and gets the stored answer.
		check("after restart")
		retry()
		check("after the client's retry")
		return
	}
	// The client retries at once, while the run the kill left is still
	// the dead process's: the retry attaches to it and gets the answer the
	// recovered turn gives.
	retry()
	check("after the client's retry")
}

// threadView is GET /v1/threads/{id} as the crash tests read it.
type threadView struct {
	Status   string `json:"status"`
	Branch   int64  `json:"branch"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

// lines is the thread's messages as role:content lines.
func (v threadView) lines() []string {
	var out []string
	for _, m := range v.Messages {
		out = append(out, m.Role+":"+m.Content)
	}
	return out
}

// prefixes reports whether got has as many lines as want, each starting
// with want's.
func prefixes(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !strings.HasPrefix(got[i], want[i]) {
			return false
		}
	}
	return true
}

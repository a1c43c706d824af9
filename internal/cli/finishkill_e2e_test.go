package cli_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/store"
)

// killBeforeFinishEnv names a folder: a stackbone process started with it
// kills itself (SIGKILL) at the first FinishRun that ends a run idle, after
// the run's answer was checkpointed and before its end is stored. A marker
// file in the folder makes it happen once.
const killBeforeFinishEnv = "STACKBONE_TEST_KILL_BEFORE_FINISH"

// killBeforeFinish is the WrapStore of a stackbone process started with
// killBeforeFinishEnv set to dir; nil (no wrapping) when dir is empty.
func killBeforeFinish(dir string) func(store.Store) store.Store {
	if dir == "" {
		return nil
	}
	return func(s store.Store) store.Store { return finishKiller{Store: s, marker: filepath.Join(dir, "killed")} }
}

// finishKiller is a store whose process dies at its first FinishRun that
// ends a run idle.
type finishKiller struct {
	store.Store
	marker string
}

func (s finishKiller) FinishRun(ctx context.Context, f store.FinishRun) error {
	if f.Status == store.Idle {
		if m, err := os.OpenFile(s.marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err == nil {
			_ = m.Close()
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way; FinishRun never runs
		}
	}
	return s.Store.FinishRun(ctx, f)
}

// TestKillBetweenAnswerAndFinishRun: a session turn through the OpenAI
// wire runs a tool (its side effect reaches the ledger) and gets its final
// answer, which is stored; the process is killed -9 right before the run's
// end is stored. Started again on the same data (SQLite: the same folder;
// PostgreSQL: the same schema), the server ends the run from what is
// stored: the thread is idle with one user message and one answer, the
// tool ran once, and the model is not asked again, neither by the
// recovery nor when the client sends the same request again (the official
// SDK, same body and session), which gets the stored answer.
func TestKillBetweenAnswerAndFinishRun(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		testKillBeforeFinish(t, nil)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		// The restarted process takes the run over once the dead one's
		// lease lapses (1 s here).
		testKillBeforeFinish(t, []string{"STACKBONE_DB=" + postgresURL(t), "STACKBONE_LEASE=1s"})
	})
}

func testKillBeforeFinish(t *testing.T, dbEnv []string) {
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
	marker := t.TempDir()
	env := append([]string{"OPENAI_BASE_URL=" + up.URL + "/v1", "OPENAI_API_KEY=sk-test"}, dbEnv...)
	args := []string{"dev", "--dir", dir, "--addr", "127.0.0.1:0"}
	const session = "kill-before-finish"
	ask := func(base string) (string, error) {
		c := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("sk-local"),
			option.WithHeader("x-stackbone-session", session), option.WithMaxRetries(0))
		res, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "shop",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("charge order o1")}})
		if err != nil {
			return "", err
		}
		return res.Choices[0].Message.Content, nil
	}

	a := startServer(t, append(env, killBeforeFinishEnv+"="+marker), args...)
	if text, err := ask(a.URL()); err == nil {
		t.Fatalf("the turn was answered (%q): the process did not die before ending the run", text)
	}
	_ = a.Cmd.Wait()
	if ws, ok := a.Cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the first process ended with %v; want killed -9 at FinishRun", a.Cmd.ProcessState)
	}
	if _, err := os.Stat(filepath.Join(marker, "killed")); err != nil {
		t.Fatalf("the process did not die at FinishRun: %v", err)
	}
	if n := len(led.calls()); n != 1 {
		t.Fatalf("the ledger saw %d calls before the kill; want 1", n)
	}
	if n := mock.Count(); n != 2 {
		t.Fatalf("%d model calls before the kill; want 2 (the tool call and the answer)", n)
	}

	b := startServer(t, env, args...)
	type thread struct {
		Status   string `json:"status"`
		Messages []struct {
			Role      string `json:"role"`
			Content   string `json:"content"`
			ToolCalls []any  `json:"toolCalls"`
		} `json:"messages"`
	}
	var th thread
	waitUntil(t, "the restarted server to end the run", 20*time.Second, func() bool {
		th = thread{}
		getJSON(t, b.URL()+"/v1/threads/"+session, &th)
		return th.Status == "idle"
	})
	const want = `Charged: {"done":"charge","orderId":"o1","status":200}`
	check := func(when string) {
		t.Helper()
		getJSON(t, b.URL()+"/v1/threads/"+session, &th)
		users, answers, tools := 0, 0, 0
		var last string
		for _, m := range th.Messages {
			switch {
			case m.Role == "user":
				users++
			case m.Role == "tool":
				tools++
			case m.Role == "assistant" && len(m.ToolCalls) == 0:
				answers++
				last = m.Content
			}
		}
		if th.Status != "idle" || users != 1 || tools != 1 || answers != 1 || last != want {
			t.Fatalf("%s: %s, %d user messages, %d tool results, %d answers (last %q)", when, th.Status, users, tools, answers, last)
		}
		if calls := led.calls(); len(calls) != 1 {
			t.Fatalf("%s: the ledger saw %q; want the charge once", when, calls)
		}
		if n := mock.Count(); n != 2 {
			t.Fatalf("%s: %d model calls; want 2, none after the kill", when, n)
		}
	}
	check("after restart")

	text, err := ask(b.URL())
	if err != nil || text != want {
		var apiErr *openai.Error
		if errors.As(err, &apiErr) {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(apiErr.RawJSON()))
		}
		t.Fatalf("the client's retry: %q, %v", text, err)
	}
	check("after the client's retry")
}

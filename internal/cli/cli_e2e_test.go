package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/cli"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

var binary string

// TestMain runs the CLI tests against the real command line: the test
// binary itself, started under the name stackbone (a symlink in a temp
// folder), runs cli.MainWith, as cmd/stackbone runs cli.Main. This
// avoids a second build of the whole binary, and the processes can still be
// killed hard (crash and replica tests), or kill themselves at a chosen
// store write (killBeforeFinish, killAfterBranch).
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "stackbone" {
		wrap := killBeforeFinish(os.Getenv(killBeforeFinishEnv))
		if dir := os.Getenv(killAfterBranchEnv); dir != "" {
			wrap = killAfterBranch(dir)
		}
		cli.MainWith(cli.Options{WrapStore: wrap}) // exits
	}
	self, err := os.Executable()
	if err != nil {
		panic(err)
	}
	dir, err := os.MkdirTemp("", "stackbone-cli")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "stackbone")
	if err := os.Symlink(self, binary); err != nil {
		fmt.Fprintf(os.Stderr, "link stackbone: %v\n", err)
		os.Exit(1)
	}
	stacktest.SetParallel(4) // the tests wait on stackbone processes
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

func run(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader("") // not a terminal
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{out.String(), errb.String(), code}
}

func pauseRefund(t *testing.T, env *stacktest.Env, sess string) store.Interrupt {
	t.Helper()
	body := `{"model":"assistant","messages":[{"role":"user","content":"please refund my order"}]}`
	req, _ := http.NewRequest("POST", env.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-stackbone-session", sess)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	its, err := env.Store.ListInterrupts(context.Background(), "dev", store.InterruptFilter{ThreadID: sess})
	if err != nil || len(its) != 1 {
		t.Fatalf("want one pending decision: %v %v", its, err)
	}
	return its[0]
}

func TestHitlListAndJSON(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	it := pauseRefund(t, env, "cli-list")
	r := run(t, nil, "hitl", "list", "--url", env.URL)
	if r.code != 0 {
		t.Fatalf("list: %d %s", r.code, r.stderr)
	}
	for _, want := range []string{"ID", "AGENT", "THREAD", "TOOL", "DESCRIPTION", "AGE", it.ID, "assistant", "cli-list", "refund", "Refund order ord_42 for 19.99"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("list output lacks %q:\n%s", want, r.stdout)
		}
	}
	r = run(t, []string{"STACKBONE_URL=" + env.URL}, "hitl", "list", "--json")
	var items []store.Interrupt
	if err := json.Unmarshal([]byte(r.stdout), &items); err != nil || len(items) != 1 || items[0].ID != it.ID {
		t.Fatalf("--json: %v %s", err, r.stdout)
	}
}

func TestHitlApproveNeedsYesOffTerminal(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	it := pauseRefund(t, env, "cli-yes")
	r := run(t, nil, "hitl", "approve", it.ID, "--url", env.URL)
	if r.code == 0 || !strings.Contains(r.stderr, "--yes") {
		t.Fatalf("approve without --yes off a terminal must refuse: %d %q", r.code, r.stderr)
	}
	if env.Calls.Get("refund") != 0 {
		t.Fatal("refused approval ran the tool")
	}
	r = run(t, nil, "hitl", "approve", it.ID, "--yes", "--url", env.URL)
	if r.code != 0 || !strings.Contains(r.stdout, "Approved "+it.ID) {
		t.Fatalf("approve: %d %s %s", r.code, r.stdout, r.stderr)
	}
	stacktest.WaitFor(t, "resumed turn", func() bool { return env.Thread(t, "dev", "cli-yes").Status == store.Idle })
	if env.Calls.Get("refund") != 1 {
		t.Fatalf("refund ran %d times", env.Calls.Get("refund"))
	}
	got, _ := env.Store.GetInterrupt(context.Background(), "dev", it.ID)
	// The CLI says it is the CLI; the server proves only the API key.
	if got.Decision == nil || got.Decision.Via != "api" || got.Decision.ClaimedVia != "cli" || got.Decision.By != "dev" {
		t.Fatalf("decidedVia: %+v", got.Decision)
	}
	if !strings.Contains(r.stdout, "decidedVia api, claims cli, by dev") {
		t.Fatalf("the approval's output lacks its audit: %q", r.stdout)
	}
	// Deciding again: one clear line, non-zero exit.
	r = run(t, nil, "hitl", "reject", it.ID, "--yes", "--url", env.URL)
	if r.code == 0 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.Contains(r.stderr, "already") {
		t.Fatalf("already decided: %d %q", r.code, r.stderr)
	}
}

func TestHitlRejectWithMessageAndEdit(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	it := pauseRefund(t, env, "cli-reject")
	r := run(t, nil, "hitl", "reject", it.ID, "--message", "not eligible", "--yes", "--url", env.URL)
	if r.code != 0 {
		t.Fatalf("reject: %d %s", r.code, r.stderr)
	}
	stacktest.WaitFor(t, "resumed turn", func() bool { return env.Thread(t, "dev", "cli-reject").Status == store.Idle })
	msgs, _ := env.Store.Messages(context.Background(), "dev", "cli-reject")
	found := false
	for _, m := range msgs {
		if strings.Contains(m.Content, "not eligible") {
			found = true
		}
	}
	if !found || env.Calls.Get("refund") != 0 {
		t.Fatalf("rejection not recorded: %+v", msgs)
	}

	it2 := pauseRefund(t, env, "cli-edit")
	r = run(t, nil, "hitl", "approve", it2.ID, "--args", `{"orderId":"ord_42","amount":"x"}`, "--yes", "--url", env.URL)
	if r.code == 0 || !strings.Contains(r.stderr, "/amount") {
		t.Fatalf("invalid edit: %d %q", r.code, r.stderr)
	}
	r = run(t, nil, "hitl", "approve", it2.ID, "--args", `{"orderId":"ord_42","amount":3}`, "--yes", "--url", env.URL)
	if r.code != 0 {
		t.Fatalf("valid edit: %d %s", r.code, r.stderr)
	}
	stacktest.WaitFor(t, "resumed turn", func() bool { return env.Calls.Get("refund") == 1 })
}

func TestHitlErrors(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	r := run(t, nil, "hitl", "approve", "int_unknown", "--yes", "--url", env.URL)
	if r.code == 0 || !strings.Contains(r.stderr, "int_unknown") {
		t.Fatalf("unknown id: %d %q", r.code, r.stderr)
	}
	r = run(t, nil, "hitl", "list", "--url", "http://127.0.0.1:1")
	if r.code == 0 || !strings.Contains(r.stderr, "cannot reach the server") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Fatalf("unreachable: %d %q", r.code, r.stderr)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	r := run(t, nil, "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "stackbone ") {
		t.Fatalf("version: %+v", r)
	}
}

// TestShowDotIDs: ids that are dot segments ("." and "..") or hold a slash
// reach the server as one path segment, so `threads show` shows that thread
// (not the list, not "No route") and `hitl approve` asks about that id.
func TestShowDotIDs(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	for _, id := range []string{".", "..", "a/b"} {
		body := `{"model":"assistant","messages":[{"role":"user","content":"hello ` + id + `"}]}`
		req, _ := http.NewRequest("POST", env.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-stackbone-session", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("turn on thread %q: %d", id, resp.StatusCode)
		}
	}
	for _, id := range []string{".", "..", "a/b"} {
		r := run(t, nil, "threads", "show", id, "--url", env.URL)
		var th struct {
			ID       string `json:"id"`
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &th) != nil || th.ID != id {
			t.Fatalf("threads show %q: %d %s %s", id, r.code, r.stdout, r.stderr)
		}
		if len(th.Messages) == 0 || th.Messages[0].Content != "hello "+id {
			t.Fatalf("threads show %q shows another thread: %s", id, r.stdout)
		}
		r = run(t, nil, "hitl", "approve", id, "--yes", "--url", env.URL)
		if r.code == 0 || !strings.Contains(r.stderr, fmt.Sprintf("%q", id)) {
			t.Fatalf("hitl approve %q: %d %q", id, r.code, r.stderr)
		}
	}
	if r := run(t, nil, "threads", "show", "", "--url", env.URL); r.code == 0 || !strings.Contains(r.stderr, "empty") {
		t.Fatalf("threads show '': %d %q", r.code, r.stderr)
	}
}

func TestHitlListDecidedShowsAudit(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	// A stateless turn runs the approval-gated call and records it.
	body := `{"model":"assistant","messages":[{"role":"user","content":"refund it, no session"}]}`
	resp, err := http.Post(env.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	it := pauseRefund(t, env, "cli-audit")
	if r := run(t, nil, "hitl", "reject", it.ID, "--yes", "--url", env.URL); r.code != 0 {
		t.Fatalf("reject: %d %s", r.code, r.stderr)
	}

	r := run(t, nil, "hitl", "list", "--status", "approved", "--url", env.URL)
	for _, want := range []string{"STATUS", "AUDIT", "(stateless)", "refund", "approved", "decidedVia stateless, by dev"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Fatalf("list --status approved lacks %q: %d\n%s%s", want, r.code, r.stdout, r.stderr)
		}
	}
	r = run(t, nil, "hitl", "list", "--status", "rejected", "--url", env.URL)
	for _, want := range []string{it.ID, "cli-audit", "rejected", "decidedVia api, claims cli, by dev"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Fatalf("list --status rejected lacks %q: %d\n%s%s", want, r.code, r.stdout, r.stderr)
		}
	}
	if r := run(t, nil, "hitl", "list", "--url", env.URL); !strings.Contains(r.stdout, "No pending decisions.") {
		t.Fatalf("pending list: %s", r.stdout)
	}
}

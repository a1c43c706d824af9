package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// seedBranched stores thread id of tenant dev: u1 a1 u2 a2 on the first
// line, then branch 1 from a1: u2b a2b, the head.
func seedBranched(t *testing.T, env *stacktest.Env, id string) {
	t.Helper()
	for i, turn := range []struct {
		from          int64
		input, answer string
	}{{0, "u1", "a1"}, {0, "u2", "a2"}, {2, "u2b", "a2b"}} {
		now, run := time.Now(), id+"-r"+string(rune('1'+i))
		if _, err := env.Store.BeginRun(t.Context(), store.BeginRun{Tenant: "dev", ThreadID: id, Agent: "assistant", RunID: run, Owner: "seed",
			Now: now, LeaseUntil: now.Add(time.Minute), From: turn.from,
			Input: []message.Message{{ID: turn.input, Role: message.User, Content: turn.input}}}); err != nil {
			t.Fatal(err)
		}
		if err := env.Store.Checkpoint(t.Context(), store.Checkpoint{Tenant: "dev", ThreadID: id, RunID: run,
			Messages: []message.Message{{ID: turn.answer, Role: message.Assistant, Content: turn.answer}}}); err != nil {
			t.Fatal(err)
		}
		if err := env.Store.FinishRun(t.Context(), store.FinishRun{Tenant: "dev", ThreadID: id, RunID: run, Status: store.Idle, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestThreadsBranchesForkHead: `threads branches` lists the branches with
// their fork points and tips, `threads head` switches and rewinds, `threads
// fork` prints the new thread's id, and errors reach the user.
func TestThreadsBranchesForkHead(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	seedBranched(t, env, "br")

	r := run(t, nil, "threads", "branches", "br", "--url", env.URL)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") ||
		strings.Join(strings.Fields(lines[1]), " ") != "0 - - 4 a2" || strings.Join(strings.Fields(lines[2]), " ") != "1 0 a1 2 a2b *" {
		t.Fatalf("threads branches: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = run(t, nil, "threads", "branches", "br", "--json", "--url", env.URL)
	var list struct {
		Head int64 `json:"head"`
		Data []struct {
			ID           int64  `json:"id"`
			TipMessageID string `json:"tipMessageId"`
		} `json:"data"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil || list.Head != 1 || len(list.Data) != 2 || list.Data[1].TipMessageID != "a2b" {
		t.Fatalf("threads branches --json: %d %s %s", r.code, r.stdout, r.stderr)
	}

	if r = run(t, nil, "threads", "head", "br", "--branch", "0", "--url", env.URL); r.code != 0 || !strings.Contains(r.stdout, "head is branch 0") {
		t.Fatalf("threads head --branch 0: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r = run(t, nil, "threads", "head", "br", "--at", "a1", "--url", env.URL); r.code != 0 || !strings.Contains(r.stdout, "head is branch 2") {
		t.Fatalf("threads head --at a1: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if th, err := env.Store.GetThread(t.Context(), "dev", "br"); err != nil || th.HeadBranch != 2 {
		t.Fatalf("after the rewind: %+v, %v", th, err)
	}
	for _, args := range [][]string{{"threads", "head", "br"}, {"threads", "head", "br", "--branch", "1", "--at", "a1"}} {
		if r = run(t, nil, append(args, "--url", env.URL)...); r.code == 0 || !strings.Contains(r.stderr, "exactly one") {
			t.Fatalf("%v: %d %q", args, r.code, r.stderr)
		}
	}
	if r = run(t, nil, "threads", "head", "br", "--branch", "9", "--url", env.URL); r.code == 0 || !strings.Contains(r.stderr, "no branch 9") {
		t.Fatalf("threads head --branch 9: %d %q", r.code, r.stderr)
	}

	if r = run(t, nil, "threads", "fork", "br", "--at", "a2", "--id", "copy", "--url", env.URL); r.code != 0 || strings.TrimSpace(r.stdout) != "copy" {
		t.Fatalf("threads fork --at a2 --id copy: %d %s %s", r.code, r.stdout, r.stderr)
	}
	ms, err := env.Store.Messages(t.Context(), "dev", "copy")
	if err != nil || len(ms) != 4 || ms[3].ID != "a2" {
		t.Fatalf("the fork's messages: %v, %v", ms, err)
	}
	r = run(t, nil, "threads", "fork", "br", "--url", env.URL)
	if id := strings.TrimSpace(r.stdout); r.code != 0 || !strings.HasPrefix(id, "thr_") {
		t.Fatalf("threads fork: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = run(t, nil, "threads", "fork", "br", "--at", "a1", "--json", "--url", env.URL)
	var view struct {
		Messages []struct {
			ID  string `json:"id"`
			Seq int64  `json:"seq"`
		} `json:"messages"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &view) != nil || len(view.Messages) != 2 || view.Messages[1].Seq != 2 {
		t.Fatalf("threads fork --json: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r = run(t, nil, "threads", "fork", "br", "--id", "copy", "--url", env.URL); r.code == 0 || !strings.Contains(r.stderr, "exists") {
		t.Fatalf("threads fork onto a taken id: %d %q", r.code, r.stderr)
	}
	if r = run(t, nil, "threads", "branches", "nope", "--url", env.URL); r.code == 0 || !strings.Contains(r.stderr, "nope") {
		t.Fatalf("threads branches of an unknown thread: %d %q", r.code, r.stderr)
	}
}

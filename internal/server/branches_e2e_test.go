package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/server"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// seedTurn stores one finished turn on a thread of the stack's store:
// input (from message from, 0: the head's tip), then the answer, with the
// answer's text_end event and state when set.
func seedTurn(t *testing.T, env *stacktest.Env, tenant, thread, run string, from int64, input, answer, state string) {
	t.Helper()
	ctx, now := t.Context(), time.Now()
	if _, err := env.Store.BeginRun(ctx, store.BeginRun{Tenant: tenant, ThreadID: thread, Agent: "assistant", RunID: run, Owner: "seed",
		Now: now, LeaseUntil: now.Add(time.Minute), From: from,
		Input: []message.Message{{ID: input, Role: message.User, Content: input}}}); err != nil {
		t.Fatalf("seed %s: %v", run, err)
	}
	c := store.Checkpoint{Tenant: tenant, ThreadID: thread, RunID: run,
		Messages: []message.Message{{ID: answer, Role: message.Assistant, Content: answer}},
		Events:   []event.Event{{Type: event.TextEnd, MessageID: answer}}}
	if state != "" {
		c.State = json.RawMessage(state)
	}
	if err := env.Store.Checkpoint(ctx, c); err != nil {
		t.Fatalf("seed %s: %v", run, err)
	}
	if err := env.Store.FinishRun(ctx, store.FinishRun{Tenant: tenant, ThreadID: thread, RunID: run, Status: store.Idle, Now: now}); err != nil {
		t.Fatalf("seed %s: %v", run, err)
	}
}

// seedForked stores thread id of tenant: u1 a1 u2 a2 (state n=1 at a1,
// n=2 at a2) on the first line, then branch 1 from a1: u2b a2b (n=5), the
// head.
func seedForked(t *testing.T, env *stacktest.Env, tenant, id string) {
	t.Helper()
	seedTurn(t, env, tenant, id, id+"-r1", 0, "u1", "a1", `{"n":1}`)
	seedTurn(t, env, tenant, id, id+"-r2", 0, "u2", "a2", `{"n":2}`)
	seedTurn(t, env, tenant, id, id+"-r3", 2, "u2b", "a2b", `{"n":5}`)
}

// apiError is the OpenAI error envelope of a control route.
type apiError struct {
	Error struct {
		Code  string `json:"code"`
		Param string `json:"param"`
	} `json:"error"`
}

// wantStatus checks a response's status and, for an error, its code and
// param.
func wantStatus(t *testing.T, what string, r apiResp, status int, code, param string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: %d %s; want %d", what, r.status, r.body, status)
	}
	if code == "" {
		return
	}
	var e apiError
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error.Code != code || e.Error.Param != param {
		t.Fatalf("%s: %s; want code %s, param %q", what, r.body, code, param)
	}
}

func decodeView(t *testing.T, what string, r apiResp, status int) server.ThreadView {
	t.Helper()
	wantStatus(t, what, r, status, "", "")
	var v server.ThreadView
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("%s: %v in %s", what, err, r.body)
	}
	return v
}

// wantMessages checks a view's message ids and that each carries its seq.
func wantMessages(t *testing.T, what string, v server.ThreadView, seqs []int64, ids ...string) {
	t.Helper()
	var gotIDs []string
	var gotSeqs []int64
	for _, m := range v.Messages {
		gotIDs, gotSeqs = append(gotIDs, m.ID), append(gotSeqs, m.Seq)
	}
	if !slices.Equal(gotIDs, ids) || !slices.Equal(gotSeqs, seqs) {
		t.Fatalf("%s: messages %v seqs %v; want %v %v", what, gotIDs, gotSeqs, ids, seqs)
	}
}

func wantState(t *testing.T, what string, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if json.Unmarshal(got, &g) != nil || json.Unmarshal([]byte(want), &w) != nil || fmt.Sprint(g) != fmt.Sprint(w) {
		t.Fatalf("%s: state %s; want %s", what, got, want)
	}
}

// branchDrivers are the stores the branch API tests run on.
var branchDrivers = map[string]func(t *testing.T) store.Store{
	"sqlite":   func(*testing.T) store.Store { return nil },
	"postgres": func(t *testing.T) store.Store { return stacktest.Postgres(t, "branch_api") },
}

// TestBranchAPIReads: the branch listing, a thread along any branch with
// each message's seq, and the state at a message, on both stores.
func TestBranchAPIReads(t *testing.T) {
	t.Parallel()
	for driver, open := range branchDrivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			env := stacktest.New(t, stacktest.Options{Store: open(t)})
			seedForked(t, env, "dev", "br")
			base := env.URL + "/v1/threads/br"

			var list server.BranchList
			if st := getJSON(t, base+"/branches", &list); st != http.StatusOK {
				t.Fatalf("branches: %d", st)
			}
			if list.Object != "list" || list.Head != 1 || len(list.Data) != 2 {
				t.Fatalf("branches = %+v", list)
			}
			b0, b1 := list.Data[0], list.Data[1]
			if b0.ID != 0 || b0.Head || b0.ForkMessageID != "" || b0.Messages != 4 || b0.TipSeq != 4 || b0.TipMessageID != "a2" || b0.CreatedAt.IsZero() {
				t.Fatalf("branch 0 = %+v", b0)
			}
			if b1.ID != 1 || !b1.Head || b1.Parent != 0 || b1.ForkSeq != 2 || b1.ForkMessageID != "a1" || b1.Messages != 2 ||
				b1.TipSeq != 6 || b1.TipMessageID != "a2b" {
				t.Fatalf("branch 1 = %+v", b1)
			}
			raw := call(t, "GET", base+"/branches", "")
			for _, field := range []string{`"forkSeq"`, `"forkMessageId"`, `"tipSeq"`, `"tipMessageId"`, `"messages"`, `"head"`, `"createdAt"`} {
				if !strings.Contains(string(raw.body), field) {
					t.Fatalf("branches body lacks %s: %s", field, raw.body)
				}
			}

			v := decodeView(t, "the thread", call(t, "GET", base, ""), http.StatusOK)
			if v.Branch != 1 || v.HeadBranch != 1 {
				t.Fatalf("thread view: branch %d, head %d", v.Branch, v.HeadBranch)
			}
			wantMessages(t, "the head's path", v, []int64{1, 2, 5, 6}, "u1", "a1", "u2b", "a2b")
			if !strings.Contains(string(call(t, "GET", base, "").body), `"seq":5`) {
				t.Fatal("a message's seq is not in the thread's JSON")
			}
			v = decodeView(t, "branch 0", call(t, "GET", base+"?branch=0", ""), http.StatusOK)
			if v.Branch != 0 || v.HeadBranch != 1 {
				t.Fatalf("branch 0 view: branch %d, head %d", v.Branch, v.HeadBranch)
			}
			wantMessages(t, "branch 0's path", v, []int64{1, 2, 3, 4}, "u1", "a1", "u2", "a2")
			wantStatus(t, "an unknown branch", call(t, "GET", base+"?branch=7", ""), 404, "not_found", "branch")
			wantStatus(t, "a branch that is no number", call(t, "GET", base+"?branch=x", ""), 400, "invalid_request", "branch")

			for at, want := range map[string]struct {
				seq, branch int64
				state       string
			}{"u1": {1, 0, `{}`}, "a1": {2, 0, `{"n":1}`}, "a2": {4, 0, `{"n":2}`}, "u2b": {5, 1, `{"n":1}`}, "a2b": {6, 1, `{"n":5}`}} {
				var st server.ThreadState
				if code := getJSON(t, base+"/state?at="+at, &st); code != http.StatusOK {
					t.Fatalf("state at %s: %d", at, code)
				}
				if st.Object != "thread.state" || st.At != at || st.Seq != want.seq || st.Branch != want.branch {
					t.Fatalf("state at %s = %+v", at, st)
				}
				wantState(t, "state at "+at, st.State, want.state)
			}
			var head server.ThreadState
			if code := getJSON(t, base+"/state", &head); code != http.StatusOK || head.At != "a2b" || head.Seq != 6 || head.Branch != 1 {
				t.Fatalf("the head's state: %d %+v", code, head)
			}
			wantState(t, "the head's state", head.State, `{"n":5}`)
			wantStatus(t, "state at an unknown message", call(t, "GET", base+"/state?at=nope", ""), 404, "not_found", "at")
		})
	}
}

// TestBranchAPIHead: switching the head and rewinding, the bodies refused,
// and the 409s of a busy or paused thread changing nothing.
func TestBranchAPIHead(t *testing.T) {
	t.Parallel()
	for driver, open := range branchDrivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			env := stacktest.New(t, stacktest.Options{Store: open(t)})
			seedForked(t, env, "dev", "br")
			head := env.URL + "/v1/threads/br/head"

			v := decodeView(t, "switch to branch 0", call(t, "POST", head, `{"branch":0}`), http.StatusOK)
			if v.Branch != 0 || v.HeadBranch != 0 {
				t.Fatalf("after the switch: branch %d, head %d", v.Branch, v.HeadBranch)
			}
			wantMessages(t, "after the switch", v, []int64{1, 2, 3, 4}, "u1", "a1", "u2", "a2")
			wantState(t, "after the switch", v.State, `{"n":2}`)

			v = decodeView(t, "rewind to a1", call(t, "POST", head, `{"at":"a1"}`), http.StatusOK)
			if v.Branch != 2 || v.HeadBranch != 2 {
				t.Fatalf("after the rewind: branch %d, head %d; want a new branch 2", v.Branch, v.HeadBranch)
			}
			wantMessages(t, "after the rewind", v, []int64{1, 2}, "u1", "a1")
			wantState(t, "after the rewind", v.State, `{"n":1}`)
			v = decodeView(t, "rewind to a2b (branch 1's tip)", call(t, "POST", head, `{"at":"a2b"}`), http.StatusOK)
			if v.HeadBranch != 1 {
				t.Fatalf("rewind to a2b: head %d; want branch 1", v.HeadBranch)
			}

			for _, body := range []string{`{}`, ``, `{"branch":0,"at":"a1"}`, `{"bogus":1}`, `not json`, `{"branch":"x"}`, `{"at":3}`} {
				wantStatus(t, "head body "+body, call(t, "POST", head, body), 400, "invalid_request", "")
			}
			wantStatus(t, "an unknown branch", call(t, "POST", head, `{"branch":9}`), 404, "not_found", "branch")
			wantStatus(t, "an unknown message", call(t, "POST", head, `{"at":"nope"}`), 404, "not_found", "at")

			// A run holds the thread: 409, nothing changes.
			now := time.Now()
			seedForked(t, env, "dev", "busy")
			if _, err := env.Store.BeginRun(t.Context(), store.BeginRun{Tenant: "dev", ThreadID: "busy", Agent: "assistant", RunID: "busy-run",
				Owner: "elsewhere", Now: now, LeaseUntil: now.Add(time.Hour), Input: []message.Message{{ID: "u9", Role: message.User, Content: "x"}}}); err != nil {
				t.Fatal(err)
			}
			for _, body := range []string{`{"branch":0}`, `{"at":"a1"}`} {
				wantStatus(t, "switch while running "+body, call(t, "POST", env.URL+"/v1/threads/busy/head", body), 409, "run_in_progress", "")
			}
			// A decision is pending: 409, nothing changes.
			seedForked(t, env, "dev", "paused")
			if _, err := env.Store.BeginRun(t.Context(), store.BeginRun{Tenant: "dev", ThreadID: "paused", Agent: "assistant", RunID: "paused-run",
				Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute), Input: []message.Message{{ID: "u8", Role: message.User, Content: "refund"}}}); err != nil {
				t.Fatal(err)
			}
			if err := env.Store.Checkpoint(t.Context(), store.Checkpoint{Tenant: "dev", ThreadID: "paused", RunID: "paused-run",
				Interrupts: []store.Interrupt{{ID: "int-1", ToolCallID: "call-1", Tool: "refund", Args: json.RawMessage(`{}`),
					AllowedDecisions: []string{"approve", "reject"}, CreatedAt: now}}}); err != nil {
				t.Fatal(err)
			}
			if err := env.Store.FinishRun(t.Context(), store.FinishRun{Tenant: "dev", ThreadID: "paused", RunID: "paused-run", Status: store.Waiting, Now: now}); err != nil {
				t.Fatal(err)
			}
			for _, body := range []string{`{"branch":0}`, `{"at":"a1"}`} {
				wantStatus(t, "switch while paused "+body, call(t, "POST", env.URL+"/v1/threads/paused/head", body), 409, "approval_pending", "")
			}
			for _, id := range []string{"busy", "paused"} {
				var list server.BranchList
				getJSON(t, env.URL+"/v1/threads/"+id+"/branches", &list)
				if list.Head != 1 || len(list.Data) != 2 {
					t.Fatalf("%s after refused switches: head %d, %d branches", id, list.Head, len(list.Data))
				}
			}
		})
	}
}

// TestBranchAPIFork: a fork at a message, at an event seq and of the whole
// head is a new thread with exactly that path and state, usable as any;
// a taken or invalid id and an unknown point are refused.
func TestBranchAPIFork(t *testing.T) {
	t.Parallel()
	for driver, open := range branchDrivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			env := stacktest.New(t, stacktest.Options{Store: open(t)})
			seedForked(t, env, "dev", "br")
			fork := env.URL + "/v1/threads/br/fork"

			v := decodeView(t, "fork at a2", call(t, "POST", fork, `{"at":"a2","threadId":"copy"}`), http.StatusCreated)
			if v.ID != "copy" || v.Agent != "assistant" || v.Status != store.Idle || v.HeadBranch != 0 || v.Branch != 0 {
				t.Fatalf("fork = %+v", v.Thread)
			}
			wantMessages(t, "fork at a2", v, []int64{1, 2, 3, 4}, "u1", "a1", "u2", "a2")
			wantState(t, "fork at a2", v.State, `{"n":2}`)
			var st server.ThreadState
			if getJSON(t, env.URL+"/v1/threads/copy/state?at=a2", &st); st.Seq != 4 {
				t.Fatalf("the fork's state at a2: %+v", st)
			}
			wantState(t, "the fork's first state version", st.State, `{"n":2}`)

			// At an event seq: the last message its events name by then.
			evs, err := env.Store.Events(t.Context(), "dev", "br", 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			var a1Seq int64
			for _, e := range evs {
				if e.MessageID == "a1" {
					a1Seq = e.Seq
				}
			}
			v = decodeView(t, "fork at an event", call(t, "POST", fork, fmt.Sprintf(`{"at":%d}`, a1Seq)), http.StatusCreated)
			if !strings.HasPrefix(v.ID, "thr_") {
				t.Fatalf("a fork without threadId got id %q; want thr_…", v.ID)
			}
			wantMessages(t, "fork at an event", v, []int64{1, 2}, "u1", "a1")

			v = decodeView(t, "fork of the head", call(t, "POST", fork, ``), http.StatusCreated)
			wantMessages(t, "fork of the head", v, []int64{1, 2, 3, 4}, "u1", "a1", "u2b", "a2b")
			wantState(t, "fork of the head", v.State, `{"n":5}`)
			// The fork is an ordinary thread: a turn on it goes on from its copy.
			seedTurn(t, env, "dev", v.ID, "on-fork", 0, "u3", "a3", "")
			v = decodeView(t, "the fork after a turn", call(t, "GET", env.URL+"/v1/threads/"+v.ID, ""), http.StatusOK)
			wantMessages(t, "the fork after a turn", v, []int64{1, 2, 3, 4, 5, 6}, "u1", "a1", "u2b", "a2b", "u3", "a3")

			wantStatus(t, "fork onto a taken id", call(t, "POST", fork, `{"threadId":"copy"}`), 409, "thread_exists", "threadId")
			wantStatus(t, "fork onto its own id", call(t, "POST", fork, `{"threadId":"br"}`), 409, "thread_exists", "threadId")
			v = decodeView(t, "copy after refused forks", call(t, "GET", env.URL+"/v1/threads/copy", ""), http.StatusOK)
			wantMessages(t, "copy after refused forks", v, []int64{1, 2, 3, 4}, "u1", "a1", "u2", "a2")
			for _, body := range []string{`{"threadId":""}`, `{"threadId":"a\u0007b"}`, `{"threadId":"` + strings.Repeat("x", 1000) + `"}`,
				`{"at":0}`, `{"at":true}`, `{"at":""}`, `{"bogus":1}`, `[]`} {
				wantStatus(t, "fork body "+body, call(t, "POST", fork, body), 400, "", "")
			}
			wantStatus(t, "fork at an unknown message", call(t, "POST", fork, `{"at":"nope","threadId":"n1"}`), 404, "not_found", "at")
			wantStatus(t, "the thread of a refused fork", call(t, "GET", env.URL+"/v1/threads/n1", ""), 404, "not_found", "")
		})
	}
}

// TestBranchAPIOtherTenant: another tenant's thread is 404 on every
// branch route, and nothing changes.
func TestBranchAPIOtherTenant(t *testing.T) {
	t.Parallel()
	for driver, open := range branchDrivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			env := stacktest.New(t, stacktest.Options{Store: open(t)})
			seedForked(t, env, "other", "theirs")
			base := env.URL + "/v1/threads/theirs"
			for _, c := range []struct{ method, url, body string }{
				{"GET", base, ""}, {"GET", base + "?branch=0", ""}, {"GET", base + "/branches", ""},
				{"GET", base + "/state", ""}, {"GET", base + "/state?at=a1", ""},
				{"POST", base + "/head", `{"branch":0}`}, {"POST", base + "/head", `{"at":"a1"}`},
				{"POST", base + "/fork", ``}, {"POST", base + "/fork", `{"at":"a1","threadId":"mine"}`}, {"POST", base + "/fork", `{"at":1}`},
			} {
				wantStatus(t, c.method+" "+c.url+" "+c.body, call(t, c.method, c.url, c.body), 404, "not_found", "")
			}
			th, err := env.Store.GetThread(t.Context(), "other", "theirs")
			if err != nil || th.HeadBranch != 1 || th.BranchSeq != 1 {
				t.Fatalf("the other tenant's thread: %+v, %v", th, err)
			}
			if ths, _ := env.Store.ListThreads(t.Context(), "dev", store.ThreadFilter{Limit: 10}); len(ths) != 0 {
				t.Fatalf("refused forks made threads: %v", ths)
			}
		})
	}
}

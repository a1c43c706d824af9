package studio_test

import (
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// seedTurn stores one finished turn of agent "assistant" on a thread
// through the store, as storetest's branch cases do: the input, the answer
// with the state it leaves, the end. from is the seq of the message the turn
// goes on from (0: the head's last), which branches the thread when it is
// not the conversation's last.
func seedTurn(t *testing.T, env *stacktest.Env, tenant, thread, run string, from int64, input, answer message.Message, state string) {
	t.Helper()
	ctx := t.Context()
	now := time.Now()
	if _, err := env.Store.BeginRun(ctx, store.BeginRun{Tenant: tenant, ThreadID: thread, Agent: "assistant", RunID: run, Owner: "seed",
		Now: now, LeaseUntil: now.Add(time.Minute), Input: []message.Message{input}, From: from}); err != nil {
		t.Fatalf("BeginRun %s (from %d): %v", run, from, err)
	}
	if err := env.Store.Checkpoint(ctx, store.Checkpoint{Tenant: tenant, ThreadID: thread, RunID: run,
		Messages: []message.Message{answer}, State: json.RawMessage(state)}); err != nil {
		t.Fatalf("Checkpoint %s: %v", run, err)
	}
	if err := env.Store.FinishRun(ctx, store.FinishRun{Tenant: tenant, ThreadID: thread, RunID: run, Status: store.Idle, Now: now}); err != nil {
		t.Fatalf("FinishRun %s: %v", run, err)
	}
}

// seedTrip stores a thread that forks after its second message: the first
// line (branch 0) asks for a cheaper trip, branch 1 (the head) for a
// luxurious one. Seqs: u1 1, a1 2, u2 3, a2 4 on branch 0; u2b 5, a2b 6 on
// branch 1, which grows from a1. first is the first message's text.
func seedTrip(t *testing.T, env *stacktest.Env, tenant, thread, first string) {
	t.Helper()
	user := func(id, text string) message.Message {
		return message.Message{ID: id, Role: message.User, Content: text}
	}
	bot := func(id, text string) message.Message {
		return message.Message{ID: id, Role: message.Assistant, Content: text}
	}
	seedTurn(t, env, tenant, thread, "run_trip_1", 0, user("msg_u1", first),
		bot("msg_a1", "Day one: the castle."), `{"city":"Lisbon"}`)
	seedTurn(t, env, tenant, thread, "run_trip_2", 0, user("msg_u2", "Make it cheaper"),
		bot("msg_a2", "A hostel near the river."), `{"city":"Lisbon","budget":"low"}`)
	seedTurn(t, env, tenant, thread, "run_trip_3", 2, user("msg_u2b", "Make it luxurious"),
		bot("msg_a2b", "A palace hotel in Sintra."), `{"city":"Lisbon","budget":"high"}`)
	if th := env.Thread(t, tenant, thread); th.HeadBranch != 1 {
		t.Fatalf("the seeded thread's head is branch %d, want 1", th.HeadBranch)
	}
}

// msgSel is the selector of a message of the conversation shown.
func msgSel(id string) string { return `#messages li.msg[data-id=` + js(id) + `]` }

// shownIDs are the ids of the messages the page shows, in order.
func shownIDs(p *page) []string {
	return eval[[]string](p, `[...document.querySelectorAll('#messages li.msg')].map((e) => e.dataset.id)`)
}

func storedIDs(t *testing.T, env *stacktest.Env, tenant, thread string) []string {
	t.Helper()
	ms, err := env.Store.Messages(t.Context(), tenant, thread)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	return ids
}

// TestThreadBranches: a thread that forks after its second message shows a
// "2 / 2" switcher on the head's first message after the fork; switching
// shows the other line (view only) and "Make this the head" moves the head
// there; "State after this" shows the state as it was after a message,
// labelled as past; "Fork from here" opens a new thread holding exactly the
// path up to that message; "Rewind to here" (confirmed) moves the head to
// that message.
func TestThreadBranches(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	seedTrip(t, env, "dev", "trip-1", "Plan a trip to Lisbon <img src=x onerror=alert(1)>")

	p := newPage(t)
	p.open(env.URL + "/studio/#/threads/trip-1")
	p.waitText("#messages", "A palace hotel in Sintra.")
	if got := shownIDs(p); !slices.Equal(got, []string{"msg_u1", "msg_a1", "msg_u2b", "msg_a2b"}) {
		t.Fatalf("the head's conversation shows %v", got)
	}
	// Message text is text, never markup.
	p.waitText(msgSel("msg_u1")+" .text", "<img src=x onerror=alert(1)>")
	if eval[bool](p, `!!document.querySelector('#messages img')`) {
		t.Fatal("a message's text became markup")
	}
	// The fork: the head's line is the second of two, and is the head.
	sw := msgSel("msg_u2b") + " .branch-switch"
	p.waitText(sw+" .branch-pos", "2 / 2")
	p.waitText(sw+" .head-mark", "head")
	if n := eval[int](p, `document.querySelectorAll('#messages .branch-switch').length`); n != 1 {
		t.Fatalf("%d switchers; want one, where the conversation forks", n)
	}
	p.waitText("#branch-bar .branch-name", "Branch 1")
	p.waitText("#branch-bar .head-mark", "head")
	if eval[bool](p, `document.querySelector(`+js(sw+` button[data-action="next-branch"]`)+`).disabled !== true`) {
		t.Fatal("the last branch offers a next one")
	}

	// Switch to the first line: its own text, view only.
	p.click(sw + ` button[data-action="prev-branch"]`)
	p.waitText("#messages", "A hostel near the river.")
	p.waitText(msgSel("msg_u2")+" .branch-pos", "1 / 2")
	if got := shownIDs(p); !slices.Equal(got, []string{"msg_u1", "msg_a1", "msg_u2", "msg_a2"}) {
		t.Fatalf("branch 0 shows %v", got)
	}
	p.waitText("#branch-bar .branch-name", "Branch 0")
	p.waitText("#branch-bar .not-head", "not the head")
	if !strings.Contains(eval[string](p, `location.hash`), "branch=0") {
		t.Fatal("the branch shown is not in the URL")
	}
	if th := env.Thread(t, "dev", "trip-1"); th.HeadBranch != 1 {
		t.Fatalf("viewing a branch moved the head to %d", th.HeadBranch)
	}
	// The state panel shows the end of the branch shown, not the head's.
	p.waitText("#state-note", "not the head")
	p.waitText("#state", `"low"`)

	// State after a message: as it was, labelled as past.
	p.click(msgSel("msg_a1") + ` button[data-action="state"]`)
	p.waitText("#state-note .past-mark", "past")
	p.waitText("#state-note", "after message 2 (Assistant)")
	p.waitText("#state", `"Lisbon"`)
	if eval[bool](p, `document.querySelector('#state').textContent.includes('budget')`) {
		t.Fatal("the state after message 2 holds a later write")
	}
	if eval[string](p, `document.querySelector(`+js(msgSel("msg_a1")+` button[data-action="state"]`)+`).getAttribute('aria-pressed')`) != "true" {
		t.Fatal("the chosen message's state button is not pressed")
	}
	p.click(`#state-note button[data-action="current-state"]`)
	p.waitJS("the past label to go", `!document.querySelector('#state-note .past-mark')`)

	// Fork from the first line's answer: a new thread, exactly that path.
	p.click(msgSel("msg_a2") + ` button[data-action="fork"]`)
	p.waitJS("the new thread's page", `location.hash.startsWith('#/threads/') && !location.hash.startsWith('#/threads/trip-1')`)
	forked := strings.TrimPrefix(strings.SplitN(eval[string](p, `location.hash`), "?", 2)[0], "#/threads/")
	p.waitText("#thread-h", forked)
	p.waitText("#messages", "A hostel near the river.")
	want := []string{"msg_u1", "msg_a1", "msg_u2", "msg_a2"}
	if got := shownIDs(p); !slices.Equal(got, want) {
		t.Fatalf("the fork %s shows %v; want %v", forked, got, want)
	}
	if got := storedIDs(t, env, "dev", forked); !slices.Equal(got, want) {
		t.Fatalf("the fork %s holds %v; want %v", forked, got, want)
	}
	if eval[bool](p, `!!document.querySelector('#messages .branch-switch')`) {
		t.Fatal("a fresh fork shows branches")
	}
	if got := storedIDs(t, env, "dev", "trip-1"); !slices.Equal(got, []string{"msg_u1", "msg_a1", "msg_u2b", "msg_a2b"}) {
		t.Fatalf("forking changed the thread: %v", got)
	}

	// Make the first line the head.
	p.open(env.URL + "/studio/#/threads/trip-1?branch=0")
	p.waitText("#messages", "A hostel near the river.")
	p.click(`#branch-bar button[data-action="make-head"]`)
	p.waitJS("branch 0 to be the head", `document.querySelector('#branch-bar').dataset.head === '0'`)
	p.waitText("#branch-bar .head-mark", "head")
	if th := env.Thread(t, "dev", "trip-1"); th.HeadBranch != 0 {
		t.Fatalf("after 'Make this the head' the head is branch %d", th.HeadBranch)
	}
	if strings.Contains(eval[string](p, `location.hash`), "branch=") {
		t.Fatal("the head is still shown as a chosen branch")
	}

	// Rewind to the first answer, confirmed: the head is a new branch there.
	p.click(msgSel("msg_a1") + ` button[data-action="rewind"]`)
	p.waitJS("the confirmation to take focus", `document.activeElement && document.activeElement.dataset.action === 'confirm-rewind'`)
	if th := env.Thread(t, "dev", "trip-1"); th.HeadBranch != 0 {
		t.Fatal("the rewind went ahead before it was confirmed")
	}
	p.click(msgSel("msg_a1") + ` button[data-action="confirm-rewind"]`)
	p.waitJS("the head to move", `document.querySelector('#branch-bar').dataset.head === '2'`)
	if got := shownIDs(p); !slices.Equal(got, []string{"msg_u1", "msg_a1"}) {
		t.Fatalf("after the rewind the head shows %v", got)
	}
	th := env.Thread(t, "dev", "trip-1")
	var state map[string]any
	if err := json.Unmarshal(th.State, &state); err != nil || th.HeadBranch != 2 || len(state) != 1 || state["city"] != "Lisbon" {
		t.Fatalf("after the rewind: head %d, state %s; want branch 2 at message 2's state", th.HeadBranch, th.State)
	}
	if got := storedIDs(t, env, "dev", "trip-1"); !slices.Equal(got, []string{"msg_u1", "msg_a1"}) {
		t.Fatalf("the head's path after the rewind: %v", got)
	}
	// The head ends at the fork point: the three lines part after it.
	p.waitText("#messages .branch-end .branch-pos", "3 / 3")
	p.waitText("#messages .branch-end", "The head ends here")
	p.waitText(`#state`, `"Lisbon"`)

	if os.Getenv("STACKBONE_SCREENSHOTS") == "1" {
		seedTrip(t, env, "dev", "lisbon", "Plan three days in Lisbon")
		p.open(env.URL + "/studio/#/threads/lisbon")
		p.waitText(msgSel("msg_u2b")+" .branch-pos", "2 / 2")
		p.click(msgSel("msg_a1") + ` button[data-action="state"]`)
		p.waitText("#state-note .past-mark", "past")
		p.waitText("#events-status", "live")
		p.waitJS("the toast to go", `!document.querySelector('#status').classList.contains('show')`)
		shotOf(t, p, ".thread-grid", "studio-branches.png")
	}
}

// TestThreadRewindRefusedShowsWhy: a thread waiting on a decision cannot be
// rewound: the page shows the API's own reason and nothing changes.
func TestThreadRewindRefusedShowsWhy(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	pause(t, env, "", "wait-rw", "please refund my order")
	first := storedIDs(t, env, "dev", "wait-rw")[0]
	r := do(t, "POST", env.URL+"/v1/threads/wait-rw/head", `{"at":`+jsonString(first)+`}`)
	var body struct {
		Error struct{ Message, Code string } `json:"error"`
	}
	if err := json.Unmarshal(r.body, &body); r.status != 409 || err != nil || body.Error.Code != "approval_pending" || body.Error.Message == "" {
		t.Fatalf("a rewind while a decision is pending: %d %s", r.status, r)
	}

	p := newPage(t)
	p.open(env.URL + "/studio/#/threads/wait-rw")
	p.waitText("#thread-pending", "Refund order ord_42")
	p.click(msgSel(first) + ` button[data-action="rewind"]`)
	p.click(msgSel(first) + ` button[data-action="confirm-rewind"]`)
	p.waitText(msgSel(first)+` [role="alert"]`, body.Error.Message)
	if th := env.Thread(t, "dev", "wait-rw"); th.HeadBranch != 0 || th.Status != store.Waiting {
		t.Fatalf("a refused rewind changed the thread: head %d, %s", th.HeadBranch, th.Status)
	}
}

// TestThreadBranchesForApprover: an approver key cannot start turns, so
// neither fork nor rewind is offered; it still switches branches and reads
// past state.
func TestThreadBranchesForApprover(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: []config.Key{opsKey, aliceKey}})
	seedTrip(t, env, "acme", "trip-2", "Plan a trip to Lisbon")
	p := newPage(t)
	signIn(p, env.URL, aliceKey)
	p.open(env.URL + "/studio/#/threads/trip-2")
	p.waitText(msgSel("msg_u2b")+" .branch-pos", "2 / 2")
	if n := eval[int](p, `document.querySelectorAll('#main button[data-action="fork"], #main button[data-action="rewind"]').length`); n != 0 {
		t.Fatalf("an approver is offered %d fork or rewind buttons", n)
	}
	p.click(msgSel("msg_u2b") + ` button[data-action="prev-branch"]`)
	p.waitText("#messages", "A hostel near the river.")
	if eval[bool](p, `!!document.querySelector('#branch-bar button[data-action="make-head"]')`) {
		t.Fatal("an approver is offered 'Make this the head'")
	}
	// Before the first write the state was empty; after it, the city.
	p.click(msgSel("msg_u1") + ` button[data-action="state"]`)
	p.waitText("#state-note", "after message 1 (User)")
	p.waitText("#state", "empty object")
	p.click(msgSel("msg_a1") + ` button[data-action="state"]`)
	p.waitText("#state-note", "after message 2 (Assistant)")
	p.waitText("#state", `"Lisbon"`)
}

// TestBranchForksLayout checks branches.js's forks on a deeper tree (the
// one storetest's testBranchFromEarlier builds): branch 1 from seq 2,
// branch 2 from seq 4 of the first line, branch 3 from seq 6 of branch 1;
// the head is branch 3. Each row: the branch viewed and its path's seqs,
// then each fork on it as "seq:current/alternatives:shown-branches".
func TestBranchForksLayout(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	p := newPage(t)
	p.open(env.URL + "/studio/")
	branches := `[{"id":0,"parent":0,"forkSeq":0},{"id":1,"parent":0,"forkSeq":2},{"id":2,"parent":0,"forkSeq":4},{"id":3,"parent":1,"forkSeq":6}]`
	for _, c := range []struct {
		viewed int
		seqs   string
		want   string
	}{
		{3, "[1,2,5,6,11,12]", "2:2/2:0,3 6:2/2:1,3"},
		{0, "[1,2,3,4]", "2:1/2:0,3 4:1/2:0,2"},
		{2, "[1,2,3,4,9,10]", "2:1/2:2,3 4:2/2:0,2"},
		{1, "[1,2,5,6,7,8]", "2:2/2:0,1 6:1/2:1,3"},
	} {
		got := eval[string](p, `import('/studio/branches.js').then((m) => m.forks(`+branches+`, `+strconv.Itoa(c.viewed)+`, 3, `+c.seqs+`)
		  .map((f) => f.seq + ':' + (f.current + 1) + '/' + f.alts.length + ':' + f.alts.map((a) => a.show).join(',')).join(' '))`)
		if got != c.want {
			t.Errorf("viewing branch %d: forks %q; want %q", c.viewed, got, c.want)
		}
	}
}

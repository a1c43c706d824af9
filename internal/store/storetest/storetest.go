// Package storetest is the conformance suite every store.Store driver
// passes. A driver's test calls Run with a constructor of fresh, empty
// stores.
//
// The suite uses fixed times (no sleeping) and compares stored JSON by
// meaning, not bytes, so a driver may normalise JSON (PostgreSQL jsonb).
// Times are compared at microsecond precision.
//
// Besides the store.Store doc comments, the suite pins these behaviours:
//   - a lease is held up to and including LeaseUntil: BeginRun at
//     Now == LeaseUntil gets ErrRunInProgress, Claim gets ErrNotClaimable;
//   - BeginRun admits a turn on an existing thread exactly when store.Admit
//     does: a Queued thread (decided, resume due) is ErrRunInProgress;
//   - Messages and Events of an unknown or foreign thread are ErrNotFound;
//     Checkpoint and FinishRun on one are ErrNotFound, not ErrLeaseLost;
//   - BeginRun, Checkpoint and FinishRun write each stored event's Seq (and
//     empty ThreadID/RunID) back into the caller's Events slice;
//   - BeginRun records its Turn as the thread's last, with Seq the sequence
//     number of the first of its Events; Claim, Checkpoint and FinishRun
//     keep it;
//   - a new run (BeginRun, Claim) clears LastError; FinishRun keeps RunID
//     and clears the lease;
//   - FinishRun with Waiting when no decision is pending any more (all were
//     made while the run still held the thread) queues the thread instead;
//   - Checkpoint fills an interrupt's Tenant, ThreadID, empty RunID and
//     empty Agent from the run, and stores it as Pending;
//   - invalid requests (see the Validate methods) fail with store.ErrInvalid;
//     so does every id, name, filter or JSON value holding a NUL byte or
//     invalid UTF-8, on reads as on writes, and nothing is stored; free
//     text (an interrupt's description, a run's error) is stored cleaned.
//   - a revoked Studio session is refused strictly before its expiry, and
//     RevokeSession deletes every revocation that lapsed at or before now.
//   - a journal entry is returned while now is before ExpiresAt, and swept
//     once now reaches it.
//   - an interrupt's ExpiresAt is stored and read back (nil stays nil);
//     ExpiredInterrupts lists, across tenants, only pending ones whose
//     expiry is at or before now, soonest first, at most limit.
//   - a record of RecordDecided (no thread) is listed and read like any
//     decided interrupt, and deciding it again is ErrAlreadyDecided.
//   - PutResponse stores an empty Request as "{}"; an id the tenant already
//     gave a response at another thread or seq is ErrInvalid; cancelling a
//     cancelled response succeeds again; a response is on one thread, so
//     NextResponse never returns another thread's.
//   - ClaimResponseKey ignores expiry (the caller decides what an expired
//     entry means) and never touches the thread it names; SweepResponseKeys
//     deletes an expired entry whose thread does not exist.
package storetest

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
)

// T0 is the suite's fixed "now".
var T0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Run runs the conformance suite. newStore returns a fresh, empty store for
// one subtest and registers its cleanup (Close, removing files) with t. The
// subtests run in parallel, so newStore must be safe for concurrent use and
// its stores independent (a file or schema each).
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Ping", testPing},
		{"LastWrite", testLastWrite},
		{"UnknownThread", testUnknownThread},
		{"BeginRun/CreatesThread", testBeginRunCreates},
		{"BeginRun/State", testBeginRunState},
		{"BeginRun/LastTurn", testBeginRunLastTurn},
		{"BeginRun/AgentMismatch", testBeginRunAgentMismatch},
		{"BeginRun/RunInProgress", testBeginRunInProgress},
		{"BeginRun/TakesOverExpiredLease", testBeginRunTakesOver},
		{"BeginRun/ApprovalPending", testBeginRunApprovalPending},
		{"BeginRun/AdmitsAsAdmitDecides", testBeginRunAdmits},
		{"BeginRun/AfterFailed", testBeginRunAfterFailed},
		{"BeginRun/Invalid", testBeginRunInvalid},
		{"BeginRun/Options", testBeginRunOptions},
		{"BeginRun/NewHint", testBeginRunNewHint},
		{"BeginRun/ExpectContinue", testBeginRunExpectContinue},
		{"InvalidText", testInvalidText},
		{"InvalidText/FreeTextCleaned", testFreeTextCleaned},
		{"Messages/RoundTripInOrder", testMessagesRoundTrip},
		{"Checkpoint", testCheckpoint},
		{"Checkpoint/LeaseLostWritesNothing", testCheckpointLeaseLost},
		{"Checkpoint/Interrupts", testCheckpointInterrupts},
		{"FinishRun", testFinishRun},
		{"FinishRun/WaitingWithNothingPendingQueues", testFinishWaitingNothingPending},
		{"Claim", testClaim},
		{"Claim/ExpiredLease", testClaimExpired},
		{"ReleaseRun", testReleaseRun},
		{"Stale", testStale},
		{"ListThreads", testListThreads},
		{"Decide", testDecide},
		{"Decide/Reject", testDecideReject},
		{"Decide/Quorum", testDecideQuorum},
		{"Decide/QuorumRejectAfterOne", testDecideQuorumReject},
		{"Decide/QuorumEditResets", testDecideQuorumEdit},
		{"Decide/QueuesAfterLastPending", testDecideQueues},
		{"Decide/WhileRunning", testDecideWhileRunning},
		{"CancelWait", testCancelWait},
		{"CancelWait/Queued", testCancelWaitQueued},
		{"CancelWait/RunRecord", testCancelWaitRunRecord},
		{"Interrupts/Expiry", testInterruptExpiry},
		{"ListInterrupts", testListInterrupts},
		{"CallInterrupts", testCallInterrupts},
		{"CallInterrupts/InDoubtAfterApproval", testInDoubtAfterApproval},
		{"StartedMarkers", testStartedMarkers},
		{"RecordDecided", testRecordDecided},
		{"Events", testEvents},
		{"TenantIsolation", testTenantIsolation},
		{"Concurrent/Decide", testConcurrentDecide},
		{"Concurrent/QuorumApprovals", testConcurrentQuorum},
		{"Concurrent/BeginRun", testConcurrentBeginRun},
		{"Concurrent/Claim", testConcurrentClaim},
		{"Concurrent/Writers", testConcurrentWriters},
		{"StudioSessions/Revoke", testRevokeSession},
		{"StudioSessions/ExpiredRowsAreDeleted", testRevokedSessionsPurged},
		{"Journal/RoundTrip", testJournalRoundTrip},
		{"Journal/ExpiryAndSweep", testJournalSweep},
		{"Journal/TenantIsolation", testJournalTenants},
		{"Journal/Invalid", testJournalInvalid},
		{"Responses/RoundTrip", testResponsesRoundTrip},
		{"Responses/RetryReturnsExisting", testResponsesRetry},
		{"Responses/TenantIsolation", testResponsesTenants},
		{"Responses/NextAndDelete", testResponsesNextAndDelete},
		{"Responses/Cancel", testResponsesCancel},
		{"Responses/Invalid", testResponsesInvalid},
		{"Responses/ConcurrentRetries", testResponsesConcurrent},
		{"Conversations", testConversations},
		{"DeletedConversationStaysDeleted", testDeletedConversationStaysDeleted},
		{"ResponseKeys/Claim", testResponseKeysClaim},
		{"ResponseKeys/ConcurrentClaims", testResponseKeysConcurrent},
		{"ResponseKeys/Sweep", testResponseKeysSweep},
		{"Messages/GetByID", testGetMessage},
		{"Outbox/OffWritesNothing", testOutboxOff},
		{"Outbox/Notices", testOutboxNotices},
		{"Outbox/Delivery", testOutboxDelivery},
		{"Push/Configs", testPushConfigs},
		{"Push/Deliveries", testPushDeliveries},
		{"Push/QueuedTurn", testPushQueuedTurn},
		{"Concurrent/ClaimDeliveries", testConcurrentDeliveries},
		{"Runs/StepsWithCheckpoint", testRunSteps},
		{"Runs/LeaseLostWritesNoStep", testRunStepsLeaseLost},
		{"Runs/RunThread", testRunThread},
		{"Runs/StatelessAndUsage", testRunUsage},
		{"Branches/FromAnEarlierMessage", testBranchFromEarlier},
		{"Branches/FromTheLastMessageGoesOn", testBranchFromTip},
		{"Branches/UnknownMessage", testBranchUnknown},
		{"Branches/Concurrent", testBranchConcurrent},
		{"Branches/StateAtTheBranchPoint", testBranchState},
		{"Branches/TurnEnds", testTurnEnds},
		{"Runs/RunTurn", testRunTurns},
		{"Branches/FromTheStart", testBranchFromStart},
		{"Branches/StaleHead", testBeginRunStaleHead},
	}
	tests = append(tests, controlTests...)
	tests = append(tests, branchAPITests...)
	tests = append(tests, queueTests...)
	tests = append(tests, scheduleTests...)
	tests = append(tests, memoryTests...)
	tests = append(tests, ownerTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

// ---- helpers ----

func at(d time.Duration) time.Time { return T0.Add(d) }

// begin starts run on a thread at now with a one-minute lease.
func begin(t *testing.T, s store.Store, tenant, thread, agent, run string, now time.Time, input ...message.Message) *store.Thread {
	t.Helper()
	th, err := s.BeginRun(t.Context(), store.BeginRun{Tenant: tenant, ThreadID: thread, Agent: agent, RunID: run,
		Owner: "owner-" + run, Now: now, LeaseUntil: now.Add(time.Minute), Input: input})
	if err != nil {
		t.Fatalf("BeginRun %s/%s %s: %v", tenant, thread, run, err)
	}
	return &th.Thread
}

func finish(t *testing.T, s store.Store, tenant, thread, run string, status store.ThreadStatus, now time.Time) {
	t.Helper()
	if err := s.FinishRun(t.Context(), store.FinishRun{Tenant: tenant, ThreadID: thread, RunID: run,
		Status: status, Now: now}); err != nil {
		t.Fatalf("FinishRun %s/%s %s %s: %v", tenant, thread, run, status, err)
	}
}

func checkpoint(t *testing.T, s store.Store, c store.Checkpoint) {
	t.Helper()
	if err := s.Checkpoint(t.Context(), c); err != nil {
		t.Fatalf("Checkpoint %s/%s %s: %v", c.Tenant, c.ThreadID, c.RunID, err)
	}
}

// interrupt is a minimal pending decision on a tool call.
func interrupt(id, callID string, created time.Time) store.Interrupt {
	return store.Interrupt{ID: id, ToolCallID: callID, Tool: "refund", Args: json.RawMessage(`{"orderId":"A1"}`),
		AllowedDecisions: []string{"approve", "reject"}, CreatedAt: created}
}

// waiting runs a thread into Waiting on the given interrupts; the run
// starts at now and finishes a second later.
func waiting(t *testing.T, s store.Store, tenant, thread, agent, run string, now time.Time, ins ...store.Interrupt) {
	t.Helper()
	begin(t, s, tenant, thread, agent, run, now, userMsg("m-"+run, "refund A1"))
	checkpoint(t, s, store.Checkpoint{Tenant: tenant, ThreadID: thread, RunID: run, Interrupts: ins})
	finish(t, s, tenant, thread, run, store.Waiting, now.Add(time.Second))
}

func decide(t *testing.T, s store.Store, tenant, id string, approved bool, now time.Time) store.DecideResult {
	t.Helper()
	res, err := s.Decide(t.Context(), tenant, id, store.Decision{Approved: approved, Via: "api", By: tenant + "/key", At: now})
	if err != nil {
		t.Fatalf("Decide %s/%s: %v", tenant, id, err)
	}
	return res
}

func userMsg(id, text string) message.Message {
	return message.Message{ID: id, Role: message.User, Content: text}
}

func getThread(t *testing.T, s store.Store, tenant, id string) *store.Thread {
	t.Helper()
	th, err := s.GetThread(t.Context(), tenant, id)
	if err != nil {
		t.Fatalf("GetThread %s/%s: %v", tenant, id, err)
	}
	return th
}

func messages(t *testing.T, s store.Store, tenant, id string) []message.Message {
	t.Helper()
	ms, err := s.Messages(t.Context(), tenant, id)
	if err != nil {
		t.Fatalf("Messages %s/%s: %v", tenant, id, err)
	}
	return ms
}

func events(t *testing.T, s store.Store, tenant, id string, after int64, limit int) []event.Event {
	t.Helper()
	es, err := s.Events(t.Context(), tenant, id, after, limit)
	if err != nil {
		t.Fatalf("Events %s/%s: %v", tenant, id, err)
	}
	return es
}

func getInterrupt(t *testing.T, s store.Store, tenant, id string) *store.Interrupt {
	t.Helper()
	in, err := s.GetInterrupt(t.Context(), tenant, id)
	if err != nil {
		t.Fatalf("GetInterrupt %s/%s: %v", tenant, id, err)
	}
	return in
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

// sameJSON compares two values by their JSON meaning.
func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	g, w := normJSON(t, got), normJSON(t, want)
	if !reflect.DeepEqual(g, w) {
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		t.Fatalf("%s:\n got  %s\n want %s", what, gb, wb)
	}
}

func normJSON(t *testing.T, v any) any {
	t.Helper()
	var b []byte
	switch x := v.(type) {
	case json.RawMessage:
		b = x
	case string:
		b = []byte(x)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatalf("marshal %T: %v", v, err)
		}
	}
	if len(b) == 0 {
		return nil
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	return out
}

func sameTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func threadIDs(ts []store.Thread) []string {
	out := make([]string, len(ts))
	for i, th := range ts {
		out[i] = th.Tenant + "/" + th.ID
	}
	return out
}

func interruptIDs(ins []store.Interrupt) []string {
	out := make([]string, len(ins))
	for i, in := range ins {
		out[i] = in.ID
	}
	return out
}

func sameStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
}

// sameThread compares every field of two threads.
func sameThread(t *testing.T, what string, got, want *store.Thread) {
	t.Helper()
	if got.Tenant != want.Tenant || got.ID != want.ID || got.Agent != want.Agent || got.Status != want.Status ||
		got.RunID != want.RunID || got.LastError != want.LastError || got.LeaseOwner != want.LeaseOwner {
		t.Fatalf("%s: got %+v, want %+v", what, got, want)
	}
	sameJSON(t, what+" state", got.State, want.State)
	sameTime(t, what+" LeaseUntil", got.LeaseUntil, want.LeaseUntil)
	sameTime(t, what+" CreatedAt", got.CreatedAt, want.CreatedAt)
	sameTime(t, what+" UpdatedAt", got.UpdatedAt, want.UpdatedAt)
}

// ---- tests ----

func testPing(t *testing.T, s store.Store) {
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

// testLastWrite: a committed write is the store's latest write, a probe
// write commits, and a write refused for its content (a lost lease) says
// nothing of the database, so it leaves LastWrite as it was.
func testLastWrite(t *testing.T, s store.Store) {
	ctx := t.Context()
	begin(t, s, "a", "t", "x", "r1", T0, userMsg("m1", "hi"))
	st := s.LastWrite()
	if st.At.IsZero() || st.Err != nil {
		t.Fatalf("after a committed write: LastWrite %+v", st)
	}
	if err := s.ProbeWrite(ctx); err != nil {
		t.Fatalf("ProbeWrite: %v", err)
	}
	probed := s.LastWrite()
	if probed.Err != nil || probed.At.Before(st.At) {
		t.Fatalf("after a probe: LastWrite %+v, before it %+v", probed, st)
	}
	if err := s.ProbeWrite(ctx); err != nil {
		t.Fatalf("a second ProbeWrite (the row exists): %v", err)
	}
	probed = s.LastWrite()
	err := s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r0", LeaseUntil: at(time.Hour),
		Messages: []message.Message{{ID: "m-r0", Role: message.Assistant, Content: "x"}}})
	wantErr(t, "Checkpoint by another run id", err, store.ErrLeaseLost)
	if got := s.LastWrite(); !got.At.Equal(probed.At) || got.Err != nil {
		t.Fatalf("a refused write changed LastWrite: %+v, was %+v", got, probed)
	}
}

func testUnknownThread(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.GetThread(ctx, "a", "nope")
	wantErr(t, "GetThread", err, store.ErrNotFound)
	_, err = s.Messages(ctx, "a", "nope")
	wantErr(t, "Messages", err, store.ErrNotFound)
	_, err = s.Events(ctx, "a", "nope", 0, 0)
	wantErr(t, "Events", err, store.ErrNotFound)
	_, err = s.Claim(ctx, store.Claim{Tenant: "a", ThreadID: "nope", RunID: "r", Now: T0, LeaseUntil: at(time.Minute)})
	wantErr(t, "Claim", err, store.ErrNotFound)
	err = s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: "nope", RunID: "r", Messages: []message.Message{userMsg("m", "x")}})
	wantErr(t, "Checkpoint", err, store.ErrNotFound)
	err = s.FinishRun(ctx, store.FinishRun{Tenant: "a", ThreadID: "nope", RunID: "r", Status: store.Idle, Now: T0})
	wantErr(t, "FinishRun", err, store.ErrNotFound)
	_, err = s.GetInterrupt(ctx, "a", "int_nope")
	wantErr(t, "GetInterrupt", err, store.ErrNotFound)
	_, err = s.Decide(ctx, "a", "int_nope", store.Decision{Approved: true, At: T0})
	wantErr(t, "Decide", err, store.ErrNotFound)
	if ts, err := s.ListThreads(ctx, "a", store.ThreadFilter{}); err != nil || len(ts) != 0 {
		t.Fatalf("ListThreads on an empty store: %v, %v", ts, err)
	}
	if ins, err := s.ListInterrupts(ctx, "a", store.InterruptFilter{}); err != nil || len(ins) != 0 {
		t.Fatalf("ListInterrupts on an empty store: %v, %v", ins, err)
	}
	if ts, err := s.Stale(ctx, T0, 10); err != nil || len(ts) != 0 {
		t.Fatalf("Stale on an empty store: %v, %v", ts, err)
	}
}

func testBeginRunCreates(t *testing.T, s store.Store) {
	in := []message.Message{{ID: "m1", Role: message.System, Content: "be brief"}, userMsg("m2", "hello")}
	th, err := s.BeginRun(t.Context(), store.BeginRun{Tenant: "acme", ThreadID: "t1", Agent: "refunds", RunID: "r1",
		Owner: "node-1", Now: T0, LeaseUntil: at(time.Minute), Input: in})
	if err != nil {
		t.Fatalf("BeginRun: %v", err)
	}
	want := &store.Thread{Tenant: "acme", ID: "t1", Agent: "refunds", Status: store.Running, RunID: "r1",
		State: json.RawMessage(`{}`), LeaseOwner: "node-1", LeaseUntil: at(time.Minute), CreatedAt: T0, UpdatedAt: T0}
	sameThread(t, "BeginRun result", &th.Thread, want)
	sameJSON(t, "BeginRun's messages of a new thread", th.Messages, in)
	sameThread(t, "GetThread", getThread(t, s, "acme", "t1"), want)
	sameJSON(t, "messages", messages(t, s, "acme", "t1"), in)
	if es := events(t, s, "acme", "t1", 0, 0); len(es) != 0 {
		t.Fatalf("events of a run that stored none: %+v", es)
	}
}

func testBeginRunState(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: "t", Agent: "x", RunID: "r1", Now: T0,
		LeaseUntil: at(time.Minute), State: json.RawMessage(`{"draft":"v1","todos":[{"content":"a","done":false}]}`)})
	if err != nil {
		t.Fatalf("BeginRun: %v", err)
	}
	sameJSON(t, "state on create", getThread(t, s, "a", "t").State, `{"draft":"v1","todos":[{"content":"a","done":false}]}`)
	finish(t, s, "a", "t", "r1", store.Idle, at(time.Second))

	begin(t, s, "a", "t", "x", "r2", at(2*time.Second))
	sameJSON(t, "state after a run without State", getThread(t, s, "a", "t").State,
		`{"draft":"v1","todos":[{"content":"a","done":false}]}`)
	finish(t, s, "a", "t", "r2", store.Idle, at(3*time.Second))

	th, err := s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: "t", Agent: "x", RunID: "r3", Now: at(4 * time.Second),
		LeaseUntil: at(time.Minute), State: json.RawMessage(`{"files":{"a.txt":"hi"}}`)})
	if err != nil {
		t.Fatalf("BeginRun with State: %v", err)
	}
	sameJSON(t, "replaced state (returned)", th.State, `{"files":{"a.txt":"hi"}}`)
	sameJSON(t, "replaced state (stored)", getThread(t, s, "a", "t").State, `{"files":{"a.txt":"hi"}}`)
}

func testBeginRunLastTurn(t *testing.T, s store.Store) {
	ctx := t.Context()
	msgs := int64(0)
	start := func(run string, now time.Time, turn store.Turn) {
		t.Helper()
		evs := []event.Event{{Type: event.RunStarted}}
		_, err := s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: "t", Agent: "x", RunID: run, Now: now,
			LeaseUntil: now.Add(time.Minute), Events: evs, Turn: turn, Input: []message.Message{userMsg("m-"+run, "hi")}})
		if err != nil {
			t.Fatalf("BeginRun %s: %v", run, err)
		}
		msgs++ // the turn's input is the thread's next message
		if got := getThread(t, s, "a", "t").Turn; got != (store.Turn{Seq: evs[0].Seq, Key: turn.Key, Digest: turn.Digest, FirstMessage: msgs}) {
			t.Fatalf("turn after BeginRun %s: %+v (its RunStarted has seq %d, its input is message %d)", run, got, evs[0].Seq, msgs)
		}
	}
	start("r1", T0, store.Turn{Key: "k1", Digest: "d1"})
	want := getThread(t, s, "a", "t").Turn
	if want.Seq != 1 {
		t.Fatalf("first turn of a thread: %+v", want)
	}
	if err := s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r1",
		Events: []event.Event{{Type: event.TextEnd, Content: "answer"}}}); err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	finish(t, s, "a", "t", "r1", store.Idle, at(time.Second))
	if got := getThread(t, s, "a", "t").Turn; got != want {
		t.Fatalf("turn after Checkpoint and FinishRun: %+v, want %+v", got, want)
	}
	start("r2", at(2*time.Second), store.Turn{Digest: "d2"})
	if got := getThread(t, s, "a", "t").Turn; got.Seq != 3 {
		t.Fatalf("second turn begins after the first's two events: %+v", got)
	}
}

func testBeginRunAgentMismatch(t *testing.T, s store.Store) {
	begin(t, s, "a", "t", "refunds", "r1", T0, userMsg("m1", "hi"))
	finish(t, s, "a", "t", "r1", store.Idle, at(time.Second))
	_, err := s.BeginRun(t.Context(), store.BeginRun{Tenant: "a", ThreadID: "t", Agent: "support", RunID: "r2",
		Now: at(2 * time.Second), LeaseUntil: at(time.Hour), Input: []message.Message{userMsg("m2", "other")}})
	wantErr(t, "BeginRun with another agent", err, store.ErrAgentMismatch)
	th := getThread(t, s, "a", "t")
	if th.Agent != "refunds" || th.Status != store.Idle || th.RunID != "r1" {
		t.Fatalf("thread changed by a refused BeginRun: %+v", th)
	}
	if ms := messages(t, s, "a", "t"); len(ms) != 1 {
		t.Fatalf("refused BeginRun appended input: %+v", ms)
	}
}

func testBeginRunInProgress(t *testing.T, s store.Store) {
	begin(t, s, "a", "t", "x", "r1", T0, userMsg("m1", "hi")) // lease until T0+1m
	for _, now := range []time.Time{at(30 * time.Second), at(time.Minute)} {
		_, err := s.BeginRun(t.Context(), store.BeginRun{Tenant: "a", ThreadID: "t", Agent: "x", RunID: "r2",
			Owner: "other", Now: now, LeaseUntil: now.Add(time.Minute), Input: []message.Message{userMsg("m2", "again")},
			State: json.RawMessage(`{"k":1}`), Events: []event.Event{{Type: event.RunStarted}}})
		wantErr(t, fmt.Sprintf("BeginRun at %v under a lease until %v", now, at(time.Minute)), err, store.ErrRunInProgress)
		// The refusal says how long the lease still holds (a 409's retry-after).
		var rip *store.RunInProgressError
		if !errors.As(err, &rip) || rip.Wait != at(time.Minute).Sub(now) {
			t.Fatalf("BeginRun at %v: want a *RunInProgressError waiting %v, got %#v", now, at(time.Minute).Sub(now), err)
		}
	}
	th := getThread(t, s, "a", "t")
	if th.RunID != "r1" || th.LeaseOwner != "owner-r1" || th.Status != store.Running {
		t.Fatalf("refused BeginRun changed the thread: %+v", th)
	}
	sameJSON(t, "state after refused BeginRun", th.State, `{}`)
	if ms := messages(t, s, "a", "t"); len(ms) != 1 {
		t.Fatalf("refused BeginRun appended input: %+v", ms)
	}
	if es := events(t, s, "a", "t", 0, 0); len(es) != 0 {
		t.Fatalf("refused BeginRun appended events: %+v", es)
	}
}

func testBeginRunTakesOver(t *testing.T, s store.Store) {
	ctx := t.Context()
	begin(t, s, "a", "t", "x", "r1", T0, userMsg("m1", "hi")) // lease until T0+1m
	th := begin(t, s, "a", "t", "x", "r2", at(time.Minute+time.Microsecond), userMsg("m2", "still there?"))
	if th.RunID != "r2" || th.LeaseOwner != "owner-r2" || th.Status != store.Running {
		t.Fatalf("takeover: %+v", th)
	}
	sameTime(t, "takeover lease", th.LeaseUntil, at(2*time.Minute+time.Microsecond))
	err := s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r1",
		Messages: []message.Message{{ID: "late", Role: message.Assistant, Content: "late"}}})
	wantErr(t, "Checkpoint of the run that lost the lease", err, store.ErrLeaseLost)
	err = s.FinishRun(ctx, store.FinishRun{Tenant: "a", ThreadID: "t", RunID: "r1", Status: store.Idle, Now: at(2 * time.Minute)})
	wantErr(t, "FinishRun of the run that lost the lease", err, store.ErrLeaseLost)
	sameStrings(t, "messages", msgIDs(messages(t, s, "a", "t")), []string{"m1", "m2"})
	if th := getThread(t, s, "a", "t"); th.Status != store.Running || th.RunID != "r2" {
		t.Fatalf("the lost run changed the thread: %+v", th)
	}
}

func msgIDs(ms []message.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func testBeginRunApprovalPending(t *testing.T, s store.Store) {
	waiting(t, s, "a", "t", "x", "r1", T0, interrupt("int_1", "call_1", T0))
	try := func(what string, want error) {
		t.Helper()
		_, err := s.BeginRun(t.Context(), store.BeginRun{Tenant: "a", ThreadID: "t", Agent: "x", RunID: "r2",
			Now: at(time.Hour), LeaseUntil: at(2 * time.Hour), Input: []message.Message{userMsg("m2", "hurry")}})
		wantErr(t, what, err, want)
		if ms := messages(t, s, "a", "t"); len(ms) != 1 {
			t.Fatalf("%s: refused BeginRun appended input: %+v", what, ms)
		}
	}
	try("BeginRun on a Waiting thread", store.ErrApprovalPending)
	if res := decide(t, s, "a", "int_1", true, at(2*time.Second)); !res.Queued {
		t.Fatalf("the only decision did not queue the thread")
	}
	// Every decision is made and the resume is about to run: a run is in
	// progress as far as a client can tell (store.Admit).
	try("BeginRun on a Queued thread", store.ErrRunInProgress)
}

// testBeginRunAdmits pins that BeginRun refuses or accepts a turn exactly
// as store.Admit decides for the thread as stored, in every state a thread
// can be in.
func testBeginRunAdmits(t *testing.T, s store.Store) {
	ctx := t.Context()
	// Each thread is brought into one state at T0..T0+2s; the turn comes at now.
	begin(t, s, "a", "idle", "x", "r1", T0)
	finish(t, s, "a", "idle", "r1", store.Idle, at(time.Second))
	begin(t, s, "a", "failed", "x", "r1", T0)
	finish(t, s, "a", "failed", "r1", store.Failed, at(time.Second))
	waiting(t, s, "a", "waiting", "x", "r1", T0, interrupt("int_w", "call_w", T0))
	waiting(t, s, "a", "queued", "x", "r1", T0, interrupt("int_q", "call_q", T0))
	decide(t, s, "a", "int_q", true, at(2*time.Second))
	begin(t, s, "a", "held", "x", "r1", at(30*time.Second))  // lease until T0+90s
	begin(t, s, "a", "edge", "x", "r1", T0)                  // lease until T0+60s, exactly now
	begin(t, s, "a", "expired", "x", "r1", at(-time.Minute)) // lease until T0
	begin(t, s, "a", "other", "y", "r1", T0)
	finish(t, s, "a", "other", "r1", store.Idle, at(time.Second))
	now := at(time.Minute)
	for _, tc := range []struct {
		thread string
		want   error // nil: admitted
	}{
		{"idle", nil}, {"failed", nil}, {"waiting", store.ErrApprovalPending}, {"queued", store.ErrRunInProgress},
		{"held", store.ErrRunInProgress}, {"edge", store.ErrRunInProgress}, {"expired", nil}, {"other", store.ErrAgentMismatch},
	} {
		th := getThread(t, s, "a", tc.thread)
		admit := store.Admit(th, "x", now)
		_, err := s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: tc.thread, Agent: "x", RunID: "r2", Owner: "o2",
			Now: now, LeaseUntil: now.Add(time.Minute), Input: []message.Message{userMsg("m-"+tc.thread, "next")}})
		for _, got := range []struct {
			who string
			err error
		}{{"store.Admit", admit}, {"BeginRun", err}} {
			if tc.want == nil && got.err != nil {
				t.Errorf("%s on the %s thread (%s): %v, want the turn admitted", got.who, tc.thread, th.Status, got.err)
			}
			if tc.want != nil && !errors.Is(got.err, tc.want) {
				t.Errorf("%s on the %s thread (%s): %v, want %v", got.who, tc.thread, th.Status, got.err, tc.want)
			}
		}
	}
}

func testBeginRunAfterFailed(t *testing.T, s store.Store) {
	begin(t, s, "a", "t", "x", "r1", T0)
	if err := s.FinishRun(t.Context(), store.FinishRun{Tenant: "a", ThreadID: "t", RunID: "r1", Status: store.Failed,
		Error: "model unavailable", Now: at(time.Second)}); err != nil {
		t.Fatalf("FinishRun Failed: %v", err)
	}
	th := getThread(t, s, "a", "t")
	if th.Status != store.Failed || th.LastError != "model unavailable" || th.LeaseOwner != "" || !th.LeaseUntil.IsZero() {
		t.Fatalf("failed thread: %+v", th)
	}
	th = begin(t, s, "a", "t", "x", "r2", at(2*time.Second))
	if th.Status != store.Running || th.LastError != "" || th.RunID != "r2" {
		t.Fatalf("new run after a failure: %+v", th)
	}
	sameTime(t, "CreatedAt kept", th.CreatedAt, T0)
	sameTime(t, "UpdatedAt", th.UpdatedAt, at(2*time.Second))
}

func testBeginRunInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	ok := store.BeginRun{Tenant: "a", ThreadID: "t", Agent: "x", RunID: "r", Now: T0, LeaseUntil: at(time.Minute)}
	bad := map[string]func(b *store.BeginRun){
		"no tenant":        func(b *store.BeginRun) { b.Tenant = "" },
		"no thread":        func(b *store.BeginRun) { b.ThreadID = "" },
		"no agent":         func(b *store.BeginRun) { b.Agent = "" },
		"no run":           func(b *store.BeginRun) { b.RunID = "" },
		"no lease":         func(b *store.BeginRun) { b.LeaseUntil = time.Time{} },
		"state not object": func(b *store.BeginRun) { b.State = json.RawMessage(`[1]`) },
		"state not JSON":   func(b *store.BeginRun) { b.State = json.RawMessage(`{"a":`) },
	}
	for name, mutate := range bad {
		b := ok
		mutate(&b)
		_, err := s.BeginRun(ctx, b)
		wantErr(t, "BeginRun "+name, err, store.ErrInvalid)
	}
	_, err := s.GetThread(ctx, "a", "t")
	wantErr(t, "thread after refused BeginRuns", err, store.ErrNotFound)
}

// badTexts are values no driver stores: a NUL byte, invalid UTF-8.
var badTexts = map[string]string{"NUL": "t\x00x", "invalid UTF-8": "t\xffx"}

func testInvalidText(t *testing.T, s store.Store) {
	ctx := t.Context()
	// A thread to read and write through, with one pending decision.
	waiting(t, s, "a", "t", "x", "r1", T0, interrupt("in1", "call_1", T0))
	begin(t, s, "a", "t2", "x", "r2", T0)
	for kind, v := range badTexts {
		raw := json.RawMessage(`{"k":"` + v[1:2] + `"}`) // the bad byte inside a JSON string
		if kind == "NUL" {
			raw = nil // not JSON at all; covered by the not-JSON cases
		}
		ok := store.BeginRun{Tenant: "a", ThreadID: "n", Agent: "x", RunID: "r", Now: T0, LeaseUntil: at(time.Minute)}
		begins := map[string]func(b *store.BeginRun){
			"tenant": func(b *store.BeginRun) { b.Tenant = v },
			"thread": func(b *store.BeginRun) { b.ThreadID = v },
			"agent":  func(b *store.BeginRun) { b.Agent = v },
			"run":    func(b *store.BeginRun) { b.RunID = v },
			"owner":  func(b *store.BeginRun) { b.Owner = v },
		}
		if raw != nil {
			begins["state"] = func(b *store.BeginRun) { b.State = raw }
			begins["options"] = func(b *store.BeginRun) { b.Options = raw }
		}
		for name, mutate := range begins {
			b := ok
			mutate(&b)
			_, err := s.BeginRun(ctx, b)
			wantErr(t, "BeginRun "+kind+" "+name, err, store.ErrInvalid)
		}
		_, err := s.GetThread(ctx, "a", v)
		wantErr(t, "GetThread "+kind, err, store.ErrInvalid)
		_, err = s.GetThread(ctx, v, "t")
		wantErr(t, "GetThread tenant "+kind, err, store.ErrInvalid)
		_, err = s.Messages(ctx, "a", v)
		wantErr(t, "Messages "+kind, err, store.ErrInvalid)
		_, err = s.Events(ctx, "a", v, 0, 0)
		wantErr(t, "Events "+kind, err, store.ErrInvalid)
		_, err = s.ListThreads(ctx, "a", store.ThreadFilter{Agent: v})
		wantErr(t, "ListThreads agent "+kind, err, store.ErrInvalid)
		_, err = s.ListThreads(ctx, "a", store.ThreadFilter{Status: store.ThreadStatus(v)})
		wantErr(t, "ListThreads status "+kind, err, store.ErrInvalid)
		_, err = s.GetInterrupt(ctx, "a", v)
		wantErr(t, "GetInterrupt "+kind, err, store.ErrInvalid)
		_, err = s.ListInterrupts(ctx, "a", store.InterruptFilter{ThreadID: v})
		wantErr(t, "ListInterrupts thread "+kind, err, store.ErrInvalid)
		_, err = s.ListInterrupts(ctx, "a", store.InterruptFilter{Agent: v})
		wantErr(t, "ListInterrupts agent "+kind, err, store.ErrInvalid)
		_, err = s.ListInterrupts(ctx, "a", store.InterruptFilter{Status: store.InterruptStatus(v)})
		wantErr(t, "ListInterrupts status "+kind, err, store.ErrInvalid)
		_, err = s.CallInterrupts(ctx, "a", "t", []string{"call_1", v})
		wantErr(t, "CallInterrupts "+kind, err, store.ErrInvalid)
		_, err = s.Decide(ctx, "a", v, store.Decision{Approved: true, Via: "api", By: "a"})
		wantErr(t, "Decide "+kind, err, store.ErrInvalid)
		_, err = s.Claim(ctx, store.Claim{Tenant: "a", ThreadID: v, RunID: "r3", Now: T0, LeaseUntil: at(time.Minute)})
		wantErr(t, "Claim "+kind, err, store.ErrInvalid)
		err = s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: "t2", RunID: v})
		wantErr(t, "Checkpoint run "+kind, err, store.ErrInvalid)
		in := interrupt("in2", "call_2", T0)
		in.Tool = v
		err = s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: "t2", RunID: "r2", Interrupts: []store.Interrupt{in}})
		wantErr(t, "Checkpoint interrupt tool "+kind, err, store.ErrInvalid)
		err = s.FinishRun(ctx, store.FinishRun{Tenant: "a", ThreadID: "t2", RunID: v, Status: store.Idle, Now: T0})
		wantErr(t, "FinishRun run "+kind, err, store.ErrInvalid)
		if raw != nil {
			in := interrupt("in3", "call_3", T0)
			in.Args = raw
			err = s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: "t2", RunID: "r2", Interrupts: []store.Interrupt{in}})
			wantErr(t, "Checkpoint interrupt args "+kind, err, store.ErrInvalid)
			err = s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: "t2", RunID: "r2", State: raw})
			wantErr(t, "Checkpoint state "+kind, err, store.ErrInvalid)
			_, err = s.Decide(ctx, "a", "in1", store.Decision{Approved: true, EditedArgs: raw, Via: "api", By: "a"})
			wantErr(t, "Decide edited args "+kind, err, store.ErrInvalid)
		}
	}
	// Nothing was stored or changed.
	ths, err := s.ListThreads(ctx, "a", store.ThreadFilter{})
	if err != nil || len(ths) != 2 {
		t.Fatalf("threads after refused writes: %v %v", ths, err)
	}
	in, err := s.GetInterrupt(ctx, "a", "in1")
	if err != nil || in.Status != store.Pending {
		t.Fatalf("decision after refused writes: %+v %v", in, err)
	}
	if its, err := s.CallInterrupts(ctx, "a", "t2", []string{"call_2", "call_3"}); err != nil || len(its) != 0 {
		t.Fatalf("interrupts after refused checkpoints: %v %v", its, err)
	}
}

func testFreeTextCleaned(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := interrupt("in1", "call_1", T0)
	in.Description = "Refund\x00 \xff order"
	waiting(t, s, "a", "t", "x", "r1", T0, in)
	got, err := s.GetInterrupt(ctx, "a", "in1")
	if err != nil || got.Description != "Refund \uFFFD order" {
		t.Fatalf("description: %q %v", got.Description, err)
	}
	begin(t, s, "a", "t2", "x", "r2", T0)
	if err := s.FinishRun(ctx, store.FinishRun{Tenant: "a", ThreadID: "t2", RunID: "r2", Status: store.Failed,
		Error: "upstream said \x00\xfe", Now: at(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if th, err := s.GetThread(ctx, "a", "t2"); err != nil || th.LastError != "upstream said \uFFFD" {
		t.Fatalf("last error: %q %v", th.LastError, err)
	}
}

func testMessagesRoundTrip(t *testing.T, s store.Store) {
	all := []message.Message{
		{ID: "m1", Role: message.System, Content: "You handle refunds."},
		{ID: "m2", Role: message.User, Content: "what is in this picture?", Parts: []message.Part{
			{Type: "image", MediaType: "image/png", Data: "iVBORw0KGgo="},
			{Type: "image", URL: "https://example.com/cat.jpg"},
		}},
		{ID: "m3", Role: message.Assistant, Content: "Let me check.", ToolCalls: []message.ToolCall{
			{ID: "call_1", Name: "refund", Arguments: `{"orderId":"A1", "amount": 12.5}`},
			{ID: "call_2", Name: "confirm_dialog", Arguments: "", Client: true},
		}, Reasoning: []message.Reasoning{ // shown again after a reload, sent back where the provider needs it
			{Type: message.ReasoningText, Text: "The order first, then the refund. ✓"},
			{Type: message.ReasoningThinking, Text: "Signed thought.", Signature: "c2ln", AfterCalls: 1},
			{Type: message.ReasoningRedacted, Data: "ZW5jcnlwdGVk", AfterCalls: 2},
		}},
		{ID: "m4", Role: message.Tool, ToolCallID: "call_1", ToolName: "refund", Content: `{"refunded":12.5}`},
		{ID: "m5", Role: message.Tool, ToolCallID: "call_2", ToolName: "confirm_dialog", Content: "rejected: no", IsError: true},
		{ID: "m6", Role: message.Assistant, Content: "Found it: ünïcödé ✓ \"quoted\" <tag> & \n newline", Subagent: "researcher"},
		{ID: "m7", Role: message.User, Content: "thanks"},
	}
	begin(t, s, "a", "t", "x", "r1", T0, all[0], all[1])
	checkpoint(t, s, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r1", Messages: all[2:4]})
	checkpoint(t, s, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r1", Messages: all[4:5]})
	checkpoint(t, s, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r1", Messages: all[5:6]})
	finish(t, s, "a", "t", "r1", store.Idle, at(time.Second))
	b, err := s.BeginRun(t.Context(), store.BeginRun{Tenant: "a", ThreadID: "t", Agent: "x", RunID: "r2", Owner: "o",
		Now: at(2 * time.Second), LeaseUntil: at(time.Minute), Input: all[6:], Known: 4})
	if err != nil {
		t.Fatalf("BeginRun r2: %v", err)
	}
	// BeginRun returns the conversation after the Known messages as read
	// under its lease: the stored ones and its own input, as Messages
	// reads them, each with its sequence number in the thread.
	for i := range all {
		all[i].Seq = int64(i + 1)
	}
	if !reflect.DeepEqual(b.Messages, all[4:]) {
		gb, _ := json.MarshalIndent(b.Messages, "", " ")
		t.Fatalf("BeginRun on an existing thread (4 messages known) returned other messages than the stored m5..m7:\n%s", gb)
	}

	got := messages(t, s, "a", "t")
	if !reflect.DeepEqual(got, all) {
		gb, _ := json.MarshalIndent(got, "", " ")
		t.Fatalf("messages did not round-trip in order:\n%s", gb)
	}
	// Arguments are text as the model wrote it, spacing included.
	if got[2].ToolCalls[0].Arguments != `{"orderId":"A1", "amount": 12.5}` {
		t.Fatalf("tool call arguments changed: %q", got[2].ToolCalls[0].Arguments)
	}
}

func testCheckpoint(t *testing.T, s store.Store) {
	ctx := t.Context()
	begin(t, s, "a", "t", "x", "r1", T0)

	checkpoint(t, s, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r1",
		State: json.RawMessage(`{"todos":[{"content":"a","status":"pending","done":false}]}`)})
	sameJSON(t, "state after checkpoint", getThread(t, s, "a", "t").State,
		`{"todos":[{"content":"a","status":"pending","done":false}]}`)

	// No State keeps it; LeaseUntil renews the lease.
	checkpoint(t, s, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r1", LeaseUntil: at(5 * time.Minute)})
	th := getThread(t, s, "a", "t")
	sameJSON(t, "state kept", th.State, `{"todos":[{"content":"a","status":"pending","done":false}]}`)
	sameTime(t, "renewed lease", th.LeaseUntil, at(5*time.Minute))
	if th.LeaseOwner != "owner-r1" || th.Status != store.Running {
		t.Fatalf("checkpoint changed the owner or status: %+v", th)
	}
	// A zero LeaseUntil leaves the lease alone.
	checkpoint(t, s, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r1", State: json.RawMessage(`{}`)})
	th = getThread(t, s, "a", "t")
	sameTime(t, "lease kept", th.LeaseUntil, at(5*time.Minute))
	sameJSON(t, "state replaced by empty", th.State, `{}`)

	// The renewed lease protects the run beyond its first minute.
	_, err := s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: "t", Agent: "x", RunID: "r2", Now: at(2 * time.Minute),
		LeaseUntil: at(3 * time.Minute)})
	wantErr(t, "BeginRun under a renewed lease", err, store.ErrRunInProgress)

	err = s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r1", State: json.RawMessage(`"str"`)})
	wantErr(t, "Checkpoint with non-object state", err, store.ErrInvalid)
	err = s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r1",
		Interrupts: []store.Interrupt{interrupt("", "call", T0)}})
	wantErr(t, "Checkpoint with an interrupt without id", err, store.ErrInvalid)
}

func testCheckpointLeaseLost(t *testing.T, s store.Store) {
	ctx := t.Context()
	begin(t, s, "a", "t", "x", "r1", T0, userMsg("m1", "hi"))
	full := func(run string) store.Checkpoint {
		return store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: run,
			Messages:   []message.Message{{ID: "m-" + run, Role: message.Assistant, Content: "x"}},
			State:      json.RawMessage(`{"from":"` + run + `"}`),
			Interrupts: []store.Interrupt{interrupt("int_"+run, "call_"+run, T0)},
			Events:     []event.Event{{Type: event.StepStarted}},
			LeaseUntil: at(time.Hour)}
	}
	wantErr(t, "Checkpoint by another run id", s.Checkpoint(ctx, full("r0")), store.ErrLeaseLost)
	finish(t, s, "a", "t", "r1", store.Idle, at(time.Second))
	wantErr(t, "Checkpoint after FinishRun", s.Checkpoint(ctx, full("r1")), store.ErrLeaseLost)

	th := getThread(t, s, "a", "t")
	sameJSON(t, "state", th.State, `{}`)
	if th.Status != store.Idle || !th.LeaseUntil.IsZero() {
		t.Fatalf("refused checkpoints changed the thread: %+v", th)
	}
	sameStrings(t, "messages", msgIDs(messages(t, s, "a", "t")), []string{"m1"})
	if es := events(t, s, "a", "t", 0, 0); len(es) != 0 {
		t.Fatalf("refused checkpoints stored events: %+v", es)
	}
	for _, id := range []string{"int_r0", "int_r1"} {
		_, err := s.GetInterrupt(ctx, "a", id)
		wantErr(t, "interrupt of a refused checkpoint", err, store.ErrNotFound)
	}
}

func testCheckpointInterrupts(t *testing.T, s store.Store) {
	ctx := t.Context()
	begin(t, s, "acme", "t", "refunds", "r1", T0)
	full := store.Interrupt{ID: "int_full", ToolCallID: "call_1", Tool: "refund",
		Args:             json.RawMessage(`{"orderId":"A1","amount":12.5}`),
		Description:      "Refund order A1 for 12.5",
		AllowedDecisions: []string{"approve", "reject", "edit"},
		ResponseSchema:   json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"}}}`),
		Subagent:         "researcher", CreatedAt: at(time.Second)}
	minimal := store.Interrupt{ID: "int_min", Agent: "refunds-v2", ToolCallID: "call_2", Tool: "delete",
		Args: json.RawMessage(`{}`), AllowedDecisions: []string{"approve"}, CreatedAt: at(2 * time.Second)}
	checkpoint(t, s, store.Checkpoint{Tenant: "acme", ThreadID: "t", RunID: "r1", Interrupts: []store.Interrupt{full, minimal}})

	got := getInterrupt(t, s, "acme", "int_full")
	want := full
	want.Tenant, want.ThreadID, want.RunID, want.Agent, want.Status = "acme", "t", "r1", "refunds", store.Pending
	sameInterrupt(t, "full interrupt", got, &want)

	got = getInterrupt(t, s, "acme", "int_min")
	want = minimal
	want.Tenant, want.ThreadID, want.RunID, want.Status = "acme", "t", "r1", store.Pending
	sameInterrupt(t, "minimal interrupt", got, &want)
	if got.Description != "" || got.Subagent != "" || got.Decision != nil {
		t.Fatalf("minimal interrupt grew fields: %+v", got)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	if _, ok := fields["description"]; ok {
		t.Fatalf("an interrupt without a description shows one: %s", b)
	}

	_, err = s.GetInterrupt(ctx, "other", "int_full")
	wantErr(t, "GetInterrupt of another tenant's interrupt", err, store.ErrNotFound)
}

func sameInterrupt(t *testing.T, what string, got, want *store.Interrupt) {
	t.Helper()
	if got.ID != want.ID || got.Tenant != want.Tenant || got.ThreadID != want.ThreadID || got.RunID != want.RunID ||
		got.Agent != want.Agent || got.ToolCallID != want.ToolCallID || got.Tool != want.Tool ||
		got.Description != want.Description || got.Subagent != want.Subagent || got.Status != want.Status ||
		got.Reason != cmp.Or(want.Reason, store.ReasonApproval) {
		t.Fatalf("%s:\n got  %+v\n want %+v", what, got, want)
	}
	sameJSON(t, what+" args", got.Args, want.Args)
	sameJSON(t, what+" response schema", got.ResponseSchema, want.ResponseSchema)
	sameStrings(t, what+" allowed decisions", got.AllowedDecisions, want.AllowedDecisions)
	sameTime(t, what+" CreatedAt", got.CreatedAt, want.CreatedAt)
	switch {
	case got.ExpiresAt == nil && want.ExpiresAt == nil:
	case got.ExpiresAt == nil || want.ExpiresAt == nil:
		t.Fatalf("%s ExpiresAt = %v, want %v", what, got.ExpiresAt, want.ExpiresAt)
	default:
		sameTime(t, what+" ExpiresAt", *got.ExpiresAt, *want.ExpiresAt)
	}
	switch {
	case got.Decision == nil && want.Decision == nil:
	case got.Decision == nil || want.Decision == nil:
		t.Fatalf("%s decision: got %+v, want %+v", what, got.Decision, want.Decision)
	default:
		g, w := *got.Decision, *want.Decision
		if g.Approved != w.Approved || g.Message != w.Message || g.Via != w.Via || g.ClaimedVia != w.ClaimedVia || g.By != w.By {
			t.Fatalf("%s decision: got %+v, want %+v", what, g, w)
		}
		sameJSON(t, what+" edited args", g.EditedArgs, w.EditedArgs)
		sameTime(t, what+" decided at", g.At, w.At)
	}
}

func testFinishRun(t *testing.T, s store.Store) {
	ctx := t.Context()
	begin(t, s, "a", "t", "x", "r1", T0)
	err := s.FinishRun(ctx, store.FinishRun{Tenant: "a", ThreadID: "t", RunID: "r1", Status: store.Running, Now: T0})
	wantErr(t, "FinishRun with status running", err, store.ErrInvalid)
	err = s.FinishRun(ctx, store.FinishRun{Tenant: "a", ThreadID: "t", RunID: "r1", Status: store.Queued, Now: T0})
	wantErr(t, "FinishRun with status queued", err, store.ErrInvalid)
	err = s.FinishRun(ctx, store.FinishRun{Tenant: "a", ThreadID: "t", RunID: "other", Status: store.Idle, Now: T0})
	wantErr(t, "FinishRun by another run", err, store.ErrLeaseLost)

	finish(t, s, "a", "t", "r1", store.Idle, at(10*time.Second))
	th := getThread(t, s, "a", "t")
	want := &store.Thread{Tenant: "a", ID: "t", Agent: "x", Status: store.Idle, RunID: "r1", State: json.RawMessage(`{}`),
		CreatedAt: T0, UpdatedAt: at(10 * time.Second)}
	sameThread(t, "finished thread", th, want)

	err = s.FinishRun(ctx, store.FinishRun{Tenant: "a", ThreadID: "t", RunID: "r1", Status: store.Idle, Now: at(11 * time.Second)})
	wantErr(t, "second FinishRun", err, store.ErrLeaseLost)

	// Waiting with a pending decision stays Waiting.
	waiting(t, s, "a", "w", "x", "r1", T0, interrupt("int_1", "call_1", T0))
	th = getThread(t, s, "a", "w")
	if th.Status != store.Waiting || th.LeaseOwner != "" || !th.LeaseUntil.IsZero() {
		t.Fatalf("waiting thread: %+v", th)
	}
	sameTime(t, "waiting UpdatedAt", th.UpdatedAt, at(time.Second))
}

func testFinishWaitingNothingPending(t *testing.T, s store.Store) {
	begin(t, s, "a", "t", "x", "r1", T0)
	checkpoint(t, s, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r1",
		Interrupts: []store.Interrupt{interrupt("int_1", "call_1", T0)}})
	if res := decide(t, s, "a", "int_1", true, at(time.Second)); res.Queued {
		t.Fatalf("a decision queued a thread its run still holds")
	}
	var queued bool
	if err := s.FinishRun(t.Context(), store.FinishRun{Tenant: "a", ThreadID: "t", RunID: "r1", Status: store.Waiting,
		Now: at(2 * time.Second), Queued: &queued}); err != nil {
		t.Fatalf("FinishRun: %v", err)
	}
	if th := getThread(t, s, "a", "t"); th.Status != store.Queued || !queued {
		t.Fatalf("FinishRun Waiting with every decision made: status %s (reported queued %v), want queued", th.Status, queued)
	}
	// One still pending: Waiting, and not reported queued.
	begin(t, s, "a", "p", "x", "r2", T0)
	checkpoint(t, s, store.Checkpoint{Tenant: "a", ThreadID: "p", RunID: "r2",
		Interrupts: []store.Interrupt{interrupt("int_2", "call_2", T0)}})
	queued = true
	if err := s.FinishRun(t.Context(), store.FinishRun{Tenant: "a", ThreadID: "p", RunID: "r2", Status: store.Waiting,
		Now: at(2 * time.Second), Queued: &queued}); err != nil || queued {
		t.Fatalf("FinishRun Waiting with a decision pending: %v, reported queued %v", err, queued)
	}
	stale, err := s.Stale(t.Context(), at(2*time.Second), 10)
	if err != nil {
		t.Fatalf("Stale: %v", err)
	}
	sameStrings(t, "stale", threadIDs(stale), []string{"a/t"})
}

func testClaim(t *testing.T, s store.Store) {
	ctx := t.Context()
	claim := func(tenant, thread, run string, now time.Time) (*store.Thread, error) {
		return s.Claim(ctx, store.Claim{Tenant: tenant, ThreadID: thread, RunID: run, Owner: "owner-" + run,
			Now: now, LeaseUntil: now.Add(time.Minute)})
	}
	begin(t, s, "a", "idle", "x", "r1", T0)
	finish(t, s, "a", "idle", "r1", store.Idle, at(time.Second))
	begin(t, s, "a", "failed", "x", "r1", T0)
	finish(t, s, "a", "failed", "r1", store.Failed, at(time.Second))
	waiting(t, s, "a", "waiting", "x", "r1", T0, interrupt("int_w", "call_w", T0))
	begin(t, s, "a", "running", "x", "r1", T0) // lease until T0+1m
	waiting(t, s, "a", "queued", "x", "r1", T0, interrupt("int_q", "call_q", T0))
	decide(t, s, "a", "int_q", true, at(2*time.Second))

	for _, id := range []string{"idle", "failed", "waiting"} {
		_, err := claim("a", id, "r2", at(time.Hour))
		wantErr(t, "Claim of a "+id+" thread", err, store.ErrNotClaimable)
	}
	for _, now := range []time.Time{at(30 * time.Second), at(time.Minute)} {
		_, err := claim("a", "running", "r2", now)
		wantErr(t, fmt.Sprintf("Claim at %v under a lease until %v", now, at(time.Minute)), err, store.ErrNotClaimable)
	}
	_, err := claim("b", "queued", "r2", at(time.Hour))
	wantErr(t, "Claim of another tenant's thread", err, store.ErrNotFound)

	th, err := claim("a", "queued", "r2", at(3*time.Second))
	if err != nil {
		t.Fatalf("Claim of a queued thread: %v", err)
	}
	want := &store.Thread{Tenant: "a", ID: "queued", Agent: "x", Status: store.Running, RunID: "r2",
		State: json.RawMessage(`{}`), LeaseOwner: "owner-r2", LeaseUntil: at(3*time.Second + time.Minute),
		CreatedAt: T0, UpdatedAt: at(3 * time.Second)}
	sameThread(t, "claimed thread", th, want)
	sameThread(t, "claimed thread (stored)", getThread(t, s, "a", "queued"), want)
	_, err = claim("a", "queued", "r3", at(4*time.Second))
	wantErr(t, "second Claim", err, store.ErrNotClaimable)
	checkpoint(t, s, store.Checkpoint{Tenant: "a", ThreadID: "queued", RunID: "r2",
		Messages: []message.Message{{ID: "m", Role: message.Tool, ToolCallID: "call_q", Content: "done"}}})
}

func testClaimExpired(t *testing.T, s store.Store) {
	ctx := t.Context()
	begin(t, s, "a", "t", "x", "r1", T0, userMsg("m1", "hi")) // lease until T0+1m
	if err := s.FinishRun(ctx, store.FinishRun{Tenant: "a", ThreadID: "t", RunID: "r0", Status: store.Failed, Now: T0}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("FinishRun of a stranger: %v", err)
	}
	now := at(time.Minute + time.Microsecond)
	th, err := s.Claim(ctx, store.Claim{Tenant: "a", ThreadID: "t", RunID: "r2", Owner: "node-2", Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil {
		t.Fatalf("Claim after the lease expired: %v", err)
	}
	if th.RunID != "r2" || th.LeaseOwner != "node-2" || th.Status != store.Running {
		t.Fatalf("claimed thread: %+v", th)
	}
	sameTime(t, "claimed lease", th.LeaseUntil, now.Add(time.Minute))
	err = s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r1", Messages: []message.Message{userMsg("late", "x")}})
	wantErr(t, "Checkpoint of the expired run", err, store.ErrLeaseLost)
	checkpoint(t, s, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r2", Messages: []message.Message{userMsg("m2", "y")}})
	sameStrings(t, "messages", msgIDs(messages(t, s, "a", "t")), []string{"m1", "m2"})
}

// testReleaseRun: a released run keeps its thread Running, without a lease,
// so Stale lists it and Claim takes it at once; nothing else changes.
func testReleaseRun(t *testing.T, s store.Store) {
	ctx := t.Context()
	begin(t, s, "a", "t", "x", "r1", T0, userMsg("m1", "hi")) // lease until T0+1m
	err := s.ReleaseRun(ctx, store.ReleaseRun{Tenant: "a", ThreadID: "t", RunID: "r0", Now: at(time.Second)})
	wantErr(t, "ReleaseRun of a stranger", err, store.ErrLeaseLost)
	err = s.ReleaseRun(ctx, store.ReleaseRun{Tenant: "b", ThreadID: "t", RunID: "r1", Now: at(time.Second)})
	wantErr(t, "ReleaseRun of another tenant's thread", err, store.ErrNotFound)
	if err := s.ReleaseRun(ctx, store.ReleaseRun{Tenant: "a", ThreadID: "t", RunID: "r1", Now: at(time.Second)}); err != nil {
		t.Fatalf("ReleaseRun: %v", err)
	}
	th := getThread(t, s, "a", "t")
	if th.Status != store.Running || th.RunID != "r1" || th.LeaseOwner != "" || !th.LeaseUntil.IsZero() || th.LastError != "" {
		t.Fatalf("released thread: %+v", th)
	}
	sameTime(t, "updated", th.UpdatedAt, at(time.Second))
	stale, err := s.Stale(ctx, at(2*time.Second), 10)
	if err != nil {
		t.Fatal(err)
	}
	sameStrings(t, "stale right after the release", threadIDs(stale), []string{"a/t"})
	now := at(2 * time.Second)
	claimed, err := s.Claim(ctx, store.Claim{Tenant: "a", ThreadID: "t", RunID: "r2", Owner: "node-2", Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil {
		t.Fatalf("Claim right after the release: %v", err)
	}
	if claimed.RunID != "r2" || claimed.Status != store.Running {
		t.Fatalf("claimed thread: %+v", claimed)
	}
	err = s.ReleaseRun(ctx, store.ReleaseRun{Tenant: "a", ThreadID: "t", RunID: "r1", Now: now})
	wantErr(t, "ReleaseRun of the superseded run", err, store.ErrLeaseLost)
}

func testStale(t *testing.T, s store.Store) {
	ctx := t.Context()
	// Queued at T0+3m (a) and T0+1m (b); Running since T0 with a lease until
	// T0+2m; Running under a long lease; Idle; Waiting.
	waiting(t, s, "a", "q-late", "x", "r1", T0, interrupt("int_a", "c", T0))
	decide(t, s, "a", "int_a", true, at(3*time.Minute))
	waiting(t, s, "b", "q-early", "x", "r1", T0, interrupt("int_b", "c", T0))
	decide(t, s, "b", "int_b", false, at(time.Minute))
	if _, err := s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: "expired", Agent: "x", RunID: "r1", Now: T0,
		LeaseUntil: at(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BeginRun(ctx, store.BeginRun{Tenant: "b", ThreadID: "live", Agent: "x", RunID: "r1", Now: at(-time.Minute),
		LeaseUntil: at(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	begin(t, s, "a", "idle", "x", "r1", at(-time.Hour))
	finish(t, s, "a", "idle", "r1", store.Idle, at(-time.Hour))
	waiting(t, s, "b", "waiting", "x", "r1", at(-time.Hour), interrupt("int_w", "c", T0))

	get := func(now time.Time, limit int) []string {
		t.Helper()
		ts, err := s.Stale(ctx, now, limit)
		if err != nil {
			t.Fatalf("Stale: %v", err)
		}
		return threadIDs(ts)
	}
	sameStrings(t, "Stale at T0+10m", get(at(10*time.Minute), 0), []string{"a/expired", "b/q-early", "a/q-late"})
	sameStrings(t, "Stale limit 2", get(at(10*time.Minute), 2), []string{"a/expired", "b/q-early"})
	sameStrings(t, "Stale at the lease's end", get(at(2*time.Minute), 0), []string{"b/q-early", "a/q-late"})
	ts, err := s.Stale(ctx, at(10*time.Minute), 1)
	if err != nil || len(ts) != 1 {
		t.Fatalf("Stale: %v %v", ts, err)
	}
	if ts[0].Status != store.Running || ts[0].RunID != "r1" || ts[0].Agent != "x" {
		t.Fatalf("stale thread: %+v", ts[0])
	}
	sameTime(t, "stale lease", ts[0].LeaseUntil, at(2*time.Minute))
}

func testListThreads(t *testing.T, s store.Store) {
	ctx := t.Context()
	begin(t, s, "a", "t1", "refunds", "r1", T0)
	finish(t, s, "a", "t1", "r1", store.Idle, at(1*time.Minute))
	begin(t, s, "a", "t2", "support", "r1", at(2*time.Minute))
	finish(t, s, "a", "t2", "r1", store.Failed, at(3*time.Minute))
	begin(t, s, "a", "t3", "refunds", "r1", at(4*time.Minute))
	begin(t, s, "b", "t4", "refunds", "r1", at(5*time.Minute))

	list := func(tenant string, f store.ThreadFilter) []string {
		t.Helper()
		ts, err := s.ListThreads(ctx, tenant, f)
		if err != nil {
			t.Fatalf("ListThreads: %v", err)
		}
		for _, th := range ts {
			if th.Tenant != tenant {
				t.Fatalf("ListThreads for %s returned %s's thread", tenant, th.Tenant)
			}
		}
		return threadIDs(ts)
	}
	sameStrings(t, "all of a", list("a", store.ThreadFilter{}), []string{"a/t3", "a/t2", "a/t1"})
	sameStrings(t, "agent refunds", list("a", store.ThreadFilter{Agent: "refunds"}), []string{"a/t3", "a/t1"})
	sameStrings(t, "status failed", list("a", store.ThreadFilter{Status: store.Failed}), []string{"a/t2"})
	sameStrings(t, "agent and status", list("a", store.ThreadFilter{Agent: "refunds", Status: store.Running}), []string{"a/t3"})
	sameStrings(t, "limit", list("a", store.ThreadFilter{Limit: 2}), []string{"a/t3", "a/t2"})
	sameStrings(t, "tenant b", list("b", store.ThreadFilter{}), []string{"b/t4"})
	sameStrings(t, "tenant c", list("c", store.ThreadFilter{}), nil)

	ts, err := s.ListThreads(ctx, "a", store.ThreadFilter{Status: store.Failed})
	if err != nil || len(ts) != 1 {
		t.Fatalf("ListThreads: %v %v", ts, err)
	}
	sameThread(t, "listed thread", &ts[0], getThread(t, s, "a", "t2"))
}

func testDecide(t *testing.T, s store.Store) {
	ctx := t.Context()
	waiting(t, s, "acme", "t", "refunds", "r1", T0, interrupt("int_1", "call_1", T0))
	if n, err := s.CountPending(ctx); err != nil || n != 1 {
		t.Fatalf("CountPending = %d, %v; want 1", n, err)
	}

	_, err := s.Decide(ctx, "other", "int_1", store.Decision{Approved: true, At: at(time.Minute)})
	wantErr(t, "Decide by another tenant", err, store.ErrNotFound)
	if in := getInterrupt(t, s, "acme", "int_1"); in.Status != store.Pending || in.Decision != nil {
		t.Fatalf("another tenant's Decide changed the interrupt: %+v", in)
	}

	d := store.Decision{Approved: true, EditedArgs: json.RawMessage(`{"orderId":"A1","amount":5}`),
		Message: "only 5", Via: "studio", By: "acme/ops", At: at(time.Minute)}
	res, err := s.Decide(ctx, "acme", "int_1", d)
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	want := interrupt("int_1", "call_1", T0)
	want.Tenant, want.ThreadID, want.RunID, want.Agent, want.Status, want.Decision = "acme", "t", "r1", "refunds", store.Approved, &d
	if res.Interrupt == nil {
		t.Fatalf("Decide returned no interrupt")
	}
	sameInterrupt(t, "decided interrupt (returned)", res.Interrupt, &want)
	sameInterrupt(t, "decided interrupt (stored)", getInterrupt(t, s, "acme", "int_1"), &want)
	if !res.Queued {
		t.Fatalf("the only decision of a waiting thread did not queue it")
	}
	if n, err := s.CountPending(ctx); err != nil || n != 0 {
		t.Fatalf("CountPending after the decision = %d, %v; want 0", n, err)
	}

	_, err = s.Decide(ctx, "acme", "int_1", store.Decision{Approved: false, Message: "no", At: at(2 * time.Minute)})
	wantErr(t, "second Decide", err, store.ErrAlreadyDecided)
	sameInterrupt(t, "interrupt after a second Decide", getInterrupt(t, s, "acme", "int_1"), &want)

	_, err = s.Decide(ctx, "acme", "int_unknown", store.Decision{Approved: true, At: at(time.Minute)})
	wantErr(t, "Decide of an unknown interrupt", err, store.ErrNotFound)
	_, err = s.Decide(ctx, "other", "int_1", store.Decision{Approved: true, At: at(time.Minute)})
	wantErr(t, "Decide of another tenant's decided interrupt", err, store.ErrNotFound)
}

func testDecideReject(t *testing.T, s store.Store) {
	waiting(t, s, "a", "t", "x", "r1", T0, interrupt("int_1", "call_1", T0))
	res, err := s.Decide(t.Context(), "a", "int_1", store.Decision{Approved: false, Message: "too much", Via: "cli", By: "a/admin", At: at(time.Minute)})
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	in := getInterrupt(t, s, "a", "int_1")
	if res.Interrupt.Status != store.Rejected || in.Status != store.Rejected || in.Decision == nil ||
		in.Decision.Approved || in.Decision.Message != "too much" || in.Decision.Via != "cli" || len(in.Decision.EditedArgs) != 0 {
		t.Fatalf("rejected interrupt: %+v (decision %+v)", in, in.Decision)
	}
	if th := getThread(t, s, "a", "t"); th.Status != store.Queued {
		t.Fatalf("thread after its only interrupt was rejected: %s", th.Status)
	}
}

// quorumInterrupt is interrupt needing two approvals.
func quorumInterrupt(id, callID string) store.Interrupt {
	in := interrupt(id, callID, T0)
	in.ApprovalsNeeded = 2
	return in
}

func approveAs(t *testing.T, s store.Store, id, by string, at time.Time, edited string) store.DecideResult {
	t.Helper()
	d := store.Decision{Approved: true, Via: "api", By: by, At: at}
	if edited != "" {
		d.EditedArgs = json.RawMessage(edited)
	}
	res, err := s.Decide(t.Context(), "a", id, d)
	if err != nil {
		t.Fatalf("approve %s as %s: %v", id, by, err)
	}
	return res
}

func approversOf(in *store.Interrupt) []string {
	var out []string
	for _, a := range in.Approvals {
		out = append(out, a.By)
	}
	return out
}

func testDecideQuorum(t *testing.T, s store.Store) {
	waiting(t, s, "a", "t", "x", "r1", T0, quorumInterrupt("int_1", "call_1"))
	if in := getInterrupt(t, s, "a", "int_1"); in.ApprovalsNeeded != 2 || len(in.Approvals) != 0 {
		t.Fatalf("stored quorum interrupt: needed %d, approvals %+v", in.ApprovalsNeeded, in.Approvals)
	}
	res := approveAs(t, s, "int_1", "a/alice", at(time.Minute), "")
	in := getInterrupt(t, s, "a", "int_1")
	if res.Queued || res.Interrupt.Status != store.Pending || in.Status != store.Pending || in.Decision != nil ||
		!slices.Equal(approversOf(in), []string{"a/alice"}) || in.Approvals[0].Via != "api" || !in.Approvals[0].At.Equal(at(time.Minute)) {
		t.Fatalf("after one of two approvals: queued %v, %+v", res.Queued, in)
	}
	if th := getThread(t, s, "a", "t"); th.Status != store.Waiting {
		t.Fatalf("thread after one of two approvals: %s", th.Status)
	}
	_, err := s.Decide(t.Context(), "a", "int_1", store.Decision{Approved: true, Via: "api", By: "a/alice", At: at(2 * time.Minute)})
	wantErr(t, "the same principal approving twice", err, store.ErrAlreadyApproved)
	if in := getInterrupt(t, s, "a", "int_1"); in.Status != store.Pending || len(in.Approvals) != 1 {
		t.Fatalf("a refused second approval changed the interrupt: %+v", in)
	}
	res = approveAs(t, s, "int_1", "a/bob", at(3*time.Minute), "")
	in = getInterrupt(t, s, "a", "int_1")
	if !res.Queued || in.Status != store.Approved || in.Decision == nil || in.Decision.By != "a/bob" ||
		!slices.Equal(approversOf(in), []string{"a/alice", "a/bob"}) {
		t.Fatalf("after two approvals: queued %v, %+v", res.Queued, in)
	}
	_, err = s.Decide(t.Context(), "a", "int_1", store.Decision{Approved: true, Via: "api", By: "a/carol", At: at(4 * time.Minute)})
	wantErr(t, "a third approval", err, store.ErrAlreadyDecided)
}

func testDecideQuorumReject(t *testing.T, s store.Store) {
	waiting(t, s, "a", "t", "x", "r1", T0, quorumInterrupt("int_1", "call_1"))
	approveAs(t, s, "int_1", "a/alice", at(time.Minute), "")
	res, err := s.Decide(t.Context(), "a", "int_1", store.Decision{Approved: false, Message: "no", Via: "api", By: "a/bob", At: at(2 * time.Minute)})
	if err != nil {
		t.Fatalf("reject: %v", err)
	}
	in := getInterrupt(t, s, "a", "int_1")
	if !res.Queued || in.Status != store.Rejected || in.Decision == nil || in.Decision.By != "a/bob" {
		t.Fatalf("a reject after one approval: queued %v, %+v", res.Queued, in)
	}
}

func testDecideQuorumEdit(t *testing.T, s store.Store) {
	waiting(t, s, "a", "t", "x", "r1", T0, quorumInterrupt("int_1", "call_1"))
	approveAs(t, s, "int_1", "a/alice", at(time.Minute), "")
	edited := `{"orderId":"A1","amount":5}`
	res := approveAs(t, s, "int_1", "a/bob", at(2*time.Minute), edited)
	in := getInterrupt(t, s, "a", "int_1")
	if res.Queued || in.Status != store.Pending || !slices.Equal(approversOf(in), []string{"a/bob"}) ||
		string(in.Approvals[0].EditedArgs) != edited {
		t.Fatalf("an edit did not reset the approvals to itself: queued %v, %+v", res.Queued, in)
	}
	// alice approved other arguments: she may approve the edited ones.
	res = approveAs(t, s, "int_1", "a/alice", at(3*time.Minute), "")
	in = getInterrupt(t, s, "a", "int_1")
	if !res.Queued || in.Status != store.Approved || in.Decision == nil || string(in.Decision.EditedArgs) != edited ||
		!slices.Equal(approversOf(in), []string{"a/bob", "a/alice"}) {
		t.Fatalf("after the edit and a second approval: queued %v, %+v (decision %+v)", res.Queued, in, in.Decision)
	}
}

func testDecideQueues(t *testing.T, s store.Store) {
	waiting(t, s, "a", "t", "x", "r1", T0,
		interrupt("int_1", "call_1", T0), interrupt("int_2", "call_2", T0), interrupt("int_3", "call_3", T0))
	waiting(t, s, "a", "other", "x", "r1", T0, interrupt("int_o", "call_1", T0))

	for i, id := range []string{"int_2", "int_1"} {
		if res := decide(t, s, "a", id, i == 0, at(time.Duration(i+1)*time.Minute)); res.Queued {
			t.Fatalf("Decide %s queued the thread with decisions still pending", id)
		}
		th := getThread(t, s, "a", "t")
		if th.Status != store.Waiting {
			t.Fatalf("after %s: status %s, want waiting", id, th.Status)
		}
		sameTime(t, "UpdatedAt while waiting", th.UpdatedAt, at(time.Second))
	}
	if ts, err := s.Stale(t.Context(), at(time.Hour), 0); err != nil || len(ts) != 0 {
		t.Fatalf("Stale with decisions pending: %v %v", threadIDs(ts), err)
	}
	res := decide(t, s, "a", "int_3", true, at(5*time.Minute))
	if !res.Queued || res.Interrupt.ID != "int_3" {
		t.Fatalf("last decision: %+v", res)
	}
	th := getThread(t, s, "a", "t")
	if th.Status != store.Queued {
		t.Fatalf("after the last decision: status %s, want queued", th.Status)
	}
	sameTime(t, "UpdatedAt when queued", th.UpdatedAt, at(5*time.Minute))
	if o := getThread(t, s, "a", "other"); o.Status != store.Waiting {
		t.Fatalf("another thread changed: %s", o.Status)
	}
	ts, err := s.Stale(t.Context(), at(time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	sameStrings(t, "stale", threadIDs(ts), []string{"a/t"})
}

func testDecideWhileRunning(t *testing.T, s store.Store) {
	begin(t, s, "a", "t", "x", "r1", T0)
	checkpoint(t, s, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r1",
		Interrupts: []store.Interrupt{interrupt("int_1", "call_1", T0), interrupt("int_2", "call_2", T0)}})
	if res := decide(t, s, "a", "int_1", true, at(time.Second)); res.Queued {
		t.Fatalf("Decide queued a running thread")
	}
	if th := getThread(t, s, "a", "t"); th.Status != store.Running || th.RunID != "r1" {
		t.Fatalf("Decide changed a running thread: %+v", th)
	}
	finish(t, s, "a", "t", "r1", store.Waiting, at(2*time.Second))
	if th := getThread(t, s, "a", "t"); th.Status != store.Waiting {
		t.Fatalf("FinishRun Waiting with one decision pending: %s", th.Status)
	}
	if res := decide(t, s, "a", "int_2", false, at(3*time.Second)); !res.Queued {
		t.Fatalf("the last decision did not queue the thread")
	}
}

func testListInterrupts(t *testing.T, s store.Store) {
	ctx := t.Context()
	waiting(t, s, "a", "x", "refunds", "r1", T0,
		interrupt("int_x1", "c1", at(1*time.Second)), interrupt("int_x2", "c2", at(2*time.Second)))
	waiting(t, s, "a", "y", "support", "r1", T0, interrupt("int_y1", "c1", at(3*time.Second)))
	waiting(t, s, "b", "x", "refunds", "r1", T0, interrupt("int_b1", "c1", at(4*time.Second)))
	decide(t, s, "a", "int_x1", true, at(time.Minute))
	waiting(t, s, "a", "z", "refunds", "r1", T0, interrupt("int_z1", "c1", at(5*time.Second)))
	decide(t, s, "a", "int_z1", false, at(time.Minute))

	list := func(tenant string, f store.InterruptFilter) []string {
		t.Helper()
		ins, err := s.ListInterrupts(ctx, tenant, f)
		if err != nil {
			t.Fatalf("ListInterrupts: %v", err)
		}
		for _, in := range ins {
			if in.Tenant != tenant {
				t.Fatalf("ListInterrupts for %s returned %s's interrupt", tenant, in.Tenant)
			}
		}
		return interruptIDs(ins)
	}
	sameStrings(t, "pending by default", list("a", store.InterruptFilter{}), []string{"int_y1", "int_x2"})
	sameStrings(t, "approved", list("a", store.InterruptFilter{Status: store.Approved}), []string{"int_x1"})
	sameStrings(t, "rejected", list("a", store.InterruptFilter{Status: store.Rejected}), []string{"int_z1"})
	sameStrings(t, "thread x", list("a", store.InterruptFilter{ThreadID: "x"}), []string{"int_x2"})
	sameStrings(t, "agent support", list("a", store.InterruptFilter{Agent: "support"}), []string{"int_y1"})
	sameStrings(t, "agent refunds", list("a", store.InterruptFilter{Agent: "refunds"}), []string{"int_x2"})
	sameStrings(t, "limit", list("a", store.InterruptFilter{Limit: 1}), []string{"int_y1"})
	sameStrings(t, "tenant b", list("b", store.InterruptFilter{}), []string{"int_b1"})
	sameStrings(t, "tenant c", list("c", store.InterruptFilter{}), nil)

	ins, err := s.ListInterrupts(ctx, "a", store.InterruptFilter{ThreadID: "x", Status: store.Approved})
	if err != nil || len(ins) != 1 {
		t.Fatalf("ListInterrupts: %v %v", ins, err)
	}
	sameInterrupt(t, "listed interrupt", &ins[0], getInterrupt(t, s, "a", "int_x1"))
}

func testCallInterrupts(t *testing.T, s store.Store) {
	ctx := t.Context()
	waiting(t, s, "a", "t", "x", "r1", T0,
		interrupt("int_1", "call_1", at(1*time.Second)), interrupt("int_2", "call_2", at(2*time.Second)),
		interrupt("int_3", "call_3", at(3*time.Second)))
	waiting(t, s, "a", "u", "x", "r1", T0, interrupt("int_u1", "call_1", T0))
	waiting(t, s, "b", "t", "x", "r1", T0, interrupt("int_b1", "call_1", T0))
	decide(t, s, "a", "int_1", true, at(time.Minute))

	calls := func(tenant, thread string, ids ...string) []string {
		t.Helper()
		ins, err := s.CallInterrupts(ctx, tenant, thread, ids)
		if err != nil {
			t.Fatalf("CallInterrupts: %v", err)
		}
		got := interruptIDs(ins)
		// Order is not part of the contract.
		slices.Sort(got)
		return got
	}
	sameStrings(t, "calls 1 and 3", calls("a", "t", "call_1", "call_3"), []string{"int_1", "int_3"})
	sameStrings(t, "unknown call", calls("a", "t", "call_9"), nil)
	sameStrings(t, "no calls", calls("a", "t"), nil)
	sameStrings(t, "thread u", calls("a", "u", "call_1", "call_2"), []string{"int_u1"})
	sameStrings(t, "tenant b", calls("b", "t", "call_1", "call_2", "call_3"), []string{"int_b1"})
	sameStrings(t, "tenant c", calls("c", "t", "call_1"), nil)

	ins, err := s.CallInterrupts(ctx, "a", "t", []string{"call_1"})
	if err != nil || len(ins) != 1 {
		t.Fatalf("CallInterrupts: %v %v", ins, err)
	}
	if ins[0].Status != store.Approved || ins[0].Decision == nil || !ins[0].Decision.Approved {
		t.Fatalf("decided call interrupt: %+v", ins[0])
	}
}

// testInDoubtAfterApproval: a call that was approved, started and crashed
// gets a second interrupt (reason in_doubt) for the same tool call; both
// are kept, the in-doubt one with its reason, and deciding it queues the
// thread like any decision.
func testInDoubtAfterApproval(t *testing.T, s store.Store) {
	ctx := t.Context()
	waiting(t, s, "a", "t", "x", "r1", T0, interrupt("int_1", "call_1", at(time.Second)))
	decide(t, s, "a", "int_1", true, at(2*time.Second))
	if _, err := s.Claim(ctx, store.Claim{Tenant: "a", ThreadID: "t", RunID: "r2", Owner: "o", Now: at(3 * time.Second),
		LeaseUntil: at(time.Hour)}); err != nil {
		t.Fatalf("Claim: %v", err)
	}
	doubt := store.Interrupt{ID: "int_2", ToolCallID: "call_1", Tool: "refund", Args: json.RawMessage(`{"orderId":"A1"}`),
		Reason: store.ReasonInDoubt, Description: "This call may already have run: refund",
		AllowedDecisions: []string{"retry", "skip"}, CreatedAt: at(4 * time.Second)}
	checkpoint(t, s, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r2", Interrupts: []store.Interrupt{doubt}})
	finish(t, s, "a", "t", "r2", store.Waiting, at(5*time.Second))
	if th := getThread(t, s, "a", "t"); th.Status != store.Waiting {
		t.Fatalf("thread with an in-doubt call is %s, want waiting", th.Status)
	}
	ins, err := s.CallInterrupts(ctx, "a", "t", []string{"call_1"})
	if err != nil {
		t.Fatalf("CallInterrupts: %v", err)
	}
	got := interruptIDs(ins)
	slices.Sort(got)
	sameStrings(t, "both interrupts of the call", got, []string{"int_1", "int_2"})
	want := doubt
	want.Tenant, want.ThreadID, want.RunID, want.Agent, want.Status = "a", "t", "r2", "x", store.Pending
	sameInterrupt(t, "in-doubt interrupt", getInterrupt(t, s, "a", "int_2"), &want)
	if got := getInterrupt(t, s, "a", "int_1"); got.Reason != store.ReasonApproval {
		t.Fatalf("an approval's reason is %q, want approval", got.Reason)
	}
	b, err := json.Marshal(getInterrupt(t, s, "a", "int_2"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"reason":"in_doubt"`) {
		t.Fatalf("the JSON of an in-doubt interrupt lacks its reason: %s", b)
	}
	pending, err := s.ListInterrupts(ctx, "a", store.InterruptFilter{ThreadID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	sameStrings(t, "pending", interruptIDs(pending), []string{"int_2"})
	if res := decide(t, s, "a", "int_2", false, at(6*time.Second)); !res.Queued || res.Interrupt.Reason != store.ReasonInDoubt {
		t.Fatalf("deciding the in-doubt call: %+v", res)
	}
	err = s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r2",
		Interrupts: []store.Interrupt{{ID: "int_3", ToolCallID: "call_1", Tool: "refund", Reason: "maybe"}}})
	wantErr(t, "an unknown reason", err, store.ErrInvalid)
}

// testStartedMarkers: Checkpoint.Started marks calls started under the
// run's lease; the checkpoint storing a call's tool result, or an in-doubt
// interrupt for it, deletes its marker; markers are per thread and tenant.
func testStartedMarkers(t *testing.T, s store.Store) {
	ctx := t.Context()
	started := func(tenant, thread string, ids ...string) []string {
		t.Helper()
		got, err := s.StartedCalls(ctx, tenant, thread, ids)
		if err != nil {
			t.Fatalf("StartedCalls: %v", err)
		}
		slices.Sort(got)
		return got
	}
	begin(t, s, "a", "t", "x", "r1", T0, userMsg("m1", "refund"))
	begin(t, s, "a", "u", "x", "r1", T0, userMsg("m1", "refund"))
	sameStrings(t, "before any start", started("a", "t", "call_1"), nil)
	checkpoint(t, s, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r1", Started: []string{"call_1", "call_2", "call_3"}})
	sameStrings(t, "after the start", started("a", "t", "call_1", "call_2", "call_3", "call_9"), []string{"call_1", "call_2", "call_3"})
	sameStrings(t, "another thread", started("a", "u", "call_1", "call_2"), nil)
	sameStrings(t, "another tenant", started("b", "t", "call_1"), nil)
	sameStrings(t, "no ids", started("a", "t"), nil)

	// Marking again (a retry) is not an error.
	checkpoint(t, s, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r1", Started: []string{"call_1"}})
	// A result settles call_1; an in-doubt interrupt call_2; an approval
	// leaves call_3 alone.
	checkpoint(t, s, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r1",
		Messages: []message.Message{{ID: "m2", Role: message.Tool, ToolCallID: "call_1", ToolName: "refund", Content: "ok"}}})
	sameStrings(t, "after call_1's result", started("a", "t", "call_1", "call_2", "call_3"), []string{"call_2", "call_3"})
	checkpoint(t, s, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r1", Interrupts: []store.Interrupt{
		{ID: "int_d", ToolCallID: "call_2", Tool: "refund", Reason: store.ReasonInDoubt, AllowedDecisions: []string{"retry", "skip"}},
		{ID: "int_a", ToolCallID: "call_3", Tool: "refund", AllowedDecisions: []string{"approve", "reject"}}}})
	sameStrings(t, "after call_2's in-doubt interrupt", started("a", "t", "call_1", "call_2", "call_3"), []string{"call_3"})

	// A run that lost its lease marks nothing.
	finish(t, s, "a", "t", "r1", store.Idle, at(time.Second))
	err := s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r1", Started: []string{"call_7"}})
	wantErr(t, "marking after the run ended", err, store.ErrLeaseLost)
	sameStrings(t, "a lost run's marker", started("a", "t", "call_7"), nil)
	// The marker survives the run: it is what the next run sees.
	sameStrings(t, "after the run ended", started("a", "t", "call_3"), []string{"call_3"})

	err = s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r1", Started: []string{""}})
	wantErr(t, "an empty call id", err, store.ErrInvalid)
}

func testEvents(t *testing.T, s store.Store) {
	ctx := t.Context()
	started := []event.Event{{Type: event.RunStarted, Time: T0.UnixMilli()}}
	if _, err := s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: "t", Agent: "x", RunID: "r1", Now: T0,
		LeaseUntil: at(time.Minute), Events: started}); err != nil {
		t.Fatal(err)
	}
	step := []event.Event{
		{Type: event.StepStarted, StepName: "researcher", SubagentRunID: "sub_1"},
		{Type: event.ToolResult, MessageID: "m4", ToolCallID: "call_1", ToolName: "refund", Content: `{"ok":true}`, IsError: true},
		{Type: event.StateDelta, Patch: json.RawMessage(`[{"op":"add","path":"/todos/0/done","value":true}]`)},
		{Type: event.StateSnapshot, Snapshot: json.RawMessage(`{"todos":[{"content":"a","done":true}]}`), RunID: "custom-run"},
		{Type: event.MessagesSnapshot, Messages: []message.Message{userMsg("m1", "hi"),
			{ID: "m2", Role: message.Assistant, ToolCalls: []message.ToolCall{{ID: "c", Name: "n", Arguments: `{}`, Client: true}}}}},
	}
	checkpoint(t, s, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r1", Events: step})
	done := []event.Event{{Type: event.RunFinished, Outcome: &event.Outcome{Type: event.Interrupt, Stop: event.StopToolCalls,
		Interrupts: []event.InterruptInfo{{ID: "int_1", ToolCallID: "call_1", Tool: "refund", AllowedDecisions: []string{"approve"},
			ResponseSchema: json.RawMessage(`{"type":"object"}`)}},
		PendingCalls: []message.ToolCall{{ID: "call_1", Name: "refund", Arguments: `{"a":1}`}}, PendingMessageID: "m3"},
		Usage: &event.Usage{InputTokens: 10, OutputTokens: 3}}}
	if err := s.FinishRun(ctx, store.FinishRun{Tenant: "a", ThreadID: "t", RunID: "r1", Status: store.Idle, Now: at(time.Second), Events: done}); err != nil {
		t.Fatal(err)
	}
	begin2 := []event.Event{{Type: event.RunError, Code: "rate_limited", Message: "slow down"}}
	if _, err := s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: "t", Agent: "x", RunID: "r2", Now: at(2 * time.Second),
		LeaseUntil: at(time.Minute), Events: begin2}); err != nil {
		t.Fatal(err)
	}
	// Another thread's log is its own.
	other := []event.Event{{Type: event.RunStarted}}
	if _, err := s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: "u", Agent: "x", RunID: "ru", Now: T0,
		LeaseUntil: at(time.Minute), Events: other}); err != nil {
		t.Fatal(err)
	}

	var want []event.Event
	for _, group := range []struct {
		run string
		evs []event.Event
	}{{"r1", started}, {"r1", step}, {"r1", done}, {"r2", begin2}} {
		for _, e := range group.evs {
			if e.ThreadID != "t" {
				t.Fatalf("the caller's event was not stamped with its thread: %+v", e)
			}
			if e.RunID == "" {
				t.Fatalf("the caller's event was not stamped with its run: %+v", e)
			}
			want = append(want, e)
		}
	}
	if want[4].RunID != "custom-run" || want[0].RunID != "r1" || want[len(want)-1].RunID != "r2" {
		t.Fatalf("run ids stamped on the caller's events: %q %q %q", want[0].RunID, want[4].RunID, want[len(want)-1].RunID)
	}

	got := events(t, s, "a", "t", 0, 0)
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Seq <= 0 || (i > 0 && got[i].Seq <= got[i-1].Seq) {
			t.Fatalf("event %d has seq %d after %d: not increasing", i, got[i].Seq, got[max(i-1, 0)].Seq)
		}
		if got[i].Seq != want[i].Seq {
			t.Fatalf("event %d: stored seq %d, the caller's slice says %d", i, got[i].Seq, want[i].Seq)
		}
	}
	sameJSON(t, "events", got, want)

	sameJSON(t, "after the third", events(t, s, "a", "t", got[2].Seq, 0), want[3:])
	sameJSON(t, "after the third, limit 2", events(t, s, "a", "t", got[2].Seq, 2), want[3:5])
	if es := events(t, s, "a", "t", got[len(got)-1].Seq, 0); len(es) != 0 {
		t.Fatalf("events after the last: %+v", es)
	}
	us := events(t, s, "a", "u", 0, 10)
	if len(us) != 1 || us[0].Type != event.RunStarted || us[0].ThreadID != "u" || us[0].RunID != "ru" || us[0].Seq != other[0].Seq {
		t.Fatalf("other thread's events: %+v", us)
	}
	_, err := s.Events(ctx, "b", "t", 0, 0)
	wantErr(t, "Events of another tenant's thread", err, store.ErrNotFound)
}

func testTenantIsolation(t *testing.T, s store.Store) {
	ctx := t.Context()
	begin(t, s, "a", "shared", "refunds", "ra", T0, userMsg("ma", "from a"))
	begin(t, s, "b", "shared", "support", "rb", at(time.Second), userMsg("mb", "from b"))

	if th := getThread(t, s, "a", "shared"); th.Agent != "refunds" || th.RunID != "ra" {
		t.Fatalf("a's thread: %+v", th)
	}
	if th := getThread(t, s, "b", "shared"); th.Agent != "support" || th.RunID != "rb" {
		t.Fatalf("b's thread: %+v", th)
	}
	sameStrings(t, "a's messages", msgIDs(messages(t, s, "a", "shared")), []string{"ma"})
	sameStrings(t, "b's messages", msgIDs(messages(t, s, "b", "shared")), []string{"mb"})
	_, err := s.GetThread(ctx, "c", "shared")
	wantErr(t, "GetThread by a third tenant", err, store.ErrNotFound)
	_, err = s.Messages(ctx, "c", "shared")
	wantErr(t, "Messages by a third tenant", err, store.ErrNotFound)

	// a's run cannot write to b's thread of the same id.
	err = s.Checkpoint(ctx, store.Checkpoint{Tenant: "b", ThreadID: "shared", RunID: "ra", Messages: []message.Message{userMsg("x", "x")}})
	wantErr(t, "Checkpoint with a's run on b's thread", err, store.ErrLeaseLost)

	checkpoint(t, s, store.Checkpoint{Tenant: "a", ThreadID: "shared", RunID: "ra",
		Interrupts: []store.Interrupt{interrupt("int_a", "call_1", T0)}, Events: []event.Event{{Type: event.StepStarted}}})
	finish(t, s, "a", "shared", "ra", store.Waiting, at(2*time.Second))
	if th := getThread(t, s, "b", "shared"); th.Status != store.Running {
		t.Fatalf("a's FinishRun changed b's thread: %+v", th)
	}
	_, err = s.GetInterrupt(ctx, "b", "int_a")
	wantErr(t, "GetInterrupt by b", err, store.ErrNotFound)
	_, err = s.Decide(ctx, "b", "int_a", store.Decision{Approved: true, At: at(time.Minute)})
	wantErr(t, "Decide by b", err, store.ErrNotFound)
	if ins, err := s.ListInterrupts(ctx, "b", store.InterruptFilter{}); err != nil || len(ins) != 0 {
		t.Fatalf("ListInterrupts by b: %v %v", interruptIDs(ins), err)
	}
	if ins, err := s.CallInterrupts(ctx, "b", "shared", []string{"call_1"}); err != nil || len(ins) != 0 {
		t.Fatalf("CallInterrupts by b: %v %v", interruptIDs(ins), err)
	}
	if es := events(t, s, "b", "shared", 0, 0); len(es) != 0 {
		t.Fatalf("b sees a's events: %+v", es)
	}
	_, err = s.Claim(ctx, store.Claim{Tenant: "b", ThreadID: "shared", RunID: "rx", Now: at(time.Second), LeaseUntil: at(time.Hour)})
	wantErr(t, "Claim of b's running thread", err, store.ErrNotClaimable)
	if res := decide(t, s, "a", "int_a", true, at(time.Minute)); !res.Queued {
		t.Fatalf("a's decision did not queue a's thread")
	}
	if th := getThread(t, s, "b", "shared"); th.Status != store.Running || th.RunID != "rb" {
		t.Fatalf("a's decision changed b's thread: %+v", th)
	}
}

// race runs fn n times at once and returns the errors.
func race(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = fn(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// oneWinner checks exactly one nil error and that every other is target.
func oneWinner(t *testing.T, what string, errs []error, target error) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("%s: calls %d and %d both won", what, winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, target):
			t.Fatalf("%s: call %d: got %v, want %v", what, i, err, target)
		}
	}
	if winner < 0 {
		t.Fatalf("%s: nobody won: %v", what, errs)
	}
	return winner
}

const racers = 8

// testConcurrentQuorum: racing approvals by distinct principals toward a
// quorum of racers-1 each count once: exactly racers-1 are accepted, the
// one that reaches the count (and only it) queues the thread, and the rest
// find it decided.
func testConcurrentQuorum(t *testing.T, s store.Store) {
	in := interrupt("int_1", "call_1", T0)
	in.ApprovalsNeeded = racers - 1
	waiting(t, s, "a", "t", "x", "r1", T0, in)
	results := make([]store.DecideResult, racers)
	errs := race(racers, func(i int) error {
		var err error
		results[i], err = s.Decide(t.Context(), "a", "int_1", store.Decision{Approved: true,
			Via: "api", By: fmt.Sprintf("a/k%d", i), At: at(time.Duration(i+1) * time.Second)})
		return err
	})
	accepted, queued := 0, 0
	for i, err := range errs {
		switch {
		case err == nil:
			accepted++
			if results[i].Queued {
				queued++
			}
		case !errors.Is(err, store.ErrAlreadyDecided):
			t.Fatalf("approval %d: %v", i, err)
		}
	}
	got := getInterrupt(t, s, "a", "int_1")
	if accepted != racers-1 || queued != 1 || got.Status != store.Approved || len(got.Approvals) != racers-1 {
		t.Fatalf("racing quorum approvals: %d accepted, %d queued, status %s, %d approvals; want %d, 1, approved, %d",
			accepted, queued, got.Status, len(got.Approvals), racers-1, racers-1)
	}
}

func testConcurrentDecide(t *testing.T, s store.Store) {
	waiting(t, s, "a", "t", "x", "r1", T0, interrupt("int_1", "call_1", T0))
	results := make([]store.DecideResult, racers)
	errs := race(racers, func(i int) error {
		var err error
		results[i], err = s.Decide(t.Context(), "a", "int_1", store.Decision{Approved: i%2 == 0, Message: fmt.Sprint(i),
			Via: "api", By: "a/k", At: at(time.Duration(i+1) * time.Second)})
		return err
	})
	w := oneWinner(t, "concurrent Decide", errs, store.ErrAlreadyDecided)
	if !results[w].Queued {
		t.Fatalf("the winning decision did not queue the thread")
	}
	in := getInterrupt(t, s, "a", "int_1")
	if in.Decision == nil || in.Decision.Message != fmt.Sprint(w) || in.Decision.Approved != (w%2 == 0) {
		t.Fatalf("stored decision is not the winner's (%d): %+v", w, in.Decision)
	}
	if th := getThread(t, s, "a", "t"); th.Status != store.Queued {
		t.Fatalf("thread: %s", th.Status)
	}
}

func testConcurrentBeginRun(t *testing.T, s store.Store) {
	threads := make([]*store.Begun, racers)
	errs := race(racers, func(i int) error {
		var err error
		threads[i], err = s.BeginRun(t.Context(), store.BeginRun{Tenant: "a", ThreadID: "new", Agent: "x",
			RunID: fmt.Sprintf("r%d", i), Owner: "o", Now: T0, LeaseUntil: at(time.Minute),
			Input: []message.Message{userMsg(fmt.Sprintf("m%d", i), "hi")}, Events: []event.Event{{Type: event.RunStarted}}})
		return err
	})
	w := oneWinner(t, "concurrent BeginRun on a new thread", errs, store.ErrRunInProgress)
	th := getThread(t, s, "a", "new")
	if th.RunID != fmt.Sprintf("r%d", w) || threads[w].RunID != th.RunID {
		t.Fatalf("thread run %q, winner r%d", th.RunID, w)
	}
	sameStrings(t, "messages", msgIDs(messages(t, s, "a", "new")), []string{fmt.Sprintf("m%d", w)})
	if es := events(t, s, "a", "new", 0, 0); len(es) != 1 {
		t.Fatalf("events: %+v", es)
	}
}

func testConcurrentClaim(t *testing.T, s store.Store) {
	waiting(t, s, "a", "t", "x", "r1", T0, interrupt("int_1", "call_1", T0))
	decide(t, s, "a", "int_1", true, at(time.Second))
	errs := race(racers, func(i int) error {
		_, err := s.Claim(t.Context(), store.Claim{Tenant: "a", ThreadID: "t", RunID: fmt.Sprintf("c%d", i),
			Owner: fmt.Sprintf("node-%d", i), Now: at(2 * time.Second), LeaseUntil: at(time.Minute)})
		return err
	})
	w := oneWinner(t, "concurrent Claim", errs, store.ErrNotClaimable)
	if th := getThread(t, s, "a", "t"); th.RunID != fmt.Sprintf("c%d", w) || th.LeaseOwner != fmt.Sprintf("node-%d", w) {
		t.Fatalf("thread %+v, winner %d", th, w)
	}
}

func testConcurrentWriters(t *testing.T, s store.Store) {
	const writers, steps = 4, 20
	for w := range writers {
		begin(t, s, "a", fmt.Sprintf("t%d", w), "x", "r", T0)
	}
	ctx := t.Context()
	errs := race(writers*2, func(i int) error {
		thread := fmt.Sprintf("t%d", i%writers)
		if i >= writers { // readers
			for range steps {
				if _, err := s.Messages(ctx, "a", thread); err != nil {
					return err
				}
				if _, err := s.GetThread(ctx, "a", thread); err != nil {
					return err
				}
			}
			return nil
		}
		for n := range steps {
			err := s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: thread, RunID: "r",
				Messages: []message.Message{
					{ID: fmt.Sprintf("a%d", n), Role: message.Assistant, ToolCalls: []message.ToolCall{{ID: "c", Name: "n", Arguments: "{}"}}},
					{ID: fmt.Sprintf("t%d", n), Role: message.Tool, ToolCallID: "c", Content: "ok"},
				},
				State:  json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)),
				Events: []event.Event{{Type: event.ToolResult, ToolCallID: "c"}},
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("goroutine %d: %v", i, err)
		}
	}
	for w := range writers {
		thread := fmt.Sprintf("t%d", w)
		ms := messages(t, s, "a", thread)
		if len(ms) != 2*steps {
			t.Fatalf("%s: %d messages, want %d", thread, len(ms), 2*steps)
		}
		for n := range steps {
			if ms[2*n].ID != fmt.Sprintf("a%d", n) || ms[2*n+1].ID != fmt.Sprintf("t%d", n) {
				t.Fatalf("%s: messages out of order at step %d: %s %s", thread, n, ms[2*n].ID, ms[2*n+1].ID)
			}
		}
		if es := events(t, s, "a", thread, 0, 0); len(es) != steps {
			t.Fatalf("%s: %d events, want %d", thread, len(es), steps)
		}
		sameJSON(t, thread+" state", getThread(t, s, "a", thread).State, fmt.Sprintf(`{"n":%d}`, steps-1))
	}
}

// testBeginRunOptions: each turn's options replace the last ones and come
// back from GetThread and Claim (a resume needs them).
func testBeginRunOptions(t *testing.T, s store.Store) {
	ctx := t.Context()
	opts := json.RawMessage(`{"system":"Be brief.","clientTools":[{"name":"open_modal"}],"maxTokens":50}`)
	th, err := s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: "t", Agent: "x", RunID: "r1", Owner: "o",
		Now: T0, LeaseUntil: at(time.Minute), Options: opts})
	if err != nil {
		t.Fatalf("BeginRun: %v", err)
	}
	sameJSON(t, "options returned by BeginRun", th.Options, opts)
	got, err := s.GetThread(ctx, "a", "t")
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "options stored", got.Options, opts)
	claimed, err := s.Claim(ctx, store.Claim{Tenant: "a", ThreadID: "t", RunID: "r2", Owner: "o2", Now: at(2 * time.Minute), LeaseUntil: at(3 * time.Minute)})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	sameJSON(t, "options returned by Claim", claimed.Options, opts)
	finish(t, s, "a", "t", "r2", store.Idle, at(3*time.Minute))
	begin(t, s, "a", "t", "x", "r3", at(4*time.Minute))
	got, _ = s.GetThread(ctx, "a", "t")
	sameJSON(t, "options of a turn without options", got.Options, json.RawMessage(`{}`))
}

func revoked(t *testing.T, s store.Store, tenant, id string, now time.Time) bool {
	t.Helper()
	r, err := s.SessionRevoked(t.Context(), tenant, id, now)
	if err != nil {
		t.Fatalf("SessionRevoked %s/%s: %v", tenant, id, err)
	}
	return r
}

func revoke(t *testing.T, s store.Store, tenant, id string, expires, now time.Time) {
	t.Helper()
	if err := s.RevokeSession(t.Context(), tenant, id, expires, now); err != nil {
		t.Fatalf("RevokeSession %s/%s: %v", tenant, id, err)
	}
}

func testRevokeSession(t *testing.T, s store.Store) {
	if revoked(t, s, "acme", "sess-1", T0) {
		t.Fatal("a session nobody revoked is revoked")
	}
	revoke(t, s, "acme", "sess-1", at(time.Hour), T0)
	if !revoked(t, s, "acme", "sess-1", T0) || !revoked(t, s, "acme", "sess-1", at(time.Hour-time.Microsecond)) {
		t.Fatal("a revoked session is not revoked before its expiry")
	}
	if revoked(t, s, "acme", "sess-1", at(time.Hour)) {
		t.Fatal("a revocation outlives the session's expiry")
	}
	// Tenants do not share session ids.
	if revoked(t, s, "globex", "sess-1", T0) || revoked(t, s, "acme", "sess-2", T0) {
		t.Fatal("a revocation reaches another tenant or session")
	}
	// Revoking again keeps the later expiry and is not an error.
	revoke(t, s, "acme", "sess-1", at(2*time.Hour), T0)
	revoke(t, s, "acme", "sess-1", at(time.Minute), T0)
	if !revoked(t, s, "acme", "sess-1", at(90*time.Minute)) {
		t.Fatal("revoking again shortened the revocation")
	}
	for _, c := range [][2]string{{"", "sess-1"}, {"acme", ""}} {
		wantErr(t, "RevokeSession "+c[0]+"/"+c[1], s.RevokeSession(t.Context(), c[0], c[1], at(time.Hour), T0), store.ErrInvalid)
		_, err := s.SessionRevoked(t.Context(), c[0], c[1], T0)
		wantErr(t, "SessionRevoked "+c[0]+"/"+c[1], err, store.ErrInvalid)
	}
}

// testRevokedSessionsPurged proves the row is gone, not just ignored: asked
// about a time before its expiry, a deleted revocation no longer answers.
func testRevokedSessionsPurged(t *testing.T, s store.Store) {
	revoke(t, s, "acme", "old", at(time.Hour), T0)
	revoke(t, s, "globex", "edge", at(2*time.Hour), T0)
	revoke(t, s, "acme", "young", at(3*time.Hour), T0)
	revoke(t, s, "acme", "new", at(4*time.Hour), at(2*time.Hour))
	if revoked(t, s, "acme", "old", T0) || revoked(t, s, "globex", "edge", T0) {
		t.Fatal("revocations that lapsed were not deleted")
	}
	if !revoked(t, s, "acme", "young", T0) || !revoked(t, s, "acme", "new", at(2*time.Hour)) {
		t.Fatal("a live revocation was deleted")
	}
}

// ---- journal of stateless turns ----

func journalEntry(tenant, key string, now time.Time, msgs ...message.Message) store.JournalEntry {
	return store.JournalEntry{Tenant: tenant, Key: key, Digest: "d-" + key, Messages: msgs,
		State: json.RawMessage(`{"draft":"v1"}`), UpdatedAt: now, ExpiresAt: now.Add(5 * time.Minute)}
}

func putJournal(t *testing.T, s store.Store, e store.JournalEntry) {
	t.Helper()
	if err := s.PutJournal(t.Context(), e); err != nil {
		t.Fatalf("PutJournal %s/%s: %v", e.Tenant, e.Key, err)
	}
}

func testJournalRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.GetJournal(ctx, "a", "k1", T0)
	wantErr(t, "GetJournal of an unknown key", err, store.ErrNotFound)

	call := message.Message{ID: "m1", Role: message.Assistant, Content: "Checking.",
		ToolCalls: []message.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}}
	result := message.Message{ID: "m2", Role: message.Tool, ToolCallID: "call_1", ToolName: "get_weather", Content: "{\"temp\":21,\"nul\":\"\\u0000\"}"}
	putJournal(t, s, journalEntry("a", "k1", T0, call))
	got, err := s.GetJournal(ctx, "a", "k1", at(time.Second))
	if err != nil {
		t.Fatalf("GetJournal: %v", err)
	}
	sameJSON(t, "first step", got.Messages, []message.Message{call})

	// A later step replaces the entry with every step so far.
	e := journalEntry("a", "k1", at(time.Minute), call, result)
	e.State = json.RawMessage(`{"draft":"v2"}`)
	putJournal(t, s, e)
	got, err = s.GetJournal(ctx, "a", "k1", at(2*time.Minute))
	if err != nil {
		t.Fatalf("GetJournal after the second step: %v", err)
	}
	if got.Tenant != "a" || got.Key != "k1" || got.Digest != "d-k1" {
		t.Fatalf("entry ids: %+v", got)
	}
	sameJSON(t, "both steps", got.Messages, []message.Message{call, result})
	sameJSON(t, "state", got.State, `{"draft":"v2"}`)
	sameTime(t, "UpdatedAt", got.UpdatedAt, at(time.Minute))
	sameTime(t, "ExpiresAt", got.ExpiresAt, at(6*time.Minute))

	// No messages and no state store as an empty list and "{}".
	putJournal(t, s, store.JournalEntry{Tenant: "a", Key: "k2", UpdatedAt: T0, ExpiresAt: at(time.Minute)})
	got, err = s.GetJournal(ctx, "a", "k2", T0)
	if err != nil {
		t.Fatalf("GetJournal of an empty entry: %v", err)
	}
	if len(got.Messages) != 0 {
		t.Fatalf("empty entry has messages: %+v", got.Messages)
	}
	sameJSON(t, "empty state", got.State, store.EmptyState)
}

func testJournalSweep(t *testing.T, s store.Store) {
	ctx := t.Context()
	putJournal(t, s, journalEntry("a", "old", T0, userMsg("m1", "x")))                 // expires at +5m
	putJournal(t, s, journalEntry("b", "old", at(time.Minute), userMsg("m2", "x")))    // +6m
	putJournal(t, s, journalEntry("a", "new", at(10*time.Minute), userMsg("m3", "x"))) // +15m

	// An expired entry is not returned, even before a sweep.
	_, err := s.GetJournal(ctx, "a", "old", at(5*time.Minute))
	wantErr(t, "GetJournal at ExpiresAt", err, store.ErrNotFound)
	if _, err := s.GetJournal(ctx, "b", "old", at(5*time.Minute)); err != nil {
		t.Fatalf("GetJournal before ExpiresAt: %v", err)
	}

	n, err := s.SweepJournal(ctx, at(6*time.Minute))
	if err != nil || n != 2 {
		t.Fatalf("SweepJournal at +6m: %d %v, want 2", n, err)
	}
	// Swept rows are gone for good: an earlier now does not bring them back.
	_, err = s.GetJournal(ctx, "b", "old", at(2*time.Minute))
	wantErr(t, "GetJournal of a swept entry", err, store.ErrNotFound)
	if _, err := s.GetJournal(ctx, "a", "new", at(6*time.Minute)); err != nil {
		t.Fatalf("unexpired entry swept: %v", err)
	}
	if n, err := s.SweepJournal(ctx, at(6*time.Minute)); err != nil || n != 0 {
		t.Fatalf("second SweepJournal: %d %v, want 0", n, err)
	}
	// A replaced entry takes the new expiry.
	putJournal(t, s, journalEntry("a", "new", at(20*time.Minute), userMsg("m3", "x"))) // +25m
	if n, err := s.SweepJournal(ctx, at(16*time.Minute)); err != nil || n != 0 {
		t.Fatalf("SweepJournal after the renewal: %d %v, want 0", n, err)
	}
}

func testJournalTenants(t *testing.T, s store.Store) {
	ctx := t.Context()
	putJournal(t, s, journalEntry("a", "same", T0, userMsg("ma", "from a")))
	_, err := s.GetJournal(ctx, "b", "same", T0)
	wantErr(t, "GetJournal by another tenant", err, store.ErrNotFound)
	putJournal(t, s, journalEntry("b", "same", T0, userMsg("mb", "from b")))
	for tenant, want := range map[string]string{"a": "ma", "b": "mb"} {
		got, err := s.GetJournal(ctx, tenant, "same", T0)
		if err != nil {
			t.Fatalf("GetJournal %s: %v", tenant, err)
		}
		sameStrings(t, tenant+"'s entry", msgIDs(got.Messages), []string{want})
	}
}

func testJournalInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	for name, e := range map[string]store.JournalEntry{
		"no tenant":        {Key: "k", UpdatedAt: T0, ExpiresAt: at(time.Minute)},
		"no key":           {Tenant: "a", UpdatedAt: T0, ExpiresAt: at(time.Minute)},
		"no expiry":        {Tenant: "a", Key: "k", UpdatedAt: T0},
		"state not object": {Tenant: "a", Key: "k", UpdatedAt: T0, ExpiresAt: at(time.Minute), State: json.RawMessage(`[1]`)},
	} {
		wantErr(t, "PutJournal with "+name, s.PutJournal(ctx, e), store.ErrInvalid)
	}
	_, err := s.GetJournal(ctx, "a", "k", T0)
	wantErr(t, "GetJournal after refused puts", err, store.ErrNotFound)
}

func testRecordDecided(t *testing.T, s store.Store) {
	ctx := t.Context()
	waiting(t, s, "a", "x", "refunds", "r1", T0, interrupt("int_x1", "c1", at(1*time.Second)))
	ran := store.Interrupt{ID: "int_s1", Tenant: "a", RunID: "run_s", Agent: "refunds", ToolCallID: "call_1", Tool: "refund",
		Args: json.RawMessage(`{"orderId":"A1","amount":5}`), Description: "Refund A1 for 5",
		AllowedDecisions: []string{"approve", "reject"}, ResponseSchema: json.RawMessage(`{"type":"object"}`),
		Status: store.Approved, CreatedAt: at(2 * time.Second),
		Decision: &store.Decision{Approved: true, Via: store.ViaStateless, By: "a/key", At: at(2 * time.Second)}}
	if err := s.RecordDecided(ctx, ran); err != nil {
		t.Fatalf("RecordDecided: %v", err)
	}
	refused := ran
	refused.ID, refused.ToolCallID, refused.Status, refused.CreatedAt = "int_s2", "call_2", store.Rejected, at(3*time.Second)
	refused.Decision = &store.Decision{Approved: false, Message: "no session", Via: store.ViaStateless, ClaimedVia: "cli", By: "a/key"}
	if err := s.RecordDecided(ctx, refused); err != nil {
		t.Fatalf("RecordDecided refused: %v", err)
	}
	sameInterrupt(t, "stateless record", getInterrupt(t, s, "a", "int_s1"), &ran)
	want := refused
	d := *refused.Decision
	d.At = refused.CreatedAt // a zero decision time is the creation time
	want.Decision = &d
	sameInterrupt(t, "refused record", getInterrupt(t, s, "a", "int_s2"), &want)

	list := func(tenant string, f store.InterruptFilter) []string {
		t.Helper()
		ins, err := s.ListInterrupts(ctx, tenant, f)
		if err != nil {
			t.Fatalf("ListInterrupts: %v", err)
		}
		return interruptIDs(ins)
	}
	sameStrings(t, "approved", list("a", store.InterruptFilter{Status: store.Approved}), []string{"int_s1"})
	sameStrings(t, "rejected", list("a", store.InterruptFilter{Status: store.Rejected}), []string{"int_s2"})
	sameStrings(t, "pending", list("a", store.InterruptFilter{}), []string{"int_x1"})
	sameStrings(t, "thread x", list("a", store.InterruptFilter{ThreadID: "x", Status: store.Approved}), nil)
	sameStrings(t, "agent", list("a", store.InterruptFilter{Agent: "refunds", Status: store.Approved}), []string{"int_s1"})
	sameStrings(t, "tenant b", list("b", store.InterruptFilter{Status: store.Approved}), nil)
	if _, err := s.GetInterrupt(ctx, "b", "int_s1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("tenant b reads a's record: %v", err)
	}
	_, err := s.Decide(ctx, "a", "int_s1", store.Decision{Approved: false, Via: "api", By: "a/key", At: at(time.Minute)})
	wantErr(t, "deciding a stateless record", err, store.ErrAlreadyDecided)
	sameInterrupt(t, "record after a second decision", getInterrupt(t, s, "a", "int_s1"), &ran)

	bad := ran
	bad.ID, bad.ThreadID = "int_bad1", "x"
	wantErr(t, "a record with a thread", s.RecordDecided(ctx, bad), store.ErrInvalid)
	bad = ran
	bad.ID, bad.Decision = "int_bad2", nil
	wantErr(t, "a record without a decision", s.RecordDecided(ctx, bad), store.ErrInvalid)
	if _, err := s.GetInterrupt(ctx, "a", "int_bad1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an invalid record was stored: %v", err)
	}
}

// ---- responses ----

func putResponse(t *testing.T, s store.Store, r store.Response) (*store.Response, bool) {
	t.Helper()
	got, created, err := s.PutResponse(t.Context(), r)
	if err != nil {
		t.Fatalf("PutResponse %s/%s: %v", r.Tenant, r.ID, err)
	}
	return got, created
}

func getResponse(t *testing.T, s store.Store, tenant, id string) *store.Response {
	t.Helper()
	r, err := s.GetResponse(t.Context(), tenant, id)
	if err != nil {
		t.Fatalf("GetResponse %s/%s: %v", tenant, id, err)
	}
	return r
}

// nextID returns the id of NextResponse, or "" when it is ErrNotFound.
func nextID(t *testing.T, s store.Store, tenant, thread string, seq int64) string {
	t.Helper()
	r, err := s.NextResponse(t.Context(), tenant, thread, seq)
	if errors.Is(err, store.ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatalf("NextResponse %s/%s after %d: %v", tenant, thread, seq, err)
	}
	return r.ID
}

// sameResponse compares every field of two responses.
func sameResponse(t *testing.T, what string, got *store.Response, want store.Response) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: nil response", what)
	}
	g, w := *got, want
	sameJSON(t, what+": request", g.Request, w.Request)
	sameTime(t, what+": created", g.CreatedAt, w.CreatedAt)
	g.Request, w.Request, g.CreatedAt, w.CreatedAt = nil, nil, time.Time{}, time.Time{}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s:\n got  %+v\n want %+v", what, g, w)
	}
}

func response(tenant, id, thread string, seq int64, created time.Time) store.Response {
	return store.Response{ID: id, Tenant: tenant, ThreadID: thread, Seq: seq,
		Request: json.RawMessage(`{"model":"m","input":"` + id + `"}`), CreatedAt: created}
}

func testResponsesRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	th := begin(t, s, "a", "x", "support", "r1", T0, userMsg("m1", "hi"))
	first := store.Response{ID: "resp_1", Tenant: "a", ThreadID: "x", Seq: th.Turn.Seq, Background: true,
		Request:   json.RawMessage(`{"model":"m","instructions":"be brief","input":[{"role":"user","content":"hi \u0000 é"}],"metadata":{"k":"v"}}`),
		CreatedAt: at(time.Second)}
	got, created := putResponse(t, s, first)
	if !created {
		t.Fatalf("PutResponse of a new response: created = false")
	}
	sameResponse(t, "PutResponse", got, first)
	sameResponse(t, "GetResponse", getResponse(t, s, "a", "resp_1"), first)

	second := store.Response{ID: "resp_2", Tenant: "a", ThreadID: "x", Seq: th.Turn.Seq + 4, PreviousID: "resp_1",
		CreatedAt: at(time.Minute)}
	putResponse(t, s, second)
	second.Request = json.RawMessage(`{}`) // an empty request is stored as {}
	sameResponse(t, "response without a request", getResponse(t, s, "a", "resp_2"), second)

	_, err := s.GetResponse(ctx, "a", "resp_none")
	wantErr(t, "GetResponse of an unknown id", err, store.ErrNotFound)
}

func testResponsesRetry(t *testing.T, s store.Store) {
	ctx := t.Context()
	begin(t, s, "a", "x", "support", "r1", T0)
	begin(t, s, "a", "y", "support", "r2", T0)
	orig := response("a", "resp_1", "x", 3, at(time.Second))
	putResponse(t, s, orig)

	// A retry attached to the turn at seq 3 gets the stored response, whatever
	// id and request it brought.
	retry := response("a", "resp_retry", "x", 3, at(time.Minute))
	retry.Background, retry.PreviousID = true, "resp_0"
	got, created := putResponse(t, s, retry)
	if created {
		t.Fatalf("PutResponse at a taken seq: created = true")
	}
	sameResponse(t, "response of the retry", got, orig)
	sameResponse(t, "stored response after the retry", getResponse(t, s, "a", "resp_1"), orig)
	_, err := s.GetResponse(ctx, "a", "resp_retry")
	wantErr(t, "GetResponse of the retry's own id", err, store.ErrNotFound)
	got, created = putResponse(t, s, orig)
	if created {
		t.Fatalf("PutResponse of the same response again: created = true")
	}
	sameResponse(t, "same response again", got, orig)

	// The seq is unique within a thread, not across threads.
	other := response("a", "resp_y", "y", 3, at(time.Second))
	if got, created := putResponse(t, s, other); !created {
		t.Fatalf("PutResponse at seq 3 of another thread: created = false, got %+v", got)
	}
	// An id already given to another response is refused.
	_, _, err = s.PutResponse(ctx, response("a", "resp_1", "x", 9, at(time.Minute)))
	wantErr(t, "PutResponse with a taken id", err, store.ErrInvalid)
	if id := nextID(t, s, "a", "x", 3); id != "" {
		t.Fatalf("the refused response was stored: NextResponse after 3 = %q", id)
	}
}

func testResponsesTenants(t *testing.T, s store.Store) {
	ctx := t.Context()
	begin(t, s, "a", "x", "support", "ra", T0)
	begin(t, s, "b", "z", "support", "rb", T0)
	orig := response("a", "resp_1", "x", 1, at(time.Second))
	putResponse(t, s, orig)

	_, err := s.GetResponse(ctx, "b", "resp_1")
	wantErr(t, "GetResponse by b", err, store.ErrNotFound)
	wantErr(t, "CancelResponse by b", s.CancelResponse(ctx, "b", "resp_1"), store.ErrNotFound)
	wantErr(t, "DeleteResponse by b", s.DeleteResponse(ctx, "b", "resp_1"), store.ErrNotFound)
	_, err = s.NextResponse(ctx, "b", "x", 0)
	wantErr(t, "NextResponse by b on a's thread", err, store.ErrNotFound)
	_, _, err = s.PutResponse(ctx, response("b", "resp_b", "x", 2, at(time.Second)))
	wantErr(t, "PutResponse by b on a's thread", err, store.ErrNotFound)
	_, _, err = s.PutResponse(ctx, response("a", "resp_u", "unknown", 1, at(time.Second)))
	wantErr(t, "PutResponse on an unknown thread", err, store.ErrNotFound)
	if id := nextID(t, s, "a", "x", 1); id != "" {
		t.Fatalf("b's response was stored on a's thread: %q", id)
	}
	sameResponse(t, "a's response after b's calls", getResponse(t, s, "a", "resp_1"), orig)

	// b may use the same id on its own thread.
	mine := response("b", "resp_1", "z", 1, at(time.Minute))
	putResponse(t, s, mine)
	sameResponse(t, "b's resp_1", getResponse(t, s, "b", "resp_1"), mine)
	sameResponse(t, "a's resp_1", getResponse(t, s, "a", "resp_1"), orig)
}

func testResponsesNextAndDelete(t *testing.T, s store.Store) {
	ctx := t.Context()
	begin(t, s, "a", "x", "support", "r1", T0, userMsg("m1", "hi"))
	begin(t, s, "a", "y", "support", "r2", T0)
	for _, r := range []store.Response{
		response("a", "resp_3", "x", 9, at(3*time.Second)), // out of order
		response("a", "resp_1", "x", 1, at(time.Second)),
		response("a", "resp_2", "x", 4, at(2*time.Second)),
		response("a", "resp_y", "y", 2, at(time.Second)),
	} {
		putResponse(t, s, r)
	}
	for seq, want := range map[int64]string{0: "resp_1", 1: "resp_2", 3: "resp_2", 4: "resp_3", 8: "resp_3", 9: ""} {
		if got := nextID(t, s, "a", "x", seq); got != want {
			t.Fatalf("NextResponse after %d: %q, want %q", seq, got, want)
		}
	}
	sameResponse(t, "NextResponse", func() *store.Response {
		r, err := s.NextResponse(ctx, "a", "x", 1)
		if err != nil {
			t.Fatalf("NextResponse: %v", err)
		}
		return r
	}(), response("a", "resp_2", "x", 4, at(2*time.Second)))

	if err := s.DeleteResponse(ctx, "a", "resp_2"); err != nil {
		t.Fatalf("DeleteResponse: %v", err)
	}
	_, err := s.GetResponse(ctx, "a", "resp_2")
	wantErr(t, "GetResponse of a deleted response", err, store.ErrNotFound)
	wantErr(t, "DeleteResponse again", s.DeleteResponse(ctx, "a", "resp_2"), store.ErrNotFound)
	wantErr(t, "CancelResponse of a deleted response", s.CancelResponse(ctx, "a", "resp_2"), store.ErrNotFound)
	wantErr(t, "DeleteResponse of an unknown id", s.DeleteResponse(ctx, "a", "resp_none"), store.ErrNotFound)
	// The deleted response still bounds its neighbours, and the thread keeps
	// its messages.
	if got := nextID(t, s, "a", "x", 1); got != "resp_2" {
		t.Fatalf("NextResponse after 1 once resp_2 is deleted: %q, want resp_2", got)
	}
	sameStrings(t, "messages after a delete", msgIDs(messages(t, s, "a", "x")), []string{"m1"})
	getResponse(t, s, "a", "resp_1")
	getResponse(t, s, "a", "resp_3")
	// A retry at the deleted response's seq does not store another.
	if _, created := putResponse(t, s, response("a", "resp_again", "x", 4, at(time.Minute))); created {
		t.Fatalf("PutResponse at a deleted response's seq: created = true")
	}
}

func testResponsesCancel(t *testing.T, s store.Store) {
	ctx := t.Context()
	begin(t, s, "a", "x", "support", "r1", T0)
	r := response("a", "resp_1", "x", 1, at(time.Second))
	r.Background = true
	putResponse(t, s, r)
	putResponse(t, s, response("a", "resp_2", "x", 5, at(2*time.Second)))

	if err := s.CancelResponse(ctx, "a", "resp_1"); err != nil {
		t.Fatalf("CancelResponse: %v", err)
	}
	r.Cancelled = true
	sameResponse(t, "cancelled response", getResponse(t, s, "a", "resp_1"), r)
	if err := s.CancelResponse(ctx, "a", "resp_1"); err != nil {
		t.Fatalf("CancelResponse again: %v", err)
	}
	if got := getResponse(t, s, "a", "resp_2"); got.Cancelled {
		t.Fatalf("cancelling resp_1 cancelled resp_2: %+v", got)
	}
	got, created := putResponse(t, s, response("a", "resp_retry", "x", 1, at(time.Minute)))
	if created || !got.Cancelled {
		t.Fatalf("retry of a cancelled response: created %v, %+v", created, got)
	}
	wantErr(t, "CancelResponse of an unknown id", s.CancelResponse(ctx, "a", "resp_none"), store.ErrNotFound)
}

func testResponsesInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	begin(t, s, "a", "x", "support", "r1", T0)
	ok := response("a", "resp_1", "x", 1, T0)
	for name, edit := range map[string]func(r *store.Response){
		"no id":                  func(r *store.Response) { r.ID = "" },
		"no tenant":              func(r *store.Response) { r.Tenant = "" },
		"no thread":              func(r *store.Response) { r.ThreadID = "" },
		"seq 0":                  func(r *store.Response) { r.Seq = 0 },
		"negative seq":           func(r *store.Response) { r.Seq = -1 },
		"a NUL byte in the id":   func(r *store.Response) { r.ID = "resp_\x00" },
		"invalid UTF-8 previous": func(r *store.Response) { r.PreviousID = "resp_\xff" },
		"a request not JSON":     func(r *store.Response) { r.Request = json.RawMessage(`{"model":`) },
		"a request not UTF-8":    func(r *store.Response) { r.Request = json.RawMessage("{\"model\":\"\xff\"}") },
	} {
		r := ok
		edit(&r)
		_, _, err := s.PutResponse(ctx, r)
		wantErr(t, "PutResponse with "+name, err, store.ErrInvalid)
	}
	if id := nextID(t, s, "a", "x", 0); id != "" {
		t.Fatalf("an invalid response was stored: %q", id)
	}
	for _, ids := range [][2]string{{"", "resp_1"}, {"a", ""}, {"a", "resp_\x00"}, {"a\xff", "resp_1"}} {
		_, err := s.GetResponse(ctx, ids[0], ids[1])
		wantErr(t, fmt.Sprintf("GetResponse(%q, %q)", ids[0], ids[1]), err, store.ErrInvalid)
		_, err = s.NextResponse(ctx, ids[0], ids[1], 0)
		wantErr(t, fmt.Sprintf("NextResponse(%q, %q)", ids[0], ids[1]), err, store.ErrInvalid)
		wantErr(t, fmt.Sprintf("CancelResponse(%q, %q)", ids[0], ids[1]), s.CancelResponse(ctx, ids[0], ids[1]), store.ErrInvalid)
		wantErr(t, fmt.Sprintf("DeleteResponse(%q, %q)", ids[0], ids[1]), s.DeleteResponse(ctx, ids[0], ids[1]), store.ErrInvalid)
	}
}

// testResponsesConcurrent races retries of one turn, each with its own id:
// one stores its response, and every other gets that one back.
func testResponsesConcurrent(t *testing.T, s store.Store) {
	begin(t, s, "a", "x", "support", "r1", T0)
	got := make([]*store.Response, racers)
	created := make([]bool, racers)
	errs := race(racers, func(i int) error {
		var err error
		got[i], created[i], err = s.PutResponse(t.Context(), response("a", fmt.Sprintf("resp_%d", i), "x", 1, T0))
		return err
	})
	winner := -1
	for i, err := range errs {
		if err != nil {
			t.Fatalf("PutResponse %d: %v", i, err)
		}
		if created[i] {
			if winner >= 0 {
				t.Fatalf("PutResponse %d and %d both created a response at seq 1", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("no PutResponse created the response")
	}
	want := response("a", fmt.Sprintf("resp_%d", winner), "x", 1, T0)
	for i := range got {
		sameResponse(t, fmt.Sprintf("PutResponse %d", i), got[i], want)
	}
}

// testGetMessage: a stored message is found by its id in any of the
// tenant's threads, and never by another tenant.
func testGetMessage(t *testing.T, s store.Store) {
	ctx := t.Context()
	begin(t, s, "a", "x", "support", "r1", T0, userMsg("m1", "hi\x00"), userMsg("m2", "second"))
	begin(t, s, "a", "y", "support", "r2", T0, userMsg("m3", "other thread"))
	begin(t, s, "b", "x", "support", "r3", T0, userMsg("m4", "tenant b"))
	for id, want := range map[string]string{"m1": "hi\x00", "m2": "second", "m3": "other thread"} {
		m, err := s.GetMessage(ctx, "a", id)
		if err != nil || m.ID != id || m.Content != want || m.Role != message.User {
			t.Fatalf("GetMessage a/%s: %+v %v", id, m, err)
		}
	}
	_, err := s.GetMessage(ctx, "a", "m4")
	wantErr(t, "GetMessage of another tenant's message", err, store.ErrNotFound)
	_, err = s.GetMessage(ctx, "a", "nope")
	wantErr(t, "GetMessage of an unknown id", err, store.ErrNotFound)
	_, err = s.GetMessage(ctx, "a", "bad\x00id")
	wantErr(t, "GetMessage of an id with a NUL byte", err, store.ErrInvalid)
}

func testInterruptExpiry(t *testing.T, s store.Store) {
	ctx := t.Context()
	exp := func(id, call string, d time.Duration) store.Interrupt {
		in := interrupt(id, call, T0)
		e := at(d)
		in.ExpiresAt = &e
		return in
	}
	waiting(t, s, "acme", "t1", "refunds", "r1", T0, exp("int_late", "call_1", 10*time.Minute),
		exp("int_soon", "call_2", 5*time.Minute), interrupt("int_never", "call_3", T0))
	waiting(t, s, "other", "t2", "refunds", "r2", T0, exp("int_other", "call_1", 7*time.Minute))
	waiting(t, s, "acme", "t3", "refunds", "r3", T0, exp("int_decided", "call_1", time.Minute))
	decide(t, s, "acme", "int_decided", true, at(30*time.Second))

	want := exp("int_soon", "call_2", 5*time.Minute)
	want.Tenant, want.ThreadID, want.RunID, want.Agent, want.Status = "acme", "t1", "r1", "refunds", store.Pending
	sameInterrupt(t, "interrupt with an expiry", getInterrupt(t, s, "acme", "int_soon"), &want)
	if in := getInterrupt(t, s, "acme", "int_never"); in.ExpiresAt != nil {
		t.Fatalf("an interrupt without an expiry reads ExpiresAt %v", in.ExpiresAt)
	}

	ids := func(now time.Time, limit int) []string {
		t.Helper()
		ins, err := s.ExpiredInterrupts(ctx, now, limit)
		if err != nil {
			t.Fatalf("ExpiredInterrupts at %v: %v", now, err)
		}
		out := []string{}
		for _, in := range ins {
			out = append(out, in.ID)
		}
		return out
	}
	sameStrings(t, "expired before any expiry", ids(at(4*time.Minute), 10), []string{})
	sameStrings(t, "expired exactly at an expiry", ids(at(5*time.Minute), 10), []string{"int_soon"})
	sameStrings(t, "expired across tenants", ids(at(time.Hour), 10), []string{"int_soon", "int_other", "int_late"})
	sameStrings(t, "expired with a limit", ids(at(time.Hour), 2), []string{"int_soon", "int_other"})

	if _, err := s.Decide(ctx, "acme", "int_soon", store.Decision{Approved: false, Message: "The approval request expired.",
		Via: store.ViaExpiry, At: at(5 * time.Minute)}); err != nil {
		t.Fatalf("Decide as expiry: %v", err)
	}
	sameStrings(t, "expired after one was decided", ids(at(time.Hour), 10), []string{"int_other", "int_late"})
	if in := getInterrupt(t, s, "acme", "int_soon"); in.Status != store.Rejected || in.Decision == nil || in.Decision.Via != store.ViaExpiry || in.ExpiresAt == nil {
		t.Fatalf("interrupt decided by expiry: %+v", in)
	}
}

// cancelWait is a CancelWait of thread/run closing ids, with one tool
// result per call and a terminal event.
func cancelWait(t *testing.T, s store.Store, tenant, thread, run string, now time.Time, ids []string, calls ...string) error {
	c := store.CancelWait{Tenant: tenant, ThreadID: thread, RunID: run, Now: now, Error: "The run was cancelled.",
		Decisions: map[string]store.Decision{},
		Events:    []event.Event{{Type: event.RunError, Code: "cancelled", Message: "The run was cancelled."}}}
	for _, id := range ids {
		c.Decisions[id] = store.Decision{Approved: false, Message: "cancelled", Via: "cancel", By: tenant + "/key", At: now}
	}
	for _, id := range calls {
		c.Messages = append(c.Messages, message.Message{ID: "m-" + id, Role: message.Tool, ToolCallID: id, Content: "cancelled"})
	}
	return s.CancelWait(t.Context(), c)
}

func testCancelWait(t *testing.T, s store.Store) {
	waiting(t, s, "a", "t", "x", "r1", T0, interrupt("int_1", "call_1", T0), interrupt("int_2", "call_2", T0))
	waiting(t, s, "a", "other", "x", "r1", T0, interrupt("int_o", "call_1", T0))
	before := events(t, s, "a", "t", 0, 0)

	// Not the pending set, not the pause's run, not a thread: nothing changes.
	wantErr(t, "CancelWait naming one of two pending", cancelWait(t, s, "a", "t", "r1", at(time.Minute), []string{"int_1"}, "call_1"), store.ErrWaitChanged)
	wantErr(t, "CancelWait of another run", cancelWait(t, s, "a", "t", "r0", at(time.Minute), []string{"int_1", "int_2"}), store.ErrNotWaiting)
	wantErr(t, "CancelWait of an unknown thread", cancelWait(t, s, "a", "nope", "r1", at(time.Minute), nil), store.ErrNotFound)
	wantErr(t, "CancelWait of another tenant's thread", cancelWait(t, s, "b", "t", "r1", at(time.Minute), []string{"int_1", "int_2"}), store.ErrNotFound)
	if th := getThread(t, s, "a", "t"); th.Status != store.Waiting {
		t.Fatalf("a refused cancel changed the thread: %s", th.Status)
	}
	if in := getInterrupt(t, s, "a", "int_1"); in.Status != store.Pending {
		t.Fatalf("a refused cancel closed int_1: %s", in.Status)
	}
	if n := len(events(t, s, "a", "t", 0, 0)); n != len(before) {
		t.Fatalf("a refused cancel stored events: %d, want %d", n, len(before))
	}

	if err := cancelWait(t, s, "a", "t", "r1", at(time.Minute), []string{"int_2", "int_1"}, "call_1", "call_2"); err != nil {
		t.Fatalf("CancelWait: %v", err)
	}
	th := getThread(t, s, "a", "t")
	if th.Status != store.Idle {
		t.Fatalf("after the cancel: status %s, want idle", th.Status)
	}
	for _, id := range []string{"int_1", "int_2"} {
		in := getInterrupt(t, s, "a", id)
		if in.Status != store.Rejected || in.Decision == nil || in.Decision.Via != "cancel" || in.Decision.By != "a/key" {
			t.Fatalf("%s after the cancel: %+v %+v", id, in.Status, in.Decision)
		}
	}
	if p, err := s.ListInterrupts(t.Context(), "a", store.InterruptFilter{ThreadID: "t"}); err != nil || len(p) != 0 {
		t.Fatalf("pending after the cancel: %v %v", interruptIDs(p), err)
	}
	_, err := s.Decide(t.Context(), "a", "int_1", store.Decision{Approved: true, Via: "api", By: "a/key", At: at(2 * time.Minute)})
	wantErr(t, "Decide after the cancel", err, store.ErrAlreadyDecided)
	ms := messages(t, s, "a", "t")
	sameStrings(t, "messages", msgIDs(ms), []string{"m-r1", "m-call_1", "m-call_2"})
	evs := events(t, s, "a", "t", 0, 0)
	if len(evs) != len(before)+1 {
		t.Fatalf("events after the cancel: %d, want %d", len(evs), len(before)+1)
	}
	last := evs[len(evs)-1]
	if last.Type != event.RunError || last.Code != "cancelled" || last.RunID != "r1" || last.Seq != int64(len(evs)) {
		t.Fatalf("the stored terminal event: %+v", last)
	}
	wantErr(t, "CancelWait again", cancelWait(t, s, "a", "t", "r1", at(3*time.Minute), nil), store.ErrNotWaiting)
	_, err = s.Claim(t.Context(), store.Claim{Tenant: "a", ThreadID: "t", RunID: "r2", Owner: "o", Now: at(3 * time.Minute), LeaseUntil: at(4 * time.Minute)})
	wantErr(t, "Claim after the cancel", err, store.ErrNotClaimable)
	if o := getThread(t, s, "a", "other"); o.Status != store.Waiting {
		t.Fatalf("another thread changed: %s", o.Status)
	}
	if in := getInterrupt(t, s, "a", "int_o"); in.Status != store.Pending {
		t.Fatalf("another thread's decision changed: %s", in.Status)
	}
	// The thread takes a new turn.
	begin(t, s, "a", "t", "x", "r3", at(5*time.Minute), userMsg("m-r3", "next"))
}

// testCancelWaitRunRecord: the record of the run whose pause is cancelled
// reads cancelled, not waiting.
func testCancelWaitRunRecord(t *testing.T, s store.Store) {
	begin(t, s, "a", "t", "x", "r1", T0, userMsg("m-r1", "refund A1"))
	checkpoint(t, s, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r1", Interrupts: []store.Interrupt{interrupt("int_1", "call_1", T0)}})
	end := T0.Add(time.Second)
	if err := s.FinishRun(t.Context(), store.FinishRun{Tenant: "a", ThreadID: "t", RunID: "r1", Status: store.Waiting, Now: end,
		Run: &store.RunRecord{Status: string(store.Waiting), StartedAt: T0, EndedAt: &end}}); err != nil {
		t.Fatalf("FinishRun: %v", err)
	}
	if err := cancelWait(t, s, "a", "t", "r1", at(time.Minute), []string{"int_1"}, "call_1"); err != nil {
		t.Fatalf("CancelWait: %v", err)
	}
	runs, err := s.ListRuns(t.Context(), "a", "t")
	if err != nil || len(runs) != 1 {
		t.Fatalf("ListRuns: %+v %v", runs, err)
	}
	if runs[0].Status != "cancelled" {
		t.Fatalf("the cancelled pause's run record: status %q, want cancelled", runs[0].Status)
	}
}

func testCancelWaitQueued(t *testing.T, s store.Store) {
	waiting(t, s, "a", "t", "x", "r1", T0, interrupt("int_1", "call_1", T0))
	if res := decide(t, s, "a", "int_1", true, at(time.Minute)); !res.Queued {
		t.Fatal("the last decision did not queue the resume")
	}
	wantErr(t, "CancelWait naming a decided interrupt", cancelWait(t, s, "a", "t", "r1", at(2*time.Minute), []string{"int_1"}), store.ErrWaitChanged)
	if err := cancelWait(t, s, "a", "t", "r1", at(2*time.Minute), nil, "call_1"); err != nil {
		t.Fatalf("CancelWait of a queued resume: %v", err)
	}
	if th := getThread(t, s, "a", "t"); th.Status != store.Idle {
		t.Fatalf("after the cancel: status %s, want idle", th.Status)
	}
	if in := getInterrupt(t, s, "a", "int_1"); in.Status != store.Approved {
		t.Fatalf("the cancel changed a decided interrupt: %s", in.Status)
	}
	_, err := s.Claim(t.Context(), store.Claim{Tenant: "a", ThreadID: "t", RunID: "r2", Owner: "o", Now: at(3 * time.Minute), LeaseUntil: at(4 * time.Minute)})
	wantErr(t, "Claim after the cancel", err, store.ErrNotClaimable)
	if ts, err := s.Stale(t.Context(), at(time.Hour), 0); err != nil || len(ts) != 0 {
		t.Fatalf("Stale after the cancel: %v %v", threadIDs(ts), err)
	}
}

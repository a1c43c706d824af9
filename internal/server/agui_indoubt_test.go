package server_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// aguiInDoubt leaves an AG-UI thread's approved refund in doubt as a crash
// does: a process (here the test, through the store) took the decided
// thread, marked the call started and died before its result; the
// server's recovery finds the call in doubt. It returns the call's id.
func aguiInDoubt(t *testing.T, env *stacktest.Env, thread string) string {
	t.Helper()
	_, it := aguiInterrupt(t, env, thread, "refund my order")
	ctx := t.Context()
	if _, err := env.Store.Decide(ctx, "dev", it["id"].(string), store.Decision{Approved: true, Via: "agui", By: "dev"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := env.Store.Claim(ctx, store.Claim{Tenant: "dev", ThreadID: thread, RunID: "run_dead", Owner: "dead",
		Now: now, LeaseUntil: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	callID := it["toolCallId"].(string)
	if err := env.Store.Checkpoint(ctx, store.Checkpoint{Tenant: "dev", ThreadID: thread, RunID: "run_dead",
		Started: []string{callID}}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Runner.Recover(ctx, now.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	stacktest.WaitFor(t, "the call to be in doubt", func() bool { return env.Thread(t, "dev", thread).Status == store.Waiting })
	return callID
}

// TestAGUIInDoubtInterruptAndResume: an in-doubt call reaches an AG-UI
// client as an interrupt with reason in_doubt, allowedDecisions retry and
// skip (also under metadata.stackbone) and a responseSchema asking for
// decision; {"approved": true} does not answer it; {"decision": "retry"}
// runs the call again; a cancelled resume skips it and the model is told
// the outcome is unknown.
func TestAGUIInDoubtInterruptAndResume(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	callID := aguiInDoubt(t, env, "th-doubt")

	// A client that reattaches gets the in-doubt interrupt.
	s := aguiPost(t, env, "assistant", `{"threadId":"th-doubt","runId":"run-r","messages":[],"tools":[],"context":[]}`)
	checkTerminal(t, s)
	out, _ := s.last()["outcome"].(map[string]any)
	if out["type"] != "interrupt" {
		t.Fatalf("reattach: %v", s.last())
	}
	it := out["interrupts"].([]any)[0].(map[string]any)
	if it["reason"] != "in_doubt" || it["toolCallId"] != callID ||
		!strings.HasPrefix(fmt.Sprint(it["message"]), "This call may already have run: refund(") {
		t.Fatalf("interrupt %v", it)
	}
	if !reflect.DeepEqual(it["allowedDecisions"], []any{"retry", "skip"}) {
		t.Fatalf("allowedDecisions %v", it["allowedDecisions"])
	}
	md, _ := it["metadata"].(map[string]any)
	sb, _ := md["stackbone"].(map[string]any)
	if sb["reason"] != "in_doubt" || !reflect.DeepEqual(sb["allowedDecisions"], []any{"retry", "skip"}) {
		t.Fatalf("metadata %v", md)
	}
	if !strings.Contains(fmt.Sprint(it["responseSchema"]), "decision") {
		t.Fatalf("responseSchema %v", it["responseSchema"])
	}

	resume := func(run, entry string) aguiStream {
		body := `{"threadId":"th-doubt","runId":"` + run + `","messages":[],"tools":[],"context":[],"resume":[` + entry + `]}`
		return aguiPost(t, env, "assistant", body)
	}
	// An approval's payload does not answer it, and changes nothing.
	bad := resume("run-bad", fmt.Sprintf(`{"interruptId":%q,"status":"resolved","payload":{"approved":true}}`, it["id"]))
	checkRunError(t, bad, "invalid_resume_payload")
	if env.Thread(t, "dev", "th-doubt").Status != store.Waiting || env.Calls.Get("refund") != 0 {
		t.Fatal("a refused resume changed the thread")
	}
	ok := resume("run-2", fmt.Sprintf(`{"interruptId":%q,"status":"resolved","payload":{"decision":"retry"}}`, it["id"]))
	checkTerminal(t, ok)
	if res := ok.first("TOOL_CALL_RESULT"); res == nil || res["toolCallId"] != callID {
		t.Fatalf("retry: %v", ok.types())
	}
	if n := env.Calls.Get("refund"); n != 1 {
		t.Fatalf("retry ran the refund %d times", n)
	}
	if d, err := env.Store.GetInterrupt(t.Context(), "dev", it["id"].(string)); err != nil || d.Decision.Kind != "retry" || d.Decision.Via != "agui" {
		t.Fatalf("decision %+v %v", d, err)
	}

	// Cancelled: skipped, nothing runs, the model hears the outcome is unknown.
	callID = aguiInDoubt(t, env, "th-doubt-2")
	pend, err := env.Store.ListInterrupts(t.Context(), "dev", store.InterruptFilter{ThreadID: "th-doubt-2"})
	if err != nil || len(pend) != 1 {
		t.Fatalf("pending %v %v", pend, err)
	}
	body := fmt.Sprintf(`{"threadId":"th-doubt-2","runId":"run-c","messages":[],"tools":[],"context":[],"resume":[{"interruptId":%q,"status":"cancelled"}]}`, pend[0].ID)
	c := aguiPost(t, env, "assistant", body)
	checkTerminal(t, c)
	if res := c.first("TOOL_CALL_RESULT"); res == nil || res["toolCallId"] != callID || res["content"] != engine.SkippedResult {
		t.Fatalf("cancelled: %v", c.first("TOOL_CALL_RESULT"))
	}
	if n := env.Calls.Get("refund"); n != 1 {
		t.Fatalf("skip ran the refund (%d calls in all)", n)
	}
}

// TestRetryAndSkipAnswerOnlyInDoubtCalls: POST /v1/hitl/{id}/retry or /skip
// on an approval is a 400 naming the decision and changes nothing; on an
// in-doubt call /skip with a message gives the model that message as the
// call's result.
func TestRetryAndSkipAnswerOnlyInDoubtCalls(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	_, it := aguiInterrupt(t, env, "th-approval", "refund my order")
	for _, verb := range []string{"retry", "skip"} {
		r := call(t, "POST", env.URL+"/v1/hitl/"+it["id"].(string)+"/"+verb, "")
		if r.status != 400 || !strings.Contains(string(r.body), `"param":"decision"`) {
			t.Fatalf("%s on an approval: %d %s", verb, r.status, r.body)
		}
	}
	if d, _ := env.Store.GetInterrupt(t.Context(), "dev", it["id"].(string)); d.Status != store.Pending {
		t.Fatalf("a refused decision changed the approval: %+v", d)
	}

	callID := aguiInDoubt(t, env, "th-skip")
	pend, err := env.Store.ListInterrupts(t.Context(), "dev", store.InterruptFilter{ThreadID: "th-skip"})
	if err != nil || len(pend) != 1 {
		t.Fatalf("pending %v %v", pend, err)
	}
	r := call(t, "POST", env.URL+"/v1/hitl/"+pend[0].ID+"/skip", `{"message":"The bank says it went out."}`)
	if r.status != 200 || !strings.Contains(string(r.body), `"decision":"skip"`) || !strings.Contains(string(r.body), `"reason":"in_doubt"`) {
		t.Fatalf("skip: %d %s", r.status, r.body)
	}
	stacktest.WaitFor(t, "the skipped turn to finish", func() bool { return env.Thread(t, "dev", "th-skip").Status == store.Idle })
	msgs, err := env.Store.Messages(t.Context(), "dev", "th-skip")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range msgs {
		found = found || (m.ToolCallID == callID && m.Content == "The bank says it went out.")
	}
	if !found || env.Calls.Get("refund") != 0 {
		t.Fatalf("skip with a message: result found %v, refund calls %d", found, env.Calls.Get("refund"))
	}
}

package postgres

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/model/scripted"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
)

type fixedModel struct{ p model.Provider }

func (m fixedModel) Resolve(ref, agentDir string) (model.Provider, string, error) {
	return m.p, "test-model", nil
}

const refundScript = `[
 {"when": {"lastTool": "refund"}, "reply": {"text": "Refund result: {{lastTool}}"}},
 {"when": {"lastUser": "refund"}, "reply": {"toolCalls": [{"name": "refund", "arguments": {"orderId": "A1"}}]}},
 {"reply": {"text": "echo: {{lastUser}}"}}
]`

// ranBy records which replica ran the refund tool.
type ranBy struct {
	mu   sync.Mutex
	runs []string
}

func (r *ranBy) add(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs = append(r.runs, name)
}

func (r *ranBy) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.runs...)
}

// newRunner is one replica's runtime over the shared schema, its bus
// bridged to the other replicas.
func newRunner(t *testing.T, schema, name string, ran *ranBy) *engine.Runner {
	t.Helper()
	rep := newReplica(t, schema)
	refund := &tool.Tool{Name: "refund", Description: "Refund an order",
		Parameters: json.RawMessage(`{"type":"object","properties":{"orderId":{"type":"string"}}}`),
		Approval:   &tool.Approval{},
		Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
			ran.add(name)
			return tool.Result{Content: `{"refunded":true,"by":"` + name + `"}`}, nil
		}}
	spec := &agent.Spec{Name: "refunds", Model: "scripted/refunds", Instructions: "Refund orders.", Tools: []*tool.Tool{refund}}
	r, err := engine.New(engine.Config{Store: rep.store, Agents: agent.NewRegistry(spec), Bus: rep.bus, Owner: "node-" + name,
		Models: fixedModel{scripted.New(script.MustParse(refundScript))}, Logger: testLogger(t), Lease: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Wait) // before the bridge and the store close
	return r
}

// TestDecisionOnAnotherReplicaResumesThere pauses a run on replica A and
// decides on replica B: B claims and finishes the run, and a subscriber of
// the thread on A sees B's events live.
func TestDecisionOnAnotherReplicaResumesThere(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	ran := &ranBy{}
	a, b := newRunner(t, schema, "a", ran), newRunner(t, schema, "b", ran)
	watch := a.Bus.Subscribe("acme", "t1")
	defer watch.Close()

	run, err := a.Start(ctx, engine.Input{Tenant: "acme", Agent: "refunds", ThreadID: "t1",
		Messages: []message.Message{{Role: message.User, Content: "refund order A1"}}})
	if err != nil {
		t.Fatalf("Start on A: %v", err)
	}
	var last event.Event
	for e := range run.Events() {
		if e.Err != nil {
			t.Fatalf("run on A: %v", e.Err)
		}
		last = e
	}
	if last.Type != event.RunFinished || last.Outcome == nil || last.Outcome.Type != event.Interrupt || len(last.Outcome.Interrupts) != 1 {
		t.Fatalf("run on A ended with %+v", last)
	}
	intID := last.Outcome.Interrupts[0].ID

	if _, err := b.Decide(ctx, "acme", intID, engine.Decision{Approved: true, Via: "api", By: "acme/ops"}); err != nil {
		t.Fatalf("Decide on B: %v", err)
	}

	// A's subscriber sees the resumed run, which is B's, through to its end.
	var resumed []event.Event
	deadline := time.After(10 * time.Second)
	for done := false; !done; {
		select {
		case e := <-watch.C:
			if e.RunID == run.ID {
				continue // A's own run, published locally
			}
			resumed = append(resumed, *e)
			done = e.Type == event.RunFinished && e.Seq > 0
		case <-deadline:
			t.Fatalf("A's subscriber did not see the resumed run finish; got %d events", len(resumed))
		}
	}
	b.Wait()
	if got := ran.get(); len(got) != 1 || got[0] != "b" {
		t.Fatalf("the refund ran on %v, want once on b", got)
	}
	fin := resumed[len(resumed)-1]
	if fin.Outcome == nil || fin.Outcome.Type != event.Success {
		t.Fatalf("resumed run ended with %+v", fin)
	}
	var sawResult bool
	for _, e := range resumed {
		sawResult = sawResult || (e.Type == event.ToolResult && e.ToolName == "refund")
	}
	if !sawResult {
		t.Fatalf("A's subscriber did not see the refund's result: %+v", resumed)
	}

	th, err := a.Store.GetThread(ctx, "acme", "t1")
	if err != nil {
		t.Fatal(err)
	}
	if th.Status != store.Idle || th.RunID != fin.RunID {
		t.Fatalf("thread after the resume: %+v (resumed run %s)", th, fin.RunID)
	}
	msgs, err := a.Store.Messages(ctx, "acme", "t1")
	if err != nil {
		t.Fatal(err)
	}
	if lastMsg := msgs[len(msgs)-1]; lastMsg.Role != message.Assistant || lastMsg.Content != `Refund result: {"refunded":true,"by":"b"}` {
		t.Fatalf("last message: %+v", lastMsg)
	}
}

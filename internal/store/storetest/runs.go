package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/store"
)

func nanos(n int64) *int64 { return &n }

// testRunSteps: a run's record and its steps go with its checkpoints and
// its finish, and read back in order with their numbers intact.
func testRunSteps(t *testing.T, s store.Store) {
	ctx := t.Context()
	begin(t, s, "t1", "th1", "ag", "run1", at(0))
	first := 120 * time.Millisecond
	model := store.Step{ID: "step1", Agent: "ag", Key: "ci", Kind: store.StepModel, Name: "gpt-4o", Provider: "openai",
		ResponseModel: "gpt-4o-2024-08-06", ResponseID: "chatcmpl-1", StartedAt: at(time.Second), Duration: 900 * time.Millisecond,
		FirstChunk: &first, Usage: event.Usage{InputTokens: 100, OutputTokens: 20, CachedInputTokens: 50, ReasoningTokens: 5},
		CostNanos: nanos(450000), FinishReason: "tool_calls", Attempts: 2, Outcome: store.OutcomeOK}
	if err := s.Checkpoint(ctx, store.Checkpoint{Tenant: "t1", ThreadID: "th1", RunID: "run1",
		Run:   &store.RunRecord{Key: "ci", TraceID: "0af7651916cd43dd8448eb211c80319c", SpanID: "b7ad6b7169203331", Status: "running", StartedAt: at(0)},
		Steps: []store.Step{model}}); err != nil {
		t.Fatal(err)
	}
	tool := store.Step{ID: "step2", Agent: "ag", Key: "ci", Kind: store.StepTool, Name: "refund", ToolCallID: "call1",
		StartedAt: at(2 * time.Second), Duration: 30 * time.Millisecond, Outcome: store.OutcomeError, Error: "boom"}
	end := at(3 * time.Second)
	if err := s.FinishRun(ctx, store.FinishRun{Tenant: "t1", ThreadID: "th1", RunID: "run1", Status: store.Idle, Now: end,
		Run:   &store.RunRecord{Key: "ci", Status: "idle", StartedAt: at(0), EndedAt: &end},
		Steps: []store.Step{tool}}); err != nil {
		t.Fatal(err)
	}
	runs, err := s.ListRuns(ctx, "t1", "th1")
	if err != nil || len(runs) != 1 {
		t.Fatalf("ListRuns = %+v, %v; want one run", runs, err)
	}
	r := runs[0]
	if r.ID != "run1" || r.Agent != "ag" || r.Status != "idle" || r.TraceID != "0af7651916cd43dd8448eb211c80319c" ||
		!r.StartedAt.Equal(at(0)) || r.EndedAt == nil || !r.EndedAt.Equal(end) || r.Key != "ci" {
		t.Fatalf("run = %+v", r)
	}
	if tot := r.Totals; tot.ModelCalls != 1 || tot.ToolCalls != 1 || tot.Usage != model.Usage || tot.CostNanos != 450000 || tot.Unpriced != 0 {
		t.Fatalf("run totals = %+v; want the steps' sums", tot)
	}
	if other, err := s.ListRuns(ctx, "t2", "th1"); err != nil || len(other) != 0 {
		t.Fatalf("another tenant's ListRuns = %+v, %v; want none", other, err)
	}
	d, err := s.GetRun(ctx, "t1", "run1")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Steps) != 2 {
		t.Fatalf("steps = %+v; want 2", d.Steps)
	}
	m := d.Steps[0]
	if m.ID != "step1" || m.Usage != model.Usage || m.CostNanos == nil || *m.CostNanos != 450000 || m.FirstChunk == nil ||
		*m.FirstChunk != first || m.Duration != model.Duration || m.Attempts != 2 || m.ResponseID != "chatcmpl-1" ||
		m.ResponseModel != model.ResponseModel || m.Provider != "openai" || !m.StartedAt.Equal(model.StartedAt) {
		t.Fatalf("model step = %+v", m)
	}
	if ts := d.Steps[1]; ts.Kind != store.StepTool || ts.CostNanos != nil || ts.FirstChunk != nil || ts.Outcome != store.OutcomeError ||
		ts.Error != "boom" || ts.ToolCallID != "call1" {
		t.Fatalf("tool step = %+v", ts)
	}
	if d, err := s.DailyUsage(ctx, store.UsageFilter{Tenant: "t1", From: at(0)}); err != nil || d.Usage != model.Usage ||
		d.CostNanos != 450000 || d.ModelCalls != 1 || d.Unpriced != 0 {
		t.Fatalf("DailyUsage = %+v, %v; want the model step's usage", d, err)
	}
	if _, err := s.GetRun(ctx, "t2", "run1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another tenant's GetRun: %v; want ErrNotFound", err)
	}
}

// testRunStepsLeaseLost: a checkpoint of a run that lost its thread writes
// no step (its usage would count twice once the run that took over redoes
// the step).
func testRunStepsLeaseLost(t *testing.T, s store.Store) {
	ctx := t.Context()
	begin(t, s, "t1", "th1", "ag", "run1", at(0))
	finish(t, s, "t1", "th1", "run1", store.Idle, at(time.Second))
	err := s.Checkpoint(ctx, store.Checkpoint{Tenant: "t1", ThreadID: "th1", RunID: "run1",
		Run:   &store.RunRecord{Status: "running", StartedAt: at(0)},
		Steps: []store.Step{{ID: "s1", Agent: "ag", Kind: store.StepModel, Name: "m", StartedAt: at(0), Outcome: store.OutcomeOK, Usage: event.Usage{InputTokens: 9}}}})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Checkpoint after the run ended: %v; want ErrLeaseLost", err)
	}
	rows, err := s.Usage(ctx, store.UsageFilter{Tenant: "t1"})
	if err != nil || len(rows) != 1 || rows[0].Usage.InputTokens != 0 {
		t.Fatalf("Usage = %+v, %v; want nothing counted", rows, err)
	}
	if d, err := s.DailyUsage(ctx, store.UsageFilter{Tenant: "t1", From: at(0)}); err != nil || d.ModelCalls != 0 {
		t.Fatalf("DailyUsage = %+v, %v; want nothing counted", d, err)
	}
}

// testRunUsage: stateless runs count; usage groups by agent, model, key,
// day and thread, within the period asked, per tenant; an unpriced call is
// counted as such.
func testRunUsage(t *testing.T, s store.Store) {
	ctx := t.Context()
	day2 := at(26 * time.Hour)
	step := func(id, agent, key, model string, start time.Time, in, out int, cost *int64) store.Step {
		return store.Step{ID: id, Agent: agent, Key: key, Kind: store.StepModel, Name: model, Provider: "openai", StartedAt: start,
			Usage: event.Usage{InputTokens: in, OutputTokens: out}, CostNanos: cost, Outcome: store.OutcomeOK}
	}
	if err := s.RecordRun(ctx, store.RunRecord{Tenant: "t1", ID: "r1", Agent: "a", Key: "k1", Status: "idle", StartedAt: at(0)},
		[]store.Step{step("s1", "a", "k1", "gpt-4o", at(0), 10, 5, nanos(1000)), step("s2", "a", "k1", "gpt-4o", at(time.Second), 20, 5, nanos(2000)),
			{ID: "s3", Kind: store.StepTool, Name: "lookup", StartedAt: at(time.Second), Outcome: store.OutcomeOK}}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordRun(ctx, store.RunRecord{Tenant: "t1", ID: "r2", Agent: "b", Key: "k2", Status: "idle", StartedAt: day2},
		[]store.Step{step("s4", "b", "k2", "local", day2, 7, 3, nil)}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordRun(ctx, store.RunRecord{Tenant: "t2", ID: "r3", Agent: "a", Status: "idle", StartedAt: at(0)},
		[]store.Step{step("s5", "a", "", "gpt-4o", at(0), 1000, 1000, nanos(99))}); err != nil {
		t.Fatal(err)
	}
	total, err := s.Usage(ctx, store.UsageFilter{Tenant: "t1"})
	if err != nil || len(total) != 1 {
		t.Fatalf("total = %+v, %v", total, err)
	}
	if u := total[0]; u.Usage.InputTokens != 37 || u.Usage.OutputTokens != 13 || u.CostNanos != 3000 || u.Unpriced != 1 || u.Runs != 2 || u.ModelCalls != 3 {
		t.Fatalf("total = %+v; want 37 in, 13 out, 3000 n$, 1 unpriced, 2 runs, 3 calls", u)
	}
	byDay, err := s.Usage(ctx, store.UsageFilter{Tenant: "t1", GroupBy: "day"})
	if err != nil || len(byDay) != 2 || byDay[0].Group != T0.UTC().Format(time.DateOnly) || byDay[0].Usage.InputTokens != 30 ||
		byDay[1].Group != day2.UTC().Format(time.DateOnly) {
		t.Fatalf("by day = %+v, %v", byDay, err)
	}
	byModel, err := s.Usage(ctx, store.UsageFilter{Tenant: "t1", GroupBy: "model"})
	if err != nil || len(byModel) != 2 || byModel[0].Group != "openai/gpt-4o" || byModel[1].Group != "openai/local" || byModel[1].Unpriced != 1 {
		t.Fatalf("by model = %+v, %v", byModel, err)
	}
	byKey, err := s.Usage(ctx, store.UsageFilter{Tenant: "t1", GroupBy: "key", From: at(time.Hour)})
	if err != nil || len(byKey) != 1 || byKey[0].Group != "k2" || byKey[0].Usage.InputTokens != 7 {
		t.Fatalf("by key from an hour in = %+v, %v", byKey, err)
	}
	agentA, err := s.Usage(ctx, store.UsageFilter{Tenant: "t1", Agent: "a", To: at(time.Second)})
	if err != nil || len(agentA) != 1 || agentA[0].Usage.InputTokens != 10 {
		t.Fatalf("agent a before 1s = %+v, %v", agentA, err)
	}
	// The daily sums agree with the steps, per day, agent and key.
	for _, f := range []store.UsageFilter{{Tenant: "t1"}, {Tenant: "t1", From: day2}, {Tenant: "t1", Agent: "a"}, {Tenant: "t1", Key: "k2"}, {Tenant: "t2"}} {
		want, err := s.Usage(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.DailyUsage(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if got.Usage != want[0].Usage || got.CostNanos != want[0].CostNanos || got.Unpriced != want[0].Unpriced || got.ModelCalls != want[0].ModelCalls {
			t.Fatalf("DailyUsage(%+v) = %+v; the steps sum to %+v", f, got, want[0])
		}
	}
	if _, err := s.Usage(ctx, store.UsageFilter{Tenant: "t1", GroupBy: "bogus"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("unknown grouping: %v; want ErrInvalid", err)
	}
}

// testRunThread: a run names its thread and its turn, before its first
// checkpoint records it (the thread's current run) and after; another
// tenant's run, and an unknown one, are ErrNotFound; ListRuns carries the
// same turn.
func testRunThread(t *testing.T, s store.Store) {
	ctx := t.Context()
	th := begin(t, s, "t1", "th1", "ag", "run1", at(0))
	thread, seq, err := s.RunThread(ctx, "t1", "run1")
	if err != nil || thread != "th1" || seq != th.Turn.Seq || seq <= 0 {
		t.Fatalf("RunThread before a checkpoint = %q, %d, %v; want th1, %d", thread, seq, err, th.Turn.Seq)
	}
	checkpoint(t, s, store.Checkpoint{Tenant: "t1", ThreadID: "th1", RunID: "run1",
		Run: &store.RunRecord{Status: "running", StartedAt: at(0)}})
	finish(t, s, "t1", "th1", "run1", store.Idle, at(time.Second))
	begin(t, s, "t1", "th1", "ag", "run2", at(2*time.Second))
	if thread, got, err := s.RunThread(ctx, "t1", "run1"); err != nil || thread != "th1" || got != seq {
		t.Fatalf("RunThread of a recorded run = %q, %d, %v; want th1, %d", thread, got, err, seq)
	}
	if thread, got, err := s.RunThread(ctx, "t1", "run2"); err != nil || thread != "th1" || got <= 0 {
		t.Fatalf("RunThread of the next turn = %q, %d, %v; want th1", thread, got, err)
	}
	for _, c := range [][2]string{{"t2", "run1"}, {"t1", "nope"}} {
		if _, _, err := s.RunThread(ctx, c[0], c[1]); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("RunThread(%s, %s): %v; want ErrNotFound", c[0], c[1], err)
		}
	}
	runs, err := s.ListRuns(ctx, "t1", "th1")
	if err != nil || len(runs) != 1 || runs[0].TurnSeq != seq {
		t.Fatalf("ListRuns = %+v, %v; want run1 with turn %d", runs, err, seq)
	}
}

package engine

import (
	"context"
	"iter"
	"log/slog"
	"testing"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/model"
)

// countingResolver resolves every reference to one provider and counts the
// calls.
type countingResolver struct{ n int }

type nopProvider struct{}

func (nopProvider) Stream(context.Context, model.Request) iter.Seq2[model.Chunk, error] {
	return func(func(model.Chunk, error) bool) {}
}

func (c *countingResolver) Resolve(ref, _ string) (model.Provider, string, error) {
	c.n++
	return nopProvider{}, ref, nil
}

// TestModelOfKeepsNoSubagentSpec: an agent's resolved model is kept per
// spec, but a subagent's spec (one per task call) is not kept: a thousand
// task calls leave the runner's cache as it was.
func TestModelOfKeepsNoSubagentSpec(t *testing.T) {
	res := &countingResolver{}
	r := &Runner{Models: res, Logger: slog.New(slog.DiscardHandler)}
	parent := &agent.Spec{Name: "assistant", Model: "openai/m", Fallbacks: []string{"openai/n"}}
	for range 3 {
		if _, err := r.modelOf(parent); err != nil {
			t.Fatal(err)
		}
	}
	if res.n != 2 {
		t.Fatalf("the agent's models resolved %d times, want once each (2)", res.n)
	}
	for range 1000 {
		child := &agent.Spec{Name: "researcher", Model: parent.Model, Parent: parent.Name}
		if m, err := r.modelOf(child); err != nil || m.name != "openai/m" {
			t.Fatalf("subagent model: %+v %v", m, err)
		}
	}
	kept := 0
	r.models.Range(func(any, any) bool { kept++; return true })
	if kept != 1 {
		t.Fatalf("the runner keeps %d resolved models after 1000 task calls, want 1 (the agent's)", kept)
	}
}

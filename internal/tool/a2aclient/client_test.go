package a2aclient

import (
	"encoding/json"
	"testing"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/wire/a2a"
)

func TestCardURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://x.example/a2a/research":                "https://x.example/a2a/research/.well-known/agent-card.json",
		"https://x.example/a2a/research/":               "https://x.example/a2a/research/.well-known/agent-card.json",
		"http://127.0.0.1:9/":                           "http://127.0.0.1:9/.well-known/agent-card.json",
		"http://127.0.0.1:9":                            "http://127.0.0.1:9/.well-known/agent-card.json",
		"https://x.example/.well-known/agent-card.json": "https://x.example/.well-known/agent-card.json",
		"https://x.example/cards/research.json?v=2":     "https://x.example/cards/research.json?v=2",
		"https://x.example/a2a/research?token=abc":      "https://x.example/a2a/research/.well-known/agent-card.json?token=abc",
	} {
		if got, err := CardURL(in); err != nil || got != want {
			t.Errorf("CardURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"ftp://x/a2a", "not a url", "http://"} {
		if _, err := CardURL(bad); err == nil {
			t.Errorf("CardURL(%q): want an error", bad)
		}
	}
}

func TestSummary(t *testing.T) {
	card := &a2a.AgentCard{Name: "research", Description: "Finds\n records.", Skills: []a2a.AgentSkill{
		{Name: "Search", Description: "Searches the index."}, {Name: "Delete", Description: "Delete"}}}
	if got := Summary(agent.A2AAgent{}, card); got != "Finds records. Skills: Search (Searches the index.); Delete." {
		t.Fatalf("summary %q", got)
	}
	if got := Summary(agent.A2AAgent{Description: "Mine."}, card); got != "Mine." {
		t.Fatalf("configured description %q", got)
	}
}

// TestFold: artifact chunks (appended or replaced), a Stackbone
// INPUT_REQUIRED status with its decision data part, and a direct message
// answer fold into updates.
func TestFold(t *testing.T) {
	var f fold
	txt := func(s string) []a2a.Part { return []a2a.Part{a2a.TextPart(s)} }
	f.apply(a2a.StreamResponse{Task: &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.StateSubmitted}}})
	f.apply(a2a.StreamResponse{ArtifactUpdate: &a2a.TaskArtifactUpdateEvent{TaskID: "t1", ContextID: "c1", Artifact: a2a.Artifact{ArtifactID: "a", Parts: txt("Hel")}}})
	f.apply(a2a.StreamResponse{ArtifactUpdate: &a2a.TaskArtifactUpdateEvent{TaskID: "t1", ContextID: "c1", Append: true, Artifact: a2a.Artifact{ArtifactID: "a", Parts: txt("lo")}}})
	if f.u.Delta != "lo" || f.u.Answer != "Hello" || f.u.State != string(a2a.StateSubmitted) {
		t.Fatalf("after chunks %+v", f.u)
	}
	in, _ := json.Marshal(a2a.Interrupt{ID: "int_1", Tool: "refund", Description: "Refund 5", AllowedDecisions: []string{"approve", "reject"}})
	f.apply(a2a.StreamResponse{StatusUpdate: &a2a.TaskStatusUpdateEvent{TaskID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.StateInputRequired,
		Message: &a2a.Message{Parts: []a2a.Part{a2a.TextPart("Waiting for approval."), {Data: in, Metadata: map[string]any{a2a.InterruptMetadataKey: "interrupt"}}}}}}})
	if f.u.State != StateInputRequired || f.u.Note != "Waiting for approval." || len(f.u.Asks) != 1 || f.u.Asks[0].ID != "int_1" || f.u.Asks[0].Tool != "refund" {
		t.Fatalf("input required %+v", f.u)
	}
	var g fold
	g.apply(a2a.StreamResponse{Message: &a2a.Message{MessageID: "m", ContextID: "c2", Parts: txt("Direct.")}})
	if g.u.State != StateCompleted || g.u.Answer != "Direct." || g.u.ContextID != "c2" {
		t.Fatalf("direct message %+v", g.u)
	}
	if !Terminal(StateCompleted) || Terminal(StateInputRequired) {
		t.Fatal("Terminal")
	}
}

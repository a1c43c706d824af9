package engine

import (
	"encoding/json"
	"testing"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/store"
)

// TestTurnDigestCoversTheTurn: every part of a request that changes what
// the turn does changes its digest, and the Idempotency-Key, when sent,
// replaces the digest as the journal key.
func TestTurnDigestCoversTheTurn(t *testing.T) {
	temp := 0.5
	base := func() Input {
		return Input{Tenant: "acme", Agent: "assistant", Messages: []message.Message{{Role: message.User, Content: "weather?"}}}
	}
	digest := func(in Input) string {
		t.Helper()
		d, err := turnDigest(in)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	want := digest(base())
	if got := digest(base()); got != want {
		t.Fatal("the same request must have the same digest")
	}
	changes := map[string]func(*Input){
		"agent":   func(in *Input) { in.Agent = "other" },
		"message": func(in *Input) { in.Messages[0].Content = "weather!" },
		"system": func(in *Input) {
			in.Messages = append([]message.Message{{Role: message.System, Content: "Be brief."}}, in.Messages...)
		},
		"client tool": func(in *Input) {
			in.ClientTools = []model.ToolDef{{Name: "open_modal", Parameters: json.RawMessage(`{}`)}}
		},
		"tool choice": func(in *Input) { in.ToolChoice = "none" },
		"max tokens":  func(in *Input) { in.MaxTokens = 10 },
		"stop":        func(in *Input) { in.StopSequences = []string{"END"} },
		"temperature": func(in *Input) { in.Temperature = &temp },
	}
	for name, change := range changes {
		in := base()
		change(&in)
		if digest(in) == want {
			t.Errorf("changing the %s keeps the digest", name)
		}
	}
	in := base()
	if journalKey(in, want) == journalKey(Input{IdempotencyKey: "k1"}, want) {
		t.Error("an Idempotency-Key must name the entry instead of the digest")
	}
	if journalKey(Input{IdempotencyKey: "k1"}, want) != journalKey(Input{IdempotencyKey: "k1"}, "other") {
		t.Error("with an Idempotency-Key the key alone names the entry")
	}
}

// TestChangesState: an AG-UI run again with nothing new is a retry only when
// the state it seeds is what the thread holds already.
func TestChangesState(t *testing.T) {
	th := &store.Thread{State: json.RawMessage(`{"draft":"a","todos":[]}`)}
	for _, c := range []struct {
		keys map[string]json.RawMessage
		want bool
	}{
		{nil, false},
		{map[string]json.RawMessage{"draft": json.RawMessage(`"a"`)}, false},
		{map[string]json.RawMessage{"draft": json.RawMessage(`"b"`)}, true},
		{map[string]json.RawMessage{"other": json.RawMessage(`1`)}, true},
	} {
		if got := changesState(th, c.keys); got != c.want {
			t.Errorf("changesState(%v) = %v, want %v", c.keys, got, c.want)
		}
	}
	if changesState(nil, map[string]json.RawMessage{"draft": json.RawMessage(`"b"`)}) {
		t.Error("a new thread has no state to change")
	}
}

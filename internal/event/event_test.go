package event

import "testing"

func TestWaitingNoteNamesWhatIsAsked(t *testing.T) {
	for _, c := range []struct {
		name string
		ins  []InterruptInfo
		want string
	}{
		{"approval", []InterruptInfo{{Tool: "refund", Description: "Refund order 1", Reason: "approval"}}, "Waiting for approval: Refund order 1."},
		{"no description", []InterruptInfo{{Tool: "refund"}}, "Waiting for approval: a call to refund."},
		{"in doubt", []InterruptInfo{{Tool: "refund", Description: "This call may already have run", Reason: "in_doubt"}},
			"Waiting for a decision: This call may already have run."},
		{"mixed", []InterruptInfo{{Tool: "a", Reason: "approval"}, {Tool: "b", Reason: "in_doubt"}},
			"Waiting for a decision: a call to a; a call to b."},
	} {
		got, ok := WaitingNote(&Outcome{Type: Interrupt, Interrupts: c.ins})
		if !ok || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.name, got, ok, c.want)
		}
	}
	if _, ok := WaitingNote(&Outcome{Type: Success}); ok {
		t.Error("a successful outcome has no waiting note")
	}
}

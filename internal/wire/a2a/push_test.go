package a2a

import (
	"encoding/json"
	"testing"

	"github.com/stackbone/stackbone/internal/event"
)

// TestPushBody: each status event becomes a statusUpdate StreamResponse
// with the task's state and the event's time; other events none.
func TestPushBody(t *testing.T) {
	const ms = int64(1767268800000) // 2026-01-01T12:00:00Z
	for _, c := range []struct {
		e     event.Event
		state TaskState
		text  string
	}{
		{event.Event{Type: event.RunStarted, Time: ms}, StateWorking, ""},
		{event.Event{Type: event.RunFinished, Time: ms, Outcome: &event.Outcome{Type: event.Success}}, StateCompleted, ""},
		{event.Event{Type: event.RunFinished, Time: ms, Outcome: &event.Outcome{Type: event.Interrupt,
			Interrupts: []event.InterruptInfo{{ID: "int_1", ToolCallID: "call_1", Tool: "refund", AllowedDecisions: []string{"approve", "reject"}}}}},
			StateInputRequired, ""},
		{event.Event{Type: event.RunError, Time: ms, Code: "cancelled", Message: "Cancelled."}, StateCanceled, "Cancelled."},
		{event.Event{Type: event.RunError, Time: ms, Code: "budget_exceeded", Message: "Budget spent."}, StateRejected, "Budget spent."},
		{event.Event{Type: event.RunError, Time: ms, Code: "model_error", Message: "Boom."}, StateFailed, "Boom."},
	} {
		b, ok := PushBody("TASK", "ctx", c.e)
		var sr StreamResponse
		if !ok || json.Unmarshal(b, &sr) != nil || sr.StatusUpdate == nil || sr.Task != nil || sr.ArtifactUpdate != nil {
			t.Fatalf("%s: %v %s", c.e.Type, ok, b)
		}
		up := sr.StatusUpdate
		if up.TaskID != "TASK" || up.ContextID != "ctx" || up.Status.State != c.state || up.Status.Timestamp != "2026-01-01T12:00:00.000Z" {
			t.Errorf("%s: %s", c.e.Type, b)
		}
		if c.text != "" && (up.Status.Message == nil || *up.Status.Message.Parts[0].Text != c.text) {
			t.Errorf("%s: status message %s", c.e.Type, b)
		}
		if c.state == StateInputRequired && (up.Status.Message == nil || len(up.Status.Message.Parts) == 0 || len(up.Status.Message.Parts[len(up.Status.Message.Parts)-1].Data) == 0) {
			t.Errorf("input required without the decision's data part: %s", b)
		}
	}
	if b, ok := PushBody("TASK", "ctx", event.Event{Type: event.TextDelta, Delta: "x"}); ok {
		t.Errorf("a text delta is pushed: %s", b)
	}
}

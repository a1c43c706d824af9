package a2a

import (
	"encoding/json"
	"time"

	"github.com/stackbone/stackbone/internal/event"
)

// PushBody is the push notification an event of a task yields, a
// StreamResponse with its statusUpdate (A2A 1.0, section 4.3.3): the
// status a run's start (WORKING), end (COMPLETED, INPUT_REQUIRED) or
// error (FAILED, CANCELED, REJECTED) gives the task, as a stream
// subscriber gets it. taskID is the task's id (or a placeholder the store
// fills in per config); ok is false for an event that changes no status.
func PushBody(taskID, contextID string, e event.Event) ([]byte, bool) {
	now := time.Now
	if e.Time > 0 {
		now = func() time.Time { return time.UnixMilli(e.Time) }
	}
	tr := NewTracker(taskID, contextID, now)
	for _, sr := range tr.Apply(e) {
		if sr.StatusUpdate != nil {
			b, err := json.Marshal(sr)
			return b, err == nil
		}
	}
	return nil, false
}

package engine_test

import (
	"testing"

	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/testwait"
)

// Every wait of these tests has a deadline (testwait.Deadline): a run that
// never ends because the contract broke (a tool run twice hangs, a decision
// never resumes the run) fails its test in seconds with what it waited for,
// not the package after go test's 10 minutes.

// waitRuns waits for r's background runs to end.
func waitRuns(t testing.TB, r *engine.Runner) {
	t.Helper()
	done := make(chan struct{})
	go func() { r.Wait(); close(done) }()
	testwait.Recv(t, done, "the runner's background runs to end")
}

// untilEnd returns run's events up to its terminal one (RunFinished or
// RunError), the consumer then leaving.
func untilEnd(t testing.TB, run *engine.Run) []event.Event {
	t.Helper()
	return collect(t, run, true)
}

// drainRun returns run's events until its stream ends.
func drainRun(t testing.TB, run *engine.Run) []event.Event {
	t.Helper()
	return collect(t, run, false)
}

func collect(t testing.TB, run *engine.Run, upToEnd bool) []event.Event {
	t.Helper()
	got := make(chan []event.Event, 1)
	go func() {
		var evs []event.Event
		for e := range run.Events() {
			evs = append(evs, e)
			if upToEnd && (e.Type == event.RunFinished || e.Type == event.RunError) {
				break
			}
		}
		got <- evs
	}()
	return testwait.Recv(t, got, "the run's events to end")
}

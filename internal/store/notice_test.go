package store

import (
	"testing"
	"time"
)

// TestRunNoticeOfARunThatFailedInDoubt: a run that failed (or was
// cancelled) while its calls ran ends waiting on their in-doubt decisions,
// with its error: its receivers still hear run.failed; a run that only
// paused on decisions sends none (its decision.pending notices tell it).
func TestRunNoticeOfARunThatFailedInDoubt(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	n, ok, err := RunNotice("acme", "shop", "t1", "run_1", Waiting, "The run was cancelled.", at)
	if err != nil || !ok || n.Type != NoticeRunFailed || n.ThreadID != "t1" {
		t.Fatalf("a failure left in doubt: %+v, %t, %v", n, ok, err)
	}
	if _, ok, _ := RunNotice("acme", "shop", "t1", "run_2", Waiting, "", at); ok {
		t.Fatal("a run that paused on a decision sent a run notice")
	}
}

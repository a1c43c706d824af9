// Package testwait is how a test waits for something another goroutine
// does: on a channel or a condition, always with a deadline, failing fast
// with what it waited for instead of hanging until the package's timeout.
// (A wait for a timer to fire is clock.Fake's Advance, not a wait here.)
package testwait

import (
	"context"
	"testing"
	"time"
)

// Deadline is how long a wait lasts before it fails the test: far longer
// than anything a test waits for takes on a loaded machine, far shorter than
// go test's 10-minute package timeout.
const Deadline = 10 * time.Second

// poll is how often Until looks again.
const poll = 2 * time.Millisecond

// Context is t.Context() ending after Deadline: for a wait that takes a
// context.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), Deadline)
	t.Cleanup(cancel)
	return ctx
}

// Until waits until cond holds, failing t (what names what it waited for)
// after Deadline.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Poll(Context(t), cond) {
		t.Fatalf("waited %s for %s", Deadline, what)
	}
}

// Poll reports whether cond came to hold before ctx ended; it can be
// called off the test's goroutine.
func Poll(ctx context.Context, cond func() bool) bool {
	if cond() {
		return true
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return cond()
		case <-tick.C:
			if cond() {
				return true
			}
		}
	}
}

// Recv returns the next value on c (or the zero value once c is closed),
// failing t after Deadline.
func Recv[T any](t testing.TB, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(Deadline):
		t.Fatalf("waited %s for %s", Deadline, what)
		panic("unreachable")
	}
}

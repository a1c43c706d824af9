// Package clock is Stackbone's one time seam: the app builds a Clock once and
// passes it down (config → app → engine, server, Studio, store), so tests of
// leases, recovery and session expiry can run on a Fake instead of waiting.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// Func adapts a function to a Clock.
type Func func() time.Time

// Now calls f.
func (f Func) Now() time.Time { return f() }

// Real is the system clock.
var Real Clock = Func(time.Now)

// Or returns c, or Real when c is nil.
func Or(c Clock) Clock {
	if c == nil {
		return Real
	}
	return c
}

// Fake is a Clock that moves only when told to. It is safe for concurrent
// use.
type Fake struct {
	mu sync.Mutex
	t  time.Time
}

// NewFake returns a Fake stopped at t.
func NewFake(t time.Time) *Fake { return &Fake{t: t} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

// Advance moves the fake time forward by d.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(d)
}

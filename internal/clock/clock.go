// Package clock is Stackbone's one time seam: the app builds a Clock once and
// passes it down (config → app → engine, server, Studio, store), so tests of
// leases, recovery, session expiry and the loops that wake on a timer (lease
// renewal, the follow poll, the recovery sweep, webhook retries, the SQLite
// checkpointer) can run on a Fake instead of waiting.
package clock

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Clock tells the time and arms timers and tickers on it.
type Clock interface {
	Now() time.Time
	// NewTimer returns a Timer that sends the time on its channel once, d
	// from now (at once when d ≤ 0).
	NewTimer(d time.Duration) Timer
	// NewTicker returns a Ticker that sends the time on its channel every
	// d, dropping ticks a slow receiver misses; d must be positive.
	NewTicker(d time.Duration) Ticker
}

// Timer is a time.Timer on a Clock. As time.Timer's since Go 1.23, no value
// from before a Stop or Reset is received after it.
type Timer interface {
	C() <-chan time.Time
	// Stop disarms the timer; it reports whether the timer was armed.
	Stop() bool
	// Reset arms the timer to fire d from now; it reports whether the
	// timer was armed.
	Reset(d time.Duration) bool
}

// Ticker is a time.Ticker on a Clock.
type Ticker interface {
	C() <-chan time.Time
	Stop()
	// Reset stops the ticker and starts it again with period d.
	Reset(d time.Duration)
}

// Func adapts a function to a Clock; its timers and tickers are the real
// ones.
type Func func() time.Time

// Now calls f.
func (f Func) Now() time.Time { return f() }

// NewTimer returns a real timer.
func (Func) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// NewTicker returns a real ticker.
func (Func) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time        { return t.t.C }
func (t realTimer) Stop() bool                 { return t.t.Stop() }
func (t realTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time   { return t.t.C }
func (t realTicker) Stop()                 { t.t.Stop() }
func (t realTicker) Reset(d time.Duration) { t.t.Reset(d) }

// Real is the system clock.
var Real Clock = Func(time.Now)

// Or returns c, or Real when c is nil.
func Or(c Clock) Clock {
	if c == nil {
		return Real
	}
	return c
}

// Fake is a Clock that moves only when told to: its timers and tickers fire
// inside Advance, as the time passes their deadlines. A test that advances
// past a timer another goroutine arms first waits for it with AwaitTimers,
// not a sleep. It is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	t       time.Time
	armed   []*fakeTimer
	changed chan struct{} // closed (and replaced) when armed changes
}

// NewFake returns a Fake stopped at t.
func NewFake(t time.Time) *Fake { return &Fake{t: t, changed: make(chan struct{})} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

// Advance moves the fake time forward by d, firing, in deadline order, every
// timer and ticker tick due by then (a ticker whose receiver has not taken
// its last tick drops the next, as a real one does).
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	end := f.t.Add(d)
	for {
		sort.SliceStable(f.armed, func(i, j int) bool { return f.armed[i].at.Before(f.armed[j].at) })
		if len(f.armed) == 0 || f.armed[0].at.After(end) {
			break
		}
		w := f.armed[0]
		if w.at.After(f.t) {
			f.t = w.at
		}
		select {
		case w.c <- f.t:
		default:
		}
		if w.period > 0 {
			w.at = w.at.Add(w.period)
		} else {
			f.disarm(w)
		}
	}
	f.t = end
}

// Timers reports how many timers and tickers are armed on f.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.armed)
}

// AwaitTimers waits until at least n timers and tickers are armed on f (the
// goroutine under test got as far as arming its timer, so an Advance reaches
// it), or ctx ends, with an error saying how many were.
func (f *Fake) AwaitTimers(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		got, changed := len(f.armed), f.changed
		f.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("clock: %d timers armed, waited for %d: %w", got, n, context.Cause(ctx))
		}
	}
}

// NewTimer arms a timer on the fake time.
func (f *Fake) NewTimer(d time.Duration) Timer {
	w := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	w.Reset(d)
	return w
}

// NewTicker arms a ticker on the fake time.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	w := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	w.reset(d, d)
	return fakeTicker{w}
}

// notify wakes AwaitTimers; f.mu is held.
func (f *Fake) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// disarm takes w off the armed list; f.mu is held.
func (f *Fake) disarm(w *fakeTimer) bool {
	for i, a := range f.armed {
		if a == w {
			f.armed = append(f.armed[:i], f.armed[i+1:]...)
			f.notify()
			return true
		}
	}
	return false
}

type fakeTimer struct {
	f      *Fake
	c      chan time.Time
	at     time.Time
	period time.Duration // a ticker's; 0 for a timer
}

func (w *fakeTimer) C() <-chan time.Time { return w.c }

func (w *fakeTimer) Stop() bool {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	w.drain()
	return w.f.disarm(w)
}

func (w *fakeTimer) Reset(d time.Duration) bool { return w.reset(d, 0) }

func (w *fakeTimer) reset(d, period time.Duration) bool {
	f := w.f
	f.mu.Lock()
	defer f.mu.Unlock()
	w.drain()
	was := f.disarm(w)
	w.at, w.period = f.t.Add(d), period
	if period == 0 && d <= 0 {
		w.c <- f.t // drained above: room for it
		return was
	}
	f.armed = append(f.armed, w)
	f.notify()
	return was
}

// drain drops a value not yet received (Go 1.23's Stop and Reset).
func (w *fakeTimer) drain() {
	select {
	case <-w.c:
	default:
	}
}

type fakeTicker struct{ w *fakeTimer }

func (t fakeTicker) C() <-chan time.Time   { return t.w.c }
func (t fakeTicker) Stop()                 { t.w.Stop() }
func (t fakeTicker) Reset(d time.Duration) { t.w.reset(d, d) }

var (
	_ Clock = Func(nil)
	_ Clock = (*Fake)(nil)
)

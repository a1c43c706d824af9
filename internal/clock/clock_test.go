package clock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/clock"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func fired(c <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-c:
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestFakeTimerFiresWhenAdvancedPastItsDeadline(t *testing.T) {
	f := clock.NewFake(t0)
	tm := f.NewTimer(time.Second)
	f.Advance(999 * time.Millisecond)
	if _, ok := fired(tm.C()); ok {
		t.Fatal("fired before its deadline")
	}
	f.Advance(time.Millisecond)
	if v, ok := fired(tm.C()); !ok || !v.Equal(t0.Add(time.Second)) {
		t.Fatalf("at its deadline: %v %v", v, ok)
	}
	if f.Timers() != 0 {
		t.Fatalf("a fired timer stays armed: %d", f.Timers())
	}
	if tm.Reset(time.Second) {
		t.Fatal("Reset of a fired timer reports it armed")
	}
	if !tm.Stop() {
		t.Fatal("Stop of an armed timer reports it not armed")
	}
	f.Advance(time.Hour)
	if _, ok := fired(tm.C()); ok {
		t.Fatal("a stopped timer fired")
	}
}

func TestFakeResetDropsAnUnreceivedValue(t *testing.T) {
	f := clock.NewFake(t0)
	tm := f.NewTimer(time.Second)
	f.Advance(time.Second)
	tm.Reset(time.Second)
	if _, ok := fired(tm.C()); ok {
		t.Fatal("a value from before Reset was received after it")
	}
	if _, ok := fired(f.NewTimer(0).C()); !ok {
		t.Fatal("a zero timer does not fire at once")
	}
}

func TestFakeTickerTicksEveryPeriodAndDropsMissedTicks(t *testing.T) {
	f := clock.NewFake(t0)
	tk := f.NewTicker(10 * time.Second)
	defer tk.Stop()
	for i := 1; i <= 3; i++ {
		f.Advance(10 * time.Second)
		if v, ok := fired(tk.C()); !ok || !v.Equal(t0.Add(time.Duration(i)*10*time.Second)) {
			t.Fatalf("tick %d: %v %v", i, v, ok)
		}
	}
	f.Advance(time.Minute) // six ticks due, one kept
	if v, ok := fired(tk.C()); !ok || !v.Equal(t0.Add(40*time.Second)) {
		t.Fatalf("after a minute: %v %v", v, ok)
	}
	if _, ok := fired(tk.C()); ok {
		t.Fatal("missed ticks were queued")
	}
	if got := f.Now(); !got.Equal(t0.Add(90 * time.Second)) {
		t.Fatalf("Now after the advances: %v", got)
	}
	tk.Stop()
	if f.Timers() != 0 {
		t.Fatalf("a stopped ticker stays armed: %d", f.Timers())
	}
}

func TestFakeAwaitTimersWaitsForAGoroutineToArm(t *testing.T) {
	f := clock.NewFake(t0)
	got := make(chan time.Time)
	go func() {
		tm := f.NewTimer(time.Minute)
		got <- <-tm.C()
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := f.AwaitTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	f.Advance(time.Minute)
	select {
	case v := <-got:
		if !v.Equal(t0.Add(time.Minute)) {
			t.Fatalf("fired at %v", v)
		}
	case <-ctx.Done():
		t.Fatal("the goroutine's timer never fired")
	}
	short, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if err := f.AwaitTimers(short, 1); err == nil {
		t.Fatal("AwaitTimers returned with no timer armed")
	}
}

func TestRealTimersRun(t *testing.T) {
	tm := clock.Real.NewTimer(time.Millisecond)
	select {
	case <-tm.C():
	case <-time.After(10 * time.Second):
		t.Fatal("a real timer of 1ms did not fire in 10s")
	}
	tk := clock.Real.NewTicker(time.Millisecond)
	defer tk.Stop()
	select {
	case <-tk.C():
	case <-time.After(10 * time.Second):
		t.Fatal("a real ticker of 1ms did not tick in 10s")
	}
}

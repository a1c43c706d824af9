package model_test

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/model"
)

func TestBackoffIsBoundedAndGrows(t *testing.T) {
	p := model.RetryPolicy{Base: 100 * time.Millisecond, Max: 400 * time.Millisecond}
	for n, want := range []time.Duration{100, 200, 400, 400, 400} {
		want *= time.Millisecond
		for range 20 {
			d := p.Backoff(n)
			if d < want/2 || d > want {
				t.Fatalf("retry %d: backoff %v outside [%v, %v]", n, d, want/2, want)
			}
		}
	}
	if (model.RetryPolicy{}).MaxAttempts() != model.DefaultRetryAttempts {
		t.Fatal("zero policy should use the default attempts")
	}
}

func TestRetryable(t *testing.T) {
	for status, want := range map[int]bool{0: true, 408: true, 429: true, 500: true, 503: true, 529: true, 400: false, 401: false, 404: false, 409: false} {
		if got := model.Retryable(&model.Error{Status: status}); got != want {
			t.Errorf("status %d: retryable %v, want %v", status, got, want)
		}
	}
	if model.Retryable(errors.New("plain")) || model.Retryable(context.Canceled) {
		t.Error("non-upstream errors must not be retried")
	}
}

// attempts yields the given outcomes, one per attempt.
func attempts(calls *int, outcomes ...func(yield func(model.Chunk, error) bool)) func(context.Context) iter.Seq2[model.Chunk, error] {
	return func(context.Context) iter.Seq2[model.Chunk, error] {
		o := outcomes[min(*calls, len(outcomes)-1)]
		*calls++
		return o
	}
}

func fail(status int) func(yield func(model.Chunk, error) bool) {
	return func(yield func(model.Chunk, error) bool) { yield(model.Chunk{}, &model.Error{Status: status}) }
}

func TestStreamRetriesOnlyBeforeFirstChunk(t *testing.T) {
	p := model.RetryPolicy{Attempts: 3, Base: time.Microsecond, Max: time.Microsecond}
	ok := func(yield func(model.Chunk, error) bool) {
		_ = yield(model.Chunk{Type: model.Text, Text: "hi"}, nil) && yield(model.Chunk{Type: model.Finish}, nil)
	}
	calls := 0
	var got []model.Chunk
	for c, err := range p.Stream(context.Background(), nil, model.Request{}, attempts(&calls, fail(503), fail(429), ok)) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, c)
	}
	if calls != 3 || len(got) != 2 {
		t.Fatalf("%d attempts, %d chunks", calls, len(got))
	}

	midway := func(yield func(model.Chunk, error) bool) {
		_ = yield(model.Chunk{Type: model.Text, Text: "partial"}, nil) && yield(model.Chunk{}, &model.Error{Status: 502})
	}
	calls = 0
	var last error
	for _, err := range p.Stream(context.Background(), nil, model.Request{}, attempts(&calls, midway)) {
		last = err
	}
	if calls != 1 || last == nil {
		t.Fatalf("retried after a delivered chunk: %d attempts, err %v", calls, last)
	}

	calls = 0
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, err := range p.Stream(ctx, nil, model.Request{}, attempts(&calls, fail(503))) {
		last = err
	}
	if calls != 1 {
		t.Fatalf("retried with a cancelled context: %d attempts", calls)
	}
}

// stalled sends one chunk after first (0: none) and then waits for its
// context, as a provider reading an upstream that stopped sending does.
func stalled(ctx context.Context, first bool) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		if first && !yield(model.Chunk{Type: model.Text, Text: "hi"}, nil) {
			return
		}
		<-ctx.Done()
		yield(model.Chunk{}, ctx.Err())
	}
}

func TestIdleTimeoutIsRetriedThenA504(t *testing.T) {
	p := model.RetryPolicy{Attempts: 3, Base: time.Microsecond, Max: time.Microsecond}
	calls := 0
	attempt := func(ctx context.Context) iter.Seq2[model.Chunk, error] { calls++; return stalled(ctx, false) }
	var last error
	for _, err := range p.Stream(context.Background(), nil, model.Request{Timeouts: model.Timeouts{Idle: 20 * time.Millisecond, Call: time.Hour}}, attempt) {
		last = err
	}
	var me *model.Error
	if calls != 3 || !errors.As(last, &me) || me.Status != 504 || !errors.Is(last, model.ErrIdleTimeout) {
		t.Fatalf("%d attempts, err %v", calls, last)
	}
	// A stall after the first chunk is not retried (the chunk reached the
	// caller) and is still a 504.
	calls = 0
	attempt = func(ctx context.Context) iter.Seq2[model.Chunk, error] { calls++; return stalled(ctx, true) }
	for _, err := range p.Stream(context.Background(), nil, model.Request{Timeouts: model.Timeouts{Idle: 20 * time.Millisecond}}, attempt) {
		last = err
	}
	if calls != 1 || !errors.Is(last, model.ErrIdleTimeout) {
		t.Fatalf("%d attempts, err %v", calls, last)
	}
}

func TestCallTimeoutBoundsAStreamThatKeepsSending(t *testing.T) {
	p := model.RetryPolicy{Attempts: 1}
	attempt := func(ctx context.Context) iter.Seq2[model.Chunk, error] {
		return func(yield func(model.Chunk, error) bool) {
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					yield(model.Chunk{}, ctx.Err())
					return
				case <-tick.C:
					if !yield(model.Chunk{Type: model.Text, Text: "."}, nil) {
						return
					}
				}
			}
		}
	}
	var last error
	for _, err := range p.Stream(context.Background(), nil, model.Request{Timeouts: model.Timeouts{Idle: time.Second, Call: 60 * time.Millisecond}}, attempt) {
		last = err
	}
	if !errors.Is(last, model.ErrCallTimeout) {
		t.Fatalf("err %v", last)
	}
}

func TestRetryAfterIsHonouredAndBounded(t *testing.T) {
	p := model.RetryPolicy{Attempts: 3, Base: time.Microsecond, Max: time.Microsecond, MaxRetryAfter: time.Second}
	limited := func(after time.Duration) func(yield func(model.Chunk, error) bool) {
		return func(yield func(model.Chunk, error) bool) {
			yield(model.Chunk{}, &model.Error{Status: 429, RetryAfter: after})
		}
	}
	ok := func(yield func(model.Chunk, error) bool) { yield(model.Chunk{Type: model.Finish}, nil) }
	calls := 0
	start := time.Now()
	for _, err := range p.Stream(context.Background(), nil, model.Request{}, attempts(&calls, limited(80*time.Millisecond), ok)) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if calls != 2 || time.Since(start) < 80*time.Millisecond {
		t.Fatalf("%d attempts after %s; want the retry after the upstream's 80ms", calls, time.Since(start))
	}
	// Longer than MaxRetryAfter: no retry, the 429 (with its wait) returns.
	calls = 0
	var last error
	for _, err := range p.Stream(context.Background(), nil, model.Request{}, attempts(&calls, limited(time.Hour), ok)) {
		last = err
	}
	var me *model.Error
	if calls != 1 || !errors.As(last, &me) || me.RetryAfter != time.Hour {
		t.Fatalf("%d attempts, err %v", calls, last)
	}
}

func TestRetryAfterHeader(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		h    http.Header
		want time.Duration
	}{
		{http.Header{"Retry-After": {"7"}}, 7 * time.Second},
		{http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"7"}}, 250 * time.Millisecond},
		{http.Header{"Retry-After": {now.Add(3 * time.Second).Format(http.TimeFormat)}}, 3 * time.Second},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{nil, 0},
	} {
		if got := model.RetryAfter(c.h, now); got != c.want {
			t.Errorf("%v: %s, want %s", c.h, got, c.want)
		}
	}
}

// Alive chunks (an upstream still thinking) restart the idle timeout and
// never reach the caller: a step that stays silent longer than Idle but
// sends Alive more often completes; an attempt that failed after only Alive
// chunks delivered nothing, so it is retried.
func TestAliveKeepsTheIdleTimeoutOff(t *testing.T) {
	p := model.RetryPolicy{Attempts: 2, Base: time.Microsecond, Max: time.Microsecond}
	calls := 0
	attempt := func(ctx context.Context) iter.Seq2[model.Chunk, error] {
		calls++
		n := calls
		return func(yield func(model.Chunk, error) bool) {
			for range 8 { // 8 × 10 ms of thinking, Idle is 30 ms
				select {
				case <-ctx.Done():
					yield(model.Chunk{}, ctx.Err())
					return
				case <-time.After(10 * time.Millisecond):
				}
				if !yield(model.Chunk{Type: model.Alive}, nil) {
					return
				}
			}
			if n == 1 {
				yield(model.Chunk{}, &model.Error{Status: 529, Message: "overloaded"})
				return
			}
			if yield(model.Chunk{Type: model.Text, Text: "done"}, nil) {
				yield(model.Chunk{Type: model.Finish, Stop: event.StopEnd}, nil)
			}
		}
	}
	var types []model.ChunkType
	for c, err := range p.Stream(context.Background(), nil, model.Request{Timeouts: model.Timeouts{Idle: 30 * time.Millisecond}}, attempt) {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, c.Type)
	}
	if calls != 2 || len(types) != 2 || types[0] != model.Text || types[1] != model.Finish {
		t.Fatalf("%d attempts, chunks %v", calls, types)
	}
}

// A Restartable call is retried after chunks too (its caller holds them):
// a Restart chunk comes first, then the new attempt's chunks; an attempt
// that stalls after a chunk is retried the same way. When no retry is left
// the failure comes without a Restart.
func TestRestartableStreamRetriesAfterChunks(t *testing.T) {
	p := model.RetryPolicy{Attempts: 3, Base: time.Microsecond, Max: time.Microsecond}
	ok := func(yield func(model.Chunk, error) bool) {
		_ = yield(model.Chunk{Type: model.Text, Text: "whole"}, nil) && yield(model.Chunk{Type: model.Finish}, nil)
	}
	midway := func(yield func(model.Chunk, error) bool) {
		_ = yield(model.Chunk{Type: model.Text, Text: "partial"}, nil) && yield(model.Chunk{}, &model.Error{Status: 0, Message: "connection closed during the answer"})
	}
	collect := func(req model.Request, attempt func(context.Context) iter.Seq2[model.Chunk, error]) ([]model.ChunkType, error) {
		var types []model.ChunkType
		for c, err := range p.Stream(context.Background(), nil, req, attempt) {
			if err != nil {
				return types, err
			}
			types = append(types, c.Type)
		}
		return types, nil
	}
	calls := 0
	types, err := collect(model.Request{Restartable: true}, attempts(&calls, midway, ok))
	want := []model.ChunkType{model.Text, model.Restart, model.Text, model.Finish}
	if err != nil || calls != 2 || !slices.Equal(types, want) {
		t.Fatalf("cut after a chunk: %d attempts, chunks %v (want %v), err %v", calls, types, want, err)
	}

	calls = 0
	stall := func(ctx context.Context) iter.Seq2[model.Chunk, error] {
		calls++
		if calls == 1 {
			return stalled(ctx, true)
		}
		return ok
	}
	types, err = collect(model.Request{Restartable: true, Timeouts: model.Timeouts{Idle: 20 * time.Millisecond}}, stall)
	if err != nil || calls != 2 || !slices.Equal(types, want) {
		t.Fatalf("stall after a chunk: %d attempts, chunks %v (want %v), err %v", calls, types, want, err)
	}

	calls = 0
	types, err = collect(model.Request{Restartable: true}, attempts(&calls, midway))
	var me *model.Error
	if calls != 3 || !errors.As(err, &me) || me.Status != 0 || slices.Equal(types, nil) || types[len(types)-1] == model.Restart {
		t.Fatalf("every attempt cut: %d attempts, chunks %v, err %v; want 3 and the failure after the last partial chunk", calls, types, err)
	}
}

// A Fallback whose candidate fails after chunks moves on to the next
// candidate only for a Restartable call, with a Restart in between.
func TestFallbackRestartsAfterChunks(t *testing.T) {
	cut := providerFunc(func(yield func(model.Chunk, error) bool) {
		_ = yield(model.Chunk{Type: model.Text, Text: "partial"}, nil) && yield(model.Chunk{}, &model.Error{Status: 502})
	})
	whole := providerFunc(func(yield func(model.Chunk, error) bool) {
		_ = yield(model.Chunk{Type: model.Text, Text: "whole"}, nil) && yield(model.Chunk{Type: model.Finish}, nil)
	})
	f := model.NewFallback([]model.Candidate{{Provider: cut, Name: "a"}, {Provider: whole, Name: "b"}}, nil)
	var types []model.ChunkType
	for c, err := range f.Stream(context.Background(), model.Request{Restartable: true}) {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, c.Type)
	}
	if want := []model.ChunkType{model.Text, model.Restart, model.Text, model.Finish}; !slices.Equal(types, want) {
		t.Fatalf("chunks %v, want %v", types, want)
	}
	var last error
	for _, err := range f.Stream(context.Background(), model.Request{}) {
		last = err
	}
	if last == nil {
		t.Fatal("a call that streamed its output fell back to another model")
	}
}

// providerFunc is a Provider answering every step with seq.
type providerFunc iter.Seq2[model.Chunk, error]

func (p providerFunc) Stream(context.Context, model.Request) iter.Seq2[model.Chunk, error] {
	return iter.Seq2[model.Chunk, error](p)
}

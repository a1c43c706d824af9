package model_test

import (
	"context"
	"errors"
	"iter"
	"testing"
	"time"

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
	for c, err := range p.Stream(context.Background(), nil, attempts(&calls, fail(503), fail(429), ok)) {
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
	for _, err := range p.Stream(context.Background(), nil, attempts(&calls, midway)) {
		last = err
	}
	if calls != 1 || last == nil {
		t.Fatalf("retried after a delivered chunk: %d attempts, err %v", calls, last)
	}

	calls = 0
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, err := range p.Stream(ctx, nil, attempts(&calls, fail(503))) {
		last = err
	}
	if calls != 1 {
		t.Fatalf("retried with a cancelled context: %d attempts", calls)
	}
}

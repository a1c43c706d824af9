package model

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"math/rand/v2"
	"time"
)

// Default retry bounds used when a RetryPolicy field is zero.
const (
	DefaultRetryAttempts = 3
	DefaultRetryBase     = 200 * time.Millisecond
	DefaultRetryMax      = 2 * time.Second
)

// RetryPolicy bounds how a provider retries an upstream failure that is
// worth retrying (429, 5xx, or no connection; see Retryable). Retries happen
// only before the first chunk of a step reached the caller, so a caller never
// sees a chunk twice. The zero value means the defaults: 3 attempts, backoff
// from 200ms doubling up to 2s, with jitter.
type RetryPolicy struct {
	// Attempts is the total number of attempts including the first; 1
	// disables retries, 0 means DefaultRetryAttempts.
	Attempts int
	// Base is the delay before the first retry (0: DefaultRetryBase).
	Base time.Duration
	// Max caps any single delay (0: DefaultRetryMax).
	Max time.Duration
}

// MaxAttempts returns the effective number of attempts.
func (p RetryPolicy) MaxAttempts() int {
	if p.Attempts <= 0 {
		return DefaultRetryAttempts
	}
	return p.Attempts
}

// Backoff returns the pause before retry number n (0 for the first retry):
// Base*2^n capped at Max, with the upper half jittered.
func (p RetryPolicy) Backoff(n int) time.Duration {
	base, limit := p.Base, p.Max
	if base <= 0 {
		base = DefaultRetryBase
	}
	if limit <= 0 {
		limit = DefaultRetryMax
	}
	d := base
	for i := 0; i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + rand.N(half+1)
}

// Retryable reports whether err is an upstream failure worth another
// attempt: a *Error with status 0 (no connection), 408, 429 or 5xx.
func Retryable(err error) bool {
	var me *Error
	if !errors.As(err, &me) {
		return false
	}
	return me.Status == 0 || me.Status == 408 || me.Status == 429 || me.Status >= 500
}

// Stream runs attempt and, while it fails with a Retryable error before
// yielding any chunk, waits a backoff and runs it again, up to MaxAttempts.
// Providers wrap their single-attempt stream with it so the retry policy is
// one and the same for every upstream. log may be nil.
func (p RetryPolicy) Stream(ctx context.Context, log *slog.Logger, attempt func(ctx context.Context) iter.Seq2[Chunk, error]) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		for n := 0; ; n++ {
			delivered := false
			var failed error
			for c, err := range attempt(ctx) {
				if err != nil {
					failed = err
					break
				}
				delivered = true
				if !yield(c, nil) {
					return
				}
			}
			if failed == nil {
				return
			}
			if delivered || !Retryable(failed) || n+1 >= p.MaxAttempts() || ctx.Err() != nil {
				yield(Chunk{}, failed)
				return
			}
			wait := p.Backoff(n)
			if log != nil {
				log.LogAttrs(ctx, slog.LevelWarn, "model upstream failed, retrying",
					slog.Int("attempt", n+1), slog.Duration("wait", wait), slog.String("error", failed.Error()))
			}
			if err := sleep(ctx, wait); err != nil {
				yield(Chunk{}, err)
				return
			}
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

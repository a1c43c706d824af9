package model

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// Default retry bounds used when a RetryPolicy field is zero.
const (
	DefaultRetryAttempts = 3
	DefaultRetryBase     = 200 * time.Millisecond
	DefaultRetryMax      = 2 * time.Second
	// DefaultMaxRetryAfter is the longest upstream retry-after a retry
	// waits for when RetryPolicy.MaxRetryAfter is zero; a longer one ends
	// the retries at once (the client gets the upstream's 429 and its
	// retry-after).
	DefaultMaxRetryAfter = 60 * time.Second
)

// Default model call timeouts (STACKBONE_MODEL_TIMEOUT,
// STACKBONE_MODEL_IDLE_TIMEOUT).
const (
	DefaultCallTimeout = 10 * time.Minute
	DefaultIdleTimeout = 2 * time.Minute
)

// Timeouts bound each attempt of a model call. A zero field means no bound.
type Timeouts struct {
	// Call bounds one attempt, from sending the request to its last chunk.
	Call time.Duration
	// Idle bounds the wait for the first chunk and between two chunks
	// (the time the caller spends on a chunk does not count).
	Idle time.Duration
}

// Or returns t with each zero field taken from d.
func (t Timeouts) Or(d Timeouts) Timeouts {
	if t.Call == 0 {
		t.Call = d.Call
	}
	if t.Idle == 0 {
		t.Idle = d.Idle
	}
	return t
}

// The causes of a timed-out attempt, wrapped in a *Error with status 504.
var (
	ErrCallTimeout = errors.New("model call timed out")
	ErrIdleTimeout = errors.New("model stream idle timeout")
)

// RetryPolicy bounds how a provider retries an upstream failure that is
// worth retrying (429, 5xx, a cut stream or no connection, a timeout; see
// Retryable). Retries happen before the first chunk of a step reached the
// caller, so a caller never sees a chunk twice, or at any point of a
// Request.Restartable call, whose caller drops what it got at a Restart
// chunk. The zero value means the defaults: 3 attempts, backoff from 200ms
// doubling up to 2s, with jitter.
type RetryPolicy struct {
	// Attempts is the total number of attempts including the first; 1
	// disables retries, 0 means DefaultRetryAttempts.
	Attempts int
	// Base is the delay before the first retry (0: DefaultRetryBase).
	Base time.Duration
	// Max caps any single delay (0: DefaultRetryMax).
	Max time.Duration
	// MaxRetryAfter is the longest upstream retry-after (Error.RetryAfter)
	// a retry waits for (0: DefaultMaxRetryAfter); with a longer one the
	// call fails at once. A retry-after replaces the backoff.
	MaxRetryAfter time.Duration
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

// Stream runs attempt for req and, while it fails with a Retryable error
// before yielding any chunk (at any point when req.Restartable, after a
// Restart chunk), waits a backoff (or the upstream's retry-after, up to
// MaxRetryAfter) and runs it again, up to MaxAttempts. Each attempt is
// bounded by req.Timeouts: an attempt that runs out of time fails with a
// *Error of status 504 wrapping ErrCallTimeout or ErrIdleTimeout, retried
// like any other 5xx. Providers wrap their single-attempt stream with it so
// retries and timeouts are one and the same for every upstream. log may be
// nil.
func (p RetryPolicy) Stream(ctx context.Context, log *slog.Logger, req Request, attempt func(ctx context.Context) iter.Seq2[Chunk, error]) iter.Seq2[Chunk, error] {
	t := req.Timeouts
	return func(yield func(Chunk, error) bool) {
		var retries []string
		for n := 0; ; n++ {
			// The step's Finish tells how many attempts it took and why the
			// others failed.
			counted := func(c Chunk, err error) bool {
				if c.Type == Finish {
					info := CallInfo{}
					if c.Call != nil {
						info = *c.Call
					}
					info.Attempts, info.Retries = n+1, append(info.Retries, retries...)
					c.Call = &info
				}
				return yield(c, err)
			}
			delivered, failed, stop := t.run(ctx, attempt, counted)
			if stop {
				return
			}
			if failed == nil {
				return
			}
			if (delivered && !req.Restartable) || !Retryable(failed) || n+1 >= p.MaxAttempts() || ctx.Err() != nil {
				yield(Chunk{}, failed)
				return
			}
			wait := p.Backoff(n)
			var me *Error
			if errors.As(failed, &me) && me.RetryAfter > 0 {
				if me.RetryAfter > p.maxRetryAfter(t) {
					yield(Chunk{}, failed)
					return
				}
				wait = me.RetryAfter
			}
			retries = append(retries, failed.Error())
			if log != nil {
				log.LogAttrs(ctx, slog.LevelWarn, "model upstream failed, retrying",
					slog.Int("attempt", n+1), slog.Bool("restart", delivered), slog.Duration("wait", wait), slog.String("error", failed.Error()))
			}
			if delivered && !yield(Chunk{Type: Restart}, nil) {
				return
			}
			if err := sleep(ctx, wait); err != nil {
				yield(Chunk{}, err)
				return
			}
		}
	}
}

// maxRetryAfter is the longest retry-after worth waiting for: MaxRetryAfter,
// and never longer than an attempt may take.
func (p RetryPolicy) maxRetryAfter(t Timeouts) time.Duration {
	d := p.MaxRetryAfter
	if d <= 0 {
		d = DefaultMaxRetryAfter
	}
	if t.Call > 0 {
		d = min(d, t.Call)
	}
	return d
}

// run runs one attempt under t, passing its chunks to yield. stop is set
// when yield asked to stop.
func (t Timeouts) run(ctx context.Context, attempt func(ctx context.Context) iter.Seq2[Chunk, error], yield func(Chunk, error) bool) (delivered bool, failed error, stop bool) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if t.Call > 0 {
		call := time.AfterFunc(t.Call, func() { cancel(ErrCallTimeout) })
		defer call.Stop()
	}
	idle := time.AfterFunc(time.Hour, func() { cancel(ErrIdleTimeout) })
	idle.Stop()
	defer idle.Stop()
	arm := func() {
		if t.Idle > 0 {
			idle.Reset(t.Idle)
		}
	}
	arm()
	for c, err := range attempt(actx) {
		idle.Stop()
		if err != nil {
			failed = err
			break
		}
		if c.Type == Alive {
			arm()
			continue
		}
		delivered = true
		if !yield(c, nil) {
			return delivered, nil, true
		}
		arm()
	}
	if failed != nil && ctx.Err() == nil {
		if cause := context.Cause(actx); errors.Is(cause, ErrCallTimeout) || errors.Is(cause, ErrIdleTimeout) {
			limit := t.Call
			if errors.Is(cause, ErrIdleTimeout) {
				limit = t.Idle
			}
			failed = &Error{Status: http.StatusGatewayTimeout, Message: fmt.Sprintf("%v after %s", cause, limit), Err: cause}
		}
	}
	return delivered, failed, false
}

// RetryAfter reads how long an upstream asks to wait before a retry:
// retry-after-ms (milliseconds), else retry-after (seconds or an HTTP date),
// as the official SDKs read them; 0 when h has neither or they do not parse.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := h.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("retry-after")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
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

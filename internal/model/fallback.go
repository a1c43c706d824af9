package model

import (
	"context"
	"iter"
	"log/slog"
)

// Candidate is one model of a fallback list: its provider, the model name
// to send it, and the agent file's "provider/model" reference (for logs).
type Candidate struct {
	Provider Provider
	Name     string
	Ref      string
}

// Fallback is a Provider that tries its candidates in order: when one fails
// with an upstream error worth another attempt (Retryable: 429, 5xx,
// overload, timeout, no connection) after its own retries and before any
// chunk reached the caller (at any point of a Request.Restartable call,
// after a Restart chunk), the step runs again on the next candidate with
// that candidate's model name. An error after output was streamed to a
// caller that cannot restart, or one that is not Retryable, ends the step
// as it is.
type Fallback struct {
	cands []Candidate
	log   *slog.Logger
}

var (
	_ Provider       = (*Fallback)(nil)
	_ FormatHonourer = (*Fallback)(nil)
)

// NewFallback returns a Fallback over cands (at least one). log receives a
// warning for each fallback (nil: discard).
func NewFallback(cands []Candidate, log *slog.Logger) *Fallback {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Fallback{cands: cands, log: log}
}

// Stream implements Provider. req.Model is replaced by each candidate's name.
func (f *Fallback) Stream(ctx context.Context, req Request) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		var fellBack []string // the errors of the candidates that failed
		for i, c := range f.cands {
			req.Model = c.Name
			delivered := false
			var failed error
			for ch, err := range c.Provider.Stream(ctx, req) {
				if err != nil {
					failed = err
					break
				}
				// After a candidate's own Restart the caller holds nothing.
				delivered = ch.Type != Restart
				if ch.Type == Finish {
					info := CallInfo{}
					if ch.Call != nil {
						info = *ch.Call
					}
					info.Ref = c.Ref
					info.Retries = append(append([]string(nil), fellBack...), info.Retries...)
					ch.Call = &info
				}
				if !yield(ch, nil) {
					return
				}
			}
			if failed == nil {
				return
			}
			if (delivered && !req.Restartable) || !Retryable(failed) || i+1 >= len(f.cands) || ctx.Err() != nil {
				yield(Chunk{}, failed)
				return
			}
			fellBack = append(fellBack, c.Ref+": "+failed.Error())
			f.log.LogAttrs(ctx, slog.LevelWarn, "model failed, falling back",
				slog.String("model", c.Ref), slog.String("next", f.cands[i+1].Ref), slog.String("error", failed.Error()))
			if delivered && !yield(Chunk{Type: Restart}, nil) {
				return
			}
		}
	}
}

// HonoursFormat implements FormatHonourer: every candidate must honour f,
// since any of them may answer.
func (f *Fallback) HonoursFormat(rf ResponseFormat) bool {
	for _, c := range f.cands {
		h, ok := c.Provider.(FormatHonourer)
		if !ok || !h.HonoursFormat(rf) {
			return false
		}
	}
	return true
}

package server

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/wire"
)

// ApprovalHeader chooses whether a durable turn's request waits in-band for
// the decisions its turn pauses on (wire.ApprovalHeader).
const ApprovalHeader = wire.ApprovalHeader

// approvalWait is how long the request's turn waits in-band for a decision
// it pauses on: 0 (the seed's behaviour: the request ends with the pending
// call) unless the request's x-stackbone-approval header, or else the
// agent's approvalMode, says wait, and the wire's clients do not resolve
// decisions themselves (AG-UI). STACKBONE_APPROVAL_WAIT bounds it (0 turns
// waiting off). A header value other than wait or pause is a 400.
func (s *Server) approvalWait(r *http.Request, tw wire.Wire, t wire.Turn) (time.Duration, error) {
	if ri, ok := tw.(wire.Interrupter); ok && ri.ResolvesInterrupts() {
		return 0, nil
	}
	mode := strings.ToLower(strings.TrimSpace(r.Header.Get(ApprovalHeader)))
	switch mode {
	case "":
		if spec := s.Agents.Get(t.Input().Agent); spec != nil {
			mode = spec.ApprovalMode
		}
	case agent.ApprovalWait, agent.ApprovalPause:
	default:
		return 0, apierror.Invalid(ApprovalHeader, "The %s header must be %q or %q.", ApprovalHeader, agent.ApprovalWait, agent.ApprovalPause)
	}
	if mode != agent.ApprovalWait {
		return 0, nil
	}
	return s.Config.ApprovalWait, nil
}

// encodeWaiting is EncodeRun for a request that waits in-band for the
// decisions its durable turn pauses on. A pause (the stored RunFinished of
// an interrupt outcome) is held back, not written, while the decisions are
// made out of band (engine.Runner.AwaitDecisions, at most wait); once they
// are, the same response goes on with the resumed turn's events as any
// replica stores them (engine.Runner.Follow from after the pause), through
// further pauses, until the turn's end, whose usage is the whole turn's. A
// wait that runs out, or a client that goes away, ends the response with the
// held pause, as EncodeRun would have: the decision stays pending, durable
// as any.
func (s *Server) encodeWaiting(ctx context.Context, tenant string, enc wire.Encoder, run *engine.Run, wait time.Duration) error {
	cur := run
	var stops []func() bool
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	events := func(yield func(event.Event) bool) {
		var usage *event.Usage
		for {
			var held *event.Event
			for e := range cur.Events() {
				if cur != run && e.Type == event.RunStarted {
					continue // the resume's start: the same turn goes on
				}
				if e.Type == event.RunFinished && e.Outcome != nil && e.Outcome.Type == event.Interrupt && e.Seq > 0 {
					held = &e
					break
				}
				if e.Type == event.RunFinished {
					e.Usage = addUsage(usage, e.Usage)
				}
				if !yield(e) {
					return
				}
			}
			if held == nil {
				return
			}
			usage = addUsage(usage, held.Usage)
			log := s.Logger.With("thread", run.ThreadID, "seq", held.Seq)
			log.Info("turn paused on a decision; the request waits for it", "wait", wait)
			next, err := s.followDecided(ctx, tenant, run.ThreadID, held.Seq, wait)
			if err != nil {
				log.Warn("waiting for a decision failed; the request ends with the pause", "err", err)
			}
			if next == nil {
				if err == nil && ctx.Err() == nil {
					log.Info("no decision within the wait; the request ends with the pause")
				}
				held.Usage = usage
				yield(*held)
				return
			}
			log.Info("decided; the request goes on with the resumed turn")
			stops = append(stops, context.AfterFunc(ctx, next.Abandon))
			cur = next
		}
	}
	return s.encode(enc, events, func() int { return cur.Buffered() })
}

// followDecided waits, at most wait, for the decisions of the pause at seq
// and then follows the thread's resumed turn; nil when the wait ran out or
// the client went away first.
func (s *Server) followDecided(ctx context.Context, tenant, threadID string, seq int64, wait time.Duration) (*engine.Run, error) {
	ok, err := s.Runner.AwaitDecisions(ctx, tenant, threadID, seq, wait)
	if err != nil || !ok {
		return nil, err
	}
	return s.Runner.Follow(ctx, tenant, threadID, seq+1)
}

// addUsage is the sum of a turn's usage so far and a part's; nil when
// neither is known.
func addUsage(sum, part *event.Usage) *event.Usage {
	switch {
	case sum == nil:
		return part
	case part == nil:
		return sum
	}
	u := sum.Add(*part)
	return &u
}

package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
)

// A client retries a durable turn when its first attempt's answer did not
// reach it (a 502, a dropped connection, a server killed mid-turn): the
// official SDKs do it by themselves. Such a retry attaches to the attempt
// instead of storing its input again and running another: it gets the
// attempt's events from the thread's log, then follows them live until the
// attempt's end, and so the attempt's answer.
//
// A request is a retry of the thread's last turn when it carries that
// turn's Idempotency-Key, or, without a key, when it sends the same input
// (the request as sent, ids included when the client gives ids) or, naming
// its messages, only messages the thread holds,
// while the turn still runs or within the retry window (JournalTTL) after
// the thread last changed. A retry of a turn that failed
// runs it again instead (without storing its input twice).

// sessionTurn is what a durable turn records of itself to recognise its
// retries: a digest of its Idempotency-Key, and of the request as sent
// (turnDigest: an SDK's retry sends the same bytes; a client sending its
// whole history and the same reply again later does not), or no request
// digest when it brings no input.
func sessionTurn(in Input) (store.Turn, error) {
	t := store.Turn{Key: keyDigest(in.IdempotencyKey)}
	for _, m := range in.Messages {
		if m.Role != message.System {
			d, err := turnDigest(in)
			t.Digest = d
			return t, err
		}
	}
	return t, nil
}

// bringsNothing reports whether a client that names its messages (AG-UI)
// sent only messages the thread holds: running the agent again with nothing
// new, as an app does to retry a run whose stream failed. A user message
// the thread holds under that id with other content is new (an edit, which
// keeps the message's id: diverge).
func bringsNothing(stored, sent []message.Message) bool {
	known := make(map[string]message.Message, len(stored))
	for _, m := range stored {
		known[m.ID] = m
	}
	n := 0
	for _, m := range sent {
		if m.Role == message.System {
			continue
		}
		k, ok := known[m.ID]
		if m.ID == "" || !ok || (m.Role == message.User && k.Role == message.User && !sameUser(&k, &m)) {
			return false
		}
		n++
	}
	return n > 0
}

// changesState reports whether seeding keys (the client's editable state)
// would change the thread's state: a run that brings only new state is a
// new run, not a retry.
func changesState(th *store.Thread, keys map[string]json.RawMessage) bool {
	if th == nil || len(keys) == 0 {
		return false
	}
	merged, err := mergeState(th.State, keys)
	return err != nil || !jsonEqual(merged, th.State)
}

// retryKind is what a durable turn is to the thread's last turn.
type retryKind int

const (
	// newTurn: not a retry; the turn begins afresh.
	newTurn retryKind = iota
	// attachRetry: a retry of a turn that runs, or ended with an answer or
	// a pause: it attaches to it (attach).
	attachRetry
	// continueRetry: a retry of a turn that failed: it goes on from the
	// failed attempt's stored steps (continueTurn), storing nothing twice
	// and running none of their tools again.
	continueRetry
)

// Continuation is the stored turn a request names as the one it goes on
// from (the Responses wire's previous_response_id), when it names one. A
// request that names the thread's last turn goes on as any other; one
// that names an earlier turn goes on from where that turn ended (From),
// on a new branch of the thread, unless it is a retry of the thread's last
// turn (it gets that turn's answer again). A request naming an earlier
// turn whose end is not known is a NotLatestError.
type Continuation struct {
	// Name is how the request named it (a response id), for the error.
	Name string
	// Next is the sequence number at which the turn that followed the
	// named one began (store.Thread.Turn.Seq then), 0 when none did: it
	// is the thread's latest.
	Next int64
	// From is the sequence number of the named turn's last message (its
	// end, store.Store.TurnEnd) when it is not the thread's latest: the
	// message a new turn goes on from; 0 when unknown.
	From int64
}

// NotLatestError refuses a request that continues a turn its thread has
// gone on from (Continuation) when where that turn ended is not known.
type NotLatestError struct {
	// Name is the named turn's (Continuation.Name).
	Name string
}

func (e *NotLatestError) Error() string {
	return fmt.Sprintf("%s is not the latest turn of its thread", e.Name)
}

// retries says whether a durable turn is a retry of the thread's last turn
// (retryOf), or, for a request that names an earlier turn it continues
// (cont), whether it may go on from that turn's end: the one rule of
// "retry or new turn" for every wire. A retry is recognised first, so a
// retried request that branched attaches to its first attempt.
//
// regen says a request that brings nothing new (a client naming its
// messages) leaves out the answer the thread's last turn stored, to have it
// again (a regenerate, diverge): it attaches to that turn while it runs,
// and is a new turn once the turn ended. (A request sending the same bytes
// as the last turn's is its retry within the retry window, regenerate or
// not: a client regenerates within it with a new Idempotency-Key.)
func (r *Runner) retries(th *store.Thread, agentName string, turn store.Turn, nothingNew bool, cont *Continuation, regen bool) (retryKind, error) {
	kind, err := r.retryOf(th, agentName, turn, nothingNew, regen)
	if err != nil || kind != newTurn || cont == nil || cont.Next == 0 || th == nil {
		return kind, err
	}
	if cont.From == 0 {
		return newTurn, &NotLatestError{Name: cont.Name}
	}
	return newTurn, nil // a new branch, from cont.From
}

// retryOf says whether a durable turn is a retry of the thread's last turn:
// same key (at any time), or, without a key, same input or nothing new
// while the turn runs or within the retry window after the thread last
// changed. A known Idempotency-Key sent with another request is an error.
func (r *Runner) retryOf(th *store.Thread, agentName string, turn store.Turn, nothingNew, regen bool) (retryKind, error) {
	if th == nil || th.Agent != agentName || th.Turn.Seq == 0 {
		return newTurn, nil
	}
	ofStatus := func() retryKind {
		if th.Status == store.Failed {
			return continueRetry
		}
		return attachRetry
	}
	if turn.Key != "" {
		if turn.Key != th.Turn.Key {
			return newTurn, nil // a new key: a new turn, whatever its text
		}
		if turn.Digest != th.Turn.Digest {
			e := inputError(FieldIdempotencyKey, "This Idempotency-Key was used for the thread's last turn with a different request; send a new key for a new request.")
			e.Code = CodeIdempotencyKeyReused
			return newTurn, e
		}
		return ofStatus(), nil
	}
	if !nothingNew && (turn.Digest == "" || turn.Digest != th.Turn.Digest) {
		return newTurn, nil
	}
	switch th.Status {
	case store.Running, store.Queued:
		return attachRetry, nil // the attempt is still going (or its process died)
	}
	if regen && th.Status != store.Failed {
		return newTurn, nil // the answer again, of a turn that ended: a regenerate
	}
	if r.JournalTTL > 0 && !r.Now().After(th.UpdatedAt.Add(r.JournalTTL)) {
		return ofStatus(), nil
	}
	return newTurn, nil
}

// attach answers a retry with the thread's last turn: its stored events,
// then its live ones until its end. A turn whose process died (its lease
// lapsed) is taken over first, so the retry gets the recovered answer.
func (r *Runner) attach(in Input, th *store.Thread, run *Run) {
	r.Logger.Info("retried turn attaches to its first attempt", "agent", in.Agent, "thread", in.ThreadID, "run", th.RunID)
	r.followFrom(in, th, th.Turn.Seq, run, true)
}

// followFrom streams th's events from seq from on to run, in the
// background, after taking over a run whose process died. A client (not a
// passive reader) following a running turn is its client again: the turn
// is no longer abandoned, and run's Abandon abandons it again.
func (r *Runner) followFrom(in Input, th *store.Thread, from int64, run *Run, client bool) {
	run.Existed = true
	r.resumeLapsed(th)
	if client && th.Status == store.Running {
		// A client follows the run again: a new message no longer stops
		// it, unless this client goes away too.
		if th.Abandoned {
			if err := r.Store.AbandonRun(context.Background(), th.Tenant, th.ID, ""); err != nil {
				r.Logger.Warn("clear an abandoned run", "thread", th.ID, "run", th.RunID, "err", err)
			}
		}
		r.watchAbandon(run, th.Tenant, th.ID, th.RunID)
	}
	r.spawn(nil, func(ctx context.Context) {
		defer close(run.events)
		r.follow(ctx, in, from, run)
	})
}

// Follow streams a durable thread's events from seq from on (in their live
// form, as attach does) until the first terminal event: a client coming back
// to a turn it started, such as the Responses wire's resumed stream. A
// thread that is unknown to the tenant is store.ErrNotFound.
func (r *Runner) Follow(ctx context.Context, tenant, threadID string, from int64) (*Run, error) {
	return r.FollowTurn(ctx, FollowTurn{Tenant: tenant, ThreadID: threadID, From: from, Client: true})
}

// FollowTurn says which turn a client follows and how (Runner.FollowTurn).
type FollowTurn struct {
	Tenant, ThreadID string
	// From is the sequence number of the first event to stream (the
	// turn's first event: store.Thread.Turn.Seq, store.Store.RunTurn).
	From int64
	// Snapshots adds, for a client that rebuilds its view from the stream
	// (AG-UI), the thread's state after the turn's start and its messages
	// before the turn's end, as the turn's own stream has them.
	Snapshots bool
	// Client says the follower is the turn's client again (a reloaded UI,
	// with a key that may start turns): a running turn it follows is no
	// longer abandoned, and the returned run's Abandon abandons it again.
	// A passive reader (false) changes nothing of the turn.
	Client bool
}

// FollowTurn is Follow with options: a turn streamed again, from its first
// event, then live to its end (a UI reattaching after a reload, on any
// wire's format).
func (r *Runner) FollowTurn(ctx context.Context, f FollowTurn) (*Run, error) {
	th, err := r.Store.GetThread(ctx, f.Tenant, f.ThreadID)
	if err != nil {
		return nil, err
	}
	if !r.admit() {
		return nil, ErrShuttingDown
	}
	defer r.wg.Done()
	run := newRun(th.RunID, f.ThreadID)
	run.tenant, run.store = f.Tenant, r.Store
	r.followFrom(Input{Tenant: f.Tenant, ThreadID: f.ThreadID, Resync: f.Snapshots}, th, f.From, run, f.Client)
	return run, nil
}

// resumeLapsed resumes a thread whose run's process died (Running with its
// lease lapsed): a retry must not wait for a run no one drives.
func (r *Runner) resumeLapsed(th *store.Thread) {
	if th.Status == store.Running && (th.LeaseUntil.IsZero() || r.Now().After(th.LeaseUntil)) {
		r.resumeAsync(th.Tenant, th.ID)
	}
}

// follow sends run's consumer the thread's events from seq from on, in their
// live form, until the first terminal event: from the store, then as the
// bus announces new stored ones (live-only deltas are skipped: the stored
// text_end holds the text). It reads the store again now and then, so a run
// on another replica whose bus does not reach this one, or one whose
// process died, is followed (and taken over) all the same.
func (r *Runner) follow(ctx context.Context, in Input, from int64, run *Run) {
	sub := r.Bus.Subscribe(in.Tenant, in.ThreadID)
	defer sub.Close()
	poll := r.clock.NewTicker(r.Lease / 3)
	defer poll.Stop()
	send := run.deliver
	fail := func(err error) {
		code, msg := r.describe(err)
		send(event.Event{Type: event.RunError, ThreadID: in.ThreadID, RunID: run.ID, Code: code, Message: msg,
			Time: r.Now().UnixMilli(), Err: err})
	}
	// worked: the turn stored a model step or a tool result, so a failure
	// after it is not safe to retry.
	after, started, worked := from-1, false, false
	for {
		evs, err := r.Store.Events(ctx, in.Tenant, in.ThreadID, after, store.MaxLimit)
		if err != nil {
			fail(err)
			return
		}
		for _, e := range evs {
			after = e.Seq
			if e.Type == event.RunStarted {
				if started {
					continue // a recovery's or a resume's start: the same turn goes on
				}
				started = true
				if !send(e) || !r.snapshot(ctx, in, e, event.StateSnapshot, send) {
					return
				}
				continue
			}
			switch e.Type {
			case event.TextEnd, event.ToolCallEnd, event.ToolResult:
				worked = true
			case event.RunError:
				e.Err = &RunFailedError{Err: &StoredFailure{Code: e.Code, Message: e.Message}, WorkDone: worked}
			}
			if e.Type == event.RunError && r.continued(ctx, in, from, e) {
				continue // a retry continues the failed attempt: the turn goes on
			}
			if e.Type == event.RunFinished || e.Type == event.RunError {
				if r.snapshot(ctx, in, e, event.MessagesSnapshot, send) {
					send(e)
				}
				return
			}
			for _, le := range event.LiveForm(e) {
				if !send(le) {
					return
				}
			}
		}
		if len(evs) == store.MaxLimit {
			continue
		}
		for wait := true; wait; {
			select {
			case <-run.gone:
				return
			case <-ctx.Done():
				fail(context.Cause(ctx))
				return
			case <-sub.Dropped:
				wait = false
			case e := <-sub.C:
				wait = e.Seq <= after
			case <-poll.C():
				th, err := r.Store.GetThread(ctx, in.Tenant, in.ThreadID)
				if err != nil {
					continue
				}
				r.resumeLapsed(th)
				if th.Status != store.Running && th.Status != store.Queued {
					// Ended: its terminal event is stored, unless the run
					// was ended without one (an agent no longer loaded).
					if evs, err := r.Store.Events(ctx, in.Tenant, in.ThreadID, after, 1); err == nil && len(evs) == 0 {
						fail(&RunFailedError{Err: &StoredFailure{Code: CodeIncompleteRun, Message: MessageIncompleteRun}, WorkDone: worked})
						return
					}
				}
				wait = false
			}
		}
	}
}

// snapshot sends, to a client that rebuilds its view from the stream
// (AG-UI), the thread's state after the turn's start and its whole
// conversation before the turn's end, as a run of its own would.
func (r *Runner) snapshot(ctx context.Context, in Input, at event.Event, typ event.Type, send func(event.Event) bool) bool {
	if !in.Resync {
		return true
	}
	e := event.Event{Type: typ, ThreadID: at.ThreadID, RunID: at.RunID, Time: at.Time}
	switch typ {
	case event.StateSnapshot:
		th, err := r.Store.GetThread(ctx, in.Tenant, in.ThreadID)
		if err != nil {
			return true
		}
		e.Snapshot = th.State
	default:
		msgs, err := r.Store.Messages(ctx, in.Tenant, in.ThreadID)
		if err != nil {
			return true
		}
		e.Messages = msgs
	}
	return send(e)
}

// continued reports whether the failed attempt whose RunError is e was
// continued by a retry (continueTurn): the thread's turn is still the one
// that began at from and another run holds or ended it since.
func (r *Runner) continued(ctx context.Context, in Input, from int64, e event.Event) bool {
	th, err := r.Store.GetThread(ctx, in.Tenant, in.ThreadID)
	return err == nil && th.Turn.Seq == from && th.RunID != e.RunID
}

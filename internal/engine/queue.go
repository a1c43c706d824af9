package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
)

// A follow-up sent with the multitask strategy enqueue, while its thread
// runs a turn (or waits on a decision), waits in the thread's durable queue
// (store.QueueStore) instead of being refused: the end of each turn starts
// the thread's next queued one (drain), on whichever replica it ends, and
// the stale sweep (Recover) starts those a dead process left. A queued turn
// begins once: the transaction that begins it takes it off the queue
// (store.BeginRun.Dequeue). Its request follows the thread until the turn
// starts, then streams it to its end, as a retry attached to it would.

// queuedInput is the record of a queued turn's Input (store.QueuedTurn.Input):
// what the turn needs to run later, on any replica. The MCP wire's live
// questions (Input.Ask) do not survive a queue: a queued turn's questions
// become pending decisions.
type queuedInput struct {
	Agent           string                     `json:"agent"`
	Key             string                     `json:"key,omitempty"`
	IdempotencyKey  string                     `json:"idempotencyKey,omitempty"`
	Continues       *Continuation              `json:"continues,omitempty"`
	History         bool                       `json:"history,omitempty"`
	Messages        []message.Message          `json:"messages"`
	ClientTools     []toolSpec                 `json:"clientTools,omitempty"`
	ToolChoice      string                     `json:"toolChoice,omitempty"`
	MaxTokens       int                        `json:"maxTokens,omitempty"`
	StopSequences   []string                   `json:"stopSequences,omitempty"`
	Temperature     *float64                   `json:"temperature,omitempty"`
	ReasoningEffort string                     `json:"reasoningEffort,omitempty"`
	ResponseFormat  *model.ResponseFormat      `json:"responseFormat,omitempty"`
	State           map[string]json.RawMessage `json:"state,omitempty"`
	Resync          bool                       `json:"resync,omitempty"`
	DecidedBy       string                     `json:"decidedBy,omitempty"`
	Collected       bool                       `json:"collected,omitempty"`
	User            *tool.User                 `json:"user,omitempty"`
	UserID          string                     `json:"userId,omitempty"`
	AnyOwner        bool                       `json:"anyOwner,omitempty"`
}

// encodeQueued is the record of in for the queue.
func encodeQueued(in Input) (json.RawMessage, error) {
	q := queuedInput{Agent: in.Agent, Key: in.Key, IdempotencyKey: in.IdempotencyKey, Continues: in.Continues,
		History: in.History, Messages: in.Messages, ToolChoice: in.ToolChoice, MaxTokens: in.MaxTokens,
		StopSequences: in.StopSequences, Temperature: in.Temperature, ReasoningEffort: in.ReasoningEffort,
		ResponseFormat: in.ResponseFormat, State: in.State, Resync: in.Resync, DecidedBy: in.DecidedBy, Collected: in.Collected,
		User: in.User, UserID: in.UserID, AnyOwner: in.AnyOwner}
	for _, t := range in.ClientTools {
		q.ClientTools = append(q.ClientTools, toolSpec{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	return json.Marshal(q)
}

// decodeQueued is the Input of a queued turn.
func decodeQueued(q store.QueuedTurn) (Input, error) {
	var r queuedInput
	if err := json.Unmarshal(q.Input, &r); err != nil {
		return Input{}, fmt.Errorf("queued turn %s: %w", q.ID, err)
	}
	in := Input{Tenant: q.Tenant, Agent: r.Agent, Key: r.Key, ThreadID: q.ThreadID, RunID: q.ID,
		IdempotencyKey: r.IdempotencyKey, Continues: r.Continues, History: r.History, Messages: r.Messages,
		ToolChoice: r.ToolChoice, MaxTokens: r.MaxTokens, StopSequences: r.StopSequences, Temperature: r.Temperature,
		ReasoningEffort: r.ReasoningEffort, ResponseFormat: r.ResponseFormat, State: r.State, Resync: r.Resync,
		DecidedBy: r.DecidedBy, Collected: r.Collected, User: r.User, UserID: r.UserID, AnyOwner: r.AnyOwner, queued: &q}
	for _, t := range r.ClientTools {
		in.ClientTools = append(in.ClientTools, model.ToolDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	return in, nil
}

// queues says whether a turn that met th (its load error err) waits in the
// thread's queue: its strategy is enqueue, it brings a message, and the
// thread runs a turn its client still follows, waits on a decision, or
// already holds queued turns (which go first).
func (r *Runner) queues(ctx context.Context, in Input, th *store.Thread, err error, strategy string) (bool, error) {
	if in.queued != nil || th == nil || strategy != "enqueue" {
		return false, nil
	}
	switch {
	case errors.Is(err, store.ErrRunInProgress):
		return !th.Abandoned, nil
	case errors.Is(err, store.ErrApprovalPending):
		return true, nil
	case err != nil:
		return false, nil
	}
	qs, qerr := r.Store.Queue(ctx, in.Tenant, in.ThreadID)
	return len(qs) > 0, qerr
}

// enqueue queues the turn in on its thread and returns its run: it follows
// the thread until its turn starts, then streams it to its end. A retry of
// a request queued before (same key, else same request) gets that one's run.
func (r *Runner) enqueue(ctx context.Context, in Input, turn store.Turn, run *Run) (*Run, error) {
	raw, err := encodeQueued(in)
	if err != nil {
		return nil, err
	}
	q, added, err := r.Store.Enqueue(ctx, store.QueuedTurn{Tenant: in.Tenant, ThreadID: in.ThreadID, ID: run.ID,
		Turn: turn, Input: raw, CreatedAt: r.Now()})
	if err != nil {
		return nil, err
	}
	if added {
		r.Logger.Info("a follow-up waits in the thread's queue", "thread", in.ThreadID, "run", q.ID, "seq", q.Seq)
	} else {
		r.Logger.Info("a retried follow-up attaches to its queued turn", "thread", in.ThreadID, "run", q.ID)
		run = newRun(q.ID, in.ThreadID)
		run.tenant, run.store = in.Tenant, r.Store
	}
	run.Existed = true
	r.watchQueued(run, in.Tenant, in.ThreadID, q.ID)
	r.spawn(nil, func(ctx context.Context) { r.awaitQueued(ctx, in, q.ID, run) })
	// The thread may have gone idle since it was read: its next turn is
	// due now (a begin takes it once, whoever drains).
	r.drainAsync(in.Tenant, in.ThreadID)
	return run, nil
}

// watchQueued makes the Abandon of run, a request that waits for its
// queued turn id, tell the runner that its client went away, as
// watchAbandon does for a running turn: with CancelOnDisconnect the turn
// leaves the queue; else it is recorded as the thread's abandoned run, so
// once it starts with no client a new message stops it, and a retry that
// follows it again clears that (followFrom). Its turn may have started by
// then: the record names its run all the same.
func (r *Runner) watchQueued(run *Run, tenant, threadID, id string) {
	r.onAbandon(run, threadID, id, func(ctx context.Context) error {
		if !r.CancelOnDisconnect {
			return r.Store.AbandonRun(ctx, tenant, threadID, id)
		}
		r.Logger.Info("the client of a queued turn went away: it leaves the queue", "thread", threadID, "run", id)
		removed, err := r.Store.Unqueue(ctx, tenant, threadID, id)
		if err != nil || removed {
			return err
		}
		// It started: cancel it if it still runs.
		th, err := r.Store.GetThread(ctx, tenant, threadID)
		if err != nil || th.RunID != id || th.Status != store.Running {
			return err
		}
		return r.Cancel(ctx, tenant, threadID)
	})
}

// queuePoll is how often a queued request reads its thread again while it
// waits (the bus announces its turn's start sooner, on any replica the
// PostgreSQL bridge reaches).
const queuePoll = time.Second

// awaitQueued waits until the queued turn id starts (or has run), then
// streams it to run from its first event, as its client; a turn taken off
// the queue before it started ends run with a cancelled RunError.
func (r *Runner) awaitQueued(ctx context.Context, in Input, id string, run *Run) {
	th, from, err := r.waitQueued(ctx, in.Tenant, in.ThreadID, id, run.gone)
	if err == nil {
		select {
		case <-run.gone:
			// Its client left as the turn started: the turn runs
			// abandoned (watchQueued), and is not followed as this
			// client's, which would clear that.
			err = errGone
		default:
		}
	}
	switch {
	case err == nil:
		r.followFrom(in, th, from, run, true)
		return
	case errors.Is(err, errGone):
	default:
		code, msg := r.describe(err)
		if errors.Is(err, ErrCancelled) {
			msg = err.Error()
		}
		run.deliver(event.Event{Type: event.RunError, ThreadID: in.ThreadID, RunID: id, Code: code, Message: msg,
			Time: r.Now().UnixMilli(), Err: err})
	}
	close(run.events)
}

// errGone ends waitQueued when its caller went away.
var errGone = errors.New("the waiter went away")

// QueuedRemovedError is what a queued turn's request gets when the turn
// left its thread's queue before it started (Runner.Unqueue). It is
// ErrCancelled.
type QueuedRemovedError struct{ ID string }

func (e *QueuedRemovedError) Error() string {
	return "The queued message was removed from the thread's queue before its turn."
}

// Is makes a QueuedRemovedError ErrCancelled.
func (e *QueuedRemovedError) Is(target error) bool { return target == ErrCancelled }

// WaitQueued waits until the thread's queued turn id starts, and returns
// the sequence number of its turn's first event (for Runner.FollowTurn). A
// run id that is not queued and never ran on the thread is
// store.ErrNotFound; one removed from the queue is a *QueuedRemovedError.
func (r *Runner) WaitQueued(ctx context.Context, tenant, threadID, id string) (int64, error) {
	_, from, err := r.waitQueued(ctx, tenant, threadID, id, nil)
	return from, err
}

// waitQueued follows the thread until its queued turn id starts (or is
// found to have run): its thread as read then and its turn's first event.
// It ends with errGone when gone closes, ctx's error when ctx ends.
func (r *Runner) waitQueued(ctx context.Context, tenant, threadID, id string, gone <-chan struct{}) (*store.Thread, int64, error) {
	sub := r.Bus.Subscribe(tenant, threadID)
	defer sub.Close()
	poll := r.clock.NewTicker(queuePoll)
	defer poll.Stop()
	for {
		th, from, waiting, err := r.queuedTurn(ctx, tenant, threadID, id)
		switch {
		case err != nil:
			return nil, 0, err
		case from > 0:
			return th, from, nil
		case !waiting:
			return nil, 0, &QueuedRemovedError{ID: id}
		}
		select {
		case <-gone:
			return nil, 0, errGone
		case <-ctx.Done():
			return nil, 0, context.Cause(ctx)
		case <-sub.Dropped:
			sub.Drain()
		case <-sub.C:
		case <-poll.C():
		}
	}
}

// queuedTurn says where the queued turn id of a thread stands: from is the
// sequence number of its turn's first event once it started (th the
// thread read then), waiting that it is still queued.
func (r *Runner) queuedTurn(ctx context.Context, tenant, threadID, id string) (th *store.Thread, from int64, waiting bool, err error) {
	// The queue first: a turn that left it had begun by then, so the
	// thread (or its run records) read after it shows it.
	qs, err := r.Store.Queue(ctx, tenant, threadID)
	if err != nil {
		return nil, 0, false, err
	}
	if slices.ContainsFunc(qs, func(q store.QueuedTurn) bool { return q.ID == id }) {
		return nil, 0, true, nil
	}
	if th, err = r.Store.GetThread(ctx, tenant, threadID); err != nil {
		return nil, 0, false, err
	}
	if th.RunID == id && th.Turn.Seq > 0 {
		return th, th.Turn.Seq, false, nil
	}
	seq, err := r.Store.RunTurn(ctx, tenant, threadID, id)
	if errors.Is(err, store.ErrNotFound) {
		return th, 0, false, nil
	}
	return th, seq, false, err
}

// drainAsync starts the thread's next queued turn in the background, if
// one is due (drain).
func (r *Runner) drainAsync(tenant, threadID string) {
	r.background(func(ctx context.Context) { r.drain(ctx, tenant, threadID) })
}

// drain starts the first turn of the thread's queue when the thread is free
// for it (no run holds it, no decision is pending): the next turn's end
// drains again. A queued turn that cannot start at all (its agent is gone,
// its input no longer valid) leaves the queue, so the turns behind it run.
func (r *Runner) drain(ctx context.Context, tenant, threadID string) {
	for range store.MaxQueue {
		qs, err := r.Store.Queue(ctx, tenant, threadID)
		if err != nil || len(qs) == 0 {
			if err != nil {
				r.Logger.Warn("read a thread's queue", "thread", threadID, "err", err)
			}
			return
		}
		q := qs[0]
		in, err := decodeQueued(q)
		if err == nil {
			var run *Run
			if run, err = r.start(ctx, in, 2); err == nil {
				run.detach() // its request follows the thread, not this run
				return
			}
		}
		switch {
		case errors.Is(err, store.ErrDequeued), errors.Is(err, store.ErrRunInProgress),
			errors.Is(err, store.ErrApprovalPending), errors.Is(err, ErrShuttingDown):
			// Another runner started it, or the thread is busy (its end
			// drains), or the next process will.
			return
		case ctx.Err() != nil:
			return
		}
		r.Logger.Warn("a queued turn cannot start: it leaves the queue", "thread", threadID, "run", q.ID, "err", err)
		if _, uerr := r.Store.Unqueue(ctx, tenant, threadID, q.ID); uerr != nil {
			r.Logger.Warn("remove a queued turn", "thread", threadID, "run", q.ID, "err", uerr)
			return
		}
	}
}

// Queue lists a durable thread's queued turns, in the order they run
// (ErrNotFound for a thread the tenant does not have).
func (r *Runner) Queue(ctx context.Context, tenant, threadID string) ([]QueuedTurn, error) {
	if _, err := r.Store.GetThread(ctx, tenant, threadID); err != nil {
		return nil, err
	}
	qs, err := r.Store.Queue(ctx, tenant, threadID)
	if err != nil {
		return nil, err
	}
	out := make([]QueuedTurn, 0, len(qs))
	for _, q := range qs {
		in, err := decodeQueued(q)
		if err != nil {
			return nil, err
		}
		out = append(out, QueuedTurn{ID: q.ID, Position: len(out) + 1, Messages: in.Messages, QueuedAt: q.CreatedAt})
	}
	return out, nil
}

// QueuedTurn is a follow-up waiting in its thread's queue (Runner.Queue).
type QueuedTurn struct {
	// ID is the run id the turn will run under.
	ID string
	// Position is its place in the queue, 1 first.
	Position int
	// Messages are the messages its request sent.
	Messages []message.Message
	// QueuedAt is when it was queued.
	QueuedAt time.Time
}

// Unqueue removes a queued turn before it starts: its request ends
// cancelled (within queuePoll). It reports whether the turn was queued (ErrNotFound for a
// thread the tenant does not have).
func (r *Runner) Unqueue(ctx context.Context, tenant, threadID, id string) (bool, error) {
	if _, err := r.Store.GetThread(ctx, tenant, threadID); err != nil {
		return false, err
	}
	// Its request learns of it when it next reads the queue (queuePoll).
	return r.Store.Unqueue(ctx, tenant, threadID, id)
}

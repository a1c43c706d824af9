// Package runtime is the agent loop: model → tools → model … until a final
// answer, a pause for a human, a client tool, or the step limit. One loop
// serves fresh turns, client-tool continuations, resumes after a decision and
// recovery after a crash, because it works only from the stored conversation:
// an assistant message whose calls lack results means "run those calls".
package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/bus"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/ids"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/store"
)

// Hooks observe runs (metrics). Every field is optional.
type Hooks struct {
	RunStarted func(agent string)
	RunEnded   func(agent string, outcome string, d time.Duration)
	Decided    func()
}

// Runner runs turns. Its fields are set once before use.
type Runner struct {
	Store  store.Store
	Agents *agent.Registry
	Models model.Resolver
	Bus    *bus.Bus
	Logger *slog.Logger
	// Now and NewID are the determinism seams.
	Now   func() time.Time
	NewID ids.Generator
	// Owner names this process in leases.
	Owner string
	// Lease is how long a run holds its thread without a checkpoint.
	Lease time.Duration
	Hooks Hooks

	wg       sync.WaitGroup
	builtins sync.Map // *agent.Spec → []*tool.Tool
}

// Init fills unset fields with defaults.
func (r *Runner) Init() {
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.NewID == nil {
		r.NewID = ids.New
	}
	if r.Owner == "" {
		r.Owner = ids.New("node")
	}
	if r.Lease == 0 {
		r.Lease = 30 * time.Second
	}
	if r.Bus == nil {
		r.Bus = bus.New()
	}
}

// Wait blocks until background runs (resumes) end.
func (r *Runner) Wait() { r.wg.Wait() }

// Run is a started turn. Read its events with Events.
type Run struct {
	ID       string
	ThreadID string
	// Existed is true when the durable thread existed before this turn.
	Existed bool
	events  chan item
	gone    chan struct{}
	once    sync.Once
}

type item struct {
	e   event.Event
	err error
}

// Events yields the run's events until its terminal event. Stopping early
// detaches the consumer: a durable run goes on and is stored; a stateless run
// is cancelled through its request context.
func (run *Run) Events() iter.Seq2[event.Event, error] {
	return func(yield func(event.Event, error) bool) {
		defer run.detach()
		for it := range run.events {
			if !yield(it.e, it.err) {
				return
			}
		}
	}
}

func (run *Run) detach() { run.once.Do(func() { close(run.gone) }) }

// ErrNoInput is returned when a durable turn carries nothing new to answer.
var ErrNoInput = errors.New("no new input")

// Start validates a turn and, for a durable one, takes the thread's lease and
// stores the new input. Errors are returned before any event: unknown agent,
// 409s, bad input. The run then proceeds in the background.
func (r *Runner) Start(ctx context.Context, in Input) (*Run, error) {
	spec := r.Agents.Get(in.Agent)
	if spec == nil {
		e := apierror.New(apierror.NotFound, "model_not_found", fmt.Sprintf("The model `%s` does not exist: no agent has that name.", in.Agent))
		e.Param = "model"
		return nil, e
	}
	x, err := r.newExecution(spec, in.Tenant, in.ThreadID)
	if err != nil {
		return nil, err
	}
	x.in = in
	x.system = systemPrompt(spec.Instructions, in.Messages)
	runID := in.RunID
	if runID == "" {
		runID = r.NewID("run")
	}
	x.runID = runID
	run := &Run{ID: runID, ThreadID: in.ThreadID, events: make(chan item, 64), gone: make(chan struct{})}

	if len(in.Resume) > 0 && !x.durable {
		return nil, contractError(CodeNeedsThread, "A resume needs a threadId.")
	}
	if len(in.State) > 0 {
		if !x.durable {
			return nil, contractError(CodeNeedsThread, "Seeding state needs a threadId: a stateless run has no state to write to.")
		}
		kept, dropped, err := FilterState(spec, in.State)
		if err != nil {
			return nil, err
		}
		if len(dropped) > 0 {
			r.Logger.Debug("dropped state keys the agent does not list as editable", "agent", spec.Name, "keys", dropped)
		}
		in.State = kept
		x.in.State = kept
	}
	if !x.durable {
		for _, m := range in.Messages {
			if m.Role != message.System {
				x.msgs = append(x.msgs, r.withID(m))
			}
		}
		if len(x.msgs) == 0 {
			return nil, apierror.Invalid("messages", "messages must hold at least one non-system message")
		}
		x.markClientCalls(x.msgs)
		x.run = run
		go x.drive(ctx, nil)
		return run, nil
	}

	if len(in.Resume) > 0 {
		if err := r.startResume(ctx, spec, in, run); err != nil {
			return nil, err
		}
		return run, nil
	}
	stored, existed, err := r.load(ctx, in.Tenant, in.ThreadID, spec.Name)
	if errors.Is(err, store.ErrApprovalPending) && in.Snapshots {
		ok, rerr := r.reattach(ctx, spec, in, run)
		if rerr != nil {
			return nil, rerr
		}
		if ok {
			return run, nil
		}
	}
	if err != nil {
		return nil, err
	}
	run.Existed = existed
	newMsgs := x.newInput(stored, in.Messages)
	if len(newMsgs) == 0 && len(message.PendingCalls(stored)) == 0 {
		return nil, apierror.Invalid("messages", "The request holds no new message to answer.")
	}
	now := r.Now()
	started := event.Event{Type: event.RunStarted, ThreadID: in.ThreadID, RunID: runID, Time: now.UnixMilli()}
	th, err := r.Store.BeginRun(ctx, store.BeginRun{
		Tenant: in.Tenant, ThreadID: in.ThreadID, Agent: spec.Name, RunID: runID, Owner: r.Owner,
		Now: now, LeaseUntil: now.Add(r.Lease), Input: newMsgs, Events: []event.Event{started},
	})
	if err != nil {
		return nil, err
	}
	x.msgs = append(stored, newMsgs...)
	x.state = th.State
	if len(in.State) > 0 {
		// Seeded keys merge into the state read under the run's lease, so
		// no other run's change is lost.
		merged, err := mergeState(th.State, in.State)
		if err == nil {
			err = x.checkpoint(ctx, store.Checkpoint{State: merged})
		}
		if err != nil {
			x.run = run
			go func() { x.fail(err); close(run.events) }()
			return run, nil
		}
		x.state = merged
	}
	r.Bus.Publish(in.Tenant, in.ThreadID, started)
	x.run = run
	go x.drive(context.WithoutCancel(ctx), &started)
	return run, nil
}

// load returns a thread's stored messages, checking it belongs to agentName.
func (r *Runner) load(ctx context.Context, tenant, threadID, agentName string) ([]message.Message, bool, error) {
	th, err := r.Store.GetThread(ctx, tenant, threadID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if th.Agent != agentName {
		return nil, true, store.ErrAgentMismatch
	}
	switch th.Status {
	case store.Waiting:
		return nil, true, store.ErrApprovalPending
	case store.Queued:
		return nil, true, store.ErrRunInProgress // decided; the resume is about to run
	case store.Running:
		if th.LeaseUntil.After(r.Now()) {
			return nil, true, store.ErrRunInProgress
		}
	}
	msgs, err := r.Store.Messages(ctx, tenant, threadID)
	return msgs, true, err
}

func (r *Runner) withID(m message.Message) message.Message {
	if m.ID == "" {
		m.ID = r.NewID("msg")
	}
	return m
}

// systemPrompt joins the agent's instructions with the client's system
// messages of this turn.
func systemPrompt(instructions string, msgs []message.Message) string {
	var b strings.Builder
	b.WriteString(instructions)
	for _, m := range msgs {
		if m.Role == message.System && m.Content != "" {
			if b.Len() > 0 {
				b.WriteString("\n\n")
			}
			b.WriteString(m.Content)
		}
	}
	return b.String()
}

// newInput picks what a client's messages add to a stored conversation. A
// client may send only its new messages or the whole history: the new input
// is then what follows the client's last assistant message. Tool messages for
// calls that already have a result are dropped; calls left unanswered before
// a new user message get a synthetic result so the conversation stays well
// formed.
func (x *execution) newInput(stored, sent []message.Message) []message.Message {
	var convo []message.Message
	for _, m := range sent {
		if m.Role != message.System {
			convo = append(convo, m)
		}
	}
	if len(stored) > 0 {
		for i := len(convo) - 1; i >= 0; i-- {
			if convo[i].Role == message.Assistant {
				convo = convo[i+1:]
				break
			}
		}
	}
	answered := map[string]bool{}
	known := map[string]bool{}
	for _, m := range stored {
		if m.Role == message.Tool {
			answered[m.ToolCallID] = true
		}
		known[m.ID] = true
	}
	pending := message.PendingCalls(stored)
	var out []message.Message
	for _, m := range convo {
		if m.ID != "" && known[m.ID] {
			continue
		}
		if m.Role == message.Tool {
			if answered[m.ToolCallID] || !callIn(pending, m.ToolCallID) {
				continue
			}
			answered[m.ToolCallID] = true
			if m.ToolName == "" {
				m.ToolName = callName(pending, m.ToolCallID)
			}
		}
		if m.Role == message.User {
			// Calls left without a result (a client that moved on, a run
			// that failed mid-step) get one, so the conversation stays well
			// formed for the model.
			for _, c := range pending {
				if answered[c.ID] {
					continue
				}
				answered[c.ID] = true
				text := "The call was interrupted before it completed."
				if c.Client {
					text = "The client did not return a result for this call."
				}
				out = append(out, message.Message{ID: x.r.NewID("msg"), Role: message.Tool, ToolCallID: c.ID, ToolName: c.Name,
					Content: text, IsError: true})
			}
		}
		out = append(out, x.r.withID(m))
	}
	return out
}

func callIn(calls []message.ToolCall, id string) bool {
	for _, c := range calls {
		if c.ID == id {
			return true
		}
	}
	return false
}

func callName(calls []message.ToolCall, id string) string {
	for _, c := range calls {
		if c.ID == id {
			return c.Name
		}
	}
	return ""
}

// mergeState sets the given keys of a state object.
func mergeState(base json.RawMessage, keys map[string]json.RawMessage) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(base) > 0 {
		if err := json.Unmarshal(base, &m); err != nil {
			return nil, fmt.Errorf("stored state is not an object: %w", err)
		}
	}
	for k, v := range keys {
		m[k] = v
	}
	return json.Marshal(m)
}

package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/trace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/decision"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/schema"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
)

// execution is one run of the loop over one conversation.
type execution struct {
	r         *Runner
	spec      *agent.Spec
	provider  model.Provider
	modelName string
	// modelRef is the model reference a run picked among its agent's
	// (Input.Model, pickModel); "" runs on the agent's own.
	modelRef string
	tools    map[string]*tool.Tool
	toolDefs []model.ToolDef

	tenant, threadID, runID string
	durable                 bool
	in                      Input
	system                  string

	msgs  []message.Message
	state json.RawMessage
	usage event.Usage
	stop  event.StopReason
	run   *Run // nil for a background resume
	begun time.Time
	// journal records a stateless turn's tool steps for client retries;
	// priorSteps counts the model steps an earlier attempt recorded.
	journal    *journal
	priorSteps int
	// inflight are the calls (not idempotent) of the batch running now whose
	// started markers are stored and results are not (the top execution's
	// own; a subagent's calls are recovered with the thread).
	inflight []inflightCall
	// partial is the text of the agent's answer the client had seen when
	// its model call failed part way (stream): stored if the run was
	// cancelled (cancelPartial).
	partial *message.Message
	// retried are the live events of the steps a failed attempt of the turn
	// stored, shown first when a client's retry continues it.
	retried []event.Event
	// answered marks a recovered run whose stored conversation already
	// ends with its answer: the loop ends it without a model call.
	answered bool
	// asked holds, by call id, the pending decision this execution's last
	// step stored for each of its calls (nil: the call needs none), so the
	// calls run without reading back what was just written.
	asked map[string]*store.Interrupt
	// cancel stops a durable top-level run with a cause (ErrCancelled when
	// its run control asks it to stop); nil until drive sets it.
	cancel context.CancelCauseFunc
	// premarked are the calls the last step's checkpoint marked started
	// (with the message that made them), so runCalls marks them no more.
	premarked map[string]bool

	// A subagent's execution runs inside its parent's run: scope is the
	// `task` call whose conversation it holds, root the top execution.
	scope    string
	subName  string
	subRunID string
	root     *execution
	usageMu  sync.Mutex
	callIDs  sync.Map // tool call ids issued in this run (root only)
	// worked is set (on the root) once this run had a side effect: a tool
	// ran, or a model answer or tool result was stored.
	worked atomic.Bool
	// obs is what the run collects of its calls (the root's is used);
	// parent is the span of the request that started the run, link the
	// span of the paused run a resumed run continues.
	obs          observed
	parent, link trace.SpanContext
	// mcp says which of the tools are an MCP server's.
	mcp map[string]bool
	// remoteCtx holds (root only) the remote A2A contextIds this run
	// learnt, by a2aAgents name.
	remoteCtx sync.Map
	// budgetChecked says the turn's start checked the budgets (its first
	// step needs no second check).
	budgetChecked bool
}

// markWorked records that the run had a side effect (RunFailedError.WorkDone).
func (x *execution) markWorked() { x.top().worked.Store(true) }

// top is the run's root execution (x itself unless x is a subagent's).
func (x *execution) top() *execution {
	if x.root != nil {
		return x.root
	}
	return x
}

// view returns the messages of this execution's own conversation, without
// the stored summaries (fitContext sends the one it needs).
func (x *execution) view() []message.Message {
	own := x.msgs[:0:0]
	mixed := false
	for _, m := range x.msgs {
		if m.TaskCallID != x.scope || m.Summarizes != "" {
			mixed = true
			break
		}
	}
	if !mixed {
		return x.msgs
	}
	for _, m := range x.msgs {
		if m.TaskCallID == x.scope && m.Summarizes == "" {
			own = append(own, m)
		}
	}
	return own
}

// callIDTaken reports whether a tool call id is already used in the thread
// (some models repeat ids such as "call_0"); the engine then issues its own
// so results and decisions stay addressable.
func (x *execution) callIDTaken(id string) bool {
	top := x
	if x.root != nil {
		top = x.root
	}
	if _, dup := top.callIDs.LoadOrStore(id, true); dup {
		return true
	}
	lists := [][]message.Message{top.msgs}
	if x != top {
		lists = append(lists, x.msgs)
	}
	for _, msgs := range lists {
		for _, m := range msgs {
			for _, c := range m.ToolCalls {
				if c.ID == id {
					return true
				}
			}
		}
	}
	return false
}

func (x *execution) addUsage(u event.Usage) {
	top := x
	if x.root != nil {
		top = x.root
	}
	top.usageMu.Lock()
	top.usage = top.usage.Add(u)
	top.usageMu.Unlock()
}

func (r *Runner) newExecution(spec *agent.Spec, tenant, threadID string) (*execution, error) {
	m, err := r.modelOf(spec)
	if err != nil {
		return nil, err
	}
	ts := r.toolsetOf(spec)
	return &execution{r: r, spec: spec, provider: m.provider, modelName: m.name, tenant: tenant, threadID: threadID,
		durable: threadID != "", tools: ts.byName, toolDefs: ts.defs, mcp: ts.mcp, state: json.RawMessage(`{}`), begun: r.Now()}, nil
}

// specModel is an agent's resolved model: its provider (a fallback over its
// model list when it has one) and the model name sent upstream.
type specModel struct {
	provider model.Provider
	name     string
}

// modelOf resolves spec's model once per spec (a reloaded agent is a new
// spec); a reference that does not resolve is an error, not remembered. A
// subagent's spec is made for each task call, so its model is resolved
// each time (the resolver keeps the providers) and never kept: kept, each
// call's spec stayed in the runner for the life of the process.
func (r *Runner) modelOf(spec *agent.Spec) (specModel, error) {
	if v, ok := r.models.Load(spec); ok {
		return v.(specModel), nil
	}
	p, name, err := r.Models.Resolve(spec.Model, spec.ModelDir())
	if err != nil {
		return specModel{}, fmt.Errorf("agent %s: %w", spec.Name, err)
	}
	if len(spec.Fallbacks) > 0 {
		cands := []model.Candidate{{Provider: p, Name: name, Ref: spec.Model}}
		for _, ref := range spec.Fallbacks {
			fp, fname, err := r.Models.Resolve(ref, spec.ModelDir())
			if err != nil {
				return specModel{}, fmt.Errorf("agent %s: %w", spec.Name, err)
			}
			cands = append(cands, model.Candidate{Provider: fp, Name: fname, Ref: ref})
		}
		p = model.NewFallback(cands, r.Logger.With("agent", spec.Name))
	}
	m := specModel{provider: p, name: name}
	if spec.Parent == "" {
		r.models.Store(spec, m)
	}
	return m, nil
}

// pickModel runs the execution on ref, one of its agent's models
// (agent.Spec.Models), alone: without the fallbacks of the agent's list, so
// the run is answered by the model picked. The caller checked ref
// (checkModel).
func (x *execution) pickModel(ref string) error {
	p, name, err := x.r.Models.Resolve(ref, x.spec.ModelDir())
	if err != nil {
		return fmt.Errorf("agent %s: %w", x.spec.Name, err)
	}
	x.provider, x.modelName, x.modelRef = p, name, ref
	return nil
}

// checkModel refuses a run's pick of a model (Input.Model) unless the
// runner lets runs pick (Config.PickModel, `stackbone dev`) and ref is one
// of the agent's models.
func (r *Runner) checkModel(spec *agent.Spec, ref string) error {
	if !r.PickModel {
		return &InputError{Code: CodeModelChoiceOff, Field: FieldModel, Index: -1,
			Reason: "Picking a run's model is for `stackbone dev` only: a server started with `stackbone start` runs each agent on the models its file names."}
	}
	models := spec.Models()
	if !slices.Contains(models, ref) {
		return &InputError{Code: CodeModelNotAllowed, Field: FieldModel, Index: -1,
			Reason: fmt.Sprintf("The model %q is not one of agent %s's models: pick one of %s.", ref, spec.Name, strings.Join(models, ", "))}
	}
	return nil
}

// toolset is an agent's tools (built-ins first), looked up by name and as
// the model sees them; built once per agent spec and again when the spec's
// dynamic tools (MCP servers') change.
type toolset struct {
	byName map[string]*tool.Tool
	defs   []model.ToolDef
	// own maps every tool name to whether it is a built-in.
	own map[string]bool
	// mcp names the tools of the agent's MCP servers (dynamic tools).
	mcp map[string]bool
	// version is the spec's dynamic tool version the set was built from.
	version uint64
}

func (r *Runner) toolsetOf(spec *agent.Spec) *toolset {
	var (
		dyn     []*tool.Tool
		version uint64
	)
	if spec.Dynamic != nil {
		dyn, version = spec.Dynamic.Tools()
	}
	if spec.Parent == "" {
		if v, ok := r.toolsets.Load(spec); ok && v.(*toolset).version == version {
			return v.(*toolset)
		}
	}
	ts := &toolset{byName: map[string]*tool.Tool{}, own: map[string]bool{}, mcp: map[string]bool{}, version: version}
	builtins := r.Builtins(spec)
	all := append(append(append([]*tool.Tool(nil), builtins...), spec.Tools...), dyn...)
	for i, t := range all {
		if _, dup := ts.byName[t.Name]; dup && i >= len(builtins)+len(spec.Tools) {
			continue // a dynamic tool never shadows a built-in or an own tool
		}
		ts.byName[t.Name] = t
		ts.own[t.Name] = i < len(builtins) || ts.own[t.Name]
		ts.mcp[t.Name] = i >= len(builtins)+len(spec.Tools)
		ts.defs = append(ts.defs, model.ToolDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	if spec.Parent == "" {
		r.toolsets.Store(spec, ts)
	}
	return ts
}

func (x *execution) isClientTool(name string) bool {
	for _, t := range x.in.ClientTools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// reportInput tells the run's consumer the input tokens of one model step
// of the turn, the assistant message msgID (an InputUsage event; the
// Anthropic wire's message_start waits for them). *reported keeps it to once
// a step; a step whose provider reported none ends with a report of 0, so
// the consumer waits no longer.
func (x *execution) reportInput(msgID string, n int, reported *bool) {
	if x.root != nil || *reported {
		return
	}
	*reported = true
	x.send(x.stamp(event.Event{Type: event.InputUsage, MessageID: msgID, Usage: &event.Usage{InputTokens: n}}))
}

// emit sends a live event to the consumer (if still attached) and the bus.
func (x *execution) emit(e event.Event) {
	if e.ThreadID == "" {
		e.ThreadID = x.threadID
	}
	if e.RunID == "" {
		e.RunID = x.runID
	}
	if e.Time == 0 {
		e.Time = x.r.Now().UnixMilli()
	}
	if x.subRunID != "" && e.SubagentRunID == "" {
		e.SubagentRunID = x.subRunID
	}
	x.send(e)
	if x.durable && e.Seq == 0 {
		x.r.Bus.Publish(x.tenant, x.threadID, e)
	}
}

func (x *execution) send(e event.Event) {
	if x.run == nil {
		return
	}
	select {
	case x.run.events <- e:
	case <-x.run.gone:
	}
}

// OutcomeShutdown is the outcome (Hooks.RunEnded) of a run stopped by
// Shutdown after its grace period.
const OutcomeShutdown = "shutdown"

// release gives up a durable run's lease without ending the run, so another
// runner can resume it at once.
func (x *execution) release() {
	if !x.durable {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseWait)
	defer cancel()
	err := x.r.Store.ReleaseRun(ctx, store.ReleaseRun{Tenant: x.tenant, ThreadID: x.threadID, RunID: x.runID, Now: x.r.Now()})
	if err != nil && !errors.Is(err, store.ErrLeaseLost) {
		x.r.Logger.Warn("release run lease at shutdown; it lapses instead", "thread", x.threadID, "run", x.runID, "err", err)
		return
	}
	x.r.Logger.Info("shutting down: run released for another runner to resume", "agent", x.spec.Name, "thread", x.threadID, "run", x.runID)
}

// OutcomeClientClosed is the outcome (Hooks.RunEnded) and RunError code of a
// stateless run whose client hung up before it ended.
const OutcomeClientClosed = "client_closed"

// drive runs the loop to its end, stores the outcome and closes the stream.
func (x *execution) drive(ctx context.Context, started *event.Event) {
	if h := x.r.Hooks.RunStarted; h != nil {
		h(x.spec.Name)
	}
	ctx, span := x.startAgentSpan(ctx)
	x.obs.span = span
	if started != nil {
		x.send(*started) // already stored and published
	} else {
		x.emit(event.Event{Type: event.RunStarted})
	}
	if x.run != nil && x.in.Resync && x.durable {
		x.emit(event.Event{Type: event.StateSnapshot, Snapshot: x.state})
		if x.run.Existed {
			x.emit(event.Event{Type: event.MessagesSnapshot, Messages: x.msgs})
		}
	}
	x.replayJournal()
	if !x.in.Resync { // a resync's messages snapshot holds those steps already
		for _, e := range x.retried {
			x.send(e)
		}
	}
	x.retried = nil
	if x.durable {
		var done func()
		ctx, x.cancel, done = x.r.cancellable(ctx, x.tenant, x.threadID, x.runID)
		defer done()
	}
	out, err := x.loop(ctx)
	x.settleJournal() // before the client can see the end and retry
	pauseEvent(span, out)
	var outcome string
	switch {
	case err != nil && errors.Is(context.Cause(ctx), ErrShuttingDown):
		// Stopped at the end of the shutdown grace period: not a failure.
		// A durable run gives its lease up so the next runner resumes it
		// from its last checkpoint.
		outcome = OutcomeShutdown
		x.release()
		code, msg := x.r.describe(ErrShuttingDown)
		// A session's retry attaches to the released run and gets its
		// recovered answer; a stateless retry after a side effect could
		// repeat it.
		cause := &RunFailedError{Err: ErrShuttingDown, WorkDone: !x.durable && x.top().worked.Load()}
		x.send(x.stamp(event.Event{Type: event.RunError, Code: code, Message: msg, Err: cause}))
	case err != nil && errors.Is(context.Cause(ctx), ErrCancelled):
		outcome = CodeCancelled
		x.cancelPartial()
		x.settle(ctx, ErrCancelled)
	case err != nil && !x.durable && ctx.Err() != nil:
		// A stateless run lives in its request: the client hung up. A
		// normal event, not a server error.
		outcome = OutcomeClientClosed
		x.r.Logger.Info("run ended: the client closed the connection", "agent", x.spec.Name, "run", x.runID)
		x.send(x.stamp(event.Event{Type: event.RunError, Code: OutcomeClientClosed, Message: "The client closed the connection.", Err: err}))
	case err != nil:
		outcome = "error"
		x.settle(ctx, err)
	default:
		outcome = string(out.Type)
		x.closeJournal(ctx)
		x.finish(out)
	}
	if !x.durable {
		x.recordStateless(outcome, err)
	}
	endAgentSpan(span, outcome, err, x.usage)
	if h := x.r.Hooks.RunEnded; h != nil {
		h(x.spec.Name, outcome, x.r.Now().Sub(x.begun))
	}
	if x.run != nil {
		close(x.run.events)
	}
}

func (x *execution) finish(out *event.Outcome) {
	fin := event.Event{Type: event.RunFinished, Outcome: out, Usage: &x.usage}
	if out.Type == event.Interrupt && x.run != nil && x.in.Resync {
		x.emit(event.Event{Type: event.StateSnapshot, Snapshot: x.state})
		x.emit(event.Event{Type: event.MessagesSnapshot, Messages: x.msgs})
	}
	if !x.durable {
		x.emit(fin)
		return
	}
	status := store.Idle
	if out.Type == event.Interrupt {
		status = store.Waiting
	}
	stored, err := x.endRun(status, "", fin)
	if err != nil {
		x.fail(fmt.Errorf("store the end of the run: %w", err))
		return
	}
	x.send(stored)
}

// fail ends the run with a RunError: its stored and published form carries
// the error's public code and message (Runner.Describe), the consumer's also
// the typed error itself.
func (x *execution) fail(err error) {
	code, msg := x.r.describe(err)
	if errors.Is(err, ErrCancelled) {
		x.r.Logger.Info("run cancelled", "agent", x.spec.Name, "thread", x.threadID, "run", x.runID)
	} else {
		x.r.Logger.Error("run failed", "agent", x.spec.Name, "thread", x.threadID, "run", x.runID, "err", err)
	}
	ev := x.stamp(event.Event{Type: event.RunError, Code: code, Message: msg})
	if x.durable {
		var ferr error
		if ev, ferr = x.endRun(store.Failed, msg, ev); ferr != nil && !errors.Is(ferr, store.ErrLeaseLost) {
			x.r.Logger.Error("store failed run", "thread", x.threadID, "err", ferr)
		}
	}
	ev.Err = &RunFailedError{Err: err, WorkDone: x.top().worked.Load()}
	x.send(ev)
}

// inflightCall is a started call and the arguments it runs with.
type inflightCall struct {
	c    message.ToolCall
	args json.RawMessage
}

// settle ends a run that failed with err. When calls of it had started and
// their results were not stored (it was cancelled, or failed, while its
// tools ran), they may have had their effect: they become in-doubt
// decisions at once, in one checkpoint, and the thread waits on them (the
// consumer still gets the failure). If that cannot be stored either (the
// database is gone), the run fails as any other and the thread is recovered
// before its next turn.
func (x *execution) settle(ctx context.Context, err error) {
	if len(x.inflight) == 0 {
		x.fail(err)
		return
	}
	doubts := make([]store.Interrupt, 0, len(x.inflight))
	for _, ic := range x.inflight {
		doubts = append(doubts, x.inDoubt(ic.c, ic.args))
	}
	if cerr := x.checkpoint(context.WithoutCancel(ctx), store.Checkpoint{Interrupts: doubts}); cerr != nil {
		x.fail(err)
		return
	}
	x.inflight = nil
	x.r.Logger.Warn("run stopped while its calls ran: they wait in doubt for retry or skip",
		"agent", x.spec.Name, "thread", x.threadID, "run", x.runID, "calls", len(doubts), "err", err)
	code, msg := x.r.describe(err)
	ev := x.stamp(event.Event{Type: event.RunError, Code: code, Message: msg})
	if stored, ferr := x.endRun(store.Waiting, msg, ev); ferr == nil {
		ev = stored
	} else if !errors.Is(ferr, store.ErrLeaseLost) {
		x.r.Logger.Error("store the end of a run waiting in doubt", "thread", x.threadID, "err", ferr)
	}
	ev.Err = &RunFailedError{Err: err, WorkDone: true}
	x.send(ev)
}

// cancelPartial stores, for a durable run that was cancelled while its
// answer streamed, the text the client had seen as the thread's message
// (marked Cancelled), so the next turn's model sees what the user saw.
func (x *execution) cancelPartial() {
	p := x.partial
	x.partial = nil
	if p == nil || !x.durable {
		return
	}
	ctx := context.Background() // the run's own context is cancelled
	if err := x.checkpoint(ctx, store.Checkpoint{Messages: []message.Message{*p}}); err != nil {
		x.r.Logger.Warn("store the answer a cancel cut short", "thread", x.threadID, "run", x.runID, "err", err)
		return
	}
	x.msgs = append(x.msgs, *p)
}

// endRun stores the end of a durable run with its terminal event and
// publishes that event (now carrying its sequence number).
func (x *execution) endRun(status store.ThreadStatus, errMsg string, ev event.Event) (event.Event, error) {
	stored := []event.Event{x.stamp(ev)}
	recStatus := string(status)
	if status == store.Failed && ev.Code == CodeCancelled {
		recStatus = CodeCancelled // stopped, not broken: the run's record says so
	}
	rec, steps := x.takeSteps(recStatus, true)
	rec.Error = errMsg
	// The run's span, so the notice of its end is part of its trace.
	ctx := context.Background()
	if span := x.top().obs.span; span != nil {
		ctx = trace.ContextWithSpan(ctx, span)
	}
	var queued, backlog bool
	err := x.r.Store.FinishRun(ctx, store.FinishRun{Tenant: x.tenant, ThreadID: x.threadID, RunID: x.runID,
		Status: status, Error: errMsg, Events: stored, Now: x.r.Now(), Run: rec, Steps: steps, Queued: &queued, Backlog: &backlog})
	if err == nil || status == store.Failed {
		x.r.Bus.Publish(x.tenant, x.threadID, stored[0])
	}
	if err == nil && queued {
		// Decided before the run ended (a fast approver: a webhook-driven
		// app, or a client waiting in-band): the deciders found the thread
		// running and left the resume to this run's end.
		x.r.Logger.Info("the pause was decided before the run ended; resuming at once", "thread", x.threadID, "run", x.runID)
		x.r.resumeAsync(x.tenant, x.threadID)
	}
	if err == nil && backlog && status != store.Waiting {
		// A follow-up waits in the thread's queue: its turn is next.
		x.r.drainAsync(x.tenant, x.threadID)
	}
	return stored[0], err
}

// failAsync ends a run that could not start streaming with a RunError.
func (x *execution) failAsync(run *Run, err error) {
	x.run = run
	x.r.spawn(nil, func(context.Context) {
		x.fail(err)
		close(run.events)
	})
}

func (x *execution) stamp(e event.Event) event.Event {
	e.ThreadID, e.RunID, e.Time = x.threadID, x.runID, x.r.Now().UnixMilli()
	if x.subRunID != "" && e.SubagentRunID == "" {
		e.SubagentRunID = x.subRunID
	}
	return e
}

// checkpoint stores one step boundary in one transaction, then publishes the
// stored events (now carrying their sequence numbers) to the bus.
func (x *execution) checkpoint(ctx context.Context, c store.Checkpoint) error {
	if !x.durable {
		return nil
	}
	for i := range c.Events {
		c.Events[i] = x.stamp(c.Events[i])
	}
	c.Tenant, c.ThreadID, c.RunID = x.tenant, x.threadID, x.runID
	c.LeaseUntil = x.r.Now().Add(x.r.Lease)
	c.Run, c.Steps = x.takeSteps(string(store.Running), false)
	if x.scope != "" {
		// A subagent's messages live in the thread, tagged with its task
		// call; its state stays its own until the task returns.
		c.State = nil
		for i := range c.Interrupts {
			c.Interrupts[i].Subagent = x.subName
		}
	}
	if err := x.r.Store.Checkpoint(ctx, c); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if len(c.Messages) > 0 {
		x.markWorked()
	}
	x.run.know(c.Interrupts)
	for _, e := range c.Events {
		x.r.Bus.Publish(x.tenant, x.threadID, e)
	}
	return nil
}

// heartbeat renews the lease while a long step runs, and watches the run's
// control: a cancel requested through any replica stops the run, heard on
// the thread's control topic within moments, or read back by the next
// renewal should that notification be lost.
func (x *execution) heartbeat(ctx context.Context) func() {
	if !x.durable || x.root != nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	ctl := x.r.Bus.SubscribeControl(x.tenant, x.threadID)
	t := x.r.clock.NewTicker(x.r.Lease / 3) // armed once the step begins
	go func() {
		defer ctl.Close()
		defer t.Stop()
		for {
			var c *store.RunControl
			var err error
			select {
			case <-ctx.Done():
				return
			case e := <-ctl.C:
				if e.RunID != x.runID {
					continue
				}
				c, err = x.r.Store.GetRunControl(ctx, x.tenant, x.threadID)
			case <-ctl.Dropped:
				ctl.Drain()
				c, err = x.r.Store.GetRunControl(ctx, x.tenant, x.threadID)
			case <-t.C():
				c, err = x.r.Store.RenewLease(ctx, store.RenewLease{Tenant: x.tenant, ThreadID: x.threadID, RunID: x.runID,
					LeaseUntil: x.r.Now().Add(x.r.Lease)})
			}
			switch {
			case err != nil && ctx.Err() == nil:
				x.r.Logger.Warn("renew run lease or read run control", "thread", x.threadID, "run", x.runID, "err", err)
			case err == nil && c.Cancels(x.runID) && x.cancel != nil:
				x.r.Logger.Info("run cancel requested", "thread", x.threadID, "run", x.runID)
				x.cancel(ErrCancelled)
			}
		}
	}()
	return cancel
}

// loop is the agent loop.
func (x *execution) loop(ctx context.Context) (*event.Outcome, error) {
	stopBeat := x.heartbeat(ctx)
	defer stopBeat()
	steps := x.priorSteps
	// The client's forced tool choice is for the turn's first model step
	// only; a step after tool results (this turn's, or a resumed turn's)
	// may answer.
	first := steps == 0
	if x.answered {
		x.stop = event.StopEnd
		return &event.Outcome{Type: event.Success, Stop: event.StopEnd}, nil
	}
	for {
		if pending := message.PendingCalls(x.view()); len(pending) > 0 {
			first = false
			out, err := x.runCalls(ctx, pending)
			if err != nil || out != nil {
				return out, err
			}
			continue
		}
		if steps >= x.spec.Steps() {
			x.stop = event.StopLength
			return &event.Outcome{Type: event.Success, Stop: event.StopLength}, nil
		}
		if !(x.budgetChecked && steps == x.priorSteps) {
			// Between steps: a run that crossed a budget stops here, its
			// last step's calls and results stored.
			if err := x.overBudget(ctx); err != nil {
				return nil, err
			}
		}
		steps++
		msg, err := x.step(ctx, first)
		first = false
		if err != nil {
			return nil, err
		}
		if len(msg.ToolCalls) == 0 {
			return &event.Outcome{Type: event.Success, Stop: x.stop}, nil
		}
	}
}

// settings are the agent's model settings with the client's values for
// those the agent lets clients override (Spec.ClientOverrides); any other
// client value is ignored.
func (x *execution) settings() model.Settings {
	s := x.spec.ModelSettings
	if x.in.Temperature != nil && x.spec.AllowsClient(agent.OverrideTemperature) {
		s.Temperature = x.in.Temperature
	}
	if x.in.MaxTokens > 0 && x.spec.AllowsClient(agent.OverrideMaxTokens) {
		s.MaxTokens = x.in.MaxTokens
	}
	if len(x.in.StopSequences) > 0 && x.spec.AllowsClient(agent.OverrideStop) {
		s.Stop = x.in.StopSequences
	}
	if x.in.ReasoningEffort != "" && x.spec.AllowsClient(agent.OverrideReasoningEffort) {
		s.ReasoningEffort = x.in.ReasoningEffort
	}
	return s
}

// systemPrompt is the step's system prompt: the agent's dynamic
// instructions, evaluated now on the thread's state, before the rest.
func (x *execution) systemPrompt(ctx context.Context) (string, error) {
	if x.spec.InstructionsFn == nil {
		return x.system, nil
	}
	state := x.state
	if len(state) == 0 {
		state = json.RawMessage(`{}`)
	}
	text, err := x.spec.InstructionsFn(ctx, agent.InstructionsInput{State: state, ThreadID: x.threadID, Agent: x.spec.Name})
	if err != nil {
		if ctx.Err() != nil {
			return "", err
		}
		return "", &InstructionsError{Agent: x.spec.Name, Err: err}
	}
	return systemPrompt(text, x.system), nil
}

// toolChoice is the client's tool choice for a model step. A choice that
// forces a call ("required" or a tool's name) holds for the turn's first
// step only, as OpenAI's Agents SDK resets it once a tool ran: the later
// steps are "auto", so a model that got its tool results can answer
// instead of being made to call a tool at every step until MaxSteps.
func (x *execution) toolChoice(first bool) string {
	c := x.in.ToolChoice
	if first || c == "" || c == "auto" || c == "none" {
		return c
	}
	return "auto"
}

// step calls the model once, streams what it says, and stores the assistant
// message with the decisions its calls need; first says it is the turn's
// first model step.
func (x *execution) step(ctx context.Context, first bool) (message.Message, error) {
	system, err := x.systemPrompt(ctx)
	if err != nil {
		return message.Message{}, err
	}
	req := model.Request{Model: x.modelName, System: system, Messages: x.view(), ToolChoice: x.toolChoice(first),
		Timeouts: x.spec.ModelTimeouts.Or(x.r.ModelTimeouts)}
	x.settings().Apply(&req)
	if x.scope == "" {
		// The format is the client's, for the agent's answer; a subagent's
		// report to its parent is free text.
		req.ResponseFormat = x.in.ResponseFormat
	}
	// Capped at its length, so adding client tools copies the shared slice.
	req.Tools = x.toolDefs[:len(x.toolDefs):len(x.toolDefs)]
	for _, t := range x.in.ClientTools {
		if x.tools[t.Name] == nil {
			req.Tools = append(req.Tools, t)
		}
	}
	if err := x.fitContext(ctx, &req); err != nil {
		return message.Message{}, err
	}
	// With a response format the answer reaches the client once it follows
	// the format: its events are held until checked, so an answer the
	// model is asked to correct is never streamed. A client that does not
	// stream sees nothing before the turn's end: the step's events are held
	// until its call ended. Either way nothing of the step has been shown
	// while the call runs, so a call that fails part way can start again.
	hold := (x.scope == "" && x.in.ResponseFormat != nil) || x.top().in.Collected
	req.Restartable = hold
	msg, args, held, err := x.stream(ctx, req, hold)
	if err != nil {
		return msg, err
	}
	if hold && len(msg.ToolCalls) == 0 {
		if ferr := x.followsFormat(msg.Content); ferr != nil {
			// One retry: the model sees its answer and what is wrong with it.
			x.r.Logger.Info("final answer does not follow the response format; asking the model once more",
				"agent", x.spec.Name, "thread", x.threadID, "run", x.runID, "err", ferr)
			req.Messages = append(req.Messages[:len(req.Messages):len(req.Messages)],
				message.Message{ID: msg.ID, Role: message.Assistant, Content: msg.Content},
				message.Message{ID: x.r.NewID("msg"), Role: message.User, Content: formatCorrection(ferr)})
			if msg, args, held, err = x.stream(ctx, req, hold); err != nil {
				return msg, err
			}
			if len(msg.ToolCalls) == 0 {
				if ferr := x.followsFormat(msg.Content); ferr != nil {
					ferr.Retried = true
					return msg, ferr
				}
			}
		}
	}
	for _, e := range held {
		x.emit(e)
	}
	var stored []event.Event
	if msg.Content != "" {
		stored = append(stored, event.Event{Type: event.TextEnd, MessageID: msg.ID, Content: msg.Content})
	}
	var interrupts []store.Interrupt
	for i := range msg.ToolCalls {
		c := &msg.ToolCalls[i]
		c.Arguments = args[i].String()
		if strings.TrimSpace(c.Arguments) == "" {
			c.Arguments = "{}"
		}
		if x.tools[c.Name] == nil && x.isClientTool(c.Name) {
			c.Client = true
		}
		x.emit(event.Event{Type: event.ToolCallEnd, MessageID: msg.ID, ToolCallID: c.ID})
		stored = append(stored, event.Event{Type: event.ToolCallEnd, MessageID: msg.ID, ToolCallID: c.ID, ToolName: c.Name, Arguments: c.Arguments})
		if it, err := x.needsDecision(ctx, *c); err != nil {
			return msg, err
		} else if it != nil {
			interrupts = append(interrupts, *it)
		}
	}
	if len(msg.ToolCalls) > 0 {
		x.stop = event.StopToolCalls
	}
	// The answer is stored on its own, before the run's end: a crash in
	// between must not lose an answer the client may have seen streaming.
	if err := x.checkpoint(ctx, store.Checkpoint{Messages: []message.Message{msg}, Interrupts: interrupts, Events: stored,
		Started: x.premark(msg.ToolCalls, interrupts)}); err != nil {
		return msg, err
	}
	x.msgs = append(x.msgs, msg)
	if x.durable {
		x.asked = make(map[string]*store.Interrupt, len(msg.ToolCalls))
		for _, c := range msg.ToolCalls {
			x.asked[c.ID] = nil
		}
		for i := range interrupts {
			x.asked[interrupts[i].ToolCallID] = &interrupts[i]
		}
	}
	return msg, nil
}

// premark returns the calls of a step to mark started with the step's own
// checkpoint: when every call is a server tool that runs at once (no
// decision asked, no client tool), those not idempotent. The marker is
// then durable with the message, before the calls run, and runCalls writes
// none (one write less per tool step). Otherwise none: runCalls marks what
// it runs.
func (x *execution) premark(calls []message.ToolCall, interrupts []store.Interrupt) []string {
	x.premarked = nil
	if !x.durable || len(calls) == 0 || len(interrupts) > 0 {
		return nil
	}
	var marks []string
	for _, c := range calls {
		t := x.tools[c.Name]
		if t == nil || c.Client {
			return nil
		}
		if !t.Idempotent {
			marks = append(marks, c.ID)
		}
	}
	if len(marks) > 0 {
		x.premarked = make(map[string]bool, len(marks))
		for _, id := range marks {
			x.premarked[id] = true
		}
	}
	return marks
}

// stream makes one model call and streams what it says as the assistant
// message's events (held and returned instead when hold is set), returning
// the message (content and calls, arguments in args). A held call may
// restart (model.Restart): what it said so far is dropped.
func (x *execution) stream(ctx context.Context, req model.Request, hold bool) (message.Message, []*strings.Builder, []event.Event, error) {
	msg := message.Message{ID: x.r.NewID("msg"), Role: message.Assistant, TaskCallID: x.scope, Subagent: x.subName}
	var held []event.Event
	emit := x.emit
	if hold {
		emit = func(e event.Event) { held = append(held, e) }
	}
	var text strings.Builder
	textOpen := false
	closeText := func() {
		if textOpen {
			emit(event.Event{Type: event.TextEnd, MessageID: msg.ID})
			textOpen = false
		}
	}
	byIndex := map[int]int{}
	var args []*strings.Builder
	x.stop = event.StopEnd
	reported := false
	ctx, call := x.startModelCall(ctx, req)
	defer func() { call.end(&msg, nil) }() // a call ended early (its consumer gone) is kept too
	for ch, err := range x.provider.Stream(ctx, req) {
		if err != nil {
			call.end(nil, err)
			if !hold && x.scope == "" && text.Len() > 0 {
				// What the client saw of an answer the call did not finish
				// (kept if the run was cancelled: cancelPartial).
				x.partial = &message.Message{ID: msg.ID, Role: message.Assistant, Content: text.String(), Cancelled: true}
			}
			return msg, args, held, err
		}
		call.chunk(ch)
		switch ch.Type {
		case model.Restart:
			if !hold {
				// The provider restarts only a Restartable call.
				return msg, args, held, fmt.Errorf("model: a restart of a call whose output was streamed")
			}
			// The failed attempt's call ids go back: the new attempt
			// may well name its calls the same.
			for _, c := range msg.ToolCalls {
				x.top().callIDs.Delete(c.ID)
			}
			msg.ToolCalls, msg.Reasoning, args, held = nil, nil, nil, nil
			clear(byIndex)
			text.Reset()
			textOpen = false
			x.stop = event.StopEnd
		case model.Text:
			if ch.Text == "" {
				continue
			}
			if !textOpen {
				emit(event.Event{Type: event.TextStart, MessageID: msg.ID})
				textOpen = true
			}
			text.WriteString(ch.Text)
			emit(event.Event{Type: event.TextDelta, MessageID: msg.ID, Delta: ch.Text})
		case model.ToolCallStart:
			closeText()
			id := ch.ID
			if id == "" || x.callIDTaken(id) {
				id = x.r.NewID("call")
			}
			byIndex[ch.Index] = len(msg.ToolCalls)
			msg.ToolCalls = append(msg.ToolCalls, message.ToolCall{ID: id, Name: ch.Name})
			args = append(args, &strings.Builder{})
			emit(event.Event{Type: event.ToolCallStart, MessageID: msg.ID, ToolCallID: id, ToolName: ch.Name})
		case model.ToolCallArgs:
			i, ok := byIndex[ch.Index]
			if !ok || ch.Text == "" {
				continue
			}
			args[i].WriteString(ch.Text)
			emit(event.Event{Type: event.ToolCallArgs, MessageID: msg.ID, ToolCallID: msg.ToolCalls[i].ID, Delta: ch.Text})
		case model.InputTokens:
			if ch.Usage.InputTokens > 0 {
				x.reportInput(msg.ID, ch.Usage.InputTokens, &reported)
			}
		case model.Reasoning:
			if ch.Reasoning != nil {
				r := *ch.Reasoning
				if r.Type == message.ReasoningText {
					r.Text = message.TruncateReasoning(r.Text) // kept bounded; a signed block never is cut
				}
				msg.Reasoning = append(msg.Reasoning, r)
				if r.Shown() {
					emit(event.Event{Type: event.Reasoning, MessageID: msg.ID, Content: r.Text})
				}
			}
		case model.Finish:
			if ch.Stop != "" {
				x.stop = ch.Stop
			}
			x.addUsage(ch.Usage)
			x.reportInput(msg.ID, ch.Usage.InputTokens, &reported)
		}
	}
	x.reportInput(msg.ID, 0, &reported)
	closeText()
	msg.Content = text.String()
	if x.r.TraceContent || x.r.KeepContent {
		for i := range msg.ToolCalls {
			msg.ToolCalls[i].Arguments = args[i].String()
		}
	}
	call.end(&msg, nil)
	return msg, args, held, nil
}

// formatCorrection is the message a model gets when its final answer does
// not follow the response format: the problem, and what to answer instead.
func formatCorrection(err *FormatMismatchError) string {
	return fmt.Sprintf("Your answer does not follow the required response format (%s): %v. "+
		"Answer again with only the corrected JSON, nothing else.", err.Type, err.Err)
}

// followsFormat checks the final answer of a turn against the client's
// response format. The model was asked for the format (upstream structured
// output, or an instruction where the provider has none); an answer that
// still does not follow it ends the turn with a 502 instead of reaching the
// client as if it did. An answer cut at the token limit is not checked: its
// finish reason already tells the client it is incomplete.
func (x *execution) followsFormat(answer string) *FormatMismatchError {
	f := x.in.ResponseFormat
	if f == nil || x.scope != "" || x.stop != event.StopEnd {
		return nil
	}
	var err error
	switch f.Type {
	case model.FormatJSONObject:
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(answer), &obj) != nil || obj == nil {
			err = errors.New("the answer is not a JSON object")
		}
	case model.FormatJSONSchema:
		if own := x.spec.OutputFormat(); own != nil && jsonEqual(own.Schema, f.Schema) {
			err = schema.Validate(f.Schema, json.RawMessage(answer))
		} else {
			// A client's format: bounded, and cached apart by size.
			err = schema.ValidateClient(f.Schema, json.RawMessage(answer))
		}
	}
	if err == nil {
		return nil
	}
	return &FormatMismatchError{Type: f.Type, Err: err}
}

// needsDecision returns the interrupt a call must wait on, or nil. Only a
// durable run pauses: a stateless one has no thread an approval could
// resume (see statelessDecision).
func (x *execution) needsDecision(ctx context.Context, c message.ToolCall) (*store.Interrupt, error) {
	if !x.durable {
		return nil, nil
	}
	return x.approvalFor(ctx, c)
}

// approvalFor returns the pending decision a call needs, or nil when its
// tool asks for none (no approval rule, or the rule's predicate says no).
func (x *execution) approvalFor(ctx context.Context, c message.ToolCall) (*store.Interrupt, error) {
	t := x.tools[c.Name]
	if t == nil || t.Approval == nil {
		return nil, nil
	}
	args := c.ArgsJSON()
	if !json.Valid(args) {
		return nil, nil // the call fails validation when run; nothing to approve
	}
	if t.Approval.When != nil {
		need, err := t.Approval.When(ctx, args)
		if err != nil {
			x.r.Logger.Warn("needsApproval predicate failed; asking for approval", "tool", t.Name, "err", err)
			need = true
		}
		if !need {
			return nil, nil
		}
	}
	it := &store.Interrupt{ID: x.r.NewID("int"), Tenant: x.tenant, ThreadID: x.threadID, RunID: x.runID, Agent: x.spec.Name,
		ToolCallID: c.ID, Tool: t.Name, Args: args, Status: store.Pending, CreatedAt: x.r.Now()}
	if t.Approval.Description != nil {
		d, err := t.Approval.Description(ctx, args)
		if err != nil {
			x.r.Logger.Warn("approval description failed", "tool", t.Name, "err", err)
		}
		it.Description = d
	}
	decision.NewApproval(t, it.CreatedAt, x.r.ApprovalTTL).Apply(it)
	return it, nil
}

// ResponseSchema is the JSON Schema of a decision payload for a tool:
// {approved: boolean}, plus editedArgs (the tool's own parameter schema) when
// edit is allowed (decision.ApprovalSchema).
func ResponseSchema(t *tool.Tool) json.RawMessage { return decision.ApprovalSchema(t) }

// ExpiredResult is the tool result the model gets for a call whose
// approval expired before anyone decided it.
const ExpiredResult = decision.ExpiredResult

// SkippedResult is the tool result the model gets for an in-doubt call a
// human skipped without writing a message.
const SkippedResult = decision.SkippedResult

// inDoubt is the pending decision for a call that started in an earlier
// run and left no result: retry it or skip it.
func (x *execution) inDoubt(c message.ToolCall, args json.RawMessage) store.Interrupt {
	shown := string(args)
	if r := []rune(shown); len(r) > 200 {
		shown = string(r[:200]) + "…"
	}
	it := store.Interrupt{ID: x.r.NewID("int"), Tenant: x.tenant, ThreadID: x.threadID, RunID: x.runID, Agent: x.spec.Name,
		ToolCallID: c.ID, Tool: c.Name, Args: args, Status: store.Pending, CreatedAt: x.r.Now(),
		Description: fmt.Sprintf("This call may already have run: %s(%s) started before the server stopped and left no result. "+
			"Retry runs it again (with the same idempotency key); skip tells the model its outcome is unknown.", c.Name, shown)}
	decision.NewInDoubt().Apply(&it)
	return it
}

// IdempotencyKey is the key of a tool call, the same for every attempt of
// it: a digest of the tenant, the thread (for a turn without one, scope:
// its journal key or run) and the call id, so a model repeating an id such
// as "call_0" in another thread gets another key.
func IdempotencyKey(tenant, thread, toolCallID string) string {
	h := sha256.Sum256([]byte(tenant + "\x00" + thread + "\x00" + toolCallID))
	return "sbk_" + hex.EncodeToString(h[:16])
}

// idempotencyKey is IdempotencyKey for a call of this execution.
func (x *execution) idempotencyKey(c message.ToolCall) string {
	scope := x.threadID
	if !x.durable {
		top := x
		if x.root != nil {
			top = x.root
		}
		scope = "run:" + top.runID
		if top.journal != nil {
			scope = "turn:" + top.journal.key
		}
	}
	return IdempotencyKey(x.tenant, scope, c.ID)
}

// StatelessRefusal is the tool error the model gets for a call that needs
// approval in a turn without a session when the server refuses such calls.
const StatelessRefusal = "Error: this call needs a human decision (approval), but the conversation has no session, " +
	"so no one can be asked and the call was not run. Tell the user; to have it approved, they must use a conversation " +
	"with a session (the x-stackbone-session header, or an AG-UI threadId)."

// statelessDecision applies the stateless-approval policy to a call of a
// stateless turn whose tool needs approval: the call is recorded in the
// decisions audit (decidedVia "stateless") before anything runs, as
// approved under the run policy or rejected under refuse. It returns the
// tool error to give the model when the call is refused, else nil (run it).
// A call whose predicate asks for no approval is neither recorded nor
// refused.
func (x *execution) statelessDecision(ctx context.Context, c message.ToolCall) (*message.Message, error) {
	it, err := x.approvalFor(ctx, c)
	if err != nil || it == nil {
		return nil, err
	}
	refuse := x.r.RefuseStateless
	in := x.top().in // a subagent's execution has no input of its own
	by := in.DecidedBy
	it.Subagent = x.subName
	// No thread owns the record: it is its end user's (seen, as their
	// threads are, by them and by admins and approvers only).
	it.Owner = in.userID()
	it.Status = store.Approved
	it.Decision = &store.Decision{Approved: true, Via: store.ViaStateless, By: by, At: it.CreatedAt}
	if refuse {
		it.Status = store.Rejected
		it.Decision.Approved = false
		it.Decision.Message = "Refused: the call needs approval and the conversation has no session (stateless-approval policy refuse)."
	}
	if err := x.r.Store.RecordDecided(ctx, *it); err != nil {
		return nil, fmt.Errorf("record the stateless call %s of %s: %w", c.ID, it.Tool, err)
	}
	x.r.decided(x.tenant, it)
	x.r.Logger.Info("approval-gated call in a stateless turn", "interrupt", it.ID, "tool", it.Tool, "agent", it.Agent,
		"refused", refuse, "by", it.Decision.By)
	if !refuse {
		return nil, nil
	}
	m := x.toolMessage(c, StatelessRefusal, true)
	return &m, nil
}

type callResult struct {
	msg   message.Message
	state json.RawMessage
	// outcome is the step's outcome when not ok or error (timed out).
	outcome string
	// paused is set when a subagent stopped on a decision.
	paused *event.Outcome
}

// runCalls runs the calls of the last assistant message that have no result:
// server tools (concurrently, results kept in call order), decided calls, and
// stops on calls that wait for a human or for the client.
func (x *execution) runCalls(ctx context.Context, pending []message.ToolCall) (*event.Outcome, error) {
	// decided holds each call's latest interrupt; started the calls of a
	// non-idempotent tool that an earlier run started and left without a
	// result (in doubt). Calls this execution's last step made need no read.
	var decided map[string]store.Interrupt
	var started map[string]bool
	if x.durable {
		decided = map[string]store.Interrupt{}
		var idsNeeded, maybeStarted []string
		for _, c := range pending {
			t := x.tools[c.Name]
			if t == nil {
				if !c.Client && !x.isClientTool(c.Name) {
					// A tool gone since the call started (an agent reload,
					// an MCP server down): a marker still makes it in doubt.
					maybeStarted = append(maybeStarted, c.ID)
					idsNeeded = append(idsNeeded, c.ID)
				}
				continue
			}
			if it, ok := x.asked[c.ID]; ok {
				// Asked by this execution's last step: as it was stored.
				if it != nil {
					decided[c.ID] = *it
				}
				continue
			}
			idsNeeded = append(idsNeeded, c.ID)
			if !t.Idempotent {
				maybeStarted = append(maybeStarted, c.ID)
			}
		}
		if len(idsNeeded) > 0 {
			its, err := x.r.Store.CallInterrupts(ctx, x.tenant, x.threadID, idsNeeded)
			if err != nil {
				return nil, err
			}
			for _, it := range its {
				if !decision.For(&it).Gate {
					// A question the call asked while it ran, not a decision on
					// running it; one left pending by a run that died is closed.
					if it.Status == store.Pending && it.RunID != x.runID {
						x.r.closeQuestion(ctx, it, MessageQuestionCutOff)
					}
					continue
				}
				// A call approved and then in doubt has two: the latest
				// counts.
				if prev, ok := decided[it.ToolCallID]; !ok || !it.CreatedAt.Before(prev.CreatedAt) {
					decided[it.ToolCallID] = it
				}
			}
			ids, err := x.r.Store.StartedCalls(ctx, x.tenant, x.threadID, maybeStarted)
			if err != nil {
				return nil, err
			}
			started = make(map[string]bool, len(ids))
			for _, id := range ids {
				started[id] = true
			}
		}
	}
	results := make([]*callResult, len(pending))
	var waiting []event.InterruptInfo
	var stopOn []message.ToolCall
	var doubts []store.Interrupt
	var marks []string
	type job struct {
		i    int
		c    message.ToolCall
		t    *tool.Tool
		args json.RawMessage
	}
	var jobs []job
	once := map[string]bool{}
	for i, c := range pending {
		t := x.tools[c.Name]
		switch {
		case c.Client || (t == nil && x.isClientTool(c.Name)):
			stopOn = append(stopOn, c)
			continue
		case t == nil && started[c.ID]:
			// Started before its tool went away: it may have run.
			it := x.inDoubt(c, c.ArgsJSON())
			doubts = append(doubts, it)
			waiting = append(waiting, interruptInfo(it))
			stopOn = append(stopOn, c)
			continue
		case t == nil:
			text, isErr := fmt.Sprintf("Error: unknown tool %q.", c.Name), true
			if it, ok := decided[c.ID]; ok {
				if o := decision.Result(&it); o.Skipped {
					text, isErr = o.Result, o.IsError // a skipped in-doubt call of a tool gone since
				}
			}
			results[i] = &callResult{msg: x.toolMessage(c, text, isErr)}
			continue
		case t.OncePerStep && once[t.Name]:
			results[i] = &callResult{msg: x.toolMessage(c, fmt.Sprintf("Error: %s may be called only once per step; this call was refused. Send the whole list in one call.", t.Name), true)}
			continue
		}
		if t.OncePerStep {
			once[t.Name] = true
		}
		args := c.ArgsJSON()
		if !x.durable && t.Approval != nil {
			refused, err := x.statelessDecision(ctx, c)
			if err != nil {
				return nil, err
			}
			if refused != nil {
				results[i] = &callResult{msg: *refused}
				continue
			}
		}
		if started[c.ID] {
			// Started by a run that ended without its result: it may have
			// run. Not run again without a human.
			// With the arguments it ran with: those of an earlier in-doubt
			// retry, or the edited ones of its approval.
			if prior, ok := decided[c.ID]; ok {
				if o := decision.Result(&prior); len(o.Args) > 0 {
					args = o.Args
				}
			}
			it := x.inDoubt(c, args)
			doubts = append(doubts, it)
			waiting = append(waiting, interruptInfo(it))
			stopOn = append(stopOn, c)
			x.settledCall(c, store.OutcomeInDoubt, "started by a run that stopped before its result was stored")
			continue
		}
		if it, ok := decided[c.ID]; ok {
			switch o := decision.Result(&it); {
			case o.Pending:
				waiting = append(waiting, interruptInfo(it))
				x.run.know([]store.Interrupt{it})
				stopOn = append(stopOn, c)
				continue
			case !o.Run:
				// Rejected, skipped or expired: the model gets the result.
				results[i] = &callResult{msg: x.toolMessage(c, o.Result, o.IsError)}
				x.settledCall(c, store.OutcomeRejected, o.Result)
				continue
			case len(o.Args) > 0:
				// Retried (the arguments it ran with, again) or approved
				// with edits.
				args = o.Args
			}
		}
		if x.durable && !t.Idempotent && !x.premarked[c.ID] {
			marks = append(marks, c.ID)
		}
		jobs = append(jobs, job{i, c, t, args})
	}
	// One write before the batch runs: the in-doubt decisions found, and
	// the started markers of the calls about to run that are not
	// idempotent (an idempotent one is simply run again after a crash).
	if len(doubts) > 0 || len(marks) > 0 {
		if err := x.checkpoint(ctx, store.Checkpoint{Interrupts: doubts, Started: marks}); err != nil {
			return nil, err
		}
		for _, it := range doubts {
			x.r.Logger.Warn("tool call in doubt: it started before the run stopped and left no result; waiting for retry or skip",
				"thread", x.threadID, "tool", it.Tool, "toolCallId", it.ToolCallID, "interrupt", it.ID)
		}
	}
	if x.durable && x.scope == "" {
		// Until their results are stored, these calls are in flight: a run
		// that fails or is cancelled meanwhile makes them in doubt (settle).
		x.inflight = x.inflight[:0]
		for _, j := range jobs {
			if !j.t.Idempotent {
				x.inflight = append(x.inflight, inflightCall{c: j.c, args: j.args})
			}
		}
	}
	if !x.durable {
		for _, j := range jobs {
			if !j.t.Idempotent {
				if err := x.markJournal(ctx); err != nil {
					return nil, err
				}
				break
			}
		}
	}
	if len(jobs) == 1 {
		// One call runs here: no goroutine to hand it to and wait for.
		j := jobs[0]
		results[j.i] = x.observedTool(ctx, j.t, j.c, j.args)
	} else {
		var wg sync.WaitGroup
		for _, j := range jobs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[j.i] = x.observedTool(ctx, j.t, j.c, j.args)
			}()
		}
		wg.Wait()
	}
	if err := ctx.Err(); err != nil {
		// The run was stopped while its tools ran: their results may be
		// cut short, so none is stored.
		return nil, err
	}

	var msgs []message.Message
	var stored []event.Event
	newState := x.state
	for _, res := range results {
		if res == nil {
			continue
		}
		if res.paused != nil {
			waiting = append(waiting, res.paused.Interrupts...)
			stopOn = append(stopOn, res.paused.PendingCalls...)
		} else {
			msgs = append(msgs, res.msg)
		}
		if res.state != nil {
			merged, err := mergeState3(x.state, newState, res.state)
			if err != nil {
				return nil, err
			}
			newState = merged
		}
	}
	var delta, state json.RawMessage
	if newState != nil && !bytes.Equal(newState, x.state) {
		d, err := Diff(x.state, newState)
		if err != nil {
			return nil, err
		}
		if string(d) != "[]" {
			delta, state = d, newState
		}
	}
	if len(msgs) > 0 || state != nil {
		for _, m := range msgs {
			ev := event.Event{Type: event.ToolResult, MessageID: m.ID, ToolCallID: m.ToolCallID, ToolName: m.ToolName, Content: m.Content, IsError: m.IsError}
			x.emit(ev)
			stored = append(stored, ev)
		}
		if state != nil {
			stored = append(stored, event.Event{Type: event.StateDelta, Patch: delta})
		}
		if err := x.checkpoint(ctx, store.Checkpoint{Messages: msgs, State: state, Events: stored}); err != nil {
			return nil, err
		}
		x.inflight = x.inflight[:0]
		x.msgs = append(x.msgs, msgs...)
		if state != nil {
			x.state = state
			if x.scope == "" {
				x.emit(event.Event{Type: event.StateDelta, Patch: delta})
			}
		}
		x.record(ctx)
	}
	if len(stopOn) == 0 {
		return nil, nil
	}
	out := &event.Outcome{Type: event.Success, Stop: event.StopToolCalls, PendingCalls: stopOn, PendingMessageID: x.lastAssistantID()}
	if len(waiting) > 0 {
		out.Type = event.Interrupt
		out.Interrupts = waiting
	}
	x.stop = event.StopToolCalls
	return out, nil
}

func (x *execution) lastAssistantID() string {
	msgs := x.view()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == message.Assistant {
			return msgs[i].ID
		}
	}
	return ""
}

func interruptInfo(it store.Interrupt) event.InterruptInfo {
	return event.InterruptInfo{ID: it.ID, ToolCallID: it.ToolCallID, Tool: it.Tool, Description: it.Description,
		AllowedDecisions: it.AllowedDecisions, ResponseSchema: it.ResponseSchema, Subagent: it.Subagent, Reason: it.Reason}
}

// capResult cuts content to at most limit bytes (at a UTF-8 boundary) and
// appends a note for the model; cut reports whether it did.
func capResult(content string, limit int) (out string, cut bool) {
	if limit <= 0 || len(content) <= limit {
		return content, false
	}
	n := limit
	for n > 0 && !utf8.RuneStart(content[n]) {
		n--
	}
	return content[:n] + fmt.Sprintf("\n\n[Stackbone: this tool result was cut to its first %d of %d bytes. "+
		"Ask for less (a range, a page, a filter or a search) to see the rest.]", n, len(content)), true
}

func (x *execution) toolMessage(c message.ToolCall, content string, isErr bool) message.Message {
	return message.Message{ID: x.r.NewID("msg"), Role: message.Tool, ToolCallID: c.ID, ToolName: c.Name, Content: content, IsError: isErr,
		TaskCallID: x.scope, Subagent: x.subName}
}

// execTool validates arguments and runs one tool under its time limit. Every
// failure becomes a tool error the model sees.
//
// A result longer than the tool's cap (agent.Spec.ToolResultCap) is cut to
// it, with a note the model sees saying so.
func (x *execution) execTool(ctx context.Context, t *tool.Tool, c message.ToolCall, args json.RawMessage) (res *callResult) {
	defer func() {
		if p := recover(); p != nil {
			x.r.Logger.Error("tool panicked", "tool", t.Name, "panic", p)
			res = &callResult{msg: x.toolMessage(c, fmt.Sprintf("Error: tool %q failed.", t.Name), true)}
		}
		if res != nil && res.paused == nil {
			limit := x.spec.ToolResultCap(t, x.modelName)
			if content, cut := capResult(res.msg.Content, limit); cut {
				x.r.Logger.Info("tool result cut to its cap", "tool", t.Name, "thread", x.threadID, "bytes", len(res.msg.Content), "cap", limit)
				res.msg.Content = content
			}
		}
	}()
	if !json.Valid(args) {
		return &callResult{msg: x.toolMessage(c, fmt.Sprintf("Error: invalid arguments for tool %q: not valid JSON.", t.Name), true)}
	}
	if len(t.Parameters) > 0 {
		if err := schema.Validate(t.Parameters, args); err != nil {
			return &callResult{msg: x.toolMessage(c, fmt.Sprintf("Error: invalid arguments for tool %q: %v", t.Name, err), true)}
		}
	}
	limit := t.TimeLimit()
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	x.markWorked()
	out, err := t.Execute(context.WithValue(cctx, execKey{}, x), tool.Call{ThreadID: x.threadID, ToolCallID: c.ID, IdempotencyKey: x.idempotencyKey(c), Agent: x.spec.Name, User: x.in.User, Args: args, State: x.state,
		Ask: x.asker(t, c, args), UserID: x.in.UserID, Store: x.r.Memory.For(x.tenant)})
	var paused *subagentPaused
	if errors.As(err, &paused) {
		return &callResult{paused: paused.outcome, state: paused.state}
	}
	if err != nil {
		if errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			return &callResult{msg: x.toolMessage(c, fmt.Sprintf("Error: tool %q timed out after %s.", t.Name, limit), true), outcome: store.OutcomeTimedOut}
		}
		x.r.Logger.Warn("tool returned an error", "tool", t.Name, "thread", x.threadID, "err", err)
		return &callResult{msg: x.toolMessage(c, "Error: "+err.Error(), true)}
	}
	msg := x.toolMessage(c, out.Content, false)
	msg.Parts = out.Parts
	return &callResult{msg: msg, state: out.State}
}

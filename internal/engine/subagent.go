package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/memory"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
	"github.com/stackbone/stackbone/internal/tool/builtin"
)

// GeneralPurpose is the subagent every deep agent has unless it defines its
// own of that name.
const GeneralPurpose = "general-purpose"

// taskTimeout bounds one subagent's whole work.
const taskTimeout = 30 * time.Minute

// execKey carries the calling execution to the `task` tool.
type execKey struct{}

// subagentPaused is how the `task` tool reports that its subagent stopped
// on a decision: the parent pauses with the subagent's interrupts.
type subagentPaused struct {
	outcome *event.Outcome
	// state carries the files the subagent wrote before it paused, so they
	// survive until it resumes.
	state json.RawMessage
}

func (p *subagentPaused) Error() string { return "subagent paused for a decision" }

// Builtins returns the built-in tools of an agent: write_todos and the file
// tools unless turned off, and `task` for handing work to a subagent.
func (r *Runner) Builtins(spec *agent.Spec) []*tool.Tool {
	if spec.Parent == "" && len(spec.A2AAgents) == 0 {
		if v, ok := r.builtins.Load(spec); ok {
			return v.([]*tool.Tool)
		}
	}
	out := r.makeBuiltins(spec)
	if spec.Parent == "" && len(spec.A2AAgents) == 0 {
		// With remote agents, task's description follows their cached
		// cards, so it is made for each turn.
		r.builtins.Store(spec, out)
	}
	return out
}

func (r *Runner) makeBuiltins(spec *agent.Spec) []*tool.Tool {
	var out []*tool.Tool
	if !spec.NoTodos {
		out = append(out, builtin.Todos())
	}
	if !spec.NoFiles {
		out = append(out, builtin.Files(r.Now)...)
	}
	if spec.Parent == "" {
		out = append(out, r.taskTool(spec))
	}
	if spec.Memory != nil {
		out = append(out, memory.Tools(spec.Memory.Namespace)...)
	}
	return out
}

// subagents returns the agent's subagents with the general-purpose default.
func subagents(spec *agent.Spec) []agent.Subagent {
	subs := append([]agent.Subagent(nil), spec.Subagents...)
	for _, s := range subs {
		if s.Name == GeneralPurpose {
			return subs
		}
	}
	return append(subs, agent.Subagent{Name: GeneralPurpose,
		Description:  "A general-purpose helper with the same tools: hand it a self-contained piece of work.",
		Instructions: spec.Instructions})
}

func (r *Runner) taskTool(spec *agent.Spec) *tool.Tool {
	subs := subagents(spec)
	names := make([]string, len(subs))
	var desc strings.Builder
	desc.WriteString("Hand a self-contained piece of work to a subagent. It starts a fresh conversation holding only your description and returns its final answer. Subagents:")
	for i, s := range subs {
		names[i] = s.Name
		fmt.Fprintf(&desc, "\n- %s: %s", s.Name, s.Description)
	}
	for _, a := range spec.A2AAgents {
		names = append(names, a.Name)
		fmt.Fprintf(&desc, "\n- %s: %s", a.Name, r.remoteDescription(a))
	}
	enum, _ := json.Marshal(names)
	return &tool.Tool{
		Name:        builtin.Task,
		Description: desc.String(),
		Parameters: json.RawMessage(`{"type":"object","properties":{"description":{"type":"string","minLength":1},` +
			`"subagent_type":{"type":"string","enum":` + string(enum) + `}},"required":["description","subagent_type"]}`),
		Timeout: taskTimeout,
		// Running task again continues the subagent's stored conversation;
		// the subagent's own tool calls carry their own started markers.
		Idempotent: true,
		Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
			parent, _ := ctx.Value(execKey{}).(*execution)
			if parent == nil {
				return tool.Result{}, fmt.Errorf("task can only run inside an agent run")
			}
			return parent.runSubagent(ctx, c)
		},
	}
}

// runSubagent runs the subagent a `task` call names on its own conversation
// (fresh, or the stored one when resuming after a decision) and returns its
// final answer. Its changes to the files state key merge into the parent's;
// its todos and messages stay its own.
func (x *execution) runSubagent(ctx context.Context, c tool.Call) (tool.Result, error) {
	var args struct {
		Description  string `json:"description"`
		SubagentType string `json:"subagent_type"`
	}
	if err := json.Unmarshal(c.Args, &args); err != nil {
		return tool.Result{}, err
	}
	if a := x.spec.A2AAgent(args.SubagentType); a != nil && x.spec.Parent == "" {
		return x.runRemote(ctx, c, *a, args.Description)
	}
	var sub *agent.Subagent
	subs := subagents(x.spec)
	for i := range subs {
		if subs[i].Name == args.SubagentType {
			sub = &subs[i]
		}
	}
	if sub == nil {
		names := make([]string, len(subs))
		for i, s := range subs {
			names[i] = s.Name
		}
		for _, a := range x.spec.A2AAgents {
			names = append(names, a.Name)
		}
		sort.Strings(names)
		return tool.Result{}, fmt.Errorf("unknown subagent %q; available: %s", args.SubagentType, strings.Join(names, ", "))
	}
	spec := &agent.Spec{Name: sub.Name, Model: sub.Model, Instructions: sub.Instructions, MaxSteps: x.spec.MaxSteps,
		ModelTimeouts: x.spec.ModelTimeouts, ModelSettings: x.spec.ModelSettings, NoTodos: x.spec.NoTodos, NoFiles: x.spec.NoFiles, Dir: x.spec.Dir, Source: x.spec.Source, Parent: x.spec.Name}
	if spec.Model == "" {
		// The parent's model, so its context window too.
		spec.Model, spec.Fallbacks = x.spec.Model, x.spec.Fallbacks
		spec.ContextWindow, spec.ContextPolicy = x.spec.ContextWindow, x.spec.ContextPolicy
	}
	if sub.ModelSettings != nil {
		spec.ModelSettings = sub.ModelSettings.Or(x.spec.ModelSettings)
	}
	for _, t := range x.spec.AllTools() {
		if sub.Tools == nil || contains(sub.Tools, t.Name) {
			spec.Tools = append(spec.Tools, t)
		}
	}
	child, err := x.r.newExecution(spec, x.tenant, x.threadID)
	if err != nil {
		return tool.Result{}, err
	}
	if sub.Model == "" && x.modelRef != "" {
		// On its parent's model, it follows the model the run picked.
		if err := child.pickModel(x.modelRef); err != nil {
			return tool.Result{}, err
		}
	}
	root := x
	if x.root != nil {
		root = x.root
	}
	child.durable, child.runID, child.run, child.root = x.durable, x.runID, x.run, root
	child.in.UserID = x.in.UserID
	child.scope, child.subName, child.subRunID = c.ToolCallID, sub.Name, x.r.NewID("sub")
	child.system = spec.Instructions
	child.in.User = x.in.User                  // its tools see the turn's end user too
	child.state = withoutKey(c.State, "todos") // its todos are its own
	for _, m := range x.msgs {
		if m.TaskCallID == c.ToolCallID {
			child.msgs = append(child.msgs, m)
		}
	}
	x.emit(event.Event{Type: event.StepStarted, StepName: sub.Name})
	x.emit(event.Event{Type: event.SubagentStarted, SubagentRunID: child.subRunID, Subagent: sub.Name, ParentToolCallID: c.ToolCallID})
	closeSteps := func(status string) {
		x.emit(event.Event{Type: event.SubagentFinished, SubagentRunID: child.subRunID, Subagent: sub.Name, Message: status})
		x.emit(event.Event{Type: event.StepFinished, StepName: sub.Name})
	}
	if len(child.msgs) == 0 {
		first := message.Message{ID: x.r.NewID("msg"), Role: message.User, Content: args.Description, TaskCallID: child.scope, Subagent: sub.Name}
		if err := child.checkpoint(ctx, store.Checkpoint{Messages: []message.Message{first}}); err != nil {
			closeSteps("error")
			return tool.Result{}, err
		}
		child.msgs = append(child.msgs, first)
	}
	sctx, span := child.startAgentSpan(ctx)
	out, err := child.loop(sctx)
	outcome := "error"
	if err == nil {
		outcome = string(out.Type)
		pauseEvent(span, out)
	}
	endAgentSpan(span, outcome, err, event.Usage{})
	if err != nil {
		closeSteps("error")
		return tool.Result{}, fmt.Errorf("subagent %s failed: %w", sub.Name, err)
	}
	filesState, err := mergeFiles(c.State, child.state)
	if err != nil {
		closeSteps("error")
		return tool.Result{}, err
	}
	if out.Type == event.Interrupt {
		closeSteps("suspended")
		return tool.Result{}, &subagentPaused{outcome: out, state: filesState}
	}
	closeSteps("success")
	answer := ""
	msgs := child.view()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == message.Assistant && msgs[i].Content != "" {
			answer = msgs[i].Content
			break
		}
	}
	return tool.Result{Content: answer, State: filesState}, nil
}

// mergeFiles returns the parent's state with the subagent's files when they
// changed, or nil.
func mergeFiles(parent, child json.RawMessage) (json.RawMessage, error) {
	files, changed := filesChange(parent, child)
	if !changed {
		return nil, nil
	}
	st := map[string]json.RawMessage{}
	if err := json.Unmarshal(nonEmpty(parent), &st); err != nil {
		return nil, fmt.Errorf("state must be a JSON object: %w", err)
	}
	st["files"] = files
	return json.Marshal(st)
}

// withoutKey returns a state object without key.
func withoutKey(state json.RawMessage, key string) json.RawMessage {
	st := map[string]json.RawMessage{}
	if json.Unmarshal(nonEmpty(state), &st) != nil {
		return state
	}
	if _, ok := st[key]; !ok {
		return state
	}
	delete(st, key)
	b, err := json.Marshal(st)
	if err != nil {
		return state
	}
	return b
}

// filesChange returns the files key of after when it differs from before's.
func filesChange(before, after json.RawMessage) (json.RawMessage, bool) {
	var b, a map[string]json.RawMessage
	_ = json.Unmarshal(nonEmpty(before), &b)
	_ = json.Unmarshal(nonEmpty(after), &a)
	af, ok := a["files"]
	if !ok || jsonEqual(b["files"], af) {
		return nil, false
	}
	return af, true
}

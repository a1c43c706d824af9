package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
	"github.com/stackbone/stackbone/internal/tool/builtin"
)

// Input is one turn as a wire decoded it.
type Input struct {
	Tenant string
	Agent  string
	// Key is the label of the caller's API key: usage and budgets count
	// the turn's calls under it.
	Key string
	// UserID is the end user the turn is for: the signed-in user's id
	// (User), else the x-stackbone-user header a key's caller sends.
	// Tools see it (tool.Call.UserID) and the built-in memory tools fill
	// {userId} with it. Empty: unknown.
	UserID string
	// ThreadID makes the turn durable; empty means stateless.
	ThreadID string
	// User is the end user starting the turn (nil for a key): a thread the
	// turn creates is theirs (store.Thread.Owner), their tools see them
	// (tool.Call.User), and a thread another user owns is not found unless
	// AnyOwner (an admin; store.Sees).
	User     *tool.User
	AnyOwner bool
	// RunID is used when set (AG-UI sends one); otherwise generated.
	RunID string
	// IdempotencyKey, sent by the client, names a turn for its retries: a
	// stateless turn's instead of the request's digest; on a durable thread,
	// a request with the key of the thread's last turn is a retry of it.
	IdempotencyKey string
	// Continues, when set, is the stored turn the request names as the one
	// it goes on from (previous_response_id): a turn that is not the
	// thread's last is gone on from where it ended, on a new branch
	// (Continuation).
	Continues *Continuation
	// History says the client sends its whole conversation on each request
	// (Chat Completions and Anthropic Messages on a session, AG-UI): one
	// that leaves the stored conversation at an earlier message (an edited
	// message, an answer left out to regenerate it) goes on from the last
	// message both hold, on a new branch of the thread (diverge).
	History bool
	// Multitask is what the request does when it meets a turn still
	// running on its thread (agent.MultitaskReject, MultitaskEnqueue,
	// MultitaskInterrupt, MultitaskRollback); "" takes the agent's
	// (agent.Spec.Multitask).
	Multitask string
	// Model, when set, is the model the turn runs on instead of its
	// agent's: one of the agent's models (agent.Spec.Models), picked in
	// Studio's playground, and kept for the turn's run after a decision.
	// Only a runner with PickModel (`stackbone dev`) takes it; otherwise
	// the turn is refused before anything is stored.
	Model string
	// rollback is the message a rolled-back turn's follow-up goes on from
	// (set by start once it stopped the turn; 0: none).
	rollback int64
	// interrupted is the first message of the turn an interrupting
	// follow-up stopped: the request is read against the thread up to it
	// (turnQuestion), as its client saw the turn while it ran.
	interrupted int64
	// queued is the queue's record of a turn that waited in its thread's
	// queue and starts now (drain): its begin takes it off the queue.
	queued *store.QueuedTurn
	// Reports says the caller reports to its client the outcome of a
	// thread's earlier turn that it told the client waits on a decision
	// (MCP: store.Thread.WaitingSeq): a new turn on a thread with such a
	// pause unreported is refused with UnreportedPauseError, before
	// anything is stored, so the caller reports it first.
	Reports bool
	// Messages are the conversation messages the client sent (only new ones,
	// or the whole history). System messages are not stored; they join the
	// agent's instructions for this turn.
	Messages []message.Message
	// ClientTools are tools the client declared and runs itself.
	ClientTools []model.ToolDef
	// ToolChoice passes through to the model. MaxTokens, StopSequences and
	// Temperature are the client's sampling values: each is used only when
	// the agent lists it in ClientOverrides (agent.Spec), else the agent's
	// modelSettings apply and the client's value is ignored.
	ToolChoice    string
	MaxTokens     int
	StopSequences []string
	Temperature   *float64
	// ReasoningEffort is the client's reasoning effort (model.ReasoningEfforts;
	// the Anthropic wire maps thinking and output_config.effort to it),
	// used only when the agent lists OverrideReasoningEffort.
	ReasoningEffort string
	// ResponseFormat asks for a JSON final answer (OpenAI response_format);
	// nil means free text. Start refuses it (400) when the agent's provider
	// cannot honour it, and the final answer is checked against it.
	ResponseFormat *model.ResponseFormat
	// State, when set, is merged into the thread's state for the agent's
	// editable keys (the caller filtered and validated it).
	State map[string]json.RawMessage
	// Resync is for clients that rebuild their view from the stream: a
	// durable run sends StateSnapshot and MessagesSnapshot events at its
	// start and when it pauses, and a turn that brings nothing new to a
	// thread waiting on decisions is answered from the store (the snapshots
	// and the pending decisions again) instead of ErrApprovalPending.
	Resync bool
	// DecidedBy names the caller for decisions made with ResumeDecisions,
	// and for the audit record of an approval-gated call in a stateless
	// turn.
	DecidedBy string
	// Ask, when set, asks the client that started the turn a question a
	// running tool asks (an MCP server's elicitation), in the middle of the
	// turn: the /mcp wire sets it for an MCP client that answers
	// elicitations. toolName names the asking tool. When it fails (the client
	// cancelled the form or cannot be asked) the question becomes a pending
	// decision on a durable run, as without it; a stateless run has no one
	// else to ask.
	Ask func(ctx context.Context, toolName string, q tool.Question) (tool.Answer, error)
	// Collected says the client gets the turn's answer in one piece when
	// the turn ends (a request without streaming, wire.Collect). The run
	// then holds each model step's events until the step's model call
	// ended, so a call cut or stalled part way through the answer is
	// retried from its start (model.Request.Restartable) with nothing shown
	// twice; watchers of a durable thread get such a step's events when its
	// call ends.
	Collected bool
}

// runOptions is what a turn carries beyond its messages. It is stored with
// the thread so a run resumed after a decision or a crash continues the turn
// as the client asked: same system text, client tools and limits.
type runOptions struct {
	System        string     `json:"system,omitempty"`
	ClientTools   []toolSpec `json:"clientTools,omitempty"`
	ToolChoice    string     `json:"toolChoice,omitempty"`
	MaxTokens     int        `json:"maxTokens,omitempty"`
	StopSequences []string   `json:"stopSequences,omitempty"`
	Temperature   *float64   `json:"temperature,omitempty"`
	// ResponseFormat is kept so a turn resumed after a decision still
	// answers in the format the client asked for.
	ResponseFormat *model.ResponseFormat `json:"responseFormat,omitempty"`
	// Key is the caller's key label, so a resumed run counts under it.
	Key string `json:"key,omitempty"`
	// UserID is the turn's end user, so a resumed run's tools see it too.
	UserID string `json:"userId,omitempty"`
	// User is the end user of the turn, so a resumed run's tools still
	// see them.
	User *tool.User `json:"user,omitempty"`
	// Model is the model the turn picked (Input.Model), so its run goes
	// on with it after a decision.
	Model string `json:"model,omitempty"`
}

type toolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// optionsOf encodes a turn's options for the store.
func optionsOf(in Input) json.RawMessage {
	o := runOptions{System: clientSystem(in.Messages), ToolChoice: in.ToolChoice, MaxTokens: in.MaxTokens,
		StopSequences: in.StopSequences, Temperature: in.Temperature, ResponseFormat: in.ResponseFormat, Key: in.Key, UserID: in.UserID, User: in.User, Model: in.Model}
	for _, t := range in.ClientTools {
		o.ClientTools = append(o.ClientTools, toolSpec{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	b, err := json.Marshal(o)
	if err != nil {
		return nil
	}
	return b
}

// restore applies stored options to a resumed execution.
func (x *execution) restore(raw json.RawMessage) {
	x.system = x.spec.Instructions
	var o runOptions
	if len(raw) == 0 {
		return
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		x.r.Logger.Warn("stored run options are unreadable; resuming with the agent's own", "thread", x.threadID, "err", err)
		return
	}
	x.system = systemPrompt(x.spec.Instructions, o.System)
	x.in.ToolChoice, x.in.MaxTokens, x.in.StopSequences, x.in.Temperature = o.ToolChoice, o.MaxTokens, o.StopSequences, o.Temperature
	x.in.ResponseFormat = o.ResponseFormat
	x.in.Key, x.in.UserID, x.in.User = o.Key, o.UserID, o.User
	if o.Model != "" {
		// Checked again: the agent file (or the server's mode) may have
		// changed since the turn picked it.
		err := x.r.checkModel(x.spec, o.Model)
		if err == nil {
			err = x.pickModel(o.Model)
		}
		if err != nil {
			x.r.Logger.Warn("the model the turn picked is no longer allowed or does not resolve; resuming on the agent's own",
				"thread", x.threadID, "model", o.Model, "err", err)
		} else {
			x.in.Model = o.Model
		}
	}
	x.in.ClientTools = nil
	for _, t := range o.ClientTools {
		x.in.ClientTools = append(x.in.ClientTools, model.ToolDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
}

// checkClientTools refuses client tools named like one of the agent's tools.
func checkClientTools(tools []model.ToolDef, own map[string]bool) error {
	for i, t := range tools {
		b, taken := own[t.Name]
		if !taken {
			continue
		}
		msg := fmt.Sprintf("The client tool %q has the name of one of the agent's own tools, which would hide it: rename the client tool.", t.Name)
		if b {
			msg = fmt.Sprintf("The client tool %q has the name of the agent's built-in tool %q, which would hide it: rename the client tool%s.", t.Name, t.Name, builtinOff(t.Name))
		}
		return &InputError{Code: CodeToolNameTaken, Field: FieldTools, Index: i, Reason: msg}
	}
	return nil
}

// builtinOff says how an agent turns a built-in off, where it can.
func builtinOff(name string) string {
	switch name {
	case builtin.WriteTodos:
		return " (or turn the built-in off in the agent with `todos: false`)"
	case builtin.Ls, builtin.ReadFile, builtin.WriteFile, builtin.EditFile:
		return " (or turn the built-in file tools off in the agent with `files: false`)"
	}
	return ""
}

// userID is the id of the turn's end user ("" for a key).
func (in *Input) userID() string {
	if in.User == nil {
		return ""
	}
	return in.User.ID
}

// sees reports whether the turn's caller sees th (store.Sees).
func (in *Input) sees(th *store.Thread) bool {
	return store.Sees(th.Owner, in.userID(), in.AnyOwner)
}

// notTheirs is the error of a turn on another user's thread: not found.
func notTheirs(th *store.Thread) error {
	return fmt.Errorf("thread %q belongs to another user: %w", th.ID, store.ErrNotFound)
}

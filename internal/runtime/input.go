package runtime

import (
	"encoding/json"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
)

// Input is one turn as a wire decoded it.
type Input struct {
	Tenant string
	Agent  string
	// ThreadID makes the turn durable; empty means stateless.
	ThreadID string
	// RunID is used when set (AG-UI sends one); otherwise generated.
	RunID string
	// Messages are the conversation messages the client sent (only new ones,
	// or the whole history). System messages are not stored; they join the
	// agent's instructions for this turn.
	Messages []message.Message
	// ClientTools are tools the client declared and runs itself.
	ClientTools []model.ToolDef
	// ToolChoice, MaxTokens, StopSequences and Temperature pass through to
	// the model.
	ToolChoice    string
	MaxTokens     int
	StopSequences []string
	Temperature   *float64
	// State, when set, is merged into the thread's state for the agent's
	// editable keys (the caller filtered and validated it).
	State map[string]json.RawMessage
	// Snapshots asks for StateSnapshot and MessagesSnapshot events at the
	// start of a durable run (AG-UI).
	Snapshots bool
	// Resume answers pending interrupts before the run continues (AG-UI).
	Resume []ResumeEntry
	// DecidedBy names the caller for decisions made through Resume, and for
	// the audit record of an approval-gated call in a stateless turn.
	DecidedBy string
}

// ResumeEntry answers one interrupt.
type ResumeEntry struct {
	InterruptID string
	// Cancelled always rejects.
	Cancelled bool
	Payload   json.RawMessage
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
}

type toolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// optionsOf encodes a turn's options for the store.
func optionsOf(in Input) json.RawMessage {
	o := runOptions{System: clientSystem(in.Messages), ToolChoice: in.ToolChoice, MaxTokens: in.MaxTokens,
		StopSequences: in.StopSequences, Temperature: in.Temperature}
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
	x.in.ClientTools = nil
	for _, t := range o.ClientTools {
		x.in.ClientTools = append(x.in.ClientTools, model.ToolDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
}

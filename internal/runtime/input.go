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
	// DecidedBy names the caller for decisions made through Resume.
	DecidedBy string
}

// ResumeEntry answers one interrupt.
type ResumeEntry struct {
	InterruptID string
	// Cancelled always rejects.
	Cancelled bool
	Payload   json.RawMessage
}

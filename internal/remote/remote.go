// Package remote is what the engine knows of a remote agent it hands work
// to (an agent file's a2aAgents): the message it sends, the answers to the
// remote's decisions, and the updates of the remote task it reads, in A2A
// 1.0's terms but without its wire (tool/a2aclient speaks that).
package remote

import (
	"encoding/json"
	"fmt"
)

// The states an Update reports (A2A's TASK_STATE_* names).
const (
	StateWorking       = "TASK_STATE_WORKING"
	StateInputRequired = "TASK_STATE_INPUT_REQUIRED"
	StateAuthRequired  = "TASK_STATE_AUTH_REQUIRED"
	StateCompleted     = "TASK_STATE_COMPLETED"
	StateFailed        = "TASK_STATE_FAILED"
	StateCanceled      = "TASK_STATE_CANCELED"
	StateRejected      = "TASK_STATE_REJECTED"
)

// Terminal reports whether nothing more happens to a task in state s.
func Terminal(s string) bool {
	return s == StateCompleted || s == StateFailed || s == StateCanceled || s == StateRejected
}

// Message is what Send sends: a new message (Text) in ContextID (empty: a
// new conversation), or the Decisions answering TaskID's input.
type Message struct {
	// MessageID is the A2A messageId (the same on a resend, so a server
	// that recognises it attaches to its task instead of starting one).
	MessageID string
	ContextID string
	TaskID    string
	Text      string
	// Decisions answer the remote's pending decisions (a Stackbone
	// agent's: data parts only); Reply is the text answer to a plain
	// question.
	Decisions []Decision
	Reply     string
}

// Decision is the answer to one of the remote's pending decisions, as A2A
// data part {"decision", "id", "message"?, "arguments"?}.
type Decision struct {
	ID        string          `json:"id,omitempty"`
	Decision  string          `json:"decision"`
	Message   string          `json:"message,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Ask is one decision the remote waits on (an INPUT_REQUIRED status
// message's data part, or its text when it has none).
type Ask struct {
	// ID is the remote's id of the decision ("" for a plain question).
	ID          string
	ToolCallID  string
	Tool        string
	Args        json.RawMessage
	Description string
	Allowed     []string
	Schema      json.RawMessage
	Reason      string
}

// Update is what the remote's task looks like after one response.
type Update struct {
	TaskID    string
	ContextID string
	// State is a TASK_STATE_* name.
	State string
	// Delta is answer text that arrived with this response.
	Delta string
	// Answer is the task's answer text so far (its artifacts' text, or
	// the final message's).
	Answer string
	// Note is the status message's text (a failure's reason, the
	// question of an INPUT_REQUIRED task).
	Note string
	// Asks are the decisions an INPUT_REQUIRED task waits on.
	Asks []Ask
}

// RPCError is a JSON-RPC error the remote answered with.
type RPCError struct {
	Agent   string
	Code    int
	Message string
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("A2A agent %s answered error %d: %s", e.Agent, e.Code, e.Message)
}

// NotFound reports whether the remote does not know the task (−32001).
func (e *RPCError) NotFound() bool { return e.Code == -32001 }

// BrokenError is a stream that ended before its task ended or waited on
// input: the task may go on at the remote (Reattach follows it).
type BrokenError struct {
	Agent string
	Err   error
}

func (e *BrokenError) Error() string {
	return fmt.Sprintf("A2A agent %s: the stream broke: %v", e.Agent, e.Err)
}

func (e *BrokenError) Unwrap() error { return e.Err }

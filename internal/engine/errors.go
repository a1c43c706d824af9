package engine

import (
	"errors"
	"fmt"
	"strings"
)

// The engine's errors are typed and know no wire: each wire (through
// internal/apierror, the one mapper at the HTTP edge) renders them in its own
// envelope and on its own parameter paths. Conditions the store decides
// (approval pending, run in progress, agent mismatch, already decided) are
// the store's sentinels.

// ErrShuttingDown: the runner is shutting down. Start refuses new turns with
// it, and it is the cause of a run stopped when Shutdown's grace period
// ended.
var ErrShuttingDown = errors.New("the server is shutting down")

// ErrCancelled is the cause of a run a client cancelled (Runner.Cancel): it
// ends failed with CodeCancelled.
var ErrCancelled = errors.New("the run was cancelled")

// The public code and message of a cancelled run.
const (
	CodeCancelled    = "cancelled"
	MessageCancelled = "The run was cancelled."
)

// The public code and message of ErrShuttingDown, and the code of a
// *FormatMismatchError, as every path reports them.
const (
	CodeShuttingDown    = "shutting_down"
	MessageShuttingDown = "The server is shutting down. Try again shortly."
	CodeFormatMismatch  = "response_format_mismatch"
)

// UnknownAgentError: no agent has the name a turn asked for.
type UnknownAgentError struct{ Name string }

func (e *UnknownAgentError) Error() string { return fmt.Sprintf("no agent is named %q", e.Name) }

// UnknownDecisionError: no decision has the id a caller named.
type UnknownDecisionError struct{ ID string }

func (e *UnknownDecisionError) Error() string {
	return fmt.Sprintf("No pending decision has the id %q.", e.ID)
}

// Codes of input errors. CodeInvalidInput is the generic one; the others
// name a broken contract (AG-UI shows them as RUN_ERROR codes).
const (
	CodeInvalidInput     = "invalid_request"
	CodeNeedsThread      = "thread_required"
	CodeInvalidState     = "invalid_state"
	CodeUnknownInterrupt = "unknown_interrupt"
	CodeAlreadyDecided   = "already_decided"
	CodeDecisionExpired  = "decision_expired"
	CodePartialResume    = "partial_resume"
	CodeInvalidPayload   = "invalid_resume_payload"
	// CodeToolNameTaken: a client tool has the name of one of the agent's
	// own tools (the cause is a *ToolNameError).
	CodeToolNameTaken = "tool_name_taken"
	// CodeIdempotencyKeyReused: a stateless turn's Idempotency-Key was used
	// with a different request within the retry window.
	CodeIdempotencyKeyReused = "idempotency_key_reused"
	// CodeModelNotAllowed: a run picked a model that is not one of its
	// agent's (Input.Model).
	CodeModelNotAllowed = "model_not_allowed"
	// CodeModelChoiceOff: a run picked a model on a server that does not
	// let runs pick (`stackbone start`).
	CodeModelChoiceOff = "model_choice_dev_only"
)

// Fields an InputError can name. They are the engine's names; a wire places
// them on its own parameter paths.
const (
	// FieldMessages is Input.Messages as a whole (Index -1).
	FieldMessages = "messages"
	// FieldToolCallID is the tool-call id of the tool message at Index of
	// Input.Messages.
	FieldToolCallID = "messages.tool_call_id"
	// FieldTools is the client tool at Index of Input.ClientTools.
	FieldTools = "tools"
	// FieldResponseFormat is Input.ResponseFormat.
	FieldResponseFormat = "response_format"
	// FieldIdempotencyKey is Input.IdempotencyKey.
	FieldIdempotencyKey = "Idempotency-Key"
	// FieldEditedArgs and FieldApproved are a Decision's fields.
	FieldEditedArgs = "editedArgs"
	FieldApproved   = "approved"
	// FieldDecision is a Decision's Kind (retry or skip of an in-doubt
	// call).
	FieldDecision = "decision"
	// FieldMultitask is Input.Multitask (the x-stackbone-multitask header,
	// AG-UI forwardedProps.multitask, Responses metadata.multitask).
	FieldMultitask = "multitask"
	// FieldModel is Input.Model (AG-UI forwardedProps.model).
	FieldModel = "model"
)

// InputError is a turn's or a decision's input the engine refuses; nothing
// was changed. Reason is public text.
type InputError struct {
	// Code classifies the error (CodeInvalidInput unless a contract names
	// its own).
	Code string
	// Field is what is wrong (one of the Field constants, or "" for the
	// request as a whole).
	Field string
	// Index is the offending element's position in Input.Messages (for
	// message fields) or Input.ClientTools (FieldTools), in the numbering
	// of the Input the wire built; -1 when the field is not a list element.
	Index int
	// Reason is the public message.
	Reason string
	// Details is structured extra data (schema problems).
	Details any
	// Err is the cause, for errors.Is/As and the logs.
	Err error
}

func (e *InputError) Error() string {
	if e.Err != nil {
		return e.Reason + ": " + e.Err.Error()
	}
	return e.Reason
}

// Unwrap returns the cause.
func (e *InputError) Unwrap() error { return e.Err }

func inputError(field, format string, args ...any) *InputError {
	return &InputError{Code: CodeInvalidInput, Field: field, Index: -1, Reason: fmt.Sprintf(format, args...)}
}

func contractError(code, format string, args ...any) *InputError {
	return &InputError{Code: code, Index: -1, Reason: fmt.Sprintf(format, args...)}
}

// FormatMismatchError: the model's final answer does not follow the
// response format the client asked for (an upstream failure, not the
// client's).
type FormatMismatchError struct {
	Type string
	Err  error
	// Retried: the model was given the problem once and its second answer
	// does not follow the format either.
	Retried bool
}

func (e *FormatMismatchError) Error() string {
	if e.Retried {
		return fmt.Sprintf("The model's answer does not follow response_format %s, also after one retry with the validation error: %v", e.Type, e.Err)
	}
	return fmt.Sprintf("The model's answer does not follow response_format %s: %v", e.Type, e.Err)
}

// Unwrap returns the validation problem.
func (e *FormatMismatchError) Unwrap() error { return e.Err }

// CodeInstructionsFailed is the public code of a run whose agent's
// instructions function failed.
const CodeInstructionsFailed = "instructions_failed"

// InstructionsError: the agent's instructions function (Spec.InstructionsFn)
// threw, returned something other than a string or timed out, so the run
// has no system prompt to send.
type InstructionsError struct {
	Agent string
	Err   error
}

func (e *InstructionsError) Error() string {
	return fmt.Sprintf("The instructions function of agent %q failed: %v", e.Agent, e.Err)
}

// Unwrap returns the function's failure.
func (e *InstructionsError) Unwrap() error { return e.Err }

// RunFailedError is the typed cause a failed run hands its consumer (the
// RunError event's Err): the failure, and whether the turn had side effects
// before it (WorkDone: a tool ran, or a model answer or tool result was
// stored), so that a client retrying the turn could repeat them. The HTTP
// edge tells clients from it whether a retry is safe (x-should-retry).
type RunFailedError struct {
	Err      error
	WorkDone bool
}

func (e *RunFailedError) Error() string { return e.Err.Error() }

// CodeCallInDoubt is the public code of a *CallInDoubtError.
const CodeCallInDoubt = "call_in_doubt"

// CallInDoubtError refuses a client's retry of a stateless turn whose earlier
// attempt started calls that are not idempotent and recorded no result for
// them (its process died while they ran): they may have had their effect, a
// turn without a session has no one to ask, so they are not run again.
// Nothing was changed.
type CallInDoubtError struct {
	// Calls are the calls in doubt, as name(arguments).
	Calls []string
}

func (e *CallInDoubtError) Error() string {
	return fmt.Sprintf("An earlier attempt of this request started %s and stopped before recording the result, so it may already have run. "+
		"It is not run again without a human, and a request without a session has no one to ask: check its outcome, then send a new request "+
		"(with a new Idempotency-Key), or use a session (x-stackbone-session) to get an in-doubt decision instead.", strings.Join(e.Calls, ", "))
}

// StoredFailure is a run's failure as its stored RunError event tells it:
// the public code and message, all a retry that attached to the run (and so
// read its end from the thread's log) knows of the cause.
type StoredFailure struct {
	Code    string
	Message string
}

func (e *StoredFailure) Error() string { return e.Code + ": " + e.Message }

// The failure of a run that ended without a terminal event.
const (
	CodeIncompleteRun    = "incomplete_run"
	MessageIncompleteRun = "The run ended without an answer."
)

// Unwrap returns the failure.
func (e *RunFailedError) Unwrap() error { return e.Err }

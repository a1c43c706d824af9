package decision

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/stackbone/stackbone/internal/schema"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
)

// The fields an Error names.
const (
	FieldDecision   = "decision"
	FieldEditedArgs = "editedArgs"
	FieldApproved   = "approved"
	// FieldArguments is a form's edited arguments (an MCP elicitation).
	FieldArguments = "arguments"
	// FieldPayload is a resume's payload as a whole.
	FieldPayload = ""
	// FieldMessage is an answer's message.
	FieldMessage = "message"
)

// MaxMessageBytes bounds an answer's message (a rejection's or skip's).
const MaxMessageBytes = 4000

// CheckMessage refuses a message longer than MaxMessageBytes (an *Error).
func CheckMessage(msg string) error {
	if len(msg) > MaxMessageBytes {
		return invalid(FieldMessage, "The message is longer than %d bytes.", MaxMessageBytes)
	}
	return nil
}

// Error is an answer a decision does not take: the client's mistake, with
// a public message. The engine maps it to its input errors (400
// invalid_input, or invalid_payload in a resume); apierror maps it to a 400
// naming Field.
type Error struct {
	// Field is what is wrong (a Field constant).
	Field string
	// Message is the public message.
	Message string
	// Problems are the schema's findings, when a schema refused the answer.
	Problems any
	// Err is the cause, when there is one.
	Err error
}

// Error is the public message.
func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func invalid(field, format string, args ...any) *Error {
	return &Error{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Validate checks an answer against what the interrupt allows and its kind
// takes, and completes it: Approved follows from the choice (retry
// approves an in-doubt call, skip rejects it; reject drops edits), and a
// verdict's Kind is set. Edited arguments must follow the kind's target
// (params is the tool's parameter schema; without one any value matches,
// but numbers no tool could read are still refused). Errors are *Error.
func Validate(it *store.Interrupt, a *Answer, params json.RawMessage) error {
	def := For(it)
	if def.Verdict || a.Kind == tool.Retry || a.Kind == tool.Skip {
		return validateVerdict(it, a)
	}
	switch a.Kind {
	case "":
	case tool.Approve, tool.Edit:
		a.Approved = true
	case tool.Reject:
		a.Approved, a.EditedArgs = false, nil
	default:
		return invalid(FieldDecision, "Unknown decision %q.", a.Kind)
	}
	if len(a.EditedArgs) > 0 {
		if !Allows(it, tool.Edit) {
			return invalid(FieldEditedArgs, "Editing the arguments is not allowed for this decision (allowed: %v).", it.AllowedDecisions)
		}
		a.Approved = true
		target, what := params, "the tool's parameter schema"
		if def.EditTarget != nil {
			target, what = def.EditTarget(it, params)
		}
		if err := schema.Validate(target, a.EditedArgs); err != nil {
			e := &Error{Field: FieldEditedArgs, Message: fmt.Sprintf("editedArgs do not match %s: %v", what, err)}
			var ve *schema.ValidationError
			if errors.As(err, &ve) {
				e.Problems = ve.Problems
			}
			return e
		}
	}
	if !a.Approved && !Allows(it, tool.Reject) {
		return invalid(FieldApproved, "Rejecting is not allowed for this decision.")
	}
	if a.Approved && len(a.EditedArgs) == 0 && !Allows(it, tool.Approve) {
		return invalid(FieldApproved, "Approving without edits is not allowed for this decision.")
	}
	return nil
}

// validateVerdict checks a verdict (retry, skip), or an approval-style
// answer to a kind that takes verdicts.
func validateVerdict(it *store.Interrupt, a *Answer) error {
	kind := a.Kind
	switch {
	case kind != "":
	case len(a.EditedArgs) > 0:
		kind = tool.Edit
	case a.Approved:
		kind = tool.Approve
	default:
		kind = tool.Reject
	}
	if !Allows(it, kind) {
		return invalid(FieldDecision, "The decision %q is not allowed for this call (allowed: %s).", kind,
			strings.Join(it.AllowedDecisions, ", "))
	}
	if len(a.EditedArgs) > 0 {
		return invalid(FieldEditedArgs, "An in-doubt call cannot be edited (allowed: %s).", strings.Join(it.AllowedDecisions, ", "))
	}
	a.Kind, a.Approved = kind, kind == tool.Retry
	return nil
}

// FromPayload reads a resume's payload for an interrupt (AG-UI's
// resume[].payload): it must match the interrupt's responseSchema and be
// {"decision"?, "approved"?, "editedArgs"?, "message"?}. The answer is then
// validated (Validate, with params). Errors are *Error.
func FromPayload(it *store.Interrupt, payload json.RawMessage, params json.RawMessage) (Answer, error) {
	payload = bytes.TrimSpace(payload)
	if len(payload) == 0 || string(payload) == "null" {
		return Answer{}, invalid(FieldPayload, "Interrupt %q needs a payload such as {\"approved\": true}.", it.ID)
	}
	if err := schema.Validate(it.ResponseSchema, payload); err != nil {
		return Answer{}, &Error{Field: FieldPayload, Message: fmt.Sprintf("The payload for interrupt %q does not match its responseSchema: %v", it.ID, err), Err: err}
	}
	var p struct {
		Decision   string          `json:"decision"`
		Approved   *bool           `json:"approved"`
		EditedArgs json.RawMessage `json:"editedArgs"`
		Message    string          `json:"message"`
	}
	if err := json.Unmarshal(payload, &p); err != nil {
		return Answer{}, invalid(FieldPayload, "The payload for interrupt %q is not an object.", it.ID)
	}
	a := Answer{Kind: Choice(p.Decision), EditedArgs: p.EditedArgs, Message: p.Message}
	if string(bytes.TrimSpace(a.EditedArgs)) == "null" {
		a.EditedArgs = nil
	}
	switch {
	case a.Kind != "":
		// Validate checks it against the allowed decisions.
	case len(a.EditedArgs) > 0:
		a.Approved = p.Approved == nil || *p.Approved
		if !a.Approved {
			a.EditedArgs = nil
		}
	case p.Approved != nil:
		a.Approved = *p.Approved
	default:
		return Answer{}, invalid(FieldPayload, "The payload for interrupt %q needs decision, approved or editedArgs.", it.ID)
	}
	if err := Validate(it, &a, params); err != nil {
		return Answer{}, err
	}
	return a, nil
}

// Cancel is the answer of a client that cancels the decision (the kind's
// Cancel: skip for a call in doubt, a rejection otherwise).
func Cancel(it *store.Interrupt) Answer { return For(it).Cancel(it) }

// Decline is the answer of a human who declines a form (an MCP
// elicitation's decline): skip when the decision allows it, else reject
// when it allows that; ok is false when it allows neither.
func Decline(it *store.Interrupt, message string) (a Answer, ok bool) {
	switch {
	case Allows(it, tool.Skip):
		return Answer{Kind: tool.Skip, Message: message}, true
	case Allows(it, tool.Reject):
		return Answer{Kind: tool.Reject, Message: message}, true
	}
	return Answer{}, false
}

// Form is the form a pending decision offers a human in a client that
// renders forms (an MCP elicitation): the message to show and the JSON
// Schema of the answer: the choice among those allowed, the arguments to
// run the call with (when editing is allowed) and a message for the agent
// (when rejecting or skipping is).
type Form struct {
	// Message is what the form asks (Question).
	Message string
	// Schema is the JSON Schema of the form's content.
	Schema map[string]any
}

// FormFor is the form of an interrupt asked on behalf of an agent.
func FormFor(agent string, it *store.Interrupt) Form {
	allowed := it.AllowedDecisions
	props := map[string]any{
		"decision": map[string]any{"type": "string", "title": "Decision", "enum": allowed,
			"description": "What to do with the call: " + strings.Join(allowed, ", ") + "."},
	}
	if Allows(it, tool.Edit) {
		props["arguments"] = map[string]any{"type": "string", "title": "Arguments (JSON)", "default": string(it.Args),
			"description": "The call's arguments. Change them and choose edit to run the call with yours."}
	}
	if Allows(it, tool.Reject) || Allows(it, tool.Skip) {
		props["message"] = map[string]any{"type": "string", "title": "Message",
			"description": "Optional: what the agent is told when the call is rejected or skipped."}
	}
	return Form{Message: Question(agent, it),
		Schema: map[string]any{"type": "object", "properties": props, "required": []string{"decision"}}}
}

// Question is what a form asks about an interrupt: the kind's heading,
// then the tool, its arguments and the decision's id.
func Question(agent string, it *store.Interrupt) string {
	what := Describe(it)
	return fmt.Sprintf("%s\nTool: %s\nArguments: %s\nDecision id: %s", For(it).Heading(agent, what, it), it.Tool, it.Args, it.ID)
}

// Describe is the short description of what a decision is about: its
// description, or "a call to TOOL".
func Describe(it *store.Interrupt) string {
	if it.Description != "" {
		return it.Description
	}
	return "a call to " + it.Tool
}

// FromForm reads an accepted form's content (FormFor's schema): the
// choice, its message and, for edit, the arguments as JSON text. ok is
// false when the content decides nothing. Errors are *Error.
func FromForm(it *store.Interrupt, content map[string]any) (a Answer, ok bool, err error) {
	kind, _ := content["decision"].(string)
	msg, _ := content["message"].(string)
	switch Choice(kind) {
	case tool.Approve, tool.Retry:
		return Answer{Kind: Choice(kind)}, true, nil
	case tool.Reject, tool.Skip:
		return Answer{Kind: Choice(kind), Message: msg}, true, nil
	case tool.Edit:
		raw, _ := content["arguments"].(string)
		if !json.Valid([]byte(raw)) {
			return a, false, invalid(FieldArguments, "The edited arguments are not valid JSON.")
		}
		return Answer{Kind: tool.Edit, EditedArgs: json.RawMessage(raw)}, true, nil
	}
	return a, false, invalid(FieldDecision, "Unknown decision %q (allowed: %s).", kind, strings.Join(it.AllowedDecisions, ", "))
}

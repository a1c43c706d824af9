package decision

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
)

func init() {
	Register(&Def{
		Kind: Approval, Choices: []Choice{tool.Approve, tool.Reject, tool.Edit}, Gate: true,
		Cancel: func(*store.Interrupt) Answer {
			return Answer{Approved: false, Message: MessageCancelled}
		},
		Heading: func(agent, what string, _ *store.Interrupt) string {
			return fmt.Sprintf("The agent %s waits for your approval: %s.", agent, what)
		},
		Result: approvalResult,
	})
	Register(&Def{
		Kind: InDoubt, Choices: []Choice{tool.Retry, tool.Skip}, Verdict: true, Gate: true, Named: true,
		Cancel: func(*store.Interrupt) Answer { return Answer{Kind: tool.Skip} },
		Heading: func(agent, what string, it *store.Interrupt) string {
			return fmt.Sprintf("The agent %s was stopped while calling %s (%s); it may or may not have run. Run it again (retry) or not (skip)?", agent, it.Tool, what)
		},
		Hint:   "Calls in doubt may already have run before a crash: decide them with `stackbone hitl retry <id>` or `stackbone hitl skip <id>`.",
		Result: inDoubtResult,
	})
	Register(&Def{
		Kind: Elicitation, Choices: []Choice{tool.Approve, tool.Edit, tool.Reject}, Named: true,
		EditTarget: func(it *store.Interrupt, _ json.RawMessage) (json.RawMessage, string) {
			return AnswerSchema(it.ResponseSchema), "the question's schema"
		},
		Cancel: func(*store.Interrupt) Answer {
			return Answer{Approved: false, Message: MessageCancelled}
		},
		Heading: func(agent, what string, _ *store.Interrupt) string {
			return fmt.Sprintf("The agent %s waits for your approval: %s.", agent, what)
		},
		Result: elicitationResult,
	})
}

// The tool results (and messages) decisions yield.
const (
	// ExpiredResult is the tool result the model gets for a call whose
	// approval expired before anyone decided it.
	ExpiredResult = "The approval request expired."
	// SkippedResult is the tool result the model gets for an in-doubt call
	// a human skipped without writing a message.
	SkippedResult = "The outcome of this call is unknown: it may or may not have run before the server stopped, " +
		"and it was not run again (a human chose skip). Do not assume it succeeded or failed; tell the user if it matters."
	// RejectedResult is the tool result of a rejected call; a reviewer's
	// message follows it.
	RejectedResult = "The user rejected this tool call."
	// MessageCancelled is the message of a decision its client cancelled.
	MessageCancelled = "The client cancelled the interrupt."
)

// Offer is what a new pending decision offers: its kind, the choices it
// allows, the form of its answer (ResponseSchema), and who may give it
// (expiry, quorum). Apply sets them on the interrupt to be stored.
type Offer struct {
	// Kind is the decision's kind (the interrupt's reason).
	Kind Kind
	// Allowed are the choices it allows (its allowedDecisions).
	Allowed []string
	// Schema is the JSON Schema of an answer's payload (responseSchema).
	Schema json.RawMessage
	// ExpiresAt is when the decision expires unanswered; nil: never.
	ExpiresAt *time.Time
	// Needed is how many approvals from distinct principals it needs.
	Needed int
}

// Apply sets the offer on an interrupt.
func (o Offer) Apply(it *store.Interrupt) {
	it.Reason, it.AllowedDecisions, it.ResponseSchema, it.ExpiresAt = string(o.Kind), o.Allowed, o.Schema, o.ExpiresAt
	if o.Needed > 0 {
		it.ApprovalsNeeded = o.Needed
	}
}

// ApprovalChoices are the choices a tool's approval rule allows (approve
// and reject when it names none).
func ApprovalChoices(a *tool.Approval) []string { return Strings(a.Allowed()) }

// NewApproval is the offer of a tool call that needs approval, created at
// now: the rule's choices, a form with the tool's parameters to edit when
// edit is allowed, the rule's expiry (or defaultTTL; zero: none) and its
// quorum.
func NewApproval(t *tool.Tool, now time.Time, defaultTTL time.Duration) Offer {
	o := Offer{Kind: Approval, Allowed: ApprovalChoices(t.Approval), Schema: ApprovalSchema(t), Needed: max(t.Approval.Approvals, 1)}
	if ttl := cmp.Or(t.Approval.ExpiresAfter, defaultTTL); ttl > 0 {
		e := now.Add(ttl)
		o.ExpiresAt = &e
	}
	return o
}

// NewInDoubt is the offer of a call that may already have run: retry or
// skip, with a form naming the verdict.
func NewInDoubt() Offer {
	return Offer{Kind: InDoubt, Allowed: Strings([]Choice{tool.Retry, tool.Skip}), Schema: InDoubtSchema()}
}

// NewElicitation is the offer of a question a running tool asks, whose
// answer follows question (any object when empty): answer (approve, with
// the answer as editedArgs, or edit) or decline (reject).
func NewElicitation(question json.RawMessage) Offer {
	return Offer{Kind: Elicitation, Allowed: Strings([]Choice{tool.Approve, tool.Edit, tool.Reject}), Schema: EditSchema(question)}
}

// ApprovalSchema is the JSON Schema of a decision payload for a tool:
// {approved: boolean}, plus editedArgs (the tool's own parameter schema)
// when edit is allowed.
func ApprovalSchema(t *tool.Tool) json.RawMessage {
	if !slices.Contains(t.Approval.Allowed(), tool.Edit) {
		return json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"}},"required":["approved"]}`)
	}
	return EditSchema(t.Parameters)
}

// EditSchema is the answer to a decision that may edit: approved, or
// editedArgs following params (any object when params is empty), or both.
func EditSchema(params json.RawMessage) json.RawMessage {
	if len(params) == 0 {
		params = json.RawMessage(`{"type":"object"}`)
	}
	return json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"},"editedArgs":` + string(params) +
		`},"anyOf":[{"required":["approved"]},{"required":["editedArgs"]}]}`)
}

// InDoubtSchema is the response schema of an in-doubt decision.
func InDoubtSchema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"decision":{"type":"string","enum":["retry","skip"]},` +
		`"message":{"type":"string"}},"required":["decision"]}`)
}

// AnswerSchema is the schema of an elicitation's answer: the editedArgs of
// its decision's response schema (any object when it has none).
func AnswerSchema(responseSchema json.RawMessage) json.RawMessage {
	var s struct {
		Properties struct {
			EditedArgs json.RawMessage `json:"editedArgs"`
		} `json:"properties"`
	}
	if json.Unmarshal(responseSchema, &s) != nil || len(s.Properties.EditedArgs) == 0 {
		return json.RawMessage(`{"type":"object"}`)
	}
	return s.Properties.EditedArgs
}

// Outcome is what a decision yields for its call.
type Outcome struct {
	// Pending: nobody decided yet; the call waits.
	Pending bool
	// Run: the call runs (with Args when set).
	Run bool
	// Args are the arguments the call goes on with under this decision
	// (an in-doubt call's recorded ones, an approval's edited ones); nil:
	// as the model called it.
	Args json.RawMessage
	// Skipped: a human chose not to run a call that may already have run.
	Skipped bool
	// Expired: nobody decided before the decision expired.
	Expired bool
	// Result and IsError are the tool result the model gets when the call
	// does not run.
	Result  string
	IsError bool
	// Answer is what a question a running tool asked gets back
	// (elicitation), once decided.
	Answer *tool.Answer
}

// Result is what a stored decision yields for its call (the kind's Result).
func Result(it *store.Interrupt) Outcome { return For(it).Result(it) }

// Expired reports whether an interrupt was decided by its expiry.
func Expired(it *store.Interrupt) bool {
	return it.Status != store.Pending && it.Decision != nil && it.Decision.Via == store.ViaExpiry
}

func editedArgs(it *store.Interrupt) json.RawMessage {
	if it.Decision != nil && len(it.Decision.EditedArgs) > 0 {
		return it.Decision.EditedArgs
	}
	return nil
}

func approvalResult(it *store.Interrupt) Outcome {
	o := Outcome{Args: editedArgs(it)}
	switch {
	case it.Status == store.Pending:
		o.Pending = true
	case it.Status == store.Rejected && Expired(it):
		o.Expired, o.Result, o.IsError = true, ExpiredResult, true
	case it.Status == store.Rejected:
		o.Result, o.IsError = RejectedResult, true
		if it.Decision != nil && it.Decision.Message != "" {
			o.Result += " Reviewer's message: " + it.Decision.Message
		}
	case it.Status == store.Approved:
		o.Run = true
	}
	return o
}

func inDoubtResult(it *store.Interrupt) Outcome {
	o := Outcome{Args: it.Args}
	switch it.Status {
	case store.Pending:
		o.Pending = true
	case store.Rejected:
		o.Skipped, o.Result, o.IsError = true, SkippedResult, true
		if it.Decision != nil && it.Decision.Message != "" {
			o.Result, o.IsError = it.Decision.Message, false
		}
	default:
		o.Run = true // retried: with the arguments it ran with, again
	}
	return o
}

func elicitationResult(it *store.Interrupt) Outcome {
	if it.Status == store.Pending || it.Decision == nil {
		return Outcome{Pending: true}
	}
	if it.Status != store.Approved {
		return Outcome{Answer: &tool.Answer{Message: it.Decision.Message}}
	}
	content := it.Decision.EditedArgs
	if len(content) == 0 {
		content = json.RawMessage(`{}`)
	}
	return Outcome{Answer: &tool.Answer{Accepted: true, Content: content}}
}

// Package decision is the logic of pending decisions: a tool call that
// waits on a human (an approval), a call that may already have run before a
// crash (in doubt), a question a running tool asks (an elicitation), and
// the kinds later rounds add. For each kind it holds the choices it allows,
// the validation of an answer, the form it offers (its JSON Schema and the
// question it asks), the outcome it yields for the call and the model, and
// who may give it (roles, quorum, expiry).
//
// The stored record stays store.Interrupt (the pending decision) and
// store.Decision (the answer, for audit); this package is what every path
// that creates, shows, answers or reads one goes through: the engine, the
// wires (AG-UI, MCP), the server's HTTP API, Studio and the CLI.
package decision

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/wI2L/jsondiff"

	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
)

// Kind names a kind of pending decision: the store.Interrupt's Reason.
type Kind string

// The kinds of pending decision this package registers.
const (
	// Approval: the tool needs a human's approval before it runs
	// (store.ReasonApproval, the default of an interrupt stored without a
	// reason).
	Approval Kind = store.ReasonApproval
	// InDoubt: the call started before a crash and left no result, so it
	// may already have run; the human picks retry or skip
	// (store.ReasonInDoubt).
	InDoubt Kind = store.ReasonInDoubt
	// Elicitation: a running tool asks a human a question and waits for
	// the answer (store.ReasonElicitation).
	Elicitation Kind = store.ReasonElicitation
)

// Choice is one answer a pending decision may allow: approve, reject,
// edit, retry or skip (tool.Decision).
type Choice = tool.Decision

// Def is what one kind of pending decision is. Each kind registers one
// (Register); everything that branches on a kind asks its Def instead.
type Def struct {
	// Kind is the kind's name, stored as the interrupt's reason.
	Kind Kind
	// Choices are every choice a decision of this kind can allow; one
	// interrupt allows a subset (its AllowedDecisions).
	Choices []Choice
	// Verdict says the choices are verdicts on a call that may already
	// have run (retry, skip) rather than approve, reject and edit: an
	// answer names one, and cannot edit the arguments.
	Verdict bool
	// Gate says deciding it decides whether the tool call runs (approval,
	// in doubt). A kind that is not a gate is asked by a call while it
	// runs (elicitation): the call reads the answer itself, and the run
	// needs no resume for it.
	Gate bool
	// Named says the wires show the kind by its name (in_doubt,
	// elicitation); a kind that is not named is shown as a plain tool-call
	// approval (AG-UI's "tool_call").
	Named bool
	// EditTarget is what an answer's edited arguments must follow, and
	// how an error names it: the tool's parameter schema (params) for an
	// approval, the question's own schema for an elicitation. Nil: the
	// tool's parameter schema.
	EditTarget func(it *store.Interrupt, params json.RawMessage) (schema json.RawMessage, what string)
	// Cancel is the answer a client that cancels the decision gives (an
	// AG-UI resume entry marked cancelled).
	Cancel func(it *store.Interrupt) Answer
	// Heading is the first line of the question a form asks a human about
	// it: agent is the asking agent, what the call's description (or "a
	// call to TOOL").
	Heading func(agent, what string, it *store.Interrupt) string
	// Hint, when set, is a line the CLI prints under a list of pending
	// decisions that holds one of this kind.
	Hint string
	// Result is the outcome of a decision of this kind for its call.
	Result func(it *store.Interrupt) Outcome
}

var (
	mu    sync.RWMutex
	kinds = map[Kind]*Def{}
)

// Register adds a kind of pending decision. It panics when the kind is
// registered already or the Def lacks what every kind needs (choices, a
// result, a cancel): kinds are registered once, at init.
func Register(d *Def) {
	if d == nil || d.Kind == "" || len(d.Choices) == 0 || d.Result == nil || d.Cancel == nil || d.Heading == nil {
		panic("decision: Register needs a Kind, Choices, Result, Cancel and Heading")
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := kinds[d.Kind]; dup {
		panic(fmt.Sprintf("decision: kind %q registered twice", d.Kind))
	}
	kinds[d.Kind] = d
}

// Lookup returns the registered Def of a kind.
func Lookup(k Kind) (*Def, bool) {
	mu.RLock()
	defer mu.RUnlock()
	d, ok := kinds[k]
	return d, ok
}

// Kinds returns the registered kinds, sorted.
func Kinds() []Kind {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]Kind, 0, len(kinds))
	for k := range kinds {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Of returns the Def of a stored reason: approval for an empty one (an
// interrupt stored before reasons were), and for a reason no kind
// registered (the store keeps only the reasons it knows).
func Of(reason string) *Def {
	if d, ok := Lookup(Kind(reason)); ok {
		return d
	}
	d, _ := Lookup(Approval)
	return d
}

// For returns the Def of a stored interrupt (Of its reason).
func For(it *store.Interrupt) *Def { return Of(it.Reason) }

// Name is the kind of a stored reason, with the default applied (an
// empty reason is an approval).
func Name(reason string) Kind { return Of(reason).Kind }

// Allows reports whether an interrupt allows a choice.
func Allows(it *store.Interrupt, c Choice) bool {
	return slices.Contains(it.AllowedDecisions, string(c))
}

// Strings turns choices into their stored names.
func Strings(cs []Choice) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, string(c))
	}
	return out
}

// Answer is a human's answer to a pending decision, before it is stored
// (store.Decision is the record). The engine's Decision is this type.
type Answer struct {
	// Kind names the choice (approve, reject, edit, retry, skip); empty
	// means approve or reject as Approved says (edit with EditedArgs). It
	// must be one of the interrupt's allowed decisions: retry and skip are
	// those of an in-doubt call, which approve and reject do not answer.
	Kind Choice
	// Approved says the answer approves (Validate sets it from Kind).
	Approved bool
	// EditedArgs replaces the call's arguments (implies approval); for an
	// elicitation it is the answer to the question.
	EditedArgs json.RawMessage
	// Message is for the model (a rejection's or skip's reason).
	Message string
	// Via is the channel the server can prove: api, studio, agui or mcp.
	Via string
	// ClaimedVia is what the client says it is (such as cli), kept apart.
	ClaimedVia string
	// By is the deciding key's name.
	By string
}

// StoredKind is the kind of an answer as its audit record keeps it
// (store.Decision.Kind): retry or skip (a verdict); approvals are told by
// approved and editedArgs.
func (a Answer) StoredKind() string {
	switch a.Kind {
	case tool.Retry, tool.Skip:
		return string(a.Kind)
	}
	return ""
}

// Record is the answer as stored, decided at the given time.
func (a Answer) Record(at time.Time) store.Decision {
	return store.Decision{Kind: a.StoredKind(), Approved: a.Approved, EditedArgs: a.EditedArgs, Message: a.Message,
		Via: a.Via, ClaimedVia: a.ClaimedVia, By: a.By, At: at}
}

// Same reports whether a repeats the decision already stored on it (an
// idempotent resume replaying it).
func Same(it *store.Interrupt, a Answer) bool {
	if it.Decision == nil || it.Decision.Approved != a.Approved || it.Decision.Kind != a.StoredKind() {
		return false
	}
	if len(a.EditedArgs) == 0 && len(it.Decision.EditedArgs) == 0 {
		return true
	}
	return jsonEqual(a.EditedArgs, it.Decision.EditedArgs)
}

// jsonEqual compares two JSON documents semantically (empty is {}).
func jsonEqual(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	p, err := jsondiff.CompareJSON(nonEmpty(a), nonEmpty(b))
	return err == nil && len(p) == 0
}

func nonEmpty(s json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(s)) == 0 {
		return json.RawMessage(`{}`)
	}
	return s
}

// Package tool defines what a tool is to the engine: a name, a JSON Schema
// for its arguments, an optional approval rule, and an Execute function. Tools
// come from TypeScript agent files (agent/tsload), from Go code, and from the
// built-ins (tool/builtin).
package tool

import (
	"context"
	"encoding/json"
	"time"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
)

// Decision names a kind of human decision on a paused call.
type Decision string

// The decisions a pause can allow.
const (
	Approve Decision = "approve"
	Reject  Decision = "reject"
	Edit    Decision = "edit"
	// Retry runs an in-doubt call again (with the same idempotency key).
	Retry Decision = "retry"
	// Skip does not run an in-doubt call again; the model is told its
	// outcome is unknown (or given the reviewer's message).
	Skip Decision = "skip"
)

// DefaultTimeout bounds one tool call unless the tool sets its own.
const DefaultTimeout = 60 * time.Second

// Tool is one callable tool.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object.
	Parameters json.RawMessage
	// Approval, when set, makes calls of the tool pause for a human decision
	// in a durable session.
	Approval *Approval
	// Timeout bounds a call; zero means DefaultTimeout.
	Timeout time.Duration
	// OncePerStep refuses a second call of the tool within one model step.
	OncePerStep bool
	// Idempotent says running a call twice has the effect of running it
	// once (given Call.IdempotencyKey). Such a call is run again after a
	// crash that left it without a result; any other call that started and
	// left no result is in doubt and waits for a human (retry or skip).
	Idempotent bool
	// MaxResultBytes caps the result the model gets (an MCP server's
	// maxResultBytes); zero means the agent's cap.
	MaxResultBytes int
	// Execute runs the tool. Arguments were validated against Parameters
	// before it is called. A returned error becomes a tool error the model
	// sees, carrying the error's message.
	Execute func(ctx context.Context, call Call) (Result, error)
}

// Approval says when and how a tool's calls wait for a human.
type Approval struct {
	// When decides per call; nil means every call needs approval.
	When func(ctx context.Context, args json.RawMessage) (bool, error)
	// Description renders the text a reviewer sees; nil means no description.
	Description func(ctx context.Context, args json.RawMessage) (string, error)
	// AllowedDecisions is a subset of approve, reject, edit; empty means
	// approve and reject.
	AllowedDecisions []Decision
	// ExpiresAfter is how long a pending approval waits before it expires
	// and is recorded as a rejection (decidedVia "expiry"); zero means the
	// server's default (STACKBONE_APPROVAL_TTL), which may be none.
	ExpiresAfter time.Duration
	// Approvals is how many approvals from distinct principals the call
	// needs before it runs (a quorum): one reject rejects it, an edit
	// resets the count. Zero or one means one.
	Approvals int
}

// Allowed returns the allowed decisions with the default applied.
func (a *Approval) Allowed() []Decision {
	if a == nil || len(a.AllowedDecisions) == 0 {
		return []Decision{Approve, Reject}
	}
	return a.AllowedDecisions
}

// Call is one invocation of a tool.
type Call struct {
	ThreadID   string
	ToolCallID string
	// IdempotencyKey is the same for every attempt of this call (a retry,
	// a run after a crash) and differs between calls, threads and tenants,
	// even when a model repeats a call id: pass it to a side effect's API
	// so a second attempt is recognised there.
	IdempotencyKey string
	// Agent is the name of the agent (or subagent) calling the tool.
	Agent string
	// User is the end user whose turn calls the tool (ctx.user): the one
	// an access token named; nil for a turn a key started.
	User *User
	Args json.RawMessage
	// State is the thread's shared state (a JSON object) before the call.
	State json.RawMessage
	// Ask, when set, asks a human a question during the call (an MCP
	// server's elicitation) and waits for the answer: a pending decision
	// with reason "elicitation", decided from Studio, the CLI or the HTTP
	// API. It is nil where no human can be asked (a turn without a
	// session). The wait is bounded by ctx (the tool's time limit).
	Ask func(ctx context.Context, q Question) (Answer, error)
	// UserID is the end user the turn is for, as the request's
	// x-stackbone-user header names them ("" when unknown).
	UserID string
	// Store is the tenant's long-term memory store (ctx.store in a
	// TypeScript tool); nil where the server has none.
	Store Memory
}

// Memory is the long-term memory store as a tool sees it: the items of the
// calling turn's tenant (ctx.store). Values are JSON objects; namespaces
// are paths of labels such as ["users", "u1"].
type Memory interface {
	// Put creates or replaces an item, embedding it for semantic search
	// when the server has an embedding model (see MemoryPut).
	Put(ctx context.Context, namespace []string, key string, value json.RawMessage, opts MemoryPut) (*store.MemoryItem, error)
	// Get returns an item, or nil when there is none (or it expired).
	Get(ctx context.Context, namespace []string, key string, refresh bool) (*store.MemoryItem, error)
	// Delete deletes an item (a missing one is not an error).
	Delete(ctx context.Context, namespace []string, key string) error
	// Search lists the items under a namespace prefix (see MemorySearch).
	Search(ctx context.Context, prefix []string, opts MemorySearch) ([]store.MemoryItem, error)
	// ListNamespaces lists the namespaces under a prefix, sorted.
	ListNamespaces(ctx context.Context, prefix []string, opts MemoryNamespaces) ([][]string, error)
}

// MemoryPut are the options of Memory.Put.
type MemoryPut struct {
	// TTL makes the item expire (0: never).
	TTL time.Duration
	// Index names the top-level fields whose text is embedded (nil: the
	// whole value); NoIndex stores no embedding (index: false).
	Index   []string
	NoIndex bool
}

// MemorySearch are the options of Memory.Search.
type MemorySearch struct {
	// Query orders the items by similarity to it when the server has an
	// embedding model, else keeps those whose value contains it
	// (case-insensitive), latest first.
	Query string
	// Filter keeps the items whose value has each top-level key with an
	// equal JSON value.
	Filter map[string]json.RawMessage
	// Limit (default 10) and Offset page the result.
	Limit, Offset int
	// Refresh renews the TTL of the items returned.
	Refresh bool
}

// MemoryNamespaces are the options of Memory.ListNamespaces.
type MemoryNamespaces struct {
	Suffix        []string
	MaxDepth      int
	Limit, Offset int
}

// User is an end user, as tools see them (ctx.user).
type User struct {
	// ID is the user's stable id (the token's sub).
	ID string `json:"id"`
	// Label is how people know the user (the token's email or name).
	Label string `json:"label"`
}

// Question is what a tool asks a human during its call.
type Question struct {
	// Message is shown to the human.
	Message string
	// Schema is the JSON Schema of the answer (an object).
	Schema json.RawMessage
}

// Answer is a human's answer to a Question: accepted with Content (valid
// against the question's schema), or declined with an optional Message.
type Answer struct {
	Accepted bool
	Content  json.RawMessage
	Message  string
}

// Result is what a tool returns.
type Result struct {
	// Content is the result as text (JSON for structured results).
	Content string
	// State is the whole new shared state when the tool changed it; nil
	// means unchanged.
	State json.RawMessage
	// Parts are images the result carries (an MCP tool's image content).
	// They reach models whose wire takes images in tool results
	// (Anthropic); Content should describe them for the others.
	Parts []message.Part
}

// TimeLimit returns the tool's effective time limit.
func (t *Tool) TimeLimit() time.Duration {
	if t.Timeout > 0 {
		return t.Timeout
	}
	return DefaultTimeout
}

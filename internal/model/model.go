// Package model is the seam between the engine and LLM providers. A Provider
// streams one model step as typed chunks; the engine assembles them.
package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
)

// Request is one model step.
type Request struct {
	// Model is the provider's own model name (the part after "provider/").
	Model    string
	System   string
	Messages []message.Message
	Tools    []ToolDef
	// ToolChoice is "", "auto", "none", "required", or a tool name.
	ToolChoice    string
	MaxTokens     int
	StopSequences []string
	Temperature   *float64
	// TopP is nucleus sampling (top_p); nil leaves the provider's default.
	TopP *float64
	// Seed asks for reproducible sampling where the provider supports it
	// (OpenAI-compatible only).
	Seed *int64
	// ReasoningEffort is "minimal", "low", "medium" or "high" ("" for the
	// provider's default): OpenAI's reasoning_effort, an Anthropic thinking
	// budget (see the anthropic package).
	ReasoningEffort string
	// ParallelToolCalls, when set, allows or forbids several tool calls in
	// one step.
	ParallelToolCalls *bool
	// ProviderOptions maps a provider name ("openai", "anthropic",
	// "ollama") to a JSON object whose fields are merged into that
	// provider's request body, overriding what it would send.
	ProviderOptions map[string]json.RawMessage
	// Timeouts bound each attempt of the call (zero fields: no bound).
	Timeouts Timeouts
	// Restartable says the caller shows nothing of the step before its
	// stream ends (it holds the chunks, or only keeps them): an attempt that
	// fails in a way worth retrying after it yielded chunks (a cut stream,
	// an idle or call timeout, an error event) is then retried too, after a
	// Restart chunk. Without it only a failure before the first chunk is
	// retried.
	Restartable bool
	// ResponseFormat, when set, asks for a JSON answer. It is sent on every
	// step of a turn, as OpenAI applies it to every call; the model may still
	// call tools.
	ResponseFormat *ResponseFormat
}

// Reasoning efforts (Request.ReasoningEffort).
var ReasoningEfforts = []string{"minimal", "low", "medium", "high"}

// Settings are an agent's sampling settings (an agent file's
// modelSettings); zero fields leave the provider's defaults.
type Settings struct {
	Temperature       *float64                   `json:"temperature,omitempty"`
	TopP              *float64                   `json:"topP,omitempty"`
	MaxTokens         int                        `json:"maxTokens,omitempty"`
	Stop              []string                   `json:"stop,omitempty"`
	Seed              *int64                     `json:"seed,omitempty"`
	ReasoningEffort   string                     `json:"reasoningEffort,omitempty"`
	ParallelToolCalls *bool                      `json:"parallelToolCalls,omitempty"`
	ProviderOptions   map[string]json.RawMessage `json:"providerOptions,omitempty"`
}

// Or returns s with each unset field taken from d (a subagent's settings
// over its parent's).
func (s Settings) Or(d Settings) Settings {
	if s.Temperature == nil {
		s.Temperature = d.Temperature
	}
	if s.TopP == nil {
		s.TopP = d.TopP
	}
	if s.MaxTokens == 0 {
		s.MaxTokens = d.MaxTokens
	}
	if s.Stop == nil {
		s.Stop = d.Stop
	}
	if s.Seed == nil {
		s.Seed = d.Seed
	}
	if s.ReasoningEffort == "" {
		s.ReasoningEffort = d.ReasoningEffort
	}
	if s.ParallelToolCalls == nil {
		s.ParallelToolCalls = d.ParallelToolCalls
	}
	if s.ProviderOptions == nil {
		s.ProviderOptions = d.ProviderOptions
	}
	return s
}

// Apply sets req's sampling fields from s.
func (s Settings) Apply(req *Request) {
	req.Temperature, req.TopP, req.MaxTokens, req.StopSequences = s.Temperature, s.TopP, s.MaxTokens, s.Stop
	req.Seed, req.ReasoningEffort, req.ParallelToolCalls, req.ProviderOptions = s.Seed, s.ReasoningEffort, s.ParallelToolCalls, s.ProviderOptions
}

// Response format types (OpenAI's response_format.type; "text" is no
// format at all and never reaches a provider).
const (
	FormatJSONObject = "json_object"
	FormatJSONSchema = "json_schema"
)

// ResponseFormat asks the model to answer with JSON: any JSON object
// (FormatJSONObject) or a value matching Schema (FormatJSONSchema).
type ResponseFormat struct {
	Type string `json:"type"`
	// Name, Description, Schema and Strict describe a FormatJSONSchema.
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      bool            `json:"strict,omitempty"`
}

// Known reports whether f is one of the two formats (json_object,
// json_schema): what a provider that honours every format answers from
// HonoursFormat.
func (f ResponseFormat) Known() bool {
	return f.Type == FormatJSONObject || f.Type == FormatJSONSchema
}

// FormatHonourer is implemented by a provider that can honour response
// formats. The engine refuses (400) a format for an agent whose provider
// does not implement it or does not honour that format, before anything is
// stored: a format is never dropped silently.
type FormatHonourer interface {
	// HonoursFormat reports whether the provider can answer in f.
	HonoursFormat(f ResponseFormat) bool
}

// ToolDef is a tool as the model sees it.
type ToolDef struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments. Its bytes are never
	// modified once the definition is built (a provider may keep their
	// encoded form by their identity); a changed schema is a new slice.
	Parameters json.RawMessage
}

// ChunkType says what a Chunk carries.
type ChunkType int

// Chunk types, in the order a step produces them.
const (
	// Text carries a text fragment in Text.
	Text ChunkType = iota + 1
	// ToolCallStart opens tool call Index with ID and Name.
	ToolCallStart
	// ToolCallArgs carries an arguments fragment of call Index in Text.
	ToolCallArgs
	// Finish ends the step with Stop and Usage.
	Finish
	// InputTokens reports the step's input tokens in Usage before any
	// output, from a provider that knows them at the start (Anthropic's
	// message_start). It comes at most once, right before the step's first
	// other chunk; Finish still carries the step's whole usage.
	InputTokens
	// Reasoning carries a finished block of the model's reasoning in
	// Reasoning, to be stored with the assistant message, shown, and sent
	// back with it where the provider needs it (Anthropic's extended
	// thinking; an OpenAI-compatible server's reasoning_content, as one
	// message.ReasoningText block). A provider yields it together
	// with the step's first visible chunk or its Finish, so that a failure
	// during the reasoning can still be retried.
	Reasoning
	// Alive says the upstream is still working on the step with nothing to
	// show yet (Anthropic's thinking deltas and pings): it restarts the idle
	// timeout (Timeouts.Idle). The retry policy consumes it: it never
	// reaches the caller and does not count as output.
	Alive
	// Restart says the attempt that yielded the step's chunks so far failed
	// and the step starts again from its first chunk: the caller drops
	// every chunk it got (text, calls, reasoning, input tokens). Only a
	// Request.Restartable call gets it.
	Restart
)

// Chunk is one piece of a streamed model step.
type Chunk struct {
	Type  ChunkType
	Text  string
	Index int
	ID    string
	Name  string
	Stop  event.StopReason
	Usage event.Usage
	// Reasoning is the block of a Reasoning chunk.
	Reasoning *message.Reasoning
	// Call, on a Finish chunk, describes the call that answered (nil when
	// the provider tells nothing of it).
	Call *CallInfo
}

// CallInfo is what a Finish chunk tells of the model call that produced
// the step: who answered, how it finished and how many attempts it took.
// Providers fill what their upstream reports; RetryPolicy.Stream adds the
// attempts, Fallback the candidate that answered.
type CallInfo struct {
	// Ref is the "provider/model" reference of the candidate that answered
	// (set by Fallback; empty: the agent's own model).
	Ref string
	// ResponseID and ResponseModel are the upstream's id of the answer and
	// the model it says answered.
	ResponseID    string
	ResponseModel string
	// FinishReason is the upstream's own finish reason ("stop",
	// "tool_calls", "end_turn", …).
	FinishReason string
	// Attempts is how many attempts the call took (0 or 1: the first).
	Attempts int
	// Retries are the errors of the attempts that failed before the last.
	Retries []string
}

// Provider calls one model.
type Provider interface {
	// Stream runs one step. The sequence ends after a Finish chunk or an error.
	Stream(ctx context.Context, req Request) iter.Seq2[Chunk, error]
}

// Error is an upstream failure that survived the provider's retries.
type Error struct {
	// Status is the upstream HTTP status (0 for a connection failure).
	Status int
	// Message is safe to show to the client.
	Message string
	// RetryAfter is how long the upstream asked to wait before a retry
	// (its retry-after-ms or retry-after header; 0: none).
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("model upstream unreachable: %s", e.Message)
	}
	return fmt.Sprintf("model upstream returned %d: %s", e.Status, e.Message)
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// ErrUnknownProvider is returned for a model reference whose provider is not known.
var ErrUnknownProvider = errors.New("unknown model provider")

// Resolver turns an agent's "provider/model" reference into a Provider and
// the provider's model name. agentDir is the folder of the agent file.
type Resolver interface {
	Resolve(ref, agentDir string) (Provider, string, error)
}

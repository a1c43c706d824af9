// Package message holds the canonical conversation messages that every wire
// decodes into, the engine works on, and the store persists as versioned JSON.
package message

import (
	"encoding/json"
	"unicode/utf8"
)

// Role is who wrote a message.
type Role string

// The roles a stored message can have. Wire roles such as OpenAI's
// "developer" are mapped to System by the decoders.
const (
	System    Role = "system"
	User      Role = "user"
	Assistant Role = "assistant"
	Tool      Role = "tool"
)

// Message is one turn of a conversation. The zero values of optional fields
// are omitted from JSON so stored rows stay small.
type Message struct {
	ID   string `json:"id"`
	Role Role   `json:"role"`
	// Content is the plain text of the message (for a tool message: the
	// tool's result as text, usually JSON).
	Content string `json:"content,omitempty"`
	// Parts holds non-text content (images) of a user message, or of a
	// tool result.
	Parts []Part `json:"parts,omitempty"`
	// ToolCalls are the calls an assistant message makes.
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// ToolCallID links a tool message to the call it answers.
	ToolCallID string `json:"toolCallId,omitempty"`
	// ToolName is the tool a tool message answers (handy for providers that
	// need it and for display).
	ToolName string `json:"toolName,omitempty"`
	// IsError marks a tool message whose tool failed or was rejected.
	IsError bool `json:"isError,omitempty"`
	// Subagent names the subagent that produced the message, if any.
	Subagent string `json:"subagent,omitempty"`
	// TaskCallID is the `task` call whose subagent conversation holds the
	// message; empty for the agent's own conversation.
	TaskCallID string `json:"taskCallId,omitempty"`
	// Summarizes marks a summary message (role system, written by the
	// engine under the summarize context policy): the id of the last
	// message of the thread the summary covers. Clients are not shown it
	// as a turn of the conversation.
	Summarizes string `json:"summarizes,omitempty"`
	// Reasoning holds the blocks of reasoning that came with an assistant
	// message: Anthropic's extended thinking (a thinking block with its
	// signature, or a redacted one), stored as the provider sent them since
	// the provider needs them back; or the plain-text reasoning of an
	// OpenAI-compatible server (ReasoningText), bounded by
	// MaxReasoningText. Clients are shown the blocks' text (Shown).
	Reasoning []Reasoning `json:"reasoning,omitempty"`
	// Cancelled marks an answer cut short by a cancel (a Stop): its text is
	// what had streamed to the client by then.
	Cancelled bool `json:"cancelled,omitempty"`
	// Remote marks a message of a delegation to a remote A2A agent (a
	// `task` call's conversation with an a2aAgents entry): what was sent
	// to it or heard from it, and the remote ids that let a later call
	// continue its conversation or re-attach to its task.
	Remote *Remote `json:"remote,omitempty"`
	// Seq is the message's sequence number in its thread, as the store read
	// it (0 for a message not read from a thread); it is not part of the
	// stored message, and a branch point names a message by it.
	Seq int64 `json:"-"`
}

// Remote is what a delegation to a remote A2A agent recorded in one of its
// messages.
type Remote struct {
	// Agent is the a2aAgents name.
	Agent string `json:"agent"`
	// ContextID and TaskID are the remote's conversation and task.
	ContextID string `json:"contextId,omitempty"`
	TaskID    string `json:"taskId,omitempty"`
	// MessageID is the A2A messageId of a message sent (a user message of
	// the delegation, recorded before it is sent).
	MessageID string `json:"messageId,omitempty"`
	// State is the remote task's state as last heard (TASK_STATE_*).
	State string `json:"state,omitempty"`
	// Asks pair the pending decisions this thread holds for the remote
	// task's INPUT_REQUIRED with the remote's own decision ids.
	Asks []RemoteAsk `json:"asks,omitempty"`
	// Answers marks a message that answered the remote's Asks.
	Answers bool `json:"answers,omitempty"`
	// InDoubt is the in-doubt decision raised for a send that may or may
	// not have reached the remote before the server stopped.
	InDoubt string `json:"inDoubt,omitempty"`
}

// RemoteAsk pairs a local pending decision with the remote's.
type RemoteAsk struct {
	// ID is the local interrupt's id; RemoteID the remote's decision id
	// ("" for a plain question).
	ID       string `json:"id"`
	RemoteID string `json:"remoteId,omitempty"`
}

// The types of a Reasoning block.
const (
	// ReasoningThinking is an Anthropic thinking block (Text and
	// Signature), sent back verbatim.
	ReasoningThinking = "thinking"
	// ReasoningRedacted is an Anthropic redacted_thinking block (Data):
	// sent back, never shown.
	ReasoningRedacted = "redacted_thinking"
	// ReasoningText is the plain-text reasoning an OpenAI-compatible server
	// streams as reasoning_content (DeepSeek, vLLM, LM Studio, Ollama) or
	// reasoning (OpenRouter): Text only, cut at MaxReasoningText.
	ReasoningText = "text"
)

// MaxReasoningText bounds the text kept of a ReasoningText block (64 KiB):
// longer reasoning is cut on a rune boundary and ends with
// ReasoningTruncated. Signed thinking blocks are never cut (their
// signature covers their text).
const MaxReasoningText = 64 << 10

// ReasoningTruncated ends the text of a reasoning block that was cut.
const ReasoningTruncated = "\n[reasoning truncated]"

// Reasoning is one block of a model's reasoning, kept so that it can be
// shown again and, where the provider needs it, sent back to the provider
// that wrote it.
type Reasoning struct {
	// Type is ReasoningThinking (Text and Signature), ReasoningRedacted
	// (Data) or ReasoningText (Text).
	Type      string `json:"type"`
	Text      string `json:"text,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
	// AfterCalls is how many of the message's tool calls came before the
	// block (interleaved thinking puts blocks between calls), so it goes
	// back in its place.
	AfterCalls int `json:"afterCalls,omitempty"`
	// Source names the upstream that wrote a ReasoningText block (the
	// provider's name: "deepseek", "ollama"): it goes back to that
	// upstream only, never to another one a fallback turns to.
	Source string `json:"source,omitempty"`
}

// Shown reports whether the block has text a client is shown (a thinking
// or plain-text block with text; never a redacted one).
func (r Reasoning) Shown() bool {
	return r.Text != "" && (r.Type == ReasoningThinking || r.Type == ReasoningText)
}

// TruncateReasoning returns text cut to MaxReasoningText bytes (on a rune
// boundary, the marker included) with ReasoningTruncated at its end, or
// text itself when it fits.
func TruncateReasoning(text string) string {
	if len(text) <= MaxReasoningText {
		return text
	}
	n := MaxReasoningText - len(ReasoningTruncated)
	for n > 0 && !utf8.RuneStart(text[n]) {
		n--
	}
	return text[:n] + ReasoningTruncated
}

// ToolCall is a call of a tool by the model.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the JSON text of the arguments, as the model wrote it.
	Arguments string `json:"arguments"`
	// Client marks a call of a tool the client declared (an OpenAI/Anthropic
	// request's tools, an AG-UI frontend tool): the server never runs it, the
	// client answers it with a tool message.
	Client bool `json:"client,omitempty"`
}

// Part is a non-text piece of user content.
type Part struct {
	// Type is "image" (the only kind carried today).
	Type string `json:"type"`
	// MediaType is the MIME type, e.g. "image/png".
	MediaType string `json:"mediaType,omitempty"`
	// Data is base64 data, when the image was sent inline.
	Data string `json:"data,omitempty"`
	// URL is where the image lives, when it was sent by reference.
	URL string `json:"url,omitempty"`
}

// ArgsJSON returns the call's arguments as raw JSON, "{}" when empty.
func (c ToolCall) ArgsJSON() json.RawMessage {
	if c.Arguments == "" {
		return json.RawMessage("{}")
	}
	return json.RawMessage(c.Arguments)
}

// PendingCalls returns the tool calls of the last assistant message in msgs
// that have no tool message answering them yet, in call order.
func PendingCalls(msgs []Message) []ToolCall {
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == Assistant {
			last = i
			break
		}
	}
	if last < 0 || len(msgs[last].ToolCalls) == 0 {
		return nil
	}
	answered := map[string]bool{}
	for _, m := range msgs[last+1:] {
		if m.Role == Tool {
			answered[m.ToolCallID] = true
		}
	}
	var out []ToolCall
	for _, c := range msgs[last].ToolCalls {
		if !answered[c.ID] {
			out = append(out, c)
		}
	}
	return out
}

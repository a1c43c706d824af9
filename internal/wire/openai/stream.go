package openai

import (
	"encoding/json"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/wire"
	"github.com/stackbone/stackbone/internal/wire/sse"
)

type chunk struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Choices []chunkChoice   `json:"choices"`
	Usage   json.RawMessage `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int     `json:"index"`
	Delta        delta   `json:"delta"`
	Logprobs     *string `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

type delta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
	// ReasoningContent is a block of the model's reasoning, as
	// OpenAI-compatible servers stream it.
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

var nullUsage = json.RawMessage("null")

// Stream encodes a run's events as chat.completion.chunk frames: a role chunk
// first, reasoning_content and content deltas, the calls the turn stopped on, exactly one chunk
// with a finish_reason, a usage chunk only when asked for, then [DONE].
type Stream struct {
	out          sse.Frames
	id, model    string
	created      int64
	includeUsage bool
	j            wire.TextJoiner
	reasoned     bool // a reasoning_content delta was sent
	done         bool
}

// NewStream starts an encoder.
func NewStream(out sse.Frames, id, model string, created int64, includeUsage bool) *Stream {
	return &Stream{out: out, id: id, model: model, created: created, includeUsage: includeUsage}
}

func (s *Stream) chunk(d delta, finish *string) error {
	c := chunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model,
		Choices: []chunkChoice{{Index: 0, Delta: d, FinishReason: finish}}}
	if s.includeUsage {
		c.Usage = nullUsage
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return s.out.Data(b)
}

// Write encodes one event.
func (s *Stream) Write(e event.Event) error {
	if s.done {
		return nil
	}
	switch e.Type {
	case event.RunStarted:
		empty := ""
		return s.chunk(delta{Role: "assistant", Content: &empty}, nil)
	case event.TextDelta:
		if e.SubagentRunID != "" {
			return nil
		}
		p := s.j.Piece(e)
		return s.chunk(delta{Content: &p}, nil)
	case event.Reasoning:
		if e.SubagentRunID != "" || e.Content == "" {
			return nil
		}
		r := e.Content
		if s.reasoned {
			r = reasoningSep + r
		}
		s.reasoned = true
		return s.chunk(delta{ReasoningContent: r}, nil)
	case event.RunFinished:
		if note, ok := event.WaitingNote(e.Outcome); ok {
			p := s.j.Piece(event.Event{MessageID: event.WaitingNoteMessageID, Delta: note})
			if err := s.chunk(delta{Content: &p}, nil); err != nil {
				return err
			}
		}
		s.done = true
		if e.Outcome != nil && len(e.Outcome.PendingCalls) > 0 {
			if err := s.chunk(delta{ToolCalls: toolCalls(e.Outcome.PendingCalls, true)}, nil); err != nil {
				return err
			}
		}
		fr := finishReason(e.Outcome)
		if err := s.chunk(delta{}, &fr); err != nil {
			return err
		}
		if s.includeUsage {
			u, _ := json.Marshal(usageOf(e.Usage))
			b, _ := json.Marshal(chunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model, Choices: []chunkChoice{}, Usage: u})
			if err := s.out.Data(b); err != nil {
				return err
			}
		}
		return s.out.Data([]byte("[DONE]"))
	case event.RunError:
		s.done = true
		return s.Error(apierror.OfRunError(e))
	}
	return nil
}

// Error writes an in-stream error frame (after the 200 was sent).
func (s *Stream) Error(e *apierror.Error) error {
	s.done = true
	obj := ErrorOf(e).Error
	if obj.Type == "invalid_request_error" && e.Status >= 500 {
		obj.Type = "server_error"
	}
	b, err := json.Marshal(map[string]any{"error": map[string]any{"message": obj.Message, "type": obj.Type, "param": nil, "code": obj.Code}})
	if err != nil {
		return err
	}
	return s.out.Data(b)
}

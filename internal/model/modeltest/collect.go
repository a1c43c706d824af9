package modeltest

import (
	"fmt"
	"iter"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
)

// Step is a provider stream assembled, for assertions.
type Step struct {
	Text      string
	ToolCalls []message.ToolCall
	Stop      event.StopReason
	Usage     event.Usage
	// Reasoning holds the Reasoning chunks' blocks, in order.
	Reasoning []message.Reasoning
	// EarlyInputTokens is what an InputTokens chunk reported (0: none).
	EarlyInputTokens int
	// Finished is true when a Finish chunk arrived.
	Finished bool
	// Chunks counts chunks by type (since the last Restart).
	Chunks map[model.ChunkType]int
	// Restarts counts the Restart chunks: the step started again, and
	// the other fields hold only what came after the last one.
	Restarts int
}

// Collect drains a provider stream and assembles it. It returns the first
// error of the stream (with what arrived before it), or an error when the
// chunks break the Provider contract (args for a call never started,
// anything after Finish).
func Collect(seq iter.Seq2[model.Chunk, error]) (Step, error) {
	s := Step{Chunks: map[model.ChunkType]int{}}
	for c, err := range seq {
		if err != nil {
			return s, err
		}
		if s.Finished {
			return s, fmt.Errorf("chunk %v after Finish", c.Type)
		}
		if c.Type == model.Restart {
			// The provider starts the step again: what came so far is dropped.
			restarts := s.Restarts + 1
			s = Step{Chunks: map[model.ChunkType]int{}, Restarts: restarts}
			continue
		}
		s.Chunks[c.Type]++
		switch c.Type {
		case model.Text:
			s.Text += c.Text
		case model.ToolCallStart:
			if c.Index != len(s.ToolCalls) {
				return s, fmt.Errorf("tool call %d started, want index %d", c.Index, len(s.ToolCalls))
			}
			s.ToolCalls = append(s.ToolCalls, message.ToolCall{ID: c.ID, Name: c.Name})
		case model.ToolCallArgs:
			if c.Index < 0 || c.Index >= len(s.ToolCalls) {
				return s, fmt.Errorf("arguments for tool call %d that never started", c.Index)
			}
			s.ToolCalls[c.Index].Arguments += c.Text
		case model.InputTokens:
			if len(s.Chunks) > 1 {
				return s, fmt.Errorf("input tokens reported after the step's output")
			}
			s.EarlyInputTokens = c.Usage.InputTokens
		case model.Reasoning:
			if c.Reasoning == nil {
				return s, fmt.Errorf("a Reasoning chunk without its block")
			}
			s.Reasoning = append(s.Reasoning, *c.Reasoning)
		case model.Finish:
			s.Finished, s.Stop, s.Usage = true, c.Stop, c.Usage
		default:
			return s, fmt.Errorf("unknown chunk type %d", c.Type)
		}
	}
	if !s.Finished {
		return s, fmt.Errorf("stream ended without Finish")
	}
	return s, nil
}

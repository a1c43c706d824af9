package openai

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/stackbone/stackbone/internal/eventsource"
	"github.com/stackbone/stackbone/internal/message"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/internal/upstream"
)

// chunk is the part of a ChatCompletionChunk the provider reads.
// It is decoded by decodeChunk.
type chunk struct {
	ID      string   `json:"id"`
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   *usage   `json:"usage"`
	// Error is set (even to null) only on an in-stream error event.
	Error json.RawMessage `json:"error"`
}

type usage struct {
	PromptTokens      int           `json:"prompt_tokens"`
	CompletionTokens  int           `json:"completion_tokens"`
	PromptDetails     *tokenDetails `json:"prompt_tokens_details"`
	CompletionDetails *tokenDetails `json:"completion_tokens_details"`
}

// tokenDetails is usage's prompt_tokens_details (cached_tokens) and
// completion_tokens_details (reasoning_tokens).
type tokenDetails struct {
	CachedTokens    int `json:"cached_tokens"`
	ReasoningTokens int `json:"reasoning_tokens"`
}

type choice struct {
	Index int `json:"index"`
	Delta struct {
		Content string `json:"content"`
		// ReasoningContent (DeepSeek, vLLM, LM Studio, Ollama) and
		// Reasoning (OpenRouter, newer vLLM) carry the model's reasoning.
		ReasoningContent string          `json:"reasoning_content"`
		Reasoning        string          `json:"reasoning"`
		ToolCalls        []toolCallDelta `json:"tool_calls"`
	} `json:"delta"`
	FinishReason string `json:"finish_reason"`
}

type toolCallDelta struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// read streams the events of a 200 answer as chunks.
func (p *Provider) read(ctx context.Context, body io.Reader, requestID string, yield func(model.Chunk, error) bool) {
	r := eventsource.NewReader(body, upstream.MaxEvent)
	defer r.Release()

	type open struct {
		idx int
		id  string
	}
	var (
		byWire = map[int]*open{}
		n      int // calls started
		finish string
		usage  event.Usage
		call   model.CallInfo
		// thought is the reasoning streamed and not yet yielded: it goes
		// out as one Reasoning block with the first visible chunk or the
		// Finish (so a failure while the model only reasons is retried).
		thought strings.Builder
		cut     bool // thought reached message.MaxReasoningText
	)
	fail := func(err error) { yield(model.Chunk{}, upstream.MapError(ctx, p.cfg.Name, err, upstream.StatusOf)) }
	send := func(c model.Chunk) bool {
		if thought.Len() > 0 {
			text := thought.String()
			if cut {
				text = message.TruncateReasoning(text)
			}
			thought.Reset()
			cut = false
			r := message.Reasoning{Type: message.ReasoningText, Text: text, AfterCalls: n, Source: p.cfg.Name}
			if c.Type == model.ToolCallStart {
				r.AfterCalls = c.Index
			}
			if !yield(model.Chunk{Type: model.Reasoning, Reasoning: &r}, nil) {
				return false
			}
		}
		return yield(c, nil)
	}
	for {
		_, data, err := r.Next()
		if err == io.EOF {
			break // the SDKs also accept a stream without [DONE]
		}
		if err != nil {
			fail(err)
			return
		}
		if bytes.HasPrefix(data, []byte("[DONE]")) {
			// The chunked terminator may still be on its way: read it, so
			// the connection goes back to the pool before the caller
			// works on the answer.
			r.Drain()
			break
		}
		var c chunk
		if err := decodeChunk(data, &c); err != nil {
			fail(err)
			return
		}
		if c.Error != nil {
			fail(upstream.StreamError(c.Error, requestID))
			return
		}
		if call.ResponseID == "" && c.ID != "" {
			call.ResponseID = c.ID
		}
		if call.ResponseModel == "" && c.Model != "" {
			call.ResponseModel = c.Model
		}
		if u := c.Usage; u != nil && (u.PromptTokens > 0 || u.CompletionTokens > 0) {
			usage = event.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
			if u.PromptDetails != nil {
				usage.CachedInputTokens = u.PromptDetails.CachedTokens
			}
			if u.CompletionDetails != nil {
				usage.ReasoningTokens = u.CompletionDetails.ReasoningTokens
			}
		}
		for i := range c.Choices {
			ch := &c.Choices[i]
			if ch.Index != 0 {
				continue
			}
			d := &ch.Delta
			if r := cmp.Or(d.ReasoningContent, d.Reasoning); r != "" {
				// Some servers send the same text in both fields: one is read.
				if !cut {
					thought.WriteString(r)
					cut = thought.Len() > message.MaxReasoningText
				}
				// Reasoning shows nothing until it ends, however long it
				// takes: the step is alive all the same.
				if !yield(model.Chunk{Type: model.Alive}, nil) {
					return
				}
			}
			if d.Content != "" && !send(model.Chunk{Type: model.Text, Text: d.Content}) {
				return
			}
			for _, tc := range d.ToolCalls {
				// A call starts with the first delta of its index, or when a
				// server that reuses or omits the index sends a new id.
				o := byWire[tc.Index]
				if o == nil || (tc.ID != "" && tc.ID != o.id) {
					id := tc.ID
					if id == "" { // some compatible servers send none
						id = "call_" + rand.Text()[:16]
					}
					o = &open{idx: n, id: id}
					byWire[tc.Index] = o
					n++
					if !send(model.Chunk{Type: model.ToolCallStart, Index: o.idx, ID: id, Name: tc.Function.Name}) {
						return
					}
				}
				if a := tc.Function.Arguments; a != "" {
					if !yield(model.Chunk{Type: model.ToolCallArgs, Index: o.idx, Text: a}, nil) {
						return
					}
				}
			}
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	if finish == "" {
		yield(model.Chunk{}, &model.Error{Status: http.StatusBadGateway, Message: p.cfg.Name + ": stream ended without a finish reason"})
		return
	}
	call.FinishReason = finish
	send(model.Chunk{Type: model.Finish, Stop: stopReason(finish, n > 0), Usage: usage, Call: &call})
}

func stopReason(finish string, hadCalls bool) event.StopReason {
	switch {
	case hadCalls, finish == "tool_calls", finish == "function_call":
		return event.StopToolCalls
	case finish == "length":
		return event.StopLength
	default:
		return event.StopEnd
	}
}

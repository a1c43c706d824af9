package modeltest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/model/script"
)

// created is the fixed "created" time of OpenAI answers (deterministic).
const created = 1700000000

// --- OpenAI Chat Completions (wire.md §1.2, §1.3) ---

func openAIUsage(u event.Usage) map[string]any {
	return map[string]any{
		"prompt_tokens":     u.InputTokens,
		"completion_tokens": u.OutputTokens,
		"total_tokens":      u.InputTokens + u.OutputTokens,
	}
}

func openAICompletion(id, model string, rep script.Reply) map[string]any {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if rep.Text != "" {
		msg["content"] = rep.Text
	}
	if rep.Reasoning != "" {
		msg["reasoning_content"] = rep.Reasoning
	}
	if len(rep.ToolCalls) > 0 {
		var calls []map[string]any
		for _, tc := range rep.ToolCalls {
			calls = append(calls, map[string]any{
				"id": tc.ID, "type": "function",
				"function": map[string]any{"name": tc.Name, "arguments": tc.Arguments},
			})
		}
		msg["tool_calls"] = calls
	}
	return map[string]any{
		"id": id, "object": "chat.completion", "created": created, "model": model,
		"choices": []map[string]any{{
			"index": 0, "message": msg, "logprobs": nil, "finish_reason": string(rep.Stop),
		}},
		"usage":              openAIUsage(rep.Usage),
		"system_fingerprint": nil,
	}
}

// streamOpenAI writes data-only chunks with one id, the role first, tool
// call id/type/name only in the first delta of each index, exactly one
// finish_reason, the usage chunk (choices: []) only when asked, then [DONE].
// There is never an "error" key in a chunk.
func streamOpenAI(ctx context.Context, s *sse, id, model string, rep script.Reply, includeUsage bool) {
	first := true
	chunk := func(delta map[string]any, finish any) bool {
		if !first && !pause(ctx, rep.ChunkDelay) {
			return false
		}
		c := map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []map[string]any{{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
		}
		if includeUsage {
			c["usage"] = nil
		}
		if first || finish != nil {
			first = false
			return s.event(ctx, "", c)
		}
		return s.piece(ctx, "", c)
	}
	if !chunk(map[string]any{"role": "assistant", "content": ""}, nil) {
		return
	}
	// The reasoning first, as DeepSeek and vLLM stream it: content null.
	for _, t := range rep.ReasoningChunks {
		if !chunk(map[string]any{"content": nil, "reasoning_content": t}, nil) {
			return
		}
	}
	for _, t := range rep.Chunks {
		if !chunk(map[string]any{"content": t}, nil) {
			return
		}
	}
	for i, tc := range rep.ToolCalls {
		start := map[string]any{"tool_calls": []map[string]any{{
			"index": i, "id": tc.ID, "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": ""},
		}}}
		if !chunk(start, nil) {
			return
		}
		for _, frag := range script.SplitArgs(tc.Arguments) {
			d := map[string]any{"tool_calls": []map[string]any{{"index": i, "function": map[string]any{"arguments": frag}}}}
			if !chunk(d, nil) {
				return
			}
		}
	}
	if !chunk(map[string]any{}, string(rep.Stop)) {
		return
	}
	if includeUsage {
		u := map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{}, "usage": openAIUsage(rep.Usage),
		}
		if !s.send("", u) {
			return
		}
	}
	s.send("", "[DONE]")
}

// --- Anthropic Messages (wire.md §3.3, §3.4) ---

func anthropicStop(r event.StopReason) string {
	switch r {
	case event.StopToolCalls:
		return "tool_use"
	case event.StopLength:
		return "max_tokens"
	default:
		return "end_turn"
	}
}

// ThinkingText is the thinking the mock Anthropic upstream writes first
// when a request turns extended thinking on; ThinkingSignature(ThinkingText)
// is its signature.
const ThinkingText = "Let me think about what was asked."

// ThinkingSignature is the signature the mock gives a thinking block's text
// (the API's is opaque; the mock checks it is sent back unchanged).
func ThinkingSignature(text string) string {
	sum := sha256.Sum256([]byte("mock thinking: " + text))
	return "sig_" + hex.EncodeToString(sum[:12])
}

func anthropicMessage(id, model string, rep script.Reply, thinking bool) map[string]any {
	content := []map[string]any{}
	if thinking {
		content = append(content, map[string]any{"type": "thinking", "thinking": ThinkingText, "signature": ThinkingSignature(ThinkingText)})
	}
	if rep.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": rep.Text})
	}
	for _, tc := range rep.ToolCalls {
		content = append(content, map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": json.RawMessage(tc.Arguments)})
	}
	return map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model,
		"content": content, "stop_reason": anthropicStop(rep.Stop), "stop_sequence": nil,
		"usage": map[string]any{
			"input_tokens": rep.Usage.InputTokens, "output_tokens": rep.Usage.OutputTokens,
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
		},
	}
}

// streamAnthropic writes named events: message_start, blocks with gapless
// indexes (tool_use starting with input {}), message_delta with usage,
// message_stop.
func streamAnthropic(ctx context.Context, s *sse, id, model string, rep script.Reply, thinking bool) {
	first := true
	ev := func(name string, data map[string]any) bool {
		if !first && name != "ping" && !pause(ctx, rep.ChunkDelay) {
			return false
		}
		first = false
		data["type"] = name
		// A piece of the answer: text, a tool call's start or arguments
		// (thinking is not shown until it ends).
		d, _ := data["delta"].(map[string]any)
		cb, _ := data["content_block"].(map[string]any)
		if (d != nil && (d["type"] == "text_delta" || d["type"] == "input_json_delta")) || (cb != nil && cb["type"] == "tool_use") {
			return s.piece(ctx, name, data)
		}
		return s.event(ctx, name, data)
	}
	start := map[string]any{"message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": rep.Usage.InputTokens, "output_tokens": 1},
	}}
	if !ev("message_start", start) {
		return
	}
	idx := 0
	if thinking {
		// As the API streams it: the text in thinking_delta events, then
		// the signature in a signature_delta.
		half := len(ThinkingText) / 2
		if !ev("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}}) ||
			!ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "thinking_delta", "thinking": ThinkingText[:half]}}) ||
			!ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "thinking_delta", "thinking": ThinkingText[half:]}}) ||
			!ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "signature_delta", "signature": ThinkingSignature(ThinkingText)}}) ||
			!ev("content_block_stop", map[string]any{"index": idx}) {
			return
		}
		idx++
	}
	if rep.Text != "" {
		if !ev("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "text", "text": ""}}) ||
			!ev("ping", map[string]any{}) {
			return
		}
		for _, t := range rep.Chunks {
			if !ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "text_delta", "text": t}}) {
				return
			}
		}
		if !ev("content_block_stop", map[string]any{"index": idx}) {
			return
		}
		idx++
	}
	for _, tc := range rep.ToolCalls {
		block := map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": map[string]any{}}
		if !ev("content_block_start", map[string]any{"index": idx, "content_block": block}) {
			return
		}
		frags := append([]string{""}, script.SplitArgs(tc.Arguments)...)
		for _, f := range frags {
			if !ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": f}}) {
				return
			}
		}
		if !ev("content_block_stop", map[string]any{"index": idx}) {
			return
		}
		idx++
	}
	delta := map[string]any{
		"delta": map[string]any{"stop_reason": anthropicStop(rep.Stop), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": rep.Usage.OutputTokens},
	}
	if !ev("message_delta", delta) {
		return
	}
	ev("message_stop", map[string]any{})
}

package openai

import (
	"encoding/json"

	"github.com/stackbone/stackbone/internal/model/internal/upstream"
)

// decodeChunk decodes one streamed chunk into c as json.Unmarshal would.
// The chunks OpenAI and compatible servers send are decoded by hand
// (upstream.JSONScanner); anything the hand decoder does not expect
// (malformed JSON, a key in other case or with escapes, a value of another
// type, invalid UTF-8) goes to json.Unmarshal, which decodes it or reports
// the error. FuzzDecodeChunk holds the two to the same results.
func decodeChunk(data []byte, c *chunk) error {
	*c = chunk{}
	var d upstream.JSONScanner
	d.Reset(data)
	if readChunk(&d, c) {
		return nil
	}
	*c = chunk{}
	return json.Unmarshal(data, c)
}

func readChunk(d *upstream.JSONScanner, c *chunk) bool {
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "id":
			return d.Str(&c.ID)
		case "model":
			return d.Str(&c.Model)
		case "choices":
			if c.Choices != nil {
				return false // a repeated key: json.Unmarshal merges
			}
			if d.Peek() == '[' {
				c.Choices = []choice{} // as json.Unmarshal: [] is not nil
			}
			return d.Array(func() bool {
				c.Choices = append(c.Choices, choice{})
				return readChoice(d, &c.Choices[len(c.Choices)-1])
			})
		case "usage":
			if d.Null() {
				c.Usage = nil
				return true
			}
			if c.Usage == nil {
				c.Usage = new(usage)
			}
			return d.Object(func(key []byte) bool {
				switch string(key) {
				case "prompt_tokens":
					return d.Integer(&c.Usage.PromptTokens)
				case "completion_tokens":
					return d.Integer(&c.Usage.CompletionTokens)
				case "prompt_tokens_details":
					return readDetails(d, &c.Usage.PromptDetails)
				case "completion_tokens_details":
					return readDetails(d, &c.Usage.CompletionDetails)
				}
				return d.Other(key, "prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details")
			})
		case "error":
			raw, ok := d.Raw()
			c.Error = raw
			return ok
		}
		return d.Other(key, "id", "model", "choices", "usage", "error")
	}) && d.End()
}

// readDetails reads a usage details object (or null) into *t.
func readDetails(d *upstream.JSONScanner, t **tokenDetails) bool {
	if d.Null() {
		*t = nil
		return true
	}
	if *t == nil {
		*t = new(tokenDetails)
	}
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "cached_tokens":
			return d.Integer(&(*t).CachedTokens)
		case "reasoning_tokens":
			return d.Integer(&(*t).ReasoningTokens)
		}
		return d.Other(key, "cached_tokens", "reasoning_tokens")
	})
}

func readChoice(d *upstream.JSONScanner, ch *choice) bool {
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "index":
			return d.Integer(&ch.Index)
		case "finish_reason":
			return d.Str(&ch.FinishReason)
		case "delta":
			return d.Object(func(key []byte) bool {
				switch string(key) {
				case "content":
					return d.Str(&ch.Delta.Content)
				case "reasoning_content":
					return d.Str(&ch.Delta.ReasoningContent)
				case "reasoning":
					return d.Str(&ch.Delta.Reasoning)
				case "tool_calls":
					if ch.Delta.ToolCalls != nil {
						return false
					}
					if d.Peek() == '[' {
						ch.Delta.ToolCalls = []toolCallDelta{}
					}
					return d.Array(func() bool {
						ch.Delta.ToolCalls = append(ch.Delta.ToolCalls, toolCallDelta{})
						return readToolCall(d, &ch.Delta.ToolCalls[len(ch.Delta.ToolCalls)-1])
					})
				}
				return d.Other(key, "content", "reasoning_content", "reasoning", "tool_calls")
			})
		}
		return d.Other(key, "index", "finish_reason", "delta")
	})
}

func readToolCall(d *upstream.JSONScanner, tc *toolCallDelta) bool {
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "index":
			return d.Integer(&tc.Index)
		case "id":
			return d.Str(&tc.ID)
		case "function":
			return d.Object(func(key []byte) bool {
				switch string(key) {
				case "name":
					return d.Str(&tc.Function.Name)
				case "arguments":
					return d.Str(&tc.Function.Arguments)
				}
				return d.Other(key, "name", "arguments")
			})
		}
		return d.Other(key, "index", "id", "function")
	})
}

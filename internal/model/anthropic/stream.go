package anthropic

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/stackbone/stackbone/internal/eventsource"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/internal/upstream"
)

// streamEvent is the part of a Messages stream event the provider reads.
type streamEvent struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message struct {
		ID    string     `json:"id"`
		Model string     `json:"model"`
		Usage eventUsage `json:"usage"`
	} `json:"message"`
	ContentBlock struct {
		Type      string `json:"type"`
		Text      string `json:"text"`
		ID        string `json:"id"`
		Name      string `json:"name"`
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
		Data      string `json:"data"`
	} `json:"content_block"`
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
	} `json:"delta"`
	Usage eventUsage `json:"usage"`
	// Error is the error of an "error" event.
	Error json.RawMessage `json:"error"`
}

type eventUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	// CacheRead and CacheCreation are input tokens read from and written
	// to the prompt cache, not counted in InputTokens.
	CacheRead     int `json:"cache_read_input_tokens"`
	CacheCreation int `json:"cache_creation_input_tokens"`
}

// inputTokens is all the input of a usage: uncached, read from the cache
// and written to it (the GenAI conventions count all of it as input).
func (u eventUsage) inputTokens() int { return u.InputTokens + u.CacheRead + u.CacheCreation }

// read streams the events of a 200 answer as chunks (wire.md §3.4): ping
// and unnamed events are skipped, an error event ends the stream with its
// error, and the stream must end with message_stop. Thinking blocks
// (extended thinking) become Reasoning chunks, yielded with the first
// visible chunk or the Finish.
func read(ctx context.Context, body io.Reader, requestID string, yield func(model.Chunk, error) bool) {
	r := eventsource.NewReader(body, upstream.MaxEvent)
	defer r.Release()
	fail := func(err error) { yield(model.Chunk{}, upstream.MapError(ctx, "anthropic", err, upstream.StatusOf)) }
	var (
		calls   = map[int]int{} // content block index -> call index
		n       int
		stop    string
		usage   event.Usage
		stopped bool
		call    model.CallInfo
		early   bool // input tokens reported
		// thinking holds the open thinking blocks by content block index,
		// done the finished ones not yielded yet.
		thinking = map[int]*thinkingBlock{}
		done     []message.Reasoning
	)
	// send yields c, preceded by the input tokens message_start reported,
	// so a client learns them before any output (and a retry is still
	// possible until the first chunk), and by the finished reasoning.
	send := func(c model.Chunk) bool {
		if !early && usage.InputTokens > 0 {
			early = true
			if !yield(model.Chunk{Type: model.InputTokens, Usage: event.Usage{InputTokens: usage.InputTokens}}, nil) {
				return false
			}
		}
		for i := range done {
			if !yield(model.Chunk{Type: model.Reasoning, Reasoning: &done[i]}, nil) {
				return false
			}
		}
		done = nil
		return yield(c, nil)
	}
	var ev streamEvent
	for {
		name, data, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fail(err)
			return
		}
		switch string(name) {
		case "ping":
			if !yield(model.Chunk{Type: model.Alive}, nil) {
				return
			}
			continue
		case "":
			continue
		}
		if len(data) == 0 {
			continue
		}
		if err := decodeEvent(data, &ev); err != nil {
			fail(err)
			return
		}
		if string(name) == "error" {
			fail(upstream.StreamError(ev.Error, requestID))
			return
		}
		switch ev.Type {
		case "message_start":
			usage.InputTokens = ev.Message.Usage.inputTokens()
			usage.CachedInputTokens = ev.Message.Usage.CacheRead
			usage.OutputTokens = ev.Message.Usage.OutputTokens
			call.ResponseID, call.ResponseModel = ev.Message.ID, ev.Message.Model
		case "content_block_start":
			cb := ev.ContentBlock
			switch cb.Type {
			case "text":
				if cb.Text != "" && !send(model.Chunk{Type: model.Text, Text: cb.Text}) {
					return
				}
			case "tool_use":
				calls[ev.Index] = n
				n++
				if !send(model.Chunk{Type: model.ToolCallStart, Index: calls[ev.Index], ID: cb.ID, Name: cb.Name}) {
					return
				}
			case "thinking", "redacted_thinking":
				b := &thinkingBlock{r: message.Reasoning{Type: cb.Type, Signature: cb.Signature, Data: cb.Data, AfterCalls: n}}
				b.text.WriteString(cb.Thinking)
				thinking[ev.Index] = b
			}
		case "content_block_delta":
			switch ev.Delta.Type {
			case "text_delta":
				if ev.Delta.Text != "" && !send(model.Chunk{Type: model.Text, Text: ev.Delta.Text}) {
					return
				}
			case "input_json_delta":
				idx, ok := calls[ev.Index]
				if ok && ev.Delta.PartialJSON != "" &&
					!send(model.Chunk{Type: model.ToolCallArgs, Index: idx, Text: ev.Delta.PartialJSON}) {
					return
				}
			case "thinking_delta", "signature_delta":
				if b := thinking[ev.Index]; b != nil {
					b.text.WriteString(ev.Delta.Thinking)
					b.r.Signature += ev.Delta.Signature
				}
				// Thinking shows nothing until it ends, however long it
				// takes: it keeps the idle timeout from firing.
				if !yield(model.Chunk{Type: model.Alive}, nil) {
					return
				}
			}
		case "content_block_stop":
			if b := thinking[ev.Index]; b != nil {
				delete(thinking, ev.Index)
				done = append(done, b.block())
			}
		case "message_delta":
			if ev.Delta.StopReason != "" {
				stop = ev.Delta.StopReason
			}
			if n := ev.Usage.inputTokens(); n > 0 {
				usage.InputTokens = n
			}
			if ev.Usage.CacheRead > 0 {
				usage.CachedInputTokens = ev.Usage.CacheRead
			}
			usage.OutputTokens = ev.Usage.OutputTokens
		case "message_stop":
			stopped = true
			// The chunked terminator may still be on its way: read it, so
			// the connection goes back to the pool before the caller works
			// on the answer.
			r.Drain()
		}
	}
	if !stopped {
		yield(model.Chunk{}, &model.Error{Status: http.StatusBadGateway, Message: "anthropic: stream ended without message_stop"})
		return
	}
	call.FinishReason = stop
	send(model.Chunk{Type: model.Finish, Stop: stopReason(stop, n > 0), Usage: usage, Call: &call})
}

// thinkingBlock is a thinking or redacted_thinking block being read: r
// without its text, which grows in text until the block ends.
type thinkingBlock struct {
	r    message.Reasoning
	text strings.Builder
}

func (b *thinkingBlock) block() message.Reasoning {
	b.r.Text = b.text.String()
	return b.r
}

func stopReason(r string, hadCalls bool) event.StopReason {
	switch {
	case hadCalls || r == "tool_use":
		return event.StopToolCalls
	case r == "max_tokens" || r == "model_context_window_exceeded":
		return event.StopLength
	default:
		return event.StopEnd
	}
}

// decodeEvent decodes one stream event's data into ev as json.Unmarshal
// would. The events the Messages API sends are decoded by hand
// (upstream.JSONScanner); anything the hand decoder does not expect goes to
// json.Unmarshal, which decodes it or reports the error. FuzzDecodeEvent
// holds the two to the same results.
func decodeEvent(data []byte, ev *streamEvent) error {
	*ev = streamEvent{}
	var d upstream.JSONScanner
	d.Reset(data)
	if readEvent(&d, ev) {
		return nil
	}
	*ev = streamEvent{}
	return json.Unmarshal(data, ev)
}

func readEvent(d *upstream.JSONScanner, ev *streamEvent) bool {
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "type":
			return d.Str(&ev.Type)
		case "index":
			return d.Integer(&ev.Index)
		case "message":
			return d.Object(func(key []byte) bool {
				switch string(key) {
				case "usage":
					return readUsage(d, &ev.Message.Usage)
				case "id":
					return d.Str(&ev.Message.ID)
				case "model":
					return d.Str(&ev.Message.Model)
				}
				return d.Other(key, "usage", "id", "model")
			})
		case "content_block":
			cb := &ev.ContentBlock
			return d.Object(func(key []byte) bool {
				switch string(key) {
				case "type":
					return d.Str(&cb.Type)
				case "text":
					return d.Str(&cb.Text)
				case "id":
					return d.Str(&cb.ID)
				case "name":
					return d.Str(&cb.Name)
				case "thinking":
					return d.Str(&cb.Thinking)
				case "signature":
					return d.Str(&cb.Signature)
				case "data":
					return d.Str(&cb.Data)
				}
				return d.Other(key, "type", "text", "id", "name", "thinking", "signature", "data")
			})
		case "delta":
			dl := &ev.Delta
			return d.Object(func(key []byte) bool {
				switch string(key) {
				case "type":
					return d.Str(&dl.Type)
				case "text":
					return d.Str(&dl.Text)
				case "partial_json":
					return d.Str(&dl.PartialJSON)
				case "stop_reason":
					return d.Str(&dl.StopReason)
				case "thinking":
					return d.Str(&dl.Thinking)
				case "signature":
					return d.Str(&dl.Signature)
				}
				return d.Other(key, "type", "text", "partial_json", "stop_reason", "thinking", "signature")
			})
		case "usage":
			return readUsage(d, &ev.Usage)
		case "error":
			raw, ok := d.Raw()
			ev.Error = raw
			return ok
		}
		return d.Other(key, "type", "index", "message", "content_block", "delta", "usage", "error")
	}) && d.End()
}

func readUsage(d *upstream.JSONScanner, u *eventUsage) bool {
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "input_tokens":
			return d.Integer(&u.InputTokens)
		case "output_tokens":
			return d.Integer(&u.OutputTokens)
		case "cache_read_input_tokens":
			return d.Integer(&u.CacheRead)
		case "cache_creation_input_tokens":
			return d.Integer(&u.CacheCreation)
		}
		return d.Other(key, "input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
	})
}

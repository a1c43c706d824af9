package openai

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/internal/upstream"
)

// maxLine bounds one SSE line (and one event's data), as the SDK's scanner did.
const maxLine = 32 << 20

// errLineTooLong is returned for an SSE line over maxLine.
var errLineTooLong = errors.New("server-sent event line too long")

// apiError is an error answer of the upstream: a non-2xx status with the
// OpenAI error envelope, or (Status 0) an {"error": …} event inside a 200
// stream.
type apiError struct {
	Status  int
	Message string
	Header  http.Header
}

func (e *apiError) Error() string {
	if e.Status == 0 {
		return e.Message
	}
	return http.StatusText(e.Status) + ": " + e.Message
}

// statusOf recognises an apiError for upstream.MapError.
func statusOf(err error) (int, string, http.Header, bool) {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Status, ae.Message, ae.Header, true
	}
	return 0, "", nil, false
}

// readAPIError reads a non-2xx answer: the message of its error envelope
// ({"error": {"message": …}} or {"error": "…"}), else the status text.
func readAPIError(resp *http.Response) error {
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	msg := envelopeMessage(data)
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &apiError{Status: resp.StatusCode, Message: msg, Header: resp.Header}
}

// envelopeMessage returns the message of an OpenAI error envelope, "" if
// data is not one.
func envelopeMessage(data []byte) string {
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &env) != nil {
		return ""
	}
	return errorMessage(env.Error)
}

// errorMessage returns the message of an "error" value: an object's
// "message" or a bare string; "" when there is none.
func errorMessage(raw json.RawMessage) string {
	var obj struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		return obj.Message
	}
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// streamError is the failure an in-stream {"error": …} event reports.
func streamError(raw json.RawMessage) error {
	msg := errorMessage(raw)
	if msg == "" && string(raw) != "null" {
		msg = string(raw)
	}
	return &apiError{Message: "received error while streaming: " + msg}
}

// chunk is the part of a ChatCompletionChunk the provider reads.
// It is decoded by decodeChunk.
type chunk struct {
	Choices []choice `json:"choices"`
	Usage   *usage   `json:"usage"`
	// Error is set (even to null) only on an in-stream error event.
	Error json.RawMessage `json:"error"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

type choice struct {
	Index int `json:"index"`
	Delta struct {
		Content   string          `json:"content"`
		ToolCalls []toolCallDelta `json:"tool_calls"`
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

// sseReader reads the data of server-sent events line by line (wire.md
// §1.3): comment lines are skipped, data lines of one event are joined with
// "\n", an event ends at a blank line; an unfinished event at EOF is dropped.
type sseReader struct {
	br   *bufio.Reader
	data []byte // the current event's data
	long []byte // a line longer than br's buffer
}

var readerPool = sync.Pool{New: func() any { return &sseReader{br: bufio.NewReaderSize(nil, 8<<10)} }}

// next returns the data of the next event, valid until the following call;
// it returns io.EOF at the end of the stream.
func (r *sseReader) next() ([]byte, error) {
	r.data = r.data[:0]
	hasData := false
	for {
		line, err := r.line()
		if err != nil && (err != io.EOF || len(line) == 0) {
			return nil, err
		}
		if len(line) == 0 {
			if hasData {
				return r.data, nil
			}
			continue
		}
		if line[0] == ':' { // a comment, e.g. a keepalive
			continue
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		if string(name) == "data" {
			if hasData {
				r.data = append(r.data, '\n')
			}
			if len(r.data)+len(value) > maxLine {
				return nil, errLineTooLong
			}
			r.data = append(r.data, value...)
			hasData = true
		}
		if err == io.EOF {
			return nil, io.EOF
		}
	}
}

// line returns the next line without its line ending; the last line of a
// stream comes with io.EOF.
func (r *sseReader) line() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		r.long = append(r.long[:0], line...)
		for err == bufio.ErrBufferFull {
			line, err = r.br.ReadSlice('\n')
			r.long = append(r.long, line...)
			if len(r.long) > maxLine {
				return nil, errLineTooLong
			}
		}
		line = r.long
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	return line, err
}

// read streams the events of a 200 answer as chunks.
func (p *Provider) read(ctx context.Context, body io.Reader, yield func(model.Chunk, error) bool) {
	r := readerPool.Get().(*sseReader)
	r.br.Reset(body)
	defer func() {
		r.br.Reset(nil)
		if cap(r.long) > 64<<10 {
			r.long = nil
		}
		if cap(r.data) > 64<<10 {
			r.data = nil
		}
		readerPool.Put(r)
	}()

	type open struct {
		idx int
		id  string
	}
	var (
		byWire = map[int]*open{}
		n      int // calls started
		finish string
		usage  event.Usage
	)
	fail := func(err error) { yield(model.Chunk{}, upstream.MapError(ctx, p.cfg.Name, err, statusOf)) }
	for {
		data, err := r.next()
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
			upstream.Drain(r.br)
			break
		}
		var c chunk
		if err := decodeChunk(data, &c); err != nil {
			fail(err)
			return
		}
		if c.Error != nil {
			fail(streamError(c.Error))
			return
		}
		if c.Usage != nil && (c.Usage.PromptTokens > 0 || c.Usage.CompletionTokens > 0) {
			usage = event.Usage{InputTokens: c.Usage.PromptTokens, OutputTokens: c.Usage.CompletionTokens}
		}
		for i := range c.Choices {
			ch := &c.Choices[i]
			if ch.Index != 0 {
				continue
			}
			d := &ch.Delta
			if d.Content != "" && !yield(model.Chunk{Type: model.Text, Text: d.Content}, nil) {
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
					if !yield(model.Chunk{Type: model.ToolCallStart, Index: o.idx, ID: id, Name: tc.Function.Name}, nil) {
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
	yield(model.Chunk{Type: model.Finish, Stop: stopReason(finish, n > 0), Usage: usage}, nil)
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

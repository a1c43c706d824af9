package responses

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
)

// Response is a response object.
type Response struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"`
	Background         bool              `json:"background"`
	Error              *ErrorInfo        `json:"error"`
	IncompleteDetails  *Incomplete       `json:"incomplete_details"`
	Instructions       *string           `json:"instructions"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Model              string            `json:"model"`
	Output             []OutputItem      `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Conversation       *Conversation     `json:"conversation"`
	Reasoning          Reasoning         `json:"reasoning"`
	Store              bool              `json:"store"`
	Temperature        *float64          `json:"temperature"`
	Text               TextConfig        `json:"text"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	Tools              []Tool            `json:"tools"`
	TopP               *float64          `json:"top_p"`
	Truncation         string            `json:"truncation"`
	Usage              *Usage            `json:"usage"`
	User               *string           `json:"user"`
	Metadata           map[string]string `json:"metadata"`
}

// ErrorInfo is a failed response's error.
type ErrorInfo struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Incomplete says why a response is incomplete.
type Incomplete struct {
	Reason string `json:"reason"`
}

// Conversation names the thread a stored response belongs to.
type Conversation struct {
	ID string `json:"id"`
}

// Reasoning is the (unused) reasoning configuration, echoed as OpenAI does.
type Reasoning struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

// TextConfig echoes the request's text format.
type TextConfig struct {
	Format json.RawMessage `json:"format"`
}

// Usage counts a response's tokens.
type Usage struct {
	InputTokens         int          `json:"input_tokens"`
	InputTokensDetails  tokenDetails `json:"input_tokens_details"`
	OutputTokens        int          `json:"output_tokens"`
	OutputTokensDetails tokenDetails `json:"output_tokens_details"`
	TotalTokens         int          `json:"total_tokens"`
}

type tokenDetails struct {
	CachedTokens    *int `json:"cached_tokens,omitempty"`
	ReasoningTokens *int `json:"reasoning_tokens,omitempty"`
}

// OutputItem is an item of a response's output: an assistant message or a
// function call the client (or a human, for an approval) must answer.
type OutputItem struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	Status string `json:"status"`
	// message
	Role    string       `json:"role,omitempty"`
	Content []OutputPart `json:"content,omitempty"`
	// function_call
	CallID    string  `json:"call_id,omitempty"`
	Name      string  `json:"name,omitempty"`
	Arguments *string `json:"arguments,omitempty"`
	// Namespace is the namespace tool the called function came from.
	Namespace string `json:"namespace,omitempty"`
}

// MarshalJSON writes the fields of the item's type: a message always has
// content (clients iterate it), a function call its arguments.
func (it OutputItem) MarshalJSON() ([]byte, error) {
	if it.Type == "message" {
		content := it.Content
		if content == nil {
			content = []OutputPart{}
		}
		return json.Marshal(struct {
			Type    string       `json:"type"`
			ID      string       `json:"id"`
			Status  string       `json:"status"`
			Role    string       `json:"role"`
			Content []OutputPart `json:"content"`
		}{it.Type, it.ID, it.Status, it.Role, content})
	}
	args := ""
	if it.Arguments != nil {
		args = *it.Arguments
	}
	return json.Marshal(struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		Status    string `json:"status"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		Namespace string `json:"namespace,omitempty"`
	}{it.Type, it.ID, it.Status, it.CallID, it.Name, args, it.Namespace})
}

// OutputPart is a part of an output message.
type OutputPart struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

// Response statuses.
const (
	StatusQueued     = "queued"
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
	StatusIncomplete = "incomplete"
	StatusFailed     = "failed"
	StatusCancelled  = "cancelled"
)

// startError is a response that could not be named (its record not
// stored) at its turn's start: reported to the client, not a client gone.
type startError struct{ err error }

func (e *startError) Error() string { return "responses: store the response: " + e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// Sink receives the stream's events: their type, sequence number and JSON
// object (which holds both).
type Sink func(typ string, data []byte) error

// fold turns a run's events into the response and, when it has a sink, into
// the stream's events. Sequence numbers depend only on what a turn's stored
// events also say, so a stream read again from the store (GET …?stream=true)
// numbers every event as the live one did: each event takes the next
// number, except text deltas, which take one number per byte of text and
// carry the last. A stream resumed after N sends only what comes after N,
// cutting a stored text that was streamed live in smaller pieces where the
// client stopped.
type fold struct {
	resp  Response
	sink  Sink  // nil: build the response only
	after int64 // numbers ≤ after are not sent (-1: send all)
	next  int64 // the next sequence number

	// start is called at the turn's first run_started, with its stored
	// sequence number (0 for a stateless turn); it names the response.
	start func(seq int64) (string, error)
	// end, when set, is called with the response once it completed (or
	// is incomplete) and its last event was sent (and flushed, with
	// flush set), so what end does cannot delay the client.
	end     func(r Response)
	flush   func() error
	started bool
	msg     *OutputItem // the message being streamed
	msgIdx  int
	text    []byte
	ended   bool // a terminal event was folded in
	err     *apierror.Error
}

func newFold(resp Response, sink Sink, after int64) *fold {
	resp.Object = "response"
	if resp.Output == nil {
		resp.Output = []OutputItem{}
	}
	return &fold{resp: resp, sink: sink, after: after}
}

// send numbers and sends one event; data is the event's fields besides
// type and sequence_number.
func (f *fold) send(typ string, data map[string]any) error {
	seq := f.next
	f.next++
	return f.deliver(typ, seq, data)
}

func (f *fold) deliver(typ string, seq int64, data map[string]any) error {
	if f.sink == nil || seq <= f.after {
		return nil
	}
	data["type"] = typ
	data["sequence_number"] = seq
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	return f.sink(typ, b)
}

// snapshot is the response as it stands, for lifecycle events.
func (f *fold) snapshot() Response {
	r := f.resp
	r.Output = append(make([]OutputItem, 0, len(f.resp.Output)), f.resp.Output...)
	return r
}

// Write folds one event in (subagent work stays inside the turn).
func (f *fold) Write(e event.Event) error {
	if e.SubagentRunID != "" {
		return nil
	}
	switch e.Type {
	case event.RunStarted:
		if f.started {
			// A resume or a recovery of the same turn.
			f.resp.Status, f.ended = StatusInProgress, false
			return nil
		}
		f.started = true
		if f.start != nil {
			id, err := f.start(e.Seq)
			if err != nil {
				return &startError{err}
			}
			f.resp.ID = id
		}
		f.resp.Status = StatusInProgress
		if err := f.send("response.created", map[string]any{"response": f.snapshot()}); err != nil {
			return err
		}
		return f.send("response.in_progress", map[string]any{"response": f.snapshot()})
	case event.TextStart:
		return f.open(e.MessageID)
	case event.TextDelta:
		if e.Delta == "" {
			return nil
		}
		if f.msg == nil || f.msg.ID != e.MessageID {
			if err := f.open(e.MessageID); err != nil {
				return err
			}
		}
		return f.delta(e.Delta)
	case event.TextEnd:
		return f.close(e.MessageID)
	case event.RunFinished:
		return f.finish(e)
	case event.RunError:
		if err := f.close(""); err != nil {
			return err
		}
		f.ended = true
		f.err = apierror.OfRunError(e)
		f.resp.Status = StatusFailed
		f.resp.Error = &ErrorInfo{Code: f.err.Code, Message: f.err.Message}
		if e.Code == engine.CodeCancelled {
			f.resp.Status, f.resp.Error = StatusCancelled, nil
		}
		return f.send("response.failed", map[string]any{"response": f.snapshot()})
	}
	return nil
}

// open starts an assistant message item.
func (f *fold) open(id string) error {
	if err := f.close(""); err != nil {
		return err
	}
	f.resp.Output = append(f.resp.Output, OutputItem{Type: "message", ID: id, Status: StatusInProgress, Role: "assistant", Content: []OutputPart{}})
	f.msgIdx = len(f.resp.Output) - 1
	f.msg, f.text = &f.resp.Output[f.msgIdx], f.text[:0]
	if err := f.send("response.output_item.added", map[string]any{"output_index": f.msgIdx, "item": *f.msg}); err != nil {
		return err
	}
	return f.send("response.content_part.added", map[string]any{"item_id": id, "output_index": f.msgIdx, "content_index": 0,
		"part": OutputPart{Type: "output_text", Text: "", Annotations: []any{}, Logprobs: []any{}}})
}

// delta sends a text delta: it takes one sequence number per byte and
// carries the last; after a resume point inside it, only the rest is sent.
func (f *fold) delta(d string) error {
	f.text = append(f.text, d...)
	first := f.next
	f.next += int64(len(d))
	last := f.next - 1
	if f.sink == nil || last <= f.after {
		return nil
	}
	if f.after >= first {
		k := int(f.after - first + 1)
		for k < len(d) && !utf8.RuneStart(d[k]) {
			k++
		}
		d = d[k:]
		if d == "" {
			return nil
		}
	}
	// The most frequent event: a struct, not a map, with its fields in the
	// order encoding/json writes a map's keys (the same bytes).
	b, err := json.Marshal(textDelta{Delta: d, ItemID: f.msg.ID, Logprobs: []any{}, OutputIndex: f.msgIdx,
		SequenceNumber: last, Type: "response.output_text.delta"})
	if err != nil {
		return err
	}
	return f.sink("response.output_text.delta", b)
}

// textDelta is a response.output_text.delta event.
type textDelta struct {
	ContentIndex   int    `json:"content_index"`
	Delta          string `json:"delta"`
	ItemID         string `json:"item_id"`
	Logprobs       []any  `json:"logprobs"`
	OutputIndex    int    `json:"output_index"`
	SequenceNumber int64  `json:"sequence_number"`
	Type           string `json:"type"`
}

// close ends the open message item (id "" closes whichever is open).
func (f *fold) close(id string) error {
	if f.msg == nil || (id != "" && f.msg.ID != id) {
		return nil
	}
	m := f.msg
	f.msg = nil
	text := string(f.text)
	part := OutputPart{Type: "output_text", Text: text, Annotations: []any{}, Logprobs: []any{}}
	m.Content, m.Status = []OutputPart{part}, StatusCompleted
	if err := f.send("response.output_text.done", map[string]any{"item_id": m.ID, "output_index": f.msgIdx, "content_index": 0,
		"text": text, "logprobs": []any{}}); err != nil {
		return err
	}
	if err := f.send("response.content_part.done", map[string]any{"item_id": m.ID, "output_index": f.msgIdx, "content_index": 0, "part": part}); err != nil {
		return err
	}
	return f.send("response.output_item.done", map[string]any{"output_index": f.msgIdx, "item": *m})
}

// finish ends a run: the calls it stopped on become function_call items,
// then the response completes (or is incomplete, cut off by its token
// limit).
func (f *fold) finish(e event.Event) error {
	if err := f.close(""); err != nil {
		return err
	}
	if e.Outcome != nil {
		for _, c := range e.Outcome.PendingCalls {
			if err := f.call(c); err != nil {
				return err
			}
		}
	}
	f.ended = true
	f.resp.Status = StatusCompleted
	if e.Outcome != nil && e.Outcome.Stop == event.StopLength {
		f.resp.Status, f.resp.IncompleteDetails = StatusIncomplete, &Incomplete{Reason: "max_output_tokens"}
	}
	if e.Usage != nil {
		u := f.resp.Usage
		if u == nil {
			zero := 0
			u = &Usage{InputTokensDetails: tokenDetails{CachedTokens: &zero}, OutputTokensDetails: tokenDetails{ReasoningTokens: &zero}}
		}
		u.InputTokens += e.Usage.InputTokens
		u.OutputTokens += e.Usage.OutputTokens
		u.TotalTokens = u.InputTokens + u.OutputTokens
		f.resp.Usage = u
	}
	typ := "response.completed"
	if f.resp.Status == StatusIncomplete {
		typ = "response.incomplete"
	}
	if err := f.send(typ, map[string]any{"response": f.snapshot()}); err != nil {
		return err
	}
	if f.end != nil {
		if f.flush != nil {
			if err := f.flush(); err != nil {
				return err
			}
		}
		f.end(f.snapshot())
	}
	return nil
}

// call adds a function_call item the turn stopped on.
func (f *fold) call(c message.ToolCall) error {
	args := c.Arguments
	empty := ""
	item := OutputItem{Type: "function_call", ID: "fc_" + c.ID, Status: StatusInProgress, CallID: c.ID, Name: c.Name, Arguments: &empty}
	for _, t := range f.resp.Tools {
		if t.Name == c.Name {
			item.Namespace = t.Namespace
		}
	}
	f.resp.Output = append(f.resp.Output, item)
	idx := len(f.resp.Output) - 1
	if err := f.send("response.output_item.added", map[string]any{"output_index": idx, "item": item}); err != nil {
		return err
	}
	if err := f.send("response.function_call_arguments.delta", map[string]any{"item_id": item.ID, "output_index": idx, "delta": args}); err != nil {
		return err
	}
	if err := f.send("response.function_call_arguments.done", map[string]any{"item_id": item.ID, "output_index": idx, "name": c.Name, "arguments": args}); err != nil {
		return err
	}
	item.Arguments, item.Status = &args, StatusCompleted
	f.resp.Output[idx] = item
	return f.send("response.output_item.done", map[string]any{"output_index": idx, "item": item})
}

package anthropic

import (
	"encoding/json"
	"sync"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/wire/sse"
)

// Stream encodes a run's events as Messages stream events: message_start
// once, content blocks indexed 0, 1, 2… (a text block per assistant message,
// then a tool_use block per call the turn stopped on), message_delta with
// the stop reason and usage, then message_stop and nothing after it. An
// error after the start is an error event. It is safe for concurrent use,
// so keepalive pings can interleave with events.
//
// message_start carries the turn's real input tokens, the figure
// message_delta ends with whenever it can (clients such as LangChain's
// ChatAnthropic take the input count from message_start and the output
// count from message_delta, so the two must agree with a non-stream call):
// it waits for the first text, or the end, and carries the input tokens of
// every model step reported by then (the run's InputUsage events). Text
// never goes out before its own step's count: a provider that reports input
// tokens at the start of a step (Anthropic) streams at once; one that reports
// them only at the end of a step (OpenAI) has the first step's text held
// until that step ends. So a turn whose text all comes from its last step
// (one step, or server tool steps and then the answer) starts with the
// turn's total; a turn that writes text and then calls tools starts with the
// steps up to that text, and message_delta has the total. A run that reports
// no count starts with the turn's input count, or the estimate when there
// is none.
type Stream struct {
	mu        sync.Mutex
	out       sse.Frames
	id, model string
	estimate  int

	begun   bool // the run started: message_start is due
	started bool // message_start was written
	// input sums the steps' reported input tokens; counted is the
	// assistant message of the latest report.
	input   int
	counted string
	// held keeps the text events that came before message_start and before
	// their step's input count.
	held     []event.Event
	done     bool
	next     int // index of the next block
	textOpen bool
	textMsg  string
}

// NewStream starts an encoder. estimate is the input count message_start
// carries when the run reports none.
func NewStream(out sse.Frames, id, model string, estimate int) *Stream {
	return &Stream{out: out, id: id, model: model, estimate: estimate}
}

type blockStart struct {
	Type         string       `json:"type"`
	Index        int          `json:"index"`
	ContentBlock ContentBlock `json:"content_block"`
}

type blockDelta struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Delta delta  `json:"delta"`
}

type delta struct {
	Type        string  `json:"type"`
	Text        *string `json:"text,omitempty"`
	PartialJSON *string `json:"partial_json,omitempty"`
}

type blockStop struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

type messageDelta struct {
	Type  string `json:"type"`
	Delta struct {
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	} `json:"delta"`
	Usage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

type streamError struct {
	Type  string      `json:"type"`
	Error ErrorObject `json:"error"`
}

var (
	pingData        = []byte(`{"type":"ping"}`)
	messageStopData = []byte(`{"type":"message_stop"}`)
)

// send writes a frame (always after message_start).
func (s *Stream) send(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.out.Event(name, b)
}

// Write encodes one event. Every frame carries an event: line (the SDKs
// drop data-only frames).
func (s *Stream) Write(e event.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.write(e)
}

func (s *Stream) write(e event.Event) error {
	if s.done || !visible(e) {
		return nil
	}
	switch e.Type {
	case event.RunStarted:
		s.begun = true
	case event.InputUsage:
		if e.Usage == nil || s.started {
			return nil
		}
		s.input += e.Usage.InputTokens
		s.counted = e.MessageID
		if len(s.held) > 0 && s.held[0].MessageID == e.MessageID {
			return s.release(s.input)
		}
	case event.TextDelta:
		if e.Delta == "" {
			return nil
		}
		if !s.started {
			switch {
			case s.counted == e.MessageID:
				if err := s.start(s.input); err != nil {
					return err
				}
			case len(s.held) == 0 || s.held[0].MessageID == e.MessageID:
				// Its step's count is still to come.
				s.held = append(s.held, e)
				return nil
			default:
				// The held step ended without a count.
				if err := s.release(s.input); err != nil {
					return err
				}
			}
		}
		if !s.textOpen || s.textMsg != e.MessageID {
			if err := s.closeText(); err != nil {
				return err
			}
			empty := ""
			if err := s.send("content_block_start", blockStart{Type: "content_block_start", Index: s.next,
				ContentBlock: ContentBlock{Type: "text", Text: &empty}}); err != nil {
				return err
			}
			s.textOpen, s.textMsg = true, e.MessageID
		}
		d := e.Delta
		return s.send("content_block_delta", blockDelta{Type: "content_block_delta", Index: s.next, Delta: delta{Type: "text_delta", Text: &d}})
	case event.TextEnd:
		if !s.started && len(s.held) > 0 {
			s.held = append(s.held, e)
			return nil
		}
		if s.textOpen && s.textMsg == e.MessageID {
			return s.closeText()
		}
	case event.RunFinished:
		if note, ok := event.WaitingNote(e.Outcome); ok {
			if e.Usage != nil {
				// The note is not the model's output: message_start
				// keeps the turn's real input count.
				if err := s.start(e.Usage.InputTokens); err != nil {
					return err
				}
			}
			if err := s.write(event.Event{Type: event.TextDelta, MessageID: event.WaitingNoteMessageID, Delta: note}); err != nil {
				return err
			}
		}
		return s.finish(e)
	case event.RunError:
		return s.fail(apierror.OfRunError(e))
	}
	return nil
}

// release writes message_start with inputTokens, then the held text.
func (s *Stream) release(inputTokens int) error {
	if err := s.start(inputTokens); err != nil {
		return err
	}
	held := s.held
	s.held = nil
	for _, e := range held {
		if err := s.write(e); err != nil {
			return err
		}
	}
	return nil
}

// start writes message_start once, with inputTokens (the estimate when
// zero).
func (s *Stream) start(inputTokens int) error {
	if s.started {
		return nil
	}
	if inputTokens <= 0 {
		inputTokens = s.estimate
	}
	s.started, s.begun = true, true
	return s.send("message_start", struct {
		Type    string   `json:"type"`
		Message Response `json:"message"`
	}{"message_start", Response{ID: s.id, Type: "message", Role: "assistant", Model: s.model, Content: []ContentBlock{},
		Usage: Usage{InputTokens: inputTokens}}})
}

// closeText ends the open text block.
func (s *Stream) closeText() error {
	if !s.textOpen {
		return nil
	}
	s.textOpen = false
	i := s.next
	s.next++
	return s.send("content_block_stop", blockStop{Type: "content_block_stop", Index: i})
}

func (s *Stream) finish(e event.Event) error {
	input := 0
	if e.Usage != nil {
		input = e.Usage.InputTokens
	}
	if err := s.release(input); err != nil {
		return err
	}
	if err := s.closeText(); err != nil {
		return err
	}
	s.done = true
	if e.Outcome != nil {
		for _, c := range e.Outcome.PendingCalls {
			i := s.next
			s.next++
			if err := s.send("content_block_start", blockStart{Type: "content_block_start", Index: i,
				ContentBlock: ContentBlock{Type: "tool_use", ID: c.ID, Name: c.Name, Input: json.RawMessage("{}")}}); err != nil {
				return err
			}
			args := string(toolInput(c))
			if err := s.send("content_block_delta", blockDelta{Type: "content_block_delta", Index: i,
				Delta: delta{Type: "input_json_delta", PartialJSON: &args}}); err != nil {
				return err
			}
			if err := s.send("content_block_stop", blockStop{Type: "content_block_stop", Index: i}); err != nil {
				return err
			}
		}
	}
	var md messageDelta
	md.Type = "message_delta"
	md.Delta.StopReason = stopReason(e.Outcome)
	u := usageOf(e.Usage)
	md.Usage.InputTokens, md.Usage.OutputTokens = u.InputTokens, u.OutputTokens
	if err := s.send("message_delta", md); err != nil {
		return err
	}
	return s.out.Event("message_stop", messageStopData)
}

// fail writes an error event and ends the stream: after message_start once
// the run began.
func (s *Stream) fail(e *apierror.Error) error {
	if s.begun || len(s.held) > 0 {
		if err := s.release(s.input); err != nil {
			return err
		}
	}
	s.done = true
	return s.send("error", streamError{Type: "error", Error: ErrorOf(e, "").Error})
}

// Error writes an in-stream error event (after the 200 was sent) and ends
// the stream.
func (s *Stream) Error(e *apierror.Error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil
	}
	return s.fail(e)
}

// Ping writes a keepalive: event: ping between message_start and
// message_stop, a comment while message_start waits for the input count
// (nothing may come before message_start), nothing after the end.
func (s *Stream) Ping() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.done:
		return nil
	case !s.started:
		return s.out.Comment("ping")
	}
	return s.out.Event("ping", pingData)
}

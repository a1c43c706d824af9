package openai

import (
	"net/http"
	"time"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/ids"
	"github.com/stackbone/stackbone/internal/wire"
	"github.com/stackbone/stackbone/internal/wire/sse"
)

// Wire is the Chat Completions wire: POST /v1/chat/completions, streaming
// or not, with errors in OpenAI's envelope.
type Wire struct {
	now func() time.Time
}

var _ wire.Wire = (*Wire)(nil)

// NewWire makes the wire; now stamps completions' created time.
func NewWire(now func() time.Time) *Wire { return &Wire{now: now} }

// TurnRoute is the Chat Completions route.
func (*Wire) TurnRoute() string { return "POST /v1/chat/completions" }

// SessionHeader: chat turns take their thread from the session header.
func (*Wire) SessionHeader() bool { return true }

// Routes: the wire has no other route (models are the server's).
func (*Wire) Routes() map[string]func(http.ResponseWriter, *http.Request) error { return nil }

// WriteError writes an error in OpenAI's envelope.
func (*Wire) WriteError(w http.ResponseWriter, e *apierror.Error) error { return WriteError(w, e) }

// DecodeTurn reads a chat completion request.
func (wr *Wire) DecodeTurn(r *http.Request, body []byte) (wire.Turn, error) {
	req, err := DecodeContext(r.Context(), body)
	if err != nil {
		return nil, err
	}
	in, err := req.Input()
	if err != nil {
		return nil, err
	}
	return &turn{req: req, in: in, now: wr.now}, nil
}

type turn struct {
	req *Request
	in  engine.Input
	now func() time.Time
}

func (t *turn) Input() engine.Input { return t.in }

// Param: Input.Messages and Input.ClientTools are the request's own
// messages and tools, in order.
func (t *turn) Param(field string, i int) string {
	return wire.Param(field, i, t.req.ToolParam, nil, "messages[%d].tool_call_id")
}

func (t *turn) Encoder(w http.ResponseWriter, _ *engine.Run) wire.Encoder {
	if !t.req.Stream {
		c := NewCollector(completionID(), t.req.Model, t.now().Unix())
		return wire.Collect(w, c.Add, c.Result)
	}
	return streamEncoder(w, t.req.Model, t.now(), t.req.StreamOptions != nil && t.req.StreamOptions.IncludeUsage)
}

// completionID names a completion.
func completionID() string { return "chatcmpl-" + ids.New("")[1:] }

// streamEncoder is the writer of a streamed completion of model: a
// streaming turn's, or a turn streamed again (RunEncoder).
func streamEncoder(w http.ResponseWriter, model string, created time.Time, includeUsage bool) wire.Encoder {
	sw := sse.NewBuffered(w)
	return &stream{Stream: NewStream(sw, completionID(), model, created.Unix(), includeUsage), sw: sw}
}

var _ wire.RunStreamer = (*Wire)(nil)

// StreamFormat is "openai": chat.completion.chunk frames ending with [DONE].
func (*Wire) StreamFormat() string { return "openai" }

// Snapshots: a Chat Completions client reads the answer only.
func (*Wire) Snapshots() bool { return false }

// RunEncoder streams a turn again as a streamed completion whose model is
// the thread's agent (?include_usage=true adds the usage chunk, as
// stream_options.include_usage does).
func (wr *Wire) RunEncoder(w http.ResponseWriter, r *http.Request, rs wire.RunStream) (wire.Encoder, error) {
	return streamEncoder(w, rs.Agent, wr.now(), r.URL.Query().Get("include_usage") == "true"), nil
}

// stream answers a streaming turn with chunks.
type stream struct {
	*Stream
	sw *sse.Writer
}

func (s *stream) Close(err *apierror.Error) error {
	if err != nil && !s.done {
		_ = s.Error(err)
	}
	return nil
}

func (s *stream) Ping() error { return s.sw.Comment("keepalive") }

func (s *stream) Flush() error { return s.sw.Flush() }

package anthropic

import (
	"fmt"
	"net/http"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/ids"
	"github.com/stackbone/stackbone/internal/wire"
	"github.com/stackbone/stackbone/internal/wire/httpjson"
	"github.com/stackbone/stackbone/internal/wire/sse"
)

// Wire is the Anthropic Messages wire: POST /v1/messages (streaming or not)
// and POST /v1/messages/count_tokens, with errors in Anthropic's envelope.
// The anthropic-version header is not checked: every version is served the
// same way.
type Wire struct {
	agents *agent.Registry
	newID  ids.Generator
}

var _ wire.Wire = (*Wire)(nil)

// NewWire makes the wire: agents are what token estimates count (an agent's
// instructions and tools), newID names messages.
func NewWire(agents *agent.Registry, newID ids.Generator) *Wire {
	return &Wire{agents: agents, newID: newID}
}

// TurnRoute is the Messages route.
func (*Wire) TurnRoute() string { return "POST /v1/messages" }

// SessionHeader: chat turns take their thread from the session header.
func (*Wire) SessionHeader() bool { return true }

// Routes: count_tokens.
func (wr *Wire) Routes() map[string]func(http.ResponseWriter, *http.Request) error {
	return map[string]func(http.ResponseWriter, *http.Request) error{"POST /v1/messages/count_tokens": wr.countTokens}
}

// WriteError writes an error in Anthropic's envelope.
func (*Wire) WriteError(w http.ResponseWriter, e *apierror.Error) error { return WriteError(w, e) }

// agentText is what an agent adds to every request it sees: instructions
// and tool definitions.
func agentText(spec *agent.Spec) []string {
	if spec == nil {
		return nil
	}
	out := []string{spec.Instructions}
	for _, t := range spec.AllTools() {
		out = append(out, t.Name, t.Description, string(t.Parameters))
	}
	return out
}

// DecodeTurn reads a Messages request.
func (wr *Wire) DecodeTurn(r *http.Request, body []byte) (wire.Turn, error) {
	req, err := DecodeContext(r.Context(), body)
	if err != nil {
		return nil, err
	}
	in, err := req.Input()
	if err != nil {
		return nil, err
	}
	return &turn{wr: wr, req: req, in: in}, nil
}

type turn struct {
	wr  *Wire
	req *Request
	in  engine.Input
}

func (t *turn) Input() engine.Input { return t.in }

// Param places an input error on the request's own paths: Input.Messages
// starts with the system text and splits a user message's tool results
// into messages of their own, so a message index maps back through origin.
func (t *turn) Param(field string, i int) string {
	return wire.Param(field, i, t.req.ToolParam, t.req.origin, "messages.%d.content")
}

func (t *turn) Encoder(w http.ResponseWriter, _ *engine.Run) wire.Encoder {
	id := t.wr.newID("msg")
	if !t.req.Stream {
		c := NewCollector(id, t.req.Model)
		return wire.Collect(w, c.Add, c.Result)
	}
	return streamEncoder(w, id, t.req.Model, EstimateTokens(t.req, agentText(t.wr.agents.Get(t.req.Model))...))
}

// streamEncoder is the writer of a streamed message of model: a streaming
// turn's, or a turn streamed again (RunEncoder); estimate is message_start's
// input_tokens.
func streamEncoder(w http.ResponseWriter, id, model string, estimate int) wire.Encoder {
	sw := sse.NewBuffered(w)
	return &stream{NewStream(sw, id, model, estimate), sw}
}

var _ wire.RunStreamer = (*Wire)(nil)

// StreamFormat is "anthropic": Messages stream events, message_start to
// message_stop.
func (*Wire) StreamFormat() string { return "anthropic" }

// Snapshots: a Messages client reads the answer only.
func (*Wire) Snapshots() bool { return false }

// RunEncoder streams a turn again as a streamed message whose model is the
// thread's agent (its input tokens are not estimated again: 0 until the
// turn's usage).
func (wr *Wire) RunEncoder(w http.ResponseWriter, _ *http.Request, rs wire.RunStream) (wire.Encoder, error) {
	return streamEncoder(w, wr.newID("msg"), rs.Agent, 0), nil
}

// stream answers a streaming turn with Messages stream events.
type stream struct {
	*Stream
	sw *sse.Writer
}

func (s stream) Flush() error { return s.sw.Flush() }

func (s stream) Close(err *apierror.Error) error {
	if err != nil {
		_ = s.Error(err)
	}
	return nil
}

func (wr *Wire) countTokens(w http.ResponseWriter, r *http.Request) error {
	body, err := httpjson.ReadBody(r)
	if err != nil {
		return err
	}
	req, err := DecodeCountContext(r.Context(), body)
	if err != nil {
		return err
	}
	spec := wr.agents.Get(req.Model)
	if req.Model != "" && spec == nil {
		return apierror.New(apierror.NotFound, "model_not_found", fmt.Sprintf("model: %s: no agent has that name", req.Model))
	}
	n := EstimateTokens(req, agentText(spec)...)
	return httpjson.Write(w, http.StatusOK, map[string]int{"input_tokens": n})
}

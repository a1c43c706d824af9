// Package agui is the AG-UI 1.0 wire: POST /v1/agents/{agent}/agui takes a
// RunAgentInput and answers with an event stream the official @ag-ui/client
// accepts in strict mode. Input errors, contract errors and a paused thread
// are reported as a RUN_ERROR event on a 200 stream, never as a bare status
// code, because AG-UI clients watch the event stream; only authentication
// failures and a body over the size limit (413, as on every wire) stay HTTP
// errors.
package agui

import (
	"fmt"
	"net/http"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/wire"
	"github.com/stackbone/stackbone/internal/wire/openai"
	"github.com/stackbone/stackbone/internal/wire/sse"
)

// Route is the pattern the wire is mounted on.
const Route = "POST /v1/agents/{agent}/agui"

// Via is the channel decisions made through a resume are recorded under.
const Via = "agui"

// Wire is the AG-UI wire.
type Wire struct {
	agents *agent.Registry
	// now stamps events the engine did not time.
	now func() time.Time
}

var _ wire.Wire = (*Wire)(nil)
var _ wire.Interrupter = (*Wire)(nil)

// NewWire makes the wire for the agents of agents; now stamps events the
// engine did not time (time.Now when nil).
func NewWire(agents *agent.Registry, now func() time.Time) *Wire {
	if now == nil {
		now = time.Now
	}
	return &Wire{agents: agents, now: now}
}

// TurnRoute is the AG-UI route.
func (*Wire) TurnRoute() string { return Route }

// SessionHeader: an AG-UI turn names its thread in the body (threadId).
func (*Wire) SessionHeader() bool { return false }

// ResolvesInterrupts: an AG-UI client resolves a pause itself (the run
// finishes with an interrupt outcome; the next run's resume answers it), so
// its turns never wait for a decision in-band.
func (*Wire) ResolvesInterrupts() bool { return true }

// Routes: the wire has no other route.
func (*Wire) Routes() map[string]func(http.ResponseWriter, *http.Request) error { return nil }

// DecodeTurn reads a RunAgentInput for the agent the path names.
func (wr *Wire) DecodeTurn(r *http.Request, body []byte) (wire.Turn, error) {
	req, err := DecodeContext(r.Context(), body)
	if err != nil {
		return nil, err
	}
	name := r.PathValue("agent")
	if wr.agents.Get(name) == nil {
		e := apierror.New(apierror.NotFound, "agent_not_found", fmt.Sprintf("No agent is named %q.", name))
		e.Param = "agent"
		return nil, e
	}
	in, err := req.Input(name)
	if err != nil {
		return nil, err
	}
	return &turn{wr: wr, req: req, in: in}, nil
}

type turn struct {
	wr  *Wire
	req *RunAgentInput
	in  engine.Input
}

func (t *turn) Input() engine.Input { return t.in }

// Answers are the request's resume entries: the turn answers the thread's
// pending decisions and continues its run.
func (t *turn) Answers() (string, []engine.Answer) { return Via, t.req.answers() }

// Param places an input error on the request's own paths (the Input's
// messages start with the context text and leave some messages out, so an
// index maps back through origin).
func (t *turn) Param(field string, i int) string {
	if field == engine.FieldModel {
		return "forwardedProps.model"
	}
	return wire.Param(field, i, t.req.ToolParam, t.req.origin, "messages[%d].toolCallId")
}

func (t *turn) Encoder(w http.ResponseWriter, run *engine.Run) wire.Encoder {
	runID := t.req.RunID
	if runID == "" {
		runID = run.ID
	}
	return t.wr.streamEncoder(w, t.req.ThreadID, runID, t.req)
}

// streamEncoder is the writer of an AG-UI run: a turn's (for the client
// that sent req), or a turn streamed again (RunEncoder, req nil: a 1.0
// client holding no message).
func (wr *Wire) streamEncoder(w http.ResponseWriter, threadID, runID string, req *RunAgentInput) wire.Encoder {
	sw := sse.NewBuffered(w)
	st := NewStream(sw, threadID, runID, wr.now)
	if req != nil {
		st = st.ForClient(req)
	}
	return &stream{Stream: st, sw: sw}
}

var _ wire.RunStreamer = (*Wire)(nil)

// StreamFormat is "agui": AG-UI events, RUN_STARTED to RUN_FINISHED.
func (*Wire) StreamFormat() string { return "agui" }

// Snapshots: an AG-UI client rebuilds its view from the stream.
func (*Wire) Snapshots() bool { return true }

// RunEncoder streams a turn again as the AG-UI run the client names.
func (wr *Wire) RunEncoder(w http.ResponseWriter, _ *http.Request, rs wire.RunStream) (wire.Encoder, error) {
	return wr.streamEncoder(w, rs.ThreadID, rs.RunID, nil), nil
}

// stream writes AG-UI events; an error (a run that ended without a
// terminal event) is a RUN_ERROR.
type stream struct {
	*Stream
	sw *sse.Writer
}

func (s *stream) Close(err *apierror.Error) error {
	if err != nil && !s.Done() {
		_ = s.Fail(err, 0)
	}
	return nil
}

func (s *stream) Ping() error { return s.sw.Comment("ping") }

func (s *stream) Flush() error { return s.sw.Flush() }

// WriteError renders an error that happened before the stream started:
// authentication and permission failures and an over-limit body as HTTP
// errors in the OpenAI envelope, everything else as a 200 stream holding one
// RUN_ERROR.
func (wr *Wire) WriteError(w http.ResponseWriter, e *apierror.Error) error {
	switch {
	case e.Status == http.StatusForbidden && e.Code == apierror.CodeForbiddenRole && e.Param == "resume":
		// A resume refused for the key's role is a RUN_ERROR, like any
		// other resume that cannot decide.
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden || e.Status == http.StatusRequestEntityTooLarge:
		return openai.WriteError(w, e)
	}
	return NewStream(sse.New(w), "", "", wr.now).Fail(e, 0)
}

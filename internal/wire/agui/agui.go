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

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/server"
	"github.com/stackbone/stackbone/internal/wire/openai"
	"github.com/stackbone/stackbone/internal/wire/sse"
)

// Route is the pattern the wire is mounted on.
const Route = "POST /v1/agents/{agent}/agui"

// Handler serves the AG-UI route.
type Handler struct {
	Server *server.Server
	// Now stamps events the engine did not time.
	Now func() time.Time
}

// Mount registers the AG-UI route and its error envelope on s.
func Mount(s *server.Server) {
	h := &Handler{Server: s, Now: time.Now}
	s.SetErrorWriter(server.WireAGUI, h.WriteError)
	s.Handle(Route, server.WireAGUI, true, h.Serve)
}

// Serve runs one AG-UI request. Errors before the stream starts are returned
// to the server's mapper, which renders them with WriteError.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request) error {
	body, err := server.ReadBody(r)
	if err != nil {
		return err
	}
	req, err := Decode(body)
	if err != nil {
		return err
	}
	name := r.PathValue("agent")
	if h.Server.Agents.Get(name) == nil {
		e := apierror.New(apierror.NotFound, "agent_not_found", fmt.Sprintf("No agent is named %q.", name))
		e.Param = "agent"
		return e
	}
	in, err := req.Input(name)
	if err != nil {
		return err
	}
	p := server.PrincipalFrom(r.Context())
	in.Tenant, in.DecidedBy = p.Tenant, p.Name
	run, err := h.Server.Runner.Start(r.Context(), in)
	if err != nil {
		return engine.ClientToolParam(err, req.ToolParam)
	}
	runID := req.RunID
	if runID == "" {
		runID = run.ID
	}
	sw := sse.New(w)
	st := NewStream(sw, req.ThreadID, runID, h.Now).ForClient(req)
	stop := sse.KeepAlive(server.KeepAliveInterval, func() { _ = sw.Comment("ping") })
	defer stop()
	for e := range run.Events() {
		if err := st.Write(e); err != nil {
			return nil // client gone; a durable run goes on
		}
	}
	if !st.Done() {
		_ = st.Fail(apierror.IncompleteRun(), 0)
	}
	return nil
}

// WriteError renders an error that happened before the stream started:
// authentication and permission failures and an over-limit body as HTTP
// errors in the OpenAI envelope, everything else as a 200 stream holding one
// RUN_ERROR.
func (h *Handler) WriteError(w http.ResponseWriter, e *apierror.Error) error {
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusRequestEntityTooLarge:
		return openai.WriteError(w, e)
	}
	now := h.Now
	if now == nil {
		now = time.Now
	}
	return NewStream(sse.New(w), "", "", now).Fail(e, 0)
}

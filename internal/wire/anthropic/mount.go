package anthropic

import (
	"fmt"
	"net/http"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/server"
	"github.com/stackbone/stackbone/internal/wire/httpjson"
	"github.com/stackbone/stackbone/internal/wire/sse"
)

// Mount registers the Anthropic Messages wire on s: POST /v1/messages
// (streaming or not) and POST /v1/messages/count_tokens, with errors in
// Anthropic's envelope. The anthropic-version header is not checked: every
// version is served the same way.
func Mount(s *server.Server) {
	h := &handler{s: s}
	s.SetErrorWriter(server.WireAnthropic, WriteError)
	s.Handle("POST /v1/messages", server.WireAnthropic, true, h.messages)
	s.Handle("POST /v1/messages/count_tokens", server.WireAnthropic, true, h.countTokens)
}

type handler struct {
	s *server.Server
}

// agentText is what an agent adds to every request it sees: instructions
// and tool definitions.
func agentText(spec *agent.Spec) []string {
	if spec == nil {
		return nil
	}
	out := []string{spec.Instructions}
	for _, t := range spec.Tools {
		out = append(out, t.Name, t.Description, string(t.Parameters))
	}
	return out
}

func (h *handler) messages(w http.ResponseWriter, r *http.Request) error {
	body, err := server.ReadBody(r)
	if err != nil {
		return err
	}
	req, err := Decode(body)
	if err != nil {
		return err
	}
	in, err := req.Input()
	if err != nil {
		return err
	}
	run, err := h.s.StartTurn(r, in)
	if err != nil {
		return engine.ClientToolParam(err, req.ToolParam)
	}
	id := h.s.Runner.NewID("msg")
	if !req.Stream {
		col := NewCollector(id, req.Model)
		for e, err := range run.Events() {
			col.Add(e, err)
		}
		res, err := col.Result()
		if err != nil {
			return err
		}
		return httpjson.Write(w, http.StatusOK, res)
	}
	sw := sse.New(w)
	st := NewStream(sw, id, req.Model, EstimateTokens(req, agentText(h.s.Agents.Get(req.Model))...))
	stop := sse.KeepAlive(server.KeepAliveInterval, func() { _ = st.Ping() })
	defer stop()
	for e, err := range run.Events() {
		if werr := st.Write(e, err); werr != nil {
			return nil // client gone; a durable run goes on
		}
	}
	_ = st.End()
	return nil
}

func (h *handler) countTokens(w http.ResponseWriter, r *http.Request) error {
	body, err := server.ReadBody(r)
	if err != nil {
		return err
	}
	req, err := DecodeCount(body)
	if err != nil {
		return err
	}
	spec := h.s.Agents.Get(req.Model)
	if req.Model != "" && spec == nil {
		return apierror.New(apierror.NotFound, "model_not_found", fmt.Sprintf("model: %s: no agent has that name", req.Model))
	}
	n := EstimateTokens(req, agentText(spec)...)
	return httpjson.Write(w, http.StatusOK, map[string]int{"input_tokens": n})
}

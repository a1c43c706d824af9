package server

import (
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/ids"
	"github.com/stackbone/stackbone/internal/wire/httpjson"
	"github.com/stackbone/stackbone/internal/wire/openai"
	"github.com/stackbone/stackbone/internal/wire/sse"
)

// SessionHeader makes a turn durable in the named thread.
const SessionHeader = "x-stackbone-session"

// IdempotencyKeyHeader names a stateless turn for its retries: a retry with
// the same key continues the turn from its recorded tool steps.
const IdempotencyKeyHeader = "Idempotency-Key"

// KeepAliveInterval is how often idle streams get a keepalive.
var KeepAliveInterval = 15 * time.Second

// StartTurn starts a chat turn for the caller: the tenant from its key, the
// durable thread from the x-stackbone-session header (none: stateless), and
// for a stateless turn the client's Idempotency-Key.
func (s *Server) StartTurn(r *http.Request, in engine.Input) (*engine.Run, error) {
	p := PrincipalFrom(r.Context())
	in.Tenant, in.DecidedBy = p.Tenant, p.Name
	in.ThreadID = r.Header.Get(SessionHeader)
	if err := CheckSession(in.ThreadID); err != nil {
		return nil, err
	}
	if in.ThreadID == "" {
		in.IdempotencyKey = r.Header.Get(IdempotencyKeyHeader)
		if len(in.IdempotencyKey) > 256 || !utf8.ValidString(in.IdempotencyKey) {
			return nil, apierror.Invalid(IdempotencyKeyHeader, "The Idempotency-Key must be valid UTF-8 of at most 256 bytes.")
		}
	}
	return s.Runner.Start(r.Context(), in)
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	req, err := openai.Decode(body)
	if err != nil {
		return err
	}
	in, err := req.Input()
	if err != nil {
		return err
	}
	run, err := s.StartTurn(r, in)
	if err != nil {
		return engine.ClientToolParam(err, req.ToolParam)
	}
	id := "chatcmpl-" + ids.New("")[1:]
	created := s.Now().Unix()
	if !req.Stream {
		col := openai.NewCollector(id, req.Model, created)
		for e, err := range run.Events() {
			col.Add(e, err)
		}
		comp, err := col.Result()
		if err != nil {
			return err
		}
		return httpjson.Write(w, http.StatusOK, comp)
	}
	sw := sse.New(w)
	st := openai.NewStream(sw, id, req.Model, created, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
	stop := sse.KeepAlive(KeepAliveInterval, func() { _ = sw.Comment("keepalive") })
	defer stop()
	for e := range run.Events() {
		if err := st.Write(e); err != nil {
			return nil // client gone; a durable run goes on
		}
	}
	return nil
}

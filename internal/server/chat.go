package server

import (
	"context"
	"iter"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/ids"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/wire"
	"github.com/stackbone/stackbone/internal/wire/httpjson"
	"github.com/stackbone/stackbone/internal/wire/sse"
)

// SessionHeader makes a turn durable in the named thread (wire.SessionHeader).
const SessionHeader = wire.SessionHeader

// MultitaskHeader chooses what a request does when it meets a turn still
// running on its thread (engine.Input.Multitask), on every wire.
const MultitaskHeader = "x-stackbone-multitask"

// UserHeader names the end user a turn is for (engine.Input.UserID): the
// built-in memory tools keep that user's facts ({userId}). It is trusted as
// sent, by any key of the tenant: until end-user sign-in exists, the
// application in front of Stackbone sets it.
const UserHeader = "x-stackbone-user"

// IdempotencyKeyHeader names a turn for its retries (wire.IdempotencyKeyHeader).
const IdempotencyKeyHeader = wire.IdempotencyKeyHeader

// DefaultKeepAliveInterval is how often idle streams get a keepalive unless
// Server.KeepAliveInterval says otherwise.
const DefaultKeepAliveInterval = 15 * time.Second

// Mount serves a wire: its turn route through the one turn handler, its
// other routes, and its errors in its envelope. A route that is not a read
// (DELETE or POST of a stored response, its cancel) acts on what turns made,
// so it takes a key that may start turns: an approver key only reads them.
func (s *Server) Mount(id Wire, tw wire.Wire) {
	s.SetErrorWriter(id, tw.WriteError)
	if rs, ok := tw.(wire.RunStreamer); ok {
		if s.formats == nil {
			s.formats = map[string]wire.RunStreamer{}
		}
		s.formats[rs.StreamFormat()] = rs
	}
	s.Handle(tw.TurnRoute(), id, true, func(w http.ResponseWriter, r *http.Request) error { return s.serveTurn(w, r, tw) })
	for pattern, h := range tw.Routes() {
		if method, _, _ := strings.Cut(pattern, " "); method != http.MethodGet && method != http.MethodHead {
			h = turnAction(h)
		}
		s.Handle(pattern, id, true, h)
	}
}

// turnAction refuses h to a key whose role cannot start turns (403
// forbidden_role).
func turnAction(h HandlerFunc) HandlerFunc { return requires(ActTurn, h) }

// requires is h behind a role check: a key whose role may not act gets
// 403 forbidden_role before its body is read.
func requires(act Action, h HandlerFunc) HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := PrincipalFrom(r.Context()).Allow(act, ""); err != nil {
			return err
		}
		return h(w, r)
	}
}

// serveTurn is the one turn handler: decode, start (or resume) the run for
// the caller, then encode its events, with keepalives while it streams (and,
// when the request waits for decisions in-band, approvalWait, through the
// turn's pauses to its end).
// Errors before the first event return to the wire's error mapper.
func (s *Server) serveTurn(w http.ResponseWriter, r *http.Request, tw wire.Wire) error {
	body, err := httpjson.ReadBody(r)
	if err != nil {
		return err
	}
	t, err := tw.DecodeTurn(r, body)
	if err != nil {
		return err
	}
	wait, err := s.approvalWait(r, tw, t)
	if err != nil {
		return err
	}
	run, err := s.startTurn(r, tw, t)
	if err != nil {
		return apierror.At(err, t.Param)
	}
	// A client that goes away before the run's end abandons it
	// (engine.Run.Abandon); stop keeps a request that ended normally from
	// counting as one.
	stop := context.AfterFunc(r.Context(), run.Abandon)
	defer stop()
	if wait > 0 {
		return s.encodeWaiting(r.Context(), PrincipalFrom(r.Context()).Tenant, t.Encoder(w, run), run, wait)
	}
	return s.EncodeRun(t.Encoder(w, run), run)
}

// EncodeRun is Encode for a run's events: a buffered encoder
// (wire.Flusher) is flushed whenever the run has no further event ready, so
// a burst of events goes out in one write and a lone event at once.
func (s *Server) EncodeRun(enc wire.Encoder, run *engine.Run) error {
	return s.encode(enc, run.Events(), run.Buffered)
}

// Encode writes a run's events with enc, with keepalives while it streams,
// and ends the response: a run whose events end without a terminal event
// is reported as incomplete on every wire. A buffered encoder (wire.Flusher)
// is flushed after each event.
func (s *Server) Encode(enc wire.Encoder, events iter.Seq[event.Event]) error {
	return s.encode(enc, events, func() int { return 0 })
}

// encode is the loop of Encode; ready tells how many events are ready
// without waiting.
func (s *Server) encode(enc wire.Encoder, events iter.Seq[event.Event], ready func() int) error {
	if p, ok := enc.(wire.Pinger); ok {
		stop := s.KeepAlive(func() { _ = p.Ping() })
		defer stop()
	}
	fl, _ := enc.(wire.Flusher)
	terminal := false
	for e := range events {
		if err := enc.Write(e); err != nil {
			return nil // client gone; a durable run goes on
		}
		if e.Type == event.RunFinished || e.Type == event.RunError {
			terminal = true
		}
		if fl != nil && ready() == 0 {
			if err := fl.Flush(); err != nil {
				return nil
			}
		}
	}
	var err error
	if !terminal {
		err = enc.Close(apierror.IncompleteRun())
	} else {
		err = enc.Close(nil)
	}
	if fl != nil {
		_ = fl.Flush()
	}
	return err
}

// startTurn starts a turn for the caller: the tenant from its key and, on
// wires that take them from headers, the durable thread from the
// x-stackbone-session header (none: stateless) and the turn's
// Idempotency-Key.
func (s *Server) startTurn(r *http.Request, tw wire.Wire, t wire.Turn) (*engine.Run, error) {
	p := PrincipalFrom(r.Context())
	// The one role check of every turn wire: a resume decides (an AG-UI
	// resume), anything else starts a turn.
	var via string
	var answers []engine.Answer
	if rs, ok := t.(wire.Resumer); ok {
		via, answers = rs.Answers()
	}
	act, param := ActTurn, ""
	if len(answers) > 0 {
		act, param = ActDecide, "resume"
	}
	if err := p.Allow(act, param); err != nil {
		return nil, err
	}
	in := t.Input()
	in.Tenant, in.DecidedBy, in.Key = p.Tenant, p.Name, p.Name
	in.User, in.AnyOwner = p.ToolUser(), p.AnyOwner()
	if v := r.Header.Get(MultitaskHeader); v != "" {
		in.Multitask = v // the header wins over a body's choice
	}
	if in.User != nil {
		// A signed-in end user is the turn's user: the header, which any
		// caller can set, does not name someone else.
		in.UserID = in.User.ID
	} else if v := r.Header.Get(UserHeader); v != "" {
		if err := store.CheckNamespace(UserHeader, []string{v}, false); err != nil {
			return nil, apierror.Invalid(UserHeader, "`%s` must be a user id of at most %d bytes of UTF-8 without '.' or control characters: it is a label of the memory store's namespaces.",
				UserHeader, store.MaxMemoryLabelBytes)
		}
		in.UserID = v
	}
	if tw.SessionHeader() {
		in.ThreadID = r.Header.Get(SessionHeader)
		if err := apierror.CheckID(SessionHeader, in.ThreadID); err != nil {
			return nil, err
		}
		in.IdempotencyKey = r.Header.Get(IdempotencyKeyHeader)
		if len(in.IdempotencyKey) > ids.MaxClientBytes || !utf8.ValidString(in.IdempotencyKey) {
			return nil, apierror.Invalid(IdempotencyKeyHeader, "The Idempotency-Key must be valid UTF-8 of at most %d bytes.", ids.MaxClientBytes)
		}
	}
	if p, ok := t.(wire.Preparer); ok {
		var err error
		if in, err = p.Prepare(r.Context(), in); err != nil {
			return nil, err
		}
	}
	if rp, ok := t.(wire.Replayer); ok {
		if run, err := rp.Replay(r.Context()); run != nil || err != nil {
			return run, err
		}
	}
	if len(answers) > 0 {
		return s.Runner.ResumeDecisions(r.Context(), in, via, answers)
	}
	return s.Runner.Start(r.Context(), in)
}

// KeepAlive calls ping every KeepAliveInterval until the returned stop is
// called: the one keepalive of every stream the server serves (ping must be
// safe to call concurrently with the stream's writes, as sse.Writer is).
func (s *Server) KeepAlive(ping func()) (stop func()) {
	return sse.KeepAlive(s.keepAliveEvery(), ping)
}

func (s *Server) keepAliveEvery() time.Duration {
	if s.KeepAliveInterval <= 0 {
		return DefaultKeepAliveInterval
	}
	return s.KeepAliveInterval
}

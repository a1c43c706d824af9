package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/wire"
)

// DefaultStreamFormat is the format of GET
// /v1/threads/{id}/runs/{run}/stream without ?format=: AG-UI events, the
// one format that carries all a UI shows (text, tool calls, state,
// decisions) as plain data lines an EventSource reads.
const DefaultStreamFormat = "agui"

// streamRun is GET /v1/threads/{id}/runs/{run}/stream: the turn of a run of
// the thread streamed again, from its first event, then live to its end, in
// the streaming format of a wire (?format=openai|anthropic|agui|responses),
// so a UI built on any wire reattaches after a reload. A finished run's
// stream is its stored events. A key that may start turns follows the turn
// as its client (a running turn it follows is no longer abandoned, and its
// going away abandons it again); any other reads it passively.
func (s *Server) streamRun(w http.ResponseWriter, r *http.Request) error {
	p := PrincipalFrom(r.Context())
	id, runID := r.PathValue("id"), r.PathValue("run")
	name := r.URL.Query().Get("format")
	if name == "" {
		name = DefaultStreamFormat
	}
	format, ok := s.formats[name]
	if !ok {
		names := make([]string, 0, len(s.formats))
		for n := range s.formats {
			names = append(names, n)
		}
		slices.Sort(names)
		return apierror.Invalid("format", "format must be one of %s, not %q.", strings.Join(names, ", "), name)
	}
	th, err := s.Store.GetThread(r.Context(), p.Tenant, id)
	if err != nil {
		return threadErr(err, id, "")
	}
	from, err := s.runTurn(r.Context(), th, runID)
	if errors.Is(err, store.ErrNotFound) {
		// A follow-up still queued: its stream starts with its turn.
		if qfrom, queued, qerr := s.queuedFrom(r, p.Tenant, id, runID); queued || qerr != nil {
			from, err = qfrom, qerr
		}
	}
	if err != nil {
		return err
	}
	rs := wire.RunStream{Tenant: p.Tenant, ThreadID: id, RunID: runID, Agent: th.Agent, TurnSeq: from}
	run, err := s.Runner.FollowTurn(r.Context(), engine.FollowTurn{Tenant: p.Tenant, ThreadID: id, From: from,
		Snapshots: format.Snapshots(), Client: p.Allow(ActTurn, "") == nil})
	if err != nil {
		return threadErr(err, id, "")
	}
	enc, err := format.RunEncoder(w, r, rs)
	if err != nil {
		run.Abandon()
		return err
	}
	stop := context.AfterFunc(r.Context(), run.Abandon)
	defer stop()
	return s.EncodeRun(enc, run)
}

// runTurn is the first event of the turn run runID of th belongs to: the
// thread's turn for its current (or last) run, which may not be recorded
// yet, else the recorded run's.
func (s *Server) runTurn(ctx context.Context, th *store.Thread, runID string) (int64, error) {
	if runID == th.RunID && th.Turn.Seq > 0 {
		return th.Turn.Seq, nil
	}
	seq, err := s.Store.RunTurn(ctx, th.Tenant, th.ID, runID)
	if errors.Is(err, store.ErrNotFound) {
		e := apierror.New(apierror.NotFound, "not_found", fmt.Sprintf("Thread %q has no run %q.", th.ID, runID))
		e.Param, e.Err = "run", err
		return 0, e
	}
	return seq, err
}

package server

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/wire/httpjson"
)

// QueuedView is one follow-up waiting in a thread's queue (GET
// /v1/threads/{id}/queue).
type QueuedView struct {
	// ID is the run id the queued turn will run under (its stream, once it
	// starts: GET /v1/threads/{id}/runs/{run}/stream).
	ID string `json:"id"`
	// Position is its place in the queue, 1 next.
	Position int `json:"position"`
	// Messages are what its request sent.
	Messages  SeqMessages `json:"messages"`
	CreatedAt time.Time   `json:"createdAt"`
}

// QueueList is GET /v1/threads/{id}/queue.
type QueueList struct {
	// Object is "list".
	Object string       `json:"object"`
	Data   []QueuedView `json:"data"`
}

// QueueRemoved is the answer of DELETE /v1/threads/{id}/queue/{run}.
type QueueRemoved struct {
	// Object is "thread.queue.deleted".
	Object  string `json:"object"`
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
}

// listQueue is GET /v1/threads/{id}/queue: the follow-ups that wait for the
// thread's running turn (multitask enqueue), in the order they run.
func (s *Server) listQueue(w http.ResponseWriter, r *http.Request) error {
	tenant, id := PrincipalFrom(r.Context()).Tenant, r.PathValue("id")
	qs, err := s.Runner.Queue(r.Context(), tenant, id)
	if err != nil {
		return threadErr(err, id, "")
	}
	out := QueueList{Object: "list", Data: make([]QueuedView, 0, len(qs))}
	for _, q := range qs {
		out.Data = append(out.Data, QueuedView{ID: q.ID, Position: q.Position, Messages: q.Messages, CreatedAt: q.QueuedAt})
	}
	return httpjson.Write(w, http.StatusOK, out)
}

// unqueue is DELETE /v1/threads/{id}/queue/{run}: a follow-up leaves the
// queue before its turn starts (its request ends cancelled). A turn that
// started already, or an unknown id, is a 404.
func (s *Server) unqueue(w http.ResponseWriter, r *http.Request) error {
	tenant, id, runID := PrincipalFrom(r.Context()).Tenant, r.PathValue("id"), r.PathValue("run")
	ok, err := s.Runner.Unqueue(r.Context(), tenant, id, runID)
	if err != nil {
		return threadErr(err, id, "")
	}
	if !ok {
		e := apierror.New(apierror.NotFound, "not_found", fmt.Sprintf("Thread %q has no queued turn %q (a turn that started is cancelled with POST /v1/threads/%s/cancel).", id, runID, id))
		e.Param = "run"
		return e
	}
	return httpjson.Write(w, http.StatusOK, QueueRemoved{Object: "thread.queue.deleted", ID: runID, Deleted: true})
}

// queuedFrom waits, for a stream of a run that is still queued, until its
// turn starts, and returns the turn's first event: found false when runID is
// not queued on the thread.
func (s *Server) queuedFrom(r *http.Request, tenant, threadID, runID string) (from int64, found bool, err error) {
	qs, err := s.Store.Queue(r.Context(), tenant, threadID)
	if err != nil {
		return 0, false, err
	}
	for _, q := range qs {
		if q.ID == runID {
			from, err = s.Runner.WaitQueued(r.Context(), tenant, threadID, runID)
			var qr *engine.QueuedRemovedError
			if errors.As(err, &qr) {
				return 0, true, apierror.New(apierror.NotFound, "not_found", qr.Error())
			}
			return from, true, err
		}
	}
	return 0, false, nil
}

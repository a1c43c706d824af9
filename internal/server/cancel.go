package server

import (
	"net/http"

	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/wire/httpjson"
)

// ThreadCancel is the answer of POST /v1/threads/{id}/cancel.
type ThreadCancel struct {
	// Object is "thread.cancel".
	Object string `json:"object"`
	// ID is the thread's id.
	ID string `json:"id"`
	// Cancelled reports whether the thread was running a turn the cancel
	// was asked of (false: nothing was running, and nothing changed).
	Cancelled bool `json:"cancelled"`
	// Status is the thread's status read after the stop: no longer
	// running once the run has stopped; still running only when it did not
	// stop within the route's bounded wait (it stops later all the same).
	Status store.ThreadStatus `json:"status"`
}

// cancelThread is POST /v1/threads/{id}/cancel (body optional and empty):
// it stops the thread's running turn, wherever it runs, waits until it has
// stopped, and answers what happened. A thread that runs nothing is left
// as it is (cancelled false), so the route is idempotent.
func (s *Server) cancelThread(w http.ResponseWriter, r *http.Request) error {
	if err := decodeOptional(r, &struct{}{}); err != nil {
		return err
	}
	ctx, tenant, id := r.Context(), PrincipalFrom(r.Context()).Tenant, r.PathValue("id")
	th, err := s.Store.GetThread(ctx, tenant, id)
	if err != nil {
		return threadErr(err, id, "")
	}
	running := th.Status == store.Running
	if running {
		stopped, err := s.Runner.Stop(ctx, tenant, id)
		if err != nil {
			return threadErr(err, id, "")
		}
		if !stopped {
			s.Logger.WarnContext(ctx, "thread cancel: the run did not stop in time", "thread", id, "run", th.RunID, "wait", engine.StopWait)
		}
		if th, err = s.Store.GetThread(ctx, tenant, id); err != nil {
			return threadErr(err, id, "")
		}
	}
	return httpjson.Write(w, http.StatusOK, ThreadCancel{Object: "thread.cancel", ID: id, Cancelled: running, Status: th.Status})
}

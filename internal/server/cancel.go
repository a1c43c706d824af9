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
	// Cancelled reports whether the thread had a turn the cancel was asked
	// of: one running, or one waiting on decisions (false: nothing was
	// running or waiting, and nothing changed).
	Cancelled bool `json:"cancelled"`
	// Status is the thread's status read after the stop: idle once a
	// waiting turn was cancelled; no longer running once the run has
	// stopped; still running only when it did not stop within the route's
	// bounded wait (it stops later all the same).
	Status store.ThreadStatus `json:"status"`
}

// cancelThread is POST /v1/threads/{id}/cancel (body optional and empty):
// it stops the thread's running turn, wherever it runs, waits until it has
// stopped, and answers what happened. A turn that waits on decisions (or
// whose resume is due but not started) is cancelled too
// (engine.CancelWaiting): its pending decisions close as cancelled by the
// caller, its paused calls do not run, and the thread becomes idle. A
// thread that runs nothing and waits on nothing is left as it is
// (cancelled false), so the route is idempotent.
func (s *Server) cancelThread(w http.ResponseWriter, r *http.Request) error {
	if err := decodeOptional(r, &struct{}{}); err != nil {
		return err
	}
	ctx, tenant, id := r.Context(), PrincipalFrom(r.Context()).Tenant, r.PathValue("id")
	th, err := s.Store.GetThread(ctx, tenant, id)
	if err != nil {
		return threadErr(err, id, "")
	}
	cancelled := false
	if th.Status == store.Waiting || th.Status == store.Queued {
		if cancelled, err = s.Runner.CancelWaiting(ctx, tenant, id, PrincipalFrom(ctx).Name); err != nil {
			return threadErr(err, id, "")
		}
		// Not cancelled: a resume took the thread meanwhile (it runs now).
		if th, err = s.Store.GetThread(ctx, tenant, id); err != nil {
			return threadErr(err, id, "")
		}
	}
	if !cancelled && th.Status == store.Running {
		cancelled = true
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
	return httpjson.Write(w, http.StatusOK, ThreadCancel{Object: "thread.cancel", ID: id, Cancelled: cancelled, Status: th.Status})
}

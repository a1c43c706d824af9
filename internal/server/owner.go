package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
)

// Per-user threads: a thread an end user created (store.Thread.Owner) is
// seen only by them and by admins; every other caller of the tenant (another
// user, a caller or approver key) gets 404 for it, as for a thread that does
// not exist. Approvers still see and decide the decisions of every thread
// of the tenant (not the conversations, unless the operator lets them:
// STACKBONE_APPROVERS_READ_THREADS, Principal.ReadsAllThreads).

// AnyOwner reports whether p sees every thread of its tenant: an admin,
// or an approver when the operator lets approvers read conversations.
func (p Principal) AnyOwner() bool { return p.admin() || p.ReadsAllThreads }

// admin reports whether p has the admin role (a key without a role is an
// admin key).
func (p Principal) admin() bool { return p.Role == "" || p.Role == config.RoleAdmin }

// Sees reports whether p sees a thread of its tenant owned by owner ("" a
// thread of the tenant's): store.Sees.
func (p Principal) Sees(owner string) bool { return store.Sees(owner, p.User.ID, p.AnyOwner()) }

// SeesAllDecisions reports whether p lists and reads the decisions of every
// thread of its tenant: admins and approvers.
func (p Principal) SeesAllDecisions() bool { return p.AnyOwner() || p.Role == config.RoleApprover }

// ToolUser is the end user p names, as tools see them (nil for a key).
func (p Principal) ToolUser() *tool.User {
	if p.User.ID == "" {
		return nil
	}
	return &tool.User{ID: p.User.ID, Label: p.User.Label}
}

// seesThread is nil when the caller sees the thread id of its tenant, or
// when there is no such thread (the handler answers for it); a thread of
// another user is the 404 of an unknown thread.
func (s *Server) seesThread(r *http.Request, id string) error {
	p := PrincipalFrom(r.Context())
	if p.AnyOwner() || id == "" {
		return nil
	}
	th, err := s.Store.GetThread(r.Context(), p.Tenant, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return err
	case !p.Sees(th.Owner):
		return threadNotFound(id)
	}
	return nil
}

// owned is h behind seesThread on the route's {id}, a thread id.
func (s *Server) owned(h HandlerFunc) HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := s.seesThread(r, r.PathValue("id")); err != nil {
			return err
		}
		return h(w, r)
	}
}

// seesDecision is nil when the caller sees the decision it: every decision
// for an admin or an approver, else those of threads it sees, and those of
// no thread (a stateless turn's) whose owner it sees. notFound is the error
// of a decision it does not see.
func (s *Server) seesDecision(r *http.Request, it *store.Interrupt, notFound error) error {
	p := PrincipalFrom(r.Context())
	switch {
	case p.SeesAllDecisions():
		return nil
	case it.ThreadID == "":
		if !p.Sees(it.Owner) {
			return notFound
		}
		return nil
	}
	if err := s.seesThread(r, it.ThreadID); err != nil {
		if apierror.From(err).Kind == apierror.NotFound {
			return notFound
		}
		return err
	}
	return nil
}

// TenantWide is h behind the rule of the routes that show the whole
// tenant's doings across threads (webhook deliveries, usage by key): an
// end user's token reads them only with the admin role (403
// forbidden_role); keys read them as before. (Studio's live changes tell
// each caller of the threads it sees instead.)
func TenantWide(h HandlerFunc) HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if p := PrincipalFrom(r.Context()); p.User.ID != "" && !p.admin() {
			return apierror.New(apierror.Permission, CodeForbiddenRole,
				fmt.Sprintf("This access token has role %q: what this route shows spans every user's threads, so only an admin token reads it.", p.Role))
		}
		return h(w, r)
	}
}

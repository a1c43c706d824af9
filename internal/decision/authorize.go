package decision

import (
	"errors"
	"fmt"
	"time"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
)

// RoleError is a key, or an end user's token, whose role may not decide
// (403 forbidden_role).
type RoleError struct {
	// Role is the refused caller's role.
	Role config.Role
	// EndUser is set when the role is an end user's (their token's role
	// claim), not a key's.
	EndUser bool
}

// Error is the public message of the refusal. An end user with the
// caller role is refused also on their own threads: a caller may chat,
// not decide.
func (e *RoleError) Error() string {
	what := "decide approvals"
	if e.EndUser {
		what = "decide approvals, not even on the user's own threads"
	}
	return e.Role.Refusal(e.EndUser, what, "approver or admin")
}

// AllowRole is the one rule of which key roles may decide: admin (or no
// role) and approver. Otherwise a *RoleError.
func AllowRole(r config.Role) error {
	if r.CanDecide() {
		return nil
	}
	return &RoleError{Role: r}
}

// ExpiredError is a decision that expired before anyone made it. It is
// store.ErrDecisionExpired (errors.Is). Unrecorded says the interrupt is
// still pending past its expiry: the caller records the expiry (as a
// rejection via store.ViaExpiry) before it reports the error.
type ExpiredError struct {
	// ID is the interrupt's id.
	ID string
	// Unrecorded: still pending past its expiry; the caller records it.
	Unrecorded bool
}

// Error names the interrupt and store.ErrDecisionExpired.
func (e *ExpiredError) Error() string {
	return fmt.Sprintf("interrupt %q: %v", e.ID, store.ErrDecisionExpired)
}

// Is makes the error store.ErrDecisionExpired.
func (e *ExpiredError) Is(target error) bool { return target == store.ErrDecisionExpired }

// ErrForeign is an interrupt of another tenant: to its caller it does not
// exist (store.ErrNotFound).
var ErrForeign = fmt.Errorf("the decision belongs to another tenant: %w", store.ErrNotFound)

// Who is who gives an answer.
type Who struct {
	// Tenant is the caller's tenant; empty: not checked (the interrupt was
	// read under it).
	Tenant string
	// By is the deciding principal's name, counted once toward a quorum.
	By string
	// Role is the deciding key's role; empty: not checked again (the
	// server checked it with AllowRole before the body was read).
	Role config.Role
}

// MayDecide is the one check of whether who may give a (before it is
// validated) on it at now, on every path that decides: the role
// (AllowRole), the tenant (ErrForeign), the expiry (*ExpiredError, for an
// interrupt decided by its expiry or pending past it), the status
// (store.ErrAlreadyDecided when decided otherwise) and the quorum
// (store.ErrAlreadyApproved when By already approved these arguments, by
// store.Tally's rule).
func MayDecide(it *store.Interrupt, who Who, a Answer, now time.Time) error {
	if who.Role != "" {
		if err := AllowRole(who.Role); err != nil {
			return err
		}
	}
	if who.Tenant != "" && it.Tenant != "" && who.Tenant != it.Tenant {
		return fmt.Errorf("interrupt %q: %w", it.ID, ErrForeign)
	}
	if Expired(it) {
		return &ExpiredError{ID: it.ID}
	}
	if it.Status != store.Pending {
		return fmt.Errorf("interrupt %q: %w", it.ID, store.ErrAlreadyDecided)
	}
	if it.ExpiresAt != nil && !now.Before(*it.ExpiresAt) {
		return &ExpiredError{ID: it.ID, Unrecorded: true}
	}
	if it.Needed() > 1 && approves(a) {
		d := store.Decision{Approved: true, EditedArgs: a.EditedArgs, By: who.By, At: now}
		if _, _, err := store.Tally(it, &d); errors.Is(err, store.ErrAlreadyApproved) {
			return err
		}
	}
	return nil
}

// approves reports whether an answer, as given, approves the call as it
// stands (what counts toward a quorum): approve, or approved without a
// verdict or a rejection.
func approves(a Answer) bool {
	switch a.Kind {
	case tool.Approve, tool.Edit:
		return true
	case "":
		return a.Approved || len(a.EditedArgs) > 0
	}
	return false
}

// Package apierror is the one typed error every handler returns and every
// wire renders in its own envelope. The public Message is separate from the
// internal Err, which only reaches the logs.
package apierror

import (
	"context"
	"errors"
	"fmt"
	"github.com/stackbone/stackbone/internal/usage"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/stackbone/stackbone/internal/decision"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/ids"
	"github.com/stackbone/stackbone/internal/memory"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/store"
)

// CodeEmbeddingsFailed is the code of a memory request whose embedding
// call failed (502): nothing was written.
const CodeEmbeddingsFailed = "embeddings_failed"

// Kind classifies an error independently of any wire.
type Kind string

// Error kinds. Each wire maps a kind to its own type names.
const (
	InvalidRequest Kind = "invalid_request"
	Authentication Kind = "authentication"
	Permission     Kind = "permission"
	NotFound       Kind = "not_found"
	Conflict       Kind = "conflict"
	TooLarge       Kind = "too_large"
	RateLimit      Kind = "rate_limit"
	Internal       Kind = "internal"
	Unavailable    Kind = "unavailable"
	Overloaded     Kind = "overloaded"
	Upstream       Kind = "upstream"
)

// The public message of a pending approval, exactly as the docs give it.
const ApprovalPendingMessage = "This conversation is waiting on a human decision. Resolve it before sending a new message."

// Error is an API error.
type Error struct {
	Status  int
	Kind    Kind
	Code    string
	Message string
	Param   string
	// NoRetry asks clients not to retry (x-should-retry: false).
	NoRetry bool
	// RetryAfter, when positive, is when a retry could succeed (retry-after,
	// retry-after-ms): with NoRetry only information (an upstream's rate
	// limit after the turn had side effects), else it also tells clients a
	// retry is safe (x-should-retry: true). See SetRetryHeaders.
	RetryAfter time.Duration
	// Details carries structured extra data (e.g. schema errors).
	Details any
	// Err is internal detail for logs; never shown to clients.
	Err error
}

// Error returns the public message, with the internal detail when present
// (for logs; clients see only Message).
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %v", e.Message, e.Err)
	}
	return e.Message
}

// Unwrap returns the internal error.
func (e *Error) Unwrap() error { return e.Err }

// New makes an error of a kind with the kind's status.
func New(kind Kind, code, msg string) *Error {
	return &Error{Status: statusOf(kind), Kind: kind, Code: code, Message: msg}
}

// Invalid is a 400 with a parameter name.
func Invalid(param, format string, args ...any) *Error {
	e := New(InvalidRequest, "invalid_request", fmt.Sprintf(format, args...))
	e.Param = param
	return e
}

// CheckID is the 400 for a client-chosen id (a session key, an AG-UI
// threadId, runId or interruptId) that ids.CheckClient refuses, naming the
// parameter; nil when the id is fine. Every wire checks thread ids with it.
func CheckID(param, id string) error {
	err := ids.CheckClient(id)
	if err == nil {
		return nil
	}
	e := Invalid(param, "`%s` %v: an id must be valid UTF-8 of at most %d bytes, without control or formatting characters.", param, err, ids.MaxClientBytes)
	e.Code = "invalid_id"
	return e
}

func statusOf(k Kind) int {
	switch k {
	case InvalidRequest:
		return http.StatusBadRequest
	case Authentication:
		return http.StatusUnauthorized
	case Permission:
		return http.StatusForbidden
	case NotFound:
		return http.StatusNotFound
	case Conflict:
		return http.StatusConflict
	case TooLarge:
		return http.StatusRequestEntityTooLarge
	case RateLimit:
		return http.StatusTooManyRequests
	case Unavailable:
		return http.StatusServiceUnavailable
	case Overloaded:
		return 529
	case Upstream:
		return http.StatusBadGateway
	default:
		return http.StatusInternalServerError
	}
}

// ApprovalPending is the 409 a paused session answers with.
func ApprovalPending() *Error {
	e := New(Conflict, "approval_pending", ApprovalPendingMessage)
	e.Kind = InvalidRequest
	e.NoRetry = true
	return e
}

// DefaultRetryAfter is the retry-after of a failure that is safe to retry
// and names no wait of its own.
const DefaultRetryAfter = time.Second

// From maps any error to an *Error: typed errors keep their meaning, anything
// else is a 500 whose detail stays internal. It also decides, in this one
// place, whether clients may retry (see advise).
func From(err error) *Error {
	var rf *engine.RunFailedError
	if errors.As(err, &rf) {
		return advise(mapError(rf.Err), rf.WorkDone, !rf.WorkDone)
	}
	return advise(mapError(err), false, false)
}

// advise sets whether a client may retry a failure. A turn that had side
// effects (a tool ran, or an answer was stored) fails with a 5xx or 429 that
// carries x-should-retry: false, as a retry could repeat them; a wait the
// failure names itself (an upstream 429's retry-after) stays, for the user
// to know when the model takes requests again. A transient
// failure before any of that (the model upstream unreachable, overloaded,
// rate limited or timed out; the database unavailable; the server shutting
// down) carries x-should-retry: true and a retry-after (the upstream's own
// when it sent one), as does any 5xx of a run that failed before it did
// anything (safe). Errors that already forbid retries keep NoRetry. A 4xx
// a retry cannot fix (a bad request, a wrong key, a role that may not, a
// missing resource, a body over the limit, a pending approval) carries
// x-should-retry: false on every wire, so an SDK fails at once instead of
// retrying the same request.
func advise(e *Error, workDone, safe bool) *Error {
	transient := e.Status == http.StatusTooManyRequests || e.Status >= 500
	switch {
	case !e.NoRetry && Unfixable(e.Status):
		c := *e
		c.NoRetry = true
		return &c
	case e.NoRetry || !transient:
	case workDone:
		c := *e
		c.NoRetry = true
		return &c
	case safe || e.Kind == Unavailable || e.Kind == Overloaded || e.Kind == Upstream || e.Kind == RateLimit:
		if e.RetryAfter <= 0 {
			c := *e
			c.RetryAfter = DefaultRetryAfter
			return &c
		}
	}
	return e
}

// Unfixable reports whether a response of status is a 4xx that the same
// request sent again cannot turn into a success: 400, 401, 403, 404, 413
// and 422. A 409 is left to its code (approval_pending is unfixable, a busy
// thread is not), 408 and 429 are worth a retry.
func Unfixable(status int) bool {
	switch status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

// SetRetryHeaders writes e's retry advice on a response: x-should-retry:
// false when NoRetry, else true when RetryAfter is positive; and, when
// RetryAfter is positive, retry-after (whole seconds, rounded up) and
// retry-after-ms. The official SDKs read x-should-retry first (false: no
// retry, whatever the wait), then retry-after-ms, then retry-after.
func SetRetryHeaders(h http.Header, e *Error) {
	switch {
	case e.NoRetry:
		h.Set("x-should-retry", "false")
	case e.RetryAfter > 0:
		h.Set("x-should-retry", "true")
	}
	if e.RetryAfter > 0 {
		h.Set("retry-after", strconv.FormatInt(retryAfterSeconds(e.RetryAfter), 10))
		h.Set("retry-after-ms", strconv.FormatInt(e.RetryAfter.Milliseconds(), 10))
	}
}

// retryAfterSeconds is a wait in whole seconds, rounded up (retry-after).
func retryAfterSeconds(d time.Duration) int64 { return int64(math.Ceil(d.Seconds())) }

// rateLimitMessage is the public message of an upstream 429: with the
// upstream's wait when it named one, so that a client that gets the error
// in-stream, after its 200 (where no header can carry it), or in AG-UI's
// RUN_ERROR, still learns it.
func rateLimitMessage(wait time.Duration) string {
	const msg = "The model provider is rate limiting requests."
	switch s := retryAfterSeconds(wait); {
	case s <= 0:
		return msg + " Try again later."
	case s == 1:
		return msg + " Try again in 1 second."
	default:
		return fmt.Sprintf("%s Try again in %d seconds.", msg, s)
	}
}

// leaseWait is the retry-after of a run_in_progress conflict: the time left
// on the run's lease, rounded up to whole seconds, at least one second.
func leaseWait(err error) time.Duration {
	var rip *store.RunInProgressError
	if !errors.As(err, &rip) || rip.Wait <= 0 {
		return time.Second
	}
	secs := (rip.Wait + time.Second - 1) / time.Second
	return max(1, secs) * time.Second
}

// CodeThreadExists is the code of a fork onto a thread id the tenant has
// (409).
const CodeThreadExists = "thread_exists"

// CodeScheduleExists is the code of the 409 for a schedule name the
// tenant gave another schedule of the agent.
const CodeScheduleExists = "schedule_exists"

// CodeBudgetExceeded is the code of a turn refused, or a run stopped, by a
// spent budget (429).
const CodeBudgetExceeded = "budget_exceeded"

func mapError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var me *model.Error
	var ie *engine.InputError
	var ua *engine.UnknownAgentError
	var ud *engine.UnknownDecisionError
	var fe *engine.FormatMismatchError
	var ins *engine.InstructionsError
	var sf *engine.StoredFailure
	var cd *engine.CallInDoubtError
	var de *decision.Error
	var re *decision.RoleError
	var nl *engine.NotLatestError
	var be *usage.ExceededError
	switch {
	case errors.As(err, &be):
		// Until the period resets: retrying sooner cannot succeed.
		return &Error{Status: http.StatusTooManyRequests, Kind: RateLimit, Code: CodeBudgetExceeded, Message: be.Error(),
			RetryAfter: be.Wait, NoRetry: true, Err: err}
	case errors.As(err, &ins):
		// The agent's own code failed: retrying will not help.
		return &Error{Status: 500, Kind: Internal, Code: engine.CodeInstructionsFailed, Message: ins.Error(), NoRetry: true, Err: err}
	case errors.As(err, &sf):
		return storedFailure(sf)
	case errors.As(err, &ie):
		return &Error{Status: http.StatusBadRequest, Kind: InvalidRequest, Code: ie.Code, Message: ie.Reason,
			Param: ie.Field, Details: ie.Details, Err: ie.Err}
	case errors.As(err, &de):
		// An answer a pending decision does not take (the engine maps its
		// own paths' to InputError; this is any other caller's).
		e := Invalid(de.Field, "%s", de.Message)
		e.Details, e.Err = de.Problems, err
		return e
	case errors.As(err, &re):
		return New(Permission, CodeForbiddenRole, re.Error())
	case errors.As(err, &ua):
		e := New(NotFound, "model_not_found", fmt.Sprintf("The model `%s` does not exist: no agent has that name.", ua.Name))
		e.Param = "model"
		return e
	case errors.As(err, &ud):
		return New(NotFound, "not_found", ud.Error())
	case errors.As(err, &nl):
		// The one request that names a stored turn is the Responses
		// wire's previous_response_id.
		e := New(Conflict, "previous_response_not_latest",
			fmt.Sprintf("Response '%s' is not the latest of its conversation and its turn never ended, so there is no point to go on from: continue from another response.", nl.Name))
		e.Param = "previous_response_id"
		e.Err = err
		return e
	case errors.As(err, &cd):
		return &Error{Status: http.StatusConflict, Kind: Conflict, Code: engine.CodeCallInDoubt, Message: cd.Error(), NoRetry: true, Err: err}
	case errors.As(err, &fe):
		return &Error{Status: http.StatusBadGateway, Kind: Upstream, Code: engine.CodeFormatMismatch, Message: fe.Error(), NoRetry: true, Err: err}
	case errors.As(err, &me):
		// The upstream's own text stays in the log: it can carry detail
		// (keys, prompts) the client must not see.
		switch {
		case me.Status == http.StatusTooManyRequests:
			// The upstream's retry-after reaches the client as is.
			return &Error{Status: 429, Kind: RateLimit, Code: codeUpstreamRateLimited, Message: rateLimitMessage(me.RetryAfter),
				RetryAfter: me.RetryAfter, Err: err}
		case me.Status == http.StatusGatewayTimeout:
			// Our own model timeouts (model.ErrCallTimeout,
			// model.ErrIdleTimeout) and an upstream's 504: Anthropic's
			// timeout_error, a 5xx every SDK may retry.
			return &Error{Status: 504, Kind: Upstream, Code: codeUpstreamTimeout, Message: "The model provider did not answer in time.", Err: err}
		case me.Status == 0:
			return &Error{Status: 502, Kind: Upstream, Code: codeUpstreamUnreachable, Message: "The model provider could not be reached.", Err: err}
		case me.Status == http.StatusServiceUnavailable || me.Status == 529:
			return &Error{Status: 529, Kind: Overloaded, Code: codeUpstreamOverloaded, Message: "The model provider is overloaded. Try again shortly.", Err: err}
		default:
			// A 4xx from the provider will fail again: tell SDKs not to retry.
			noRetry := me.Status >= 400 && me.Status < 500 && me.Status != http.StatusRequestTimeout
			return &Error{Status: 502, Kind: Upstream, Code: codeUpstreamError, NoRetry: noRetry,
				Message: fmt.Sprintf("The model provider returned an error (status %d).", me.Status), Err: err}
		}
	case errors.Is(err, store.ErrApprovalPending):
		return ApprovalPending()
	case errors.Is(err, store.ErrRunInProgress):
		// Clients may retry once the run's lease would lapse: the SDKs
		// retry a 409 by themselves after retry-after.
		e := New(Conflict, "run_in_progress", "A run is already in progress on this session. Wait for it to finish before sending a new message.")
		e.Kind = InvalidRequest
		e.RetryAfter = leaseWait(err)
		return e
	case errors.Is(err, store.ErrThreadExists):
		e := New(Conflict, CodeThreadExists, "A thread with this id exists already: choose another threadId, or omit it for a new one.")
		e.NoRetry, e.Err = true, err
		return e
	case errors.Is(err, store.ErrScheduleExists):
		e := New(Conflict, CodeScheduleExists, "The tenant has a schedule of this agent with this name already: choose another name, or change that schedule (PATCH /v1/schedules/{id}).")
		e.Param, e.NoRetry, e.Err = "name", true, err
		return e
	case errors.Is(err, store.ErrAgentMismatch):
		return Invalid("model", "This session belongs to another agent.")
	case errors.Is(err, store.ErrNotFound):
		return New(NotFound, "not_found", "Not found.")
	case errors.Is(err, store.ErrDecisionExpired):
		e := New(Conflict, "decision_expired", "This decision expired before it was made; it was recorded as a rejection.")
		e.NoRetry = true
		return e
	case errors.Is(err, store.ErrAlreadyApproved):
		e := New(Conflict, "already_approved_by_you", "You already approved this call; it needs approvals from other principals too.")
		e.NoRetry = true
		return e
	case errors.Is(err, store.ErrAlreadyDecided):
		e := New(Conflict, "already_decided", "This decision was already made.")
		e.NoRetry = true
		return e
	case errors.As(err, new(*store.MemoryError)):
		// A memory request the store refuses (a bad namespace, key,
		// value or TTL): nothing was written.
		var mr *store.MemoryError
		errors.As(err, &mr)
		e := Invalid(mr.Field, "Invalid %s: %s.", mr.Field, mr.Reason)
		e.NoRetry, e.Err = true, err
		return e
	case errors.As(err, new(*memory.EmbedError)):
		var ee *memory.EmbedError
		errors.As(err, &ee)
		msg := "The embedding model could not be reached."
		if ee.Status != 0 {
			msg = fmt.Sprintf("The embedding model returned an error (status %d).", ee.Status)
		}
		return &Error{Status: http.StatusBadGateway, Kind: Upstream, Code: CodeEmbeddingsFailed, Message: msg, Err: err}
	case errors.Is(err, store.ErrInvalid):
		// The store refuses a value every driver refuses alike (a NUL byte
		// or invalid UTF-8 in an id, a filter or a JSON value): the
		// client's input, so a 400 that changed nothing.
		e := Invalid("", "The request holds a value that cannot be stored: ids, names, filters and JSON must be valid UTF-8 without NUL bytes.")
		e.Err = err
		return e
	case errors.Is(err, engine.ErrCancelled):
		return &Error{Status: 409, Kind: Conflict, Code: engine.CodeCancelled, Message: engine.MessageCancelled, Err: err}
	case errors.Is(err, engine.ErrShuttingDown):
		return &Error{Status: 503, Kind: Unavailable, Code: engine.CodeShuttingDown, Message: engine.MessageShuttingDown, Err: err}
	case errors.Is(err, store.ErrUnavailable):
		return &Error{Status: 503, Kind: Unavailable, Code: codeStoreUnavailable, Message: "The database is unavailable. Try again shortly.", Err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: 504, Kind: Internal, Code: "timeout", Message: "The request timed out.", Err: err}
	}
	return &Error{Status: 500, Kind: Internal, Code: "internal_error", Message: "Internal server error.", Err: err}
}

// Describe gives an error's public code and message: what a failed run
// stores and publishes (engine.Runner.Describe), so the stored error reads as
// the live one.
func Describe(err error) (code, message string) {
	e := From(err)
	return e.Code, e.Message
}

// At places an engine input error on a wire's own parameter path: place maps
// the engine's field and index (into the Input the wire built) to the wire's
// path, "" keeping the engine's field name. An error about a client tool
// names the tool's path in its message too. Other errors are returned as
// they are.
func At(err error, place func(field string, index int) string) error {
	var ie *engine.InputError
	if err == nil || place == nil || !errors.As(err, &ie) {
		return err
	}
	p := place(ie.Field, ie.Index)
	if p == "" {
		return err
	}
	e := From(err)
	e.Param = p
	if ie.Field == engine.FieldTools {
		e.Message = p + ": " + e.Message
	}
	return e
}

// OfRunError returns the error a RunError event reports: its typed cause
// when the run handed one over (it keeps its kind and status), else the
// event's public code and message (a stored event).
func OfRunError(e event.Event) *Error {
	if e.Err != nil {
		return From(e.Err)
	}
	return From(&engine.StoredFailure{Code: e.Code, Message: e.Message})
}

// IncompleteRun is the error of a run whose events ended without a
// terminal event.
func IncompleteRun() *Error {
	return New(Internal, engine.CodeIncompleteRun, engine.MessageIncompleteRun)
}

// storedFailure maps a failure known only by its stored code (a retry that
// attached to the failed run) to the status and kind the live failure had.
func storedFailure(f *engine.StoredFailure) *Error {
	e := &Error{Status: 500, Kind: Internal, Code: f.Code, Message: f.Message, Err: f}
	switch f.Code {
	case codeUpstreamRateLimited:
		e.Status, e.Kind = 429, RateLimit
	case codeUpstreamTimeout:
		e.Status, e.Kind = 504, Upstream
	case codeUpstreamUnreachable, codeUpstreamError:
		e.Status, e.Kind = 502, Upstream
	case codeUpstreamOverloaded:
		e.Status, e.Kind = 529, Overloaded
	case engine.CodeFormatMismatch:
		e.Status, e.Kind, e.NoRetry = 502, Upstream, true
	case engine.CodeContextLength:
		e.Status, e.Kind = http.StatusBadRequest, InvalidRequest
	case engine.CodeShuttingDown, codeStoreUnavailable:
		e.Status, e.Kind = 503, Unavailable
	}
	return e
}

// CodeForbiddenRole is the code of a 403 to a key whose role may not do
// what it asked (the server's role check; a wire maps it to its own form).
const CodeForbiddenRole = "forbidden_role"

// The public codes of upstream and store failures.
const (
	codeUpstreamRateLimited = "upstream_rate_limited"
	codeUpstreamTimeout     = "upstream_timeout"
	codeUpstreamUnreachable = "upstream_unreachable"
	codeUpstreamOverloaded  = "upstream_overloaded"
	codeUpstreamError       = "upstream_error"
	codeStoreUnavailable    = "store_unavailable"
)

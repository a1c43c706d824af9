// Package store is the persistence seam: threads, their messages and state,
// runs and their leases, pending decisions (interrupts), and the thread event
// log. Every driver (sqlite, postgres) passes the storetest conformance suite.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
)

// Typed control-flow errors. Drivers return these (wrapped or not) so callers
// can map them with errors.Is.
var (
	ErrNotFound        = errors.New("not found")
	ErrRunInProgress   = errors.New("a run is in progress on this thread")
	ErrApprovalPending = errors.New("the thread is waiting on a human decision")
	ErrAgentMismatch   = errors.New("the thread belongs to another agent")
	ErrAlreadyDecided  = errors.New("the decision was already made")
	// ErrDecisionExpired: the decision expired before anyone made it (it
	// is recorded as a rejection with Via ViaExpiry) and cannot be made.
	ErrDecisionExpired = errors.New("the decision expired")
	// ErrAlreadyApproved: the decision needs approvals from several
	// principals (a quorum) and this one has already approved it.
	ErrAlreadyApproved = errors.New("this principal already approved")
	ErrLeaseLost       = errors.New("the run no longer holds the thread")
	ErrNotClaimable    = errors.New("the thread has no run to claim")
	// ErrNotWaiting: the thread's turn no longer waits on decisions (or
	// its resume is no longer due): a run took it, or it ended.
	ErrNotWaiting = errors.New("the thread does not wait on decisions")
	// ErrWaitChanged: the decisions the thread waits on are not those a
	// CancelWait named (one was decided, or asked, meanwhile).
	ErrWaitChanged = errors.New("the thread's pending decisions changed")
	// ErrUnavailable wraps a failure to reach the database.
	ErrUnavailable = errors.New("store unavailable")
)

// RunInProgressError is the ErrRunInProgress Admit returns: Wait is how long
// the run's lease still holds the thread at the time of the check (0 when
// unknown, e.g. a resume about to run), so a client can be told when to
// try again.
type RunInProgressError struct {
	ThreadID string
	Wait     time.Duration
	// Why says why the thread is busy.
	Why string
	// Changed says the thread is not busy but moved on since the caller
	// read it (BeginRun.Expect): reading it again may admit the turn.
	Changed bool
}

func (e *RunInProgressError) Error() string {
	return fmt.Sprintf("thread %q: %s%s", e.ThreadID, e.Why, ErrRunInProgress)
}

// Is makes a *RunInProgressError match ErrRunInProgress.
func (e *RunInProgressError) Is(target error) bool { return target == ErrRunInProgress }

// ThreadStatus is where a thread is in its life.
type ThreadStatus string

// Thread statuses.
const (
	// Idle: no run; new input is accepted.
	Idle ThreadStatus = "idle"
	// Running: a run holds the thread's lease.
	Running ThreadStatus = "running"
	// Waiting: the last run paused on pending decisions.
	Waiting ThreadStatus = "waiting"
	// Queued: every decision is made and the resume is recorded; a runner
	// will claim it.
	Queued ThreadStatus = "queued"
	// Failed: the last run ended in an error; new input is accepted.
	Failed ThreadStatus = "failed"
)

// Admit is the admission rule: whether a thread accepts a new turn of agent
// at now. It is the one place that decides; the engine asks it before
// reading a conversation and every driver asks it again inside BeginRun's
// transaction. A thread of another agent is ErrAgentMismatch; a Waiting one
// (decisions pending) is ErrApprovalPending; a Queued one (every decision
// made, the resume about to run) and a Running one whose lease is held at now
// (up to and including LeaseUntil) are ErrRunInProgress. Idle and Failed
// threads, and Running ones whose lease expired, accept the turn.
func Admit(th *Thread, agent string, now time.Time) error {
	if th.Agent != agent {
		return fmt.Errorf("thread %q is bound to agent %q, not %q: %w", th.ID, th.Agent, agent, ErrAgentMismatch)
	}
	switch th.Status {
	case Waiting:
		return fmt.Errorf("thread %q: %w", th.ID, ErrApprovalPending)
	case Queued:
		return &RunInProgressError{ThreadID: th.ID, Why: "its decisions are made and the resume is about to run: "}
	case Running:
		// At the stored (microsecond) precision, as Claim compares.
		if at := now.Truncate(time.Microsecond); !th.LeaseUntil.IsZero() && !at.After(th.LeaseUntil) {
			return &RunInProgressError{ThreadID: th.ID, Wait: th.LeaseUntil.Sub(at)}
		}
	}
	return nil
}

// Thread is one durable conversation, owned by a tenant and bound to an agent.
type Thread struct {
	Tenant string       `json:"tenant"`
	ID     string       `json:"id"`
	Agent  string       `json:"agent"`
	Status ThreadStatus `json:"status"`
	// RunID is the current or last run.
	RunID string `json:"runId,omitempty"`
	// State is the shared state, a JSON object ("{}" when empty).
	State      json.RawMessage `json:"state"`
	LastError  string          `json:"lastError,omitempty"`
	LeaseOwner string          `json:"-"`
	LeaseUntil time.Time       `json:"-"`
	// Options are what the last turn's request carried beyond its messages
	// (client system prompt, client tools, limits), so a resume after a
	// decision or a crash continues the turn as the client asked. Opaque
	// JSON to the store ("{}" when none).
	Options json.RawMessage `json:"-"`
	// Turn is the last turn BeginRun began on the thread.
	Turn Turn `json:"-"`
	// WaitingSeq is the thread's RunControl.WaitingSeq (the pause an MCP
	// call answered "waiting" about, whose outcome no call reported yet);
	// only GetThread reads it, so the engine's own read of the thread
	// tells a wire without another store call.
	WaitingSeq int64 `json:"-"`
	// Abandoned says the thread's running run lost its client before its
	// end (Store.AbandonRun named it): a new message stops it and goes
	// on. Only GetThread reads it.
	Abandoned bool      `json:"-"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// HeadBranch is the branch new turns go on (0: the first line);
	// BranchSeq the last branch id given (0: the thread never branched).
	HeadBranch int64 `json:"headBranch"`
	BranchSeq  int64 `json:"-"`
	// Owner is the end user the thread belongs to (the sub of the access
	// token that created it); "" for a thread of the tenant (a key's, a
	// schedule's). See Sees.
	Owner string `json:"owner,omitempty"`
}

// Sees is the one rule of per-user threads: a caller sees (reads, goes on
// with, forks, decides on) a thread of its tenant when the thread has no
// owner, when the caller is its owner (user, an end user's id), or when
// anyOwner (an admin).
func Sees(owner, user string, anyOwner bool) bool {
	return owner == "" || anyOwner || owner == user
}

// Turn identifies a thread's last turn (the last BeginRun), so a client's
// retry of it can be recognised and attached to it.
type Turn struct {
	// Seq is the sequence number of the turn's first event (its
	// RunStarted): the events from it on are the turn's, then later runs'
	// (a recovery, a resume). BeginRun sets it; 0 means none is recorded.
	Seq int64
	// Key is a digest of the client's Idempotency-Key ("" when none).
	Key string
	// Digest is a digest of the turn's input as the client sent it.
	Digest string
	// FirstMessage is the sequence number of the first message the turn
	// appended (its input; for a turn with none, its first answer).
	FirstMessage int64
}

// InterruptStatus is the state of a pending decision.
type InterruptStatus string

// Interrupt statuses.
const (
	Pending  InterruptStatus = "pending"
	Approved InterruptStatus = "approved"
	Rejected InterruptStatus = "rejected"
)

// Why a decision is asked (Interrupt.Reason).
const (
	// ReasonApproval: the tool needs a human's approval before it runs.
	ReasonApproval = "approval"
	// ReasonInDoubt: the call started before a crash and left no result,
	// so it may already have run; the human picks retry (run it again,
	// status approved) or skip (do not, status rejected).
	ReasonInDoubt = "in_doubt"
	// ReasonElicitation: a running tool asks a human a question (an MCP
	// server's elicitation) and waits for the answer; approving answers it
	// (the decision's EditedArgs hold the answer, matching the interrupt's
	// ResponseSchema), rejecting declines it.
	ReasonElicitation = "elicitation"
)

// Interrupt is a tool call waiting on (or decided by) a human.
type Interrupt struct {
	ID         string          `json:"id"`
	Tenant     string          `json:"tenant"`
	ThreadID   string          `json:"threadId"`
	RunID      string          `json:"runId"`
	Agent      string          `json:"agent"`
	ToolCallID string          `json:"toolCallId"`
	Tool       string          `json:"tool"`
	Args       json.RawMessage `json:"args"`
	// Reason is ReasonApproval (the default when stored empty),
	// ReasonInDoubt or ReasonElicitation.
	Reason string `json:"reason"`
	// Description is omitted when the pause has none.
	Description      string          `json:"description,omitempty"`
	AllowedDecisions []string        `json:"allowedDecisions"`
	ResponseSchema   json.RawMessage `json:"responseSchema"`
	// Subagent names the subagent whose call paused, if any.
	Subagent string `json:"subagent,omitempty"`
	// Owner is the end user the decision belongs to: the owner of its
	// thread (Thread.Owner), or, for the record of a stateless turn, the
	// turn's end user; '' for the tenant's (a key's). A decision of no
	// thread is seen by its owner, admins and approvers (Sees).
	Owner     string          `json:"owner,omitempty"`
	Status    InterruptStatus `json:"status"`
	CreatedAt time.Time       `json:"createdAt"`
	// ExpiresAt is when a pending interrupt expires (it is then decided as
	// a rejection with Via ViaExpiry); nil means never.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	Decision  *Decision  `json:"decision,omitempty"`
	// ApprovalsNeeded is how many approvals from distinct principals the
	// call needs before it runs (a quorum); 0 or 1 is one.
	ApprovalsNeeded int `json:"approvalsNeeded,omitempty"`
	// Approvals are the approvals so far, oldest first (an edit resets
	// them to just itself: the others approved other arguments).
	Approvals []Approval `json:"approvals,omitempty"`
}

// Approval is one principal's approval toward an interrupt's quorum.
type Approval struct {
	By         string          `json:"by"`
	Via        string          `json:"via"`
	At         time.Time       `json:"at"`
	EditedArgs json.RawMessage `json:"editedArgs,omitempty"`
}

// Needed is the number of approvals the interrupt needs (at least one).
func (in *Interrupt) Needed() int {
	if in.ApprovalsNeeded < 1 {
		return 1
	}
	return in.ApprovalsNeeded
}

// Tally applies d to a pending interrupt's quorum: it returns the
// approvals after d, encoded as stored, and whether d decides the interrupt
// (a rejection, an in-doubt decision, or the approval that reaches the
// count). The same By
// approving twice without an edit is ErrAlreadyApproved; an edit resets
// the approvals to just itself. When d completes a quorum whose first
// approval edited the arguments, d gets those EditedArgs.
func Tally(in *Interrupt, d *Decision) (approvals string, final bool, err error) {
	list, final, err := tally(in, d)
	if err != nil {
		return "", false, err
	}
	approvals, err = encodeApprovals(list)
	return approvals, final, err
}

func tally(in *Interrupt, d *Decision) ([]Approval, bool, error) {
	if !d.Approved || d.Kind != "" || in.Needed() <= 1 {
		return in.Approvals, true, nil
	}
	a := Approval{By: d.By, Via: d.Via, At: d.At, EditedArgs: d.EditedArgs}
	if len(d.EditedArgs) > 0 {
		return []Approval{a}, false, nil
	}
	for _, p := range in.Approvals {
		if p.By == d.By {
			return nil, false, fmt.Errorf("interrupt %q: %q: %w", in.ID, d.By, ErrAlreadyApproved)
		}
	}
	out := append(append([]Approval{}, in.Approvals...), a)
	if len(out[0].EditedArgs) > 0 {
		d.EditedArgs = out[0].EditedArgs
	}
	return out, len(out) >= in.Needed(), nil
}

// ViaExpiry is the Decision.Via of an interrupt rejected because it
// expired before anyone decided it.
const ViaExpiry = "expiry"

// Decision is a human's answer to an interrupt, kept for audit.
type Decision struct {
	// Kind is retry or skip for an in-doubt call (status approved or
	// rejected); empty for an approval.
	Kind     string `json:"decision,omitempty"`
	Approved bool   `json:"approved"`
	// EditedArgs replaces the call's arguments when set.
	EditedArgs json.RawMessage `json:"editedArgs,omitempty"`
	Message    string          `json:"message,omitempty"`
	// Via is the channel the server can prove: api (a key over the HTTP
	// API), studio (Studio's session), agui (an AG-UI resume) or stateless
	// (no human: the call ran, or was refused, in a turn without a session
	// under the stateless-approval policy).
	Via string `json:"decidedVia"`
	// ClaimedVia is the tool the client said it was (the x-stackbone-client
	// header, such as "cli"); recorded as claimed, never trusted.
	ClaimedVia string `json:"claimedVia,omitempty"`
	// By is the deciding key's tenant/name.
	By string    `json:"decidedBy"`
	At time.Time `json:"decidedAt"`
}

// ViaSystem is the Via of a decision the server made itself: a question a
// running tool asked, closed because the call can no longer wait for it.
const ViaSystem = "system"

// ViaCancel is the Via of a decision closed because its turn was
// cancelled (Store.CancelWait) before anyone made it; its By is who
// cancelled.
const ViaCancel = "cancel"

// ViaStateless is the Via of a decision no human made: an approval-gated
// call of a stateless turn, run or refused by the server's policy.
const ViaStateless = "stateless"

// BeginRun asks for a new run on a thread, creating the thread if needed.
type BeginRun struct {
	Tenant   string
	ThreadID string
	Agent    string
	RunID    string
	// Owner is the lease owner (the runner).
	Owner string
	// User is the end user starting the turn ("" for a key): a thread
	// BeginRun creates belongs to them (Thread.Owner), and an existing
	// thread another user owns is ErrNotFound unless AnyOwner (Sees).
	User     string
	AnyOwner bool
	Now      time.Time
	// LeaseUntil is when the run's lease expires unless renewed.
	LeaseUntil time.Time
	// Input are new messages appended in the same transaction.
	Input []message.Message
	// State, when set, replaces the thread's state in the same transaction.
	State json.RawMessage
	// Options replace the thread's run options ("{}" when empty).
	Options json.RawMessage
	// Events are appended to the thread's log in the same transaction.
	Events []event.Event
	// Turn is recorded as the thread's last turn (its Seq is set by the
	// store: the sequence number of the first of Events).
	Turn Turn
	// New says the caller found no such thread: a driver may try creating
	// it first, and fall back to the existing thread's path when another
	// creator was first. Only a hint: the outcome is the same either way.
	New bool
	// From, when set, is the sequence number of the message the turn goes
	// on from (FromStart: before the first message): when it is not the
	// conversation's last, the turn starts a new branch there (the thread's
	// new head), in the same transaction, and Begun.Messages is the whole
	// new conversation.
	From int64
	// Known is how many of the thread's messages the caller holds already
	// (a conversation it read before; messages are only ever appended):
	// Begun.Messages starts after them.
	Known int
	// Expect, when set, is the run the caller found on the thread (its
	// RunID) and examined: the run begins only if that is still the
	// thread's run, so what the caller concluded from it (no call of it is
	// in doubt, say) holds at the commit. Otherwise ErrRunInProgress.
	Expect string
	// Head, with Expect, is the head branch the caller found on the thread
	// (Thread.HeadBranch): the conversation it read (Known) is that
	// branch's; a head switched since is refused as changed.
	Head int64
	// Continue says the run goes on with the thread's last turn (a
	// recovery before a new turn, a client retrying a turn that failed):
	// the thread's Turn is kept and b.Turn is ignored.
	Continue bool
	// Dequeue, when set, is the id of the queued turn (QueuedTurn.ID) the run
	// begins: its row leaves the thread's queue in the same transaction.
	// When it is no longer queued (another runner began it, or it was
	// removed) the begin is refused with ErrDequeued and writes nothing.
	Dequeue string
}

// ExpectNoThread is the BeginRun.Expect of a caller that found no thread:
// a thread that exists by the commit (another request created it since, and
// may have ended its turn) is refused as changed, so the caller reads it
// and can tell a retry of that turn from a new one.
const ExpectNoThread = "\x00no thread"

// Admit is the admission rule of BeginRun on an existing thread, as it is
// inside the transaction: Admit, then Expect.
func (b BeginRun) Admit(cur *Thread) error {
	if !Sees(cur.Owner, b.User, b.AnyOwner) {
		return fmt.Errorf("thread %q belongs to another user: %w", cur.ID, ErrNotFound)
	}
	if err := Admit(cur, b.Agent, b.Now); err != nil {
		return err
	}
	if b.Expect != "" && cur.RunID != b.Expect {
		return &RunInProgressError{ThreadID: cur.ID, Why: "another run began on the thread since it was read: ", Changed: true}
	}
	if b.Expect != "" && b.Expect != ExpectNoThread && cur.HeadBranch != b.Head {
		return &RunInProgressError{ThreadID: cur.ID, Why: "the thread's head branch changed since it was read: ", Changed: true}
	}
	return nil
}

// FromStart as BeginRun.From goes on from before a thread's first message:
// a new branch holding none of its messages (its first one edited).
const FromStart int64 = -1

// Begun is a run BeginRun started: the thread as the run holds it, and the
// thread's messages after the first Known, read under the run's lease in
// the same transaction (the Input included), so a caller that read the
// conversation before holds all of it without reading it again.
type Begun struct {
	Thread
	// Messages are the thread's messages after the first Known, in order;
	// for a new thread, Input; with From (a new branch or not), the whole
	// conversation.
	Messages []message.Message
	// Branched says BeginRun.From started a new branch.
	Branched bool
}

// Claim takes a thread whose run must continue (a queued resume, or a run
// whose lease expired before Now) for a new run.
type Claim struct {
	Tenant     string
	ThreadID   string
	RunID      string
	Owner      string
	Now        time.Time
	LeaseUntil time.Time
}

// Checkpoint is what a run stores at a step boundary, in one transaction.
type Checkpoint struct {
	Tenant   string
	ThreadID string
	RunID    string
	// Messages are appended.
	Messages []message.Message
	// State, when set, replaces the thread's state.
	State json.RawMessage
	// Interrupts are created as pending.
	Interrupts []Interrupt
	// Started are tool calls about to run: each gets a started marker
	// (replacing one it had), so that after a crash a call with a marker
	// and no result is known to be in doubt. The marker of a call is
	// deleted by the checkpoint that stores its tool result (a Messages
	// entry with its ToolCallID) or an in-doubt interrupt for it.
	Started []string
	// Events are appended to the thread's log.
	Events []event.Event
	// LeaseUntil renews the lease when non-zero.
	LeaseUntil time.Time
	// Run, when set, records the run (its first checkpoint); Steps are the
	// model and tool calls it made since its last write.
	Run   *RunRecord
	Steps []Step
}

// FinishRun ends a run and releases the thread.
type FinishRun struct {
	Tenant   string
	ThreadID string
	RunID    string
	// Status is Idle, Waiting or Failed.
	Status ThreadStatus
	Error  string
	Events []event.Event
	Now    time.Time
	// Run records the run's end; Steps are the model and tool calls it
	// made since its last write.
	Run   *RunRecord
	Steps []Step
	// Queued, when set, is told whether a run that ended Waiting left the
	// thread Queued instead: every decision of its pause was made before
	// its end (while the thread was still Running, so no decider could
	// resume it), and the resume is due at once.
	Queued *bool
	// Backlog, when set, is told whether the thread's queue holds a turn
	// as of the run's end (QueueStore): the next one is due.
	Backlog *bool
}

// CancelWait ends a thread's turn that waits on decisions, or whose
// resume is due but not started (Waiting or Queued), without a run: the
// pending decisions close, the paused calls get their results, the turn's
// terminal event is stored and the thread becomes Idle.
type CancelWait struct {
	Tenant   string
	ThreadID string
	// RunID is the run whose pause is cancelled (the thread's RunID as
	// read); the events are stored under it.
	RunID string
	// Decisions close the thread's pending decisions, by interrupt id:
	// they must be exactly those pending when the transaction runs.
	Decisions map[string]Decision
	// Messages are appended on the head branch (the paused calls'
	// results); their calls' started markers are dropped.
	Messages []message.Message
	// Events are appended (the turn's terminal event).
	Events []event.Event
	// Error is the run.failed webhook notice's error.
	Error string
	Now   time.Time
	// Backlog, when set, is told whether the thread's queue holds a turn
	// as of the cancel (QueueStore): the next one is due.
	Backlog *bool
}

// ReleaseRun gives up a run's lease without ending the run (a server
// shutting down): the thread stays Running with no lease, so Stale lists it
// and Claim takes it at once.
type ReleaseRun struct {
	Tenant   string
	ThreadID string
	RunID    string
	Now      time.Time
}

// ThreadFilter narrows ListThreads.
type ThreadFilter struct {
	Agent  string
	Status ThreadStatus
	Limit  int
	// Scoped lists only the threads User sees (Sees without anyOwner):
	// those without an owner and User's own.
	Scoped bool
	User   string
}

// InterruptFilter narrows ListInterrupts. An empty Status means Pending.
type InterruptFilter struct {
	ThreadID string
	Agent    string
	Status   InterruptStatus
	Limit    int
	// Scoped lists only the interrupts of threads User sees (Sees without
	// anyOwner), and those of no thread (stateless turns) User sees by
	// their Owner.
	Scoped bool
	User   string
}

// JournalEntry is what a stateless turn has done so far, kept for a short
// time so a client retrying the same turn continues it instead of running
// its server tools again: the messages its completed tool steps added (the
// model's tool-call message and the tool results) and the state they left.
type JournalEntry struct {
	Tenant string
	// Key names the turn within the tenant: a digest of the request, or of
	// the client's Idempotency-Key.
	Key string
	// Digest is the request's digest, so a client key reused for another
	// request can be refused.
	Digest string
	// Messages are the recorded steps' messages, in order.
	Messages []message.Message
	// State is the state the steps left ("{}" when none).
	State json.RawMessage
	// UpdatedAt is when the entry was last written; ExpiresAt is when it
	// stops being returned and may be swept.
	UpdatedAt time.Time
	ExpiresAt time.Time
}

// Response is a response of the Responses wire (POST /v1/responses) with
// store: true: a turn of a durable thread, from the turn's first stored
// event on. Its output is read from the thread's events, from Seq up to the
// next response's Seq, so the store keeps only where it begins and what the
// wire needs to render it again.
type Response struct {
	ID       string
	Tenant   string
	ThreadID string
	// Seq is the stored sequence number of the turn's first event (its
	// run_started); unique within the thread.
	Seq int64
	// PreviousID is the response this one continued ("" for the first of a
	// chain, or one that named its thread directly).
	PreviousID string
	// Background is true for a response created with background: true.
	Background bool
	// Cancelled is set once the response was cancelled.
	Cancelled bool
	// Request is the wire's own record of the request (model, instructions,
	// input items, metadata, …), opaque to the store.
	Request   json.RawMessage
	CreatedAt time.Time
}

// ResponseKey is how the Responses wire finds the first attempt of a
// request that names no conversation (each such request starts a thread of
// its own), so that a client's retry of it gets that attempt's response
// instead of starting another: under the client's Idempotency-Key for the
// retry window, or, without a key, under the request's digest while the
// attempt runs.
type ResponseKey struct {
	Tenant string
	// Key names the request within the tenant: a digest of its
	// Idempotency-Key, or of the request itself.
	Key string
	// Digest is the request's digest, so that a key sent again with
	// another request can be refused.
	Digest string
	// ThreadID is the thread the first attempt started.
	ThreadID  string
	CreatedAt time.Time
	// ExpiresAt is when the entry stops naming a retry window; it is swept
	// from then on, once its thread no longer runs.
	ExpiresAt time.Time
}

// DecideResult is the outcome of a successful decision.
type DecideResult struct {
	Interrupt *Interrupt
	// Queued is true when this decision was the run's last pending one and
	// the thread is now queued for its resume.
	Queued bool
}

// Store is the persistence interface.
type Store interface {
	// GetThread returns ErrNotFound for an unknown (or foreign) thread.
	GetThread(ctx context.Context, tenant, id string) (*Thread, error)
	// RecordRun stores a stateless run and its steps.
	RecordRun(ctx context.Context, r RunRecord, steps []Step) error
	// ListRuns lists a thread's runs, oldest first.
	ListRuns(ctx context.Context, tenant, threadID string) ([]RunRecord, error)
	// NotifyOnce queues a webhook notice whose id may have been queued
	// before (by any replica): a notice goes out once per id.
	NotifyOnce(ctx context.Context, n Notice) error
	// LastRun returns a thread's latest run (nil: none).
	LastRun(ctx context.Context, tenant, threadID string) (*RunRecord, error)
	// Branches lists a thread's branches with their tips, the first line
	// (0) first, then by id; ErrNotFound for an unknown (or foreign)
	// thread.
	Branches(ctx context.Context, tenant, threadID string) ([]Branch, error)
	// BranchPath returns a branch's conversation (its own messages after
	// its parent's path up to its fork), in order: ErrNotFound for an
	// unknown thread, a *MissingError (What "branch") for an unknown
	// branch of one.
	BranchPath(ctx context.Context, tenant, threadID string, branch int64) ([]message.Message, error)
	// FindMessage places the thread's message with the given id (its seq
	// and branch): ErrNotFound for an unknown thread, a *MissingError
	// (What "message") for an unknown message of one.
	FindMessage(ctx context.Context, tenant, threadID, id string) (*MessageRef, error)
	// StateAt returns the thread's state as it was right after message seq
	// on its branch: the latest version at or before it along its path,
	// {} when there is none. Errors as FindMessage's.
	StateAt(ctx context.Context, tenant, threadID string, seq int64) (json.RawMessage, error)
	// SetHead switches the head in one transaction that locks the thread
	// row: to h.Branch, or (h.At set) to the branch whose tip is message
	// h.At, a new empty branch forking there when none is. The thread's
	// state becomes the state at the new head's tip. Refused, changing
	// nothing: ErrRunInProgress while a run holds the thread (or a resume
	// or recovery is due), ErrApprovalPending while a decision is pending,
	// *MissingError for an unknown branch or message, ErrNotFound for an
	// unknown thread.
	SetHead(ctx context.Context, h SetHead) (*Thread, error)
	// Fork creates an idle thread f.NewID of the same agent holding a copy
	// of the path up to message f.At (all of the head's when 0),
	// renumbered from 1 with ids kept, and the state there as its state
	// and first state version, in one transaction. A taken id is
	// ErrThreadExists, an unknown message a *MissingError, an unknown
	// thread ErrNotFound.
	Fork(ctx context.Context, f Fork) (*Thread, error)
	// GetRun returns a run with its steps, or ErrNotFound.
	GetRun(ctx context.Context, tenant, id string) (*RunDetail, error)
	// DailyUsage sums the tenant's model calls from a UTC day on, from
	// the daily sums (budgets).
	DailyUsage(ctx context.Context, f UsageFilter) (UsageRow, error)
	// Usage sums the tenant's model calls.
	Usage(ctx context.Context, f UsageFilter) ([]UsageRow, error)
	ListThreads(ctx context.Context, tenant string, f ThreadFilter) ([]Thread, error)
	// Messages returns the thread's messages in order.
	Messages(ctx context.Context, tenant, threadID string) ([]message.Message, error)
	// MessagesTo returns the conversation that ends at message seq of the
	// thread (on whichever branch it is), in order; ErrNotFound when the
	// thread has no such message.
	MessagesTo(ctx context.Context, tenant, threadID string, seq int64) ([]message.Message, error)
	// TurnEnd returns where the turn that began at event seq turnSeq
	// ended: the sequence number of its conversation's last message when
	// its last run ended; ErrNotFound when none of its runs has ended.
	TurnEnd(ctx context.Context, tenant, threadID string, turnSeq int64) (int64, error)

	// RunTurn returns the event sequence number of the first event of
	// the turn a recorded run of the thread belongs to; ErrNotFound for
	// an unknown run.
	RunTurn(ctx context.Context, tenant, threadID, runID string) (int64, error)

	// RunThread returns the thread a run of the tenant belongs to, and the
	// event sequence number of the first event of the run's turn: a
	// recorded run's, else the thread's current run's (one not recorded
	// yet); ErrNotFound for an unknown run (A2A's tasks are named by run).
	RunThread(ctx context.Context, tenant, runID string) (threadID string, turnSeq int64, err error)

	// BeginRun creates the thread if needed and takes its lease, appending
	// Input. An existing thread must pass Admit (ErrAgentMismatch,
	// ErrApprovalPending, ErrRunInProgress), checked in the same transaction.
	BeginRun(ctx context.Context, b BeginRun) (*Begun, error)
	// Claim is a conditional update: exactly one of concurrent claimers wins;
	// others get ErrNotClaimable.
	Claim(ctx context.Context, c Claim) (*Thread, error)
	// Checkpoint fails with ErrLeaseLost when RunID no longer holds the thread.
	Checkpoint(ctx context.Context, c Checkpoint) error
	// FinishRun fails with ErrLeaseLost when RunID no longer holds the thread.
	FinishRun(ctx context.Context, f FinishRun) error
	// ReleaseRun fails with ErrLeaseLost when RunID no longer holds the
	// thread.
	ReleaseRun(ctx context.Context, r ReleaseRun) error
	// Stale lists threads to claim: Queued ones, and Running ones whose lease
	// expired before now, oldest first.
	Stale(ctx context.Context, now time.Time, limit int) ([]Thread, error)

	GetInterrupt(ctx context.Context, tenant, id string) (*Interrupt, error)
	ListInterrupts(ctx context.Context, tenant string, f InterruptFilter) ([]Interrupt, error)
	// CallInterrupts returns the interrupts (any status) of the given tool
	// calls of a thread.
	CallInterrupts(ctx context.Context, tenant, threadID string, toolCallIDs []string) ([]Interrupt, error)
	// StartedCalls returns those of the given tool calls of a thread that
	// have a started marker (Checkpoint.Started), in no particular order.
	StartedCalls(ctx context.Context, tenant, threadID string, toolCallIDs []string) ([]string, error)
	// Decide is one conditional update: ErrAlreadyDecided if it was not
	// pending, ErrNotFound if unknown. When it was the last pending interrupt
	// of a Waiting thread, the thread becomes Queued in the same transaction.
	Decide(ctx context.Context, tenant, id string, d Decision) (DecideResult, error)
	// CancelWait ends a waiting turn in one transaction (see CancelWait):
	// ErrNotWaiting, changing nothing, once the thread is not Waiting or
	// Queued under c.RunID; ErrWaitChanged, changing nothing, when its
	// pending decisions are not c.Decisions' (read them again); ErrNotFound
	// for an unknown thread. Of a CancelWait, a Decide and a Claim racing
	// on one thread, the row lock lets exactly one order happen: a decision
	// after the cancel is ErrAlreadyDecided, a claim after it
	// ErrNotClaimable.
	CancelWait(ctx context.Context, c CancelWait) error
	// RecordDecided adds an already decided interrupt that belongs to no
	// thread (ThreadID empty, Decision set): the audit record of an
	// approval-gated call in a stateless turn. Anything else is ErrInvalid.
	RecordDecided(ctx context.Context, in Interrupt) error

	// ExpiredInterrupts lists, across tenants, pending interrupts whose
	// ExpiresAt is at or before now, soonest expiry first, at most limit.
	ExpiredInterrupts(ctx context.Context, now time.Time, limit int) ([]Interrupt, error)

	// CountPending counts pending decisions across all tenants (a metric).
	CountPending(ctx context.Context) (int, error)

	// Events returns the thread's stored events with Seq > after, in order.
	Events(ctx context.Context, tenant, threadID string, after int64, limit int) ([]event.Event, error)

	// RevokeSession records that a Studio session (by the id its token
	// carries) is signed out until expires, when the session would have
	// ended anyway; revoking an id again is not an error. It also deletes
	// the revocations that lapsed at or before now, so the table holds only
	// sign-outs of the last session lifetime.
	RevokeSession(ctx context.Context, tenant, id string, expires, now time.Time) error
	// SessionRevoked reports whether a Studio session is signed out at now.
	SessionRevoked(ctx context.Context, tenant, id string, now time.Time) (bool, error)
	// GetJournal returns the tenant's journal entry under key that has not
	// expired at now, or ErrNotFound.
	GetJournal(ctx context.Context, tenant, key string, now time.Time) (*JournalEntry, error)
	// PutJournal creates or replaces the entry of (Tenant, Key) in one
	// statement.
	PutJournal(ctx context.Context, e JournalEntry) error
	// SweepJournal deletes the entries (of every tenant) that expired at or
	// before now and returns how many it deleted.
	SweepJournal(ctx context.Context, now time.Time) (int, error)

	// PutResponse stores r, unless its thread already has a response at
	// r.Seq (a retried request attached to that turn): then it returns the
	// stored one and false. A foreign or unknown thread is ErrNotFound.
	PutResponse(ctx context.Context, r Response) (*Response, bool, error)
	// GetResponse returns ErrNotFound for an unknown, deleted or foreign
	// response.
	GetResponse(ctx context.Context, tenant, id string) (*Response, error)
	// NextResponse returns the thread's first response (deleted ones
	// included) with Seq > seq, or ErrNotFound when there is none.
	NextResponse(ctx context.Context, tenant, threadID string, seq int64) (*Response, error)
	// CancelResponse marks a response cancelled (ErrNotFound as GetResponse).
	CancelResponse(ctx context.Context, tenant, id string) error
	// GetMessage returns the tenant's stored message with the given id (in
	// any thread), or ErrNotFound: what a Responses client's item_reference
	// to an earlier output message names.
	GetMessage(ctx context.Context, tenant, id string) (*message.Message, error)
	// DeleteResponse deletes a response: GetResponse no longer finds it
	// (ErrNotFound as GetResponse); the thread keeps its messages and
	// NextResponse still sees it, so its neighbours keep their bounds.
	DeleteResponse(ctx context.Context, tenant, id string) error

	// ClaimResponseKey records k as the entry of (k.Tenant, k.Key) when
	// there is none, or when the one there names the thread replace (not
	// empty): one conditional write, so that of concurrent claims exactly
	// one wins. It returns the entry that holds afterwards and whether it
	// is k.
	ClaimResponseKey(ctx context.Context, k ResponseKey, replace string) (*ResponseKey, bool, error)
	// GetResponseKey returns the entry of (tenant, key), expired or not, or
	// ErrNotFound.
	GetResponseKey(ctx context.Context, tenant, key string) (*ResponseKey, error)
	// SweepResponseKeys deletes the entries (of every tenant) that expired
	// at or before now, except those whose thread is running or queued,
	// and returns how many it deleted.
	SweepResponseKeys(ctx context.Context, now time.Time) (int, error)

	// PutConversation creates the conversation c names, or replaces its
	// metadata and deleted mark (its CreatedAt stays the first one), and
	// appends items to it, in one transaction. Marking it deleted also
	// deletes its items; deleted is for good: a put without the mark on a
	// deleted conversation (an update racing the delete) changes nothing
	// and is ErrNotFound.
	PutConversation(ctx context.Context, c Conversation, items []ConversationItem) error
	// GetConversation returns the tenant's conversation, deleted or not,
	// or ErrNotFound when it has none with the id.
	GetConversation(ctx context.Context, tenant, id string) (*Conversation, error)
	// AddConversationItems appends items, in order, to the conversation
	// id of tenant (whether or not a Conversation row exists: a thread is
	// a conversation too); a deleted one takes none (ErrNotFound).
	AddConversationItems(ctx context.Context, tenant, id string, items []ConversationItem) error
	// ConversationItems returns the items added to a conversation, in the
	// order they were added (none for an unknown one).
	ConversationItems(ctx context.Context, tenant, id string) ([]ConversationItem, error)
	// DeleteConversationItems deletes the conversation's items with the
	// given ids and returns how many it deleted.
	DeleteConversationItems(ctx context.Context, tenant, id string, itemIDs []string) (int, error)

	// RunControl: what is asked of a thread's runs from outside them
	// (cancel, the pause an MCP caller waits on), stored so any replica can
	// ask it of a run another replica drives.
	RunControlStore
	// Queue: follow-up turns that wait for a thread's running turn to end
	// (the multitask strategy enqueue).
	QueueStore

	// ScheduleStore: schedules and the firings schedulers claimed.
	ScheduleStore

	// MemoryStore: the long-term memory store (ctx.store, /v1/store).
	MemoryStore

	// Outbox: the webhook notices the transactions above write (Checkpoint
	// with Interrupts, Decide, FinishRun) and their deliveries.
	Outbox
	// PushStore: A2A push notification configs, whose deliveries the
	// transactions above queue in the outbox.
	PushStore

	// Ping checks the database answers.
	Ping(ctx context.Context) error
	// LastWrite returns the outcome of the store's latest write
	// (WriteStatus), for readiness: a database that answers Ping may still
	// refuse every write (a full disk).
	LastWrite() WriteStatus
	// ProbeWrite writes one row (table health_probe) in a transaction of
	// its own, to learn whether the database takes writes when no other
	// write said so lately; its outcome becomes LastWrite's.
	ProbeWrite(ctx context.Context) error
	Close() error
}

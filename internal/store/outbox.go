package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/stackbone/stackbone/internal/ids"
)

// Webhook event types: what the outbox reports.
const (
	// NoticeDecisionPending: a tool call waits on a human decision.
	NoticeDecisionPending = "decision.pending"
	// NoticeDecisionDecided: a human decided (or a quorum was reached).
	NoticeDecisionDecided = "decision.decided"
	// NoticeDecisionExpired: nobody decided before the decision expired.
	NoticeDecisionExpired = "decision.expired"
	// NoticeRunCompleted: a run ended with the agent's answer.
	NoticeRunCompleted = "run.completed"
	// NoticeRunFailed: a run ended in an error.
	NoticeRunFailed = "run.failed"
	// NoticeBudgetExceeded: a budget is spent for its period (once per
	// budget, tenant and period).
	NoticeBudgetExceeded = "budget.exceeded"
)

// Notice is one event of the webhook outbox. A driver configured with
// endpoints (Outbox) writes one delivery row per endpoint in the same
// transaction as the fact the notice reports (a checkpoint that creates
// pending decisions, a decision, the end of a run), so a crash can never
// lose a notice of a fact that was stored, nor report one that was not.
type Notice struct {
	// ID is the webhook-id: the same on every attempt and every endpoint.
	ID     string `json:"id"`
	Type   string `json:"type"`
	Tenant string `json:"tenant"`
	// At is when the fact was stored.
	At time.Time `json:"at"`
	// ThreadID is the thread the notice concerns ("" for none: a
	// stateless call's decision); its notices are numbered (Sequence).
	ThreadID string `json:"-"`
	// Data is the event's payload, a JSON object (NoticeData).
	Data json.RawMessage `json:"data"`
}

// NoticeData is what a notice tells: the thread and run it concerns and,
// for decision.* notices, the decision.
type NoticeData struct {
	Tenant   string `json:"tenant"`
	Agent    string `json:"agent"`
	ThreadID string `json:"threadId,omitempty"`
	RunID    string `json:"runId,omitempty"`
	// Budget names a spent budget (budget.exceeded only).
	Budget string `json:"budget,omitempty"`
	// DecisionID is the interrupt's id (decision.* only).
	DecisionID  string          `json:"decisionId,omitempty"`
	ToolCallID  string          `json:"toolCallId,omitempty"`
	Tool        string          `json:"tool,omitempty"`
	Description string          `json:"description,omitempty"`
	Args        json.RawMessage `json:"args,omitempty"`
	Reason      string          `json:"reason,omitempty"`
	Subagent    string          `json:"subagent,omitempty"`
	ExpiresAt   *time.Time      `json:"expiresAt,omitempty"`
	// ApprovalsNeeded is set for a quorum (more than one).
	ApprovalsNeeded int `json:"approvalsNeeded,omitempty"`
	// Decision is the decision made (decision.decided, decision.expired).
	Decision *Decision `json:"decision,omitempty"`
	// Error is a failed run's error (run.failed).
	Error string `json:"error,omitempty"`
	// Seq numbers the notices of one thread in the order their facts were
	// stored (1, 2, …): deliveries are at least once and unordered, so a
	// receiver orders by it. Absent for a notice of no thread.
	Seq int64 `json:"seq,omitempty"`
}

// Sequence numbers notices of one thread whose counter (the thread's
// notice_seq, bumped by len(notices) in the same transaction) is now last:
// they get last-len+1 … last, in order, written into their Data. Notices of
// no thread are left as they are.
func Sequence(notices []Notice, last int64) {
	first := last - int64(len(notices)) + 1
	for i := range notices {
		n := &notices[i]
		if n.ThreadID == "" || len(n.Data) < 2 || n.Data[0] != '{' {
			continue
		}
		seq := fmt.Sprintf(`{"seq":%d`, first+int64(i))
		if string(n.Data) == "{}" {
			n.Data = json.RawMessage(seq + "}")
		} else {
			n.Data = json.RawMessage(seq + "," + string(n.Data[1:]))
		}
	}
}

// NoticeThread returns the tenant and thread the notices concern, when
// they concern one (every notice of one transaction does), else ok false.
func NoticeThread(notices []Notice) (tenant, threadID string, ok bool) {
	for _, n := range notices {
		if n.ThreadID == "" || (threadID != "" && (n.ThreadID != threadID || n.Tenant != tenant)) {
			return "", "", false
		}
		tenant, threadID = n.Tenant, n.ThreadID
	}
	return tenant, threadID, threadID != ""
}

// DecisionNotice is the notice of an interrupt: decision.pending for a
// pending one, decision.expired for one rejected by expiry, else
// decision.decided.
func DecisionNotice(in *Interrupt, at time.Time) (Notice, error) {
	typ := NoticeDecisionPending
	switch {
	case in.Decision != nil && in.Decision.Via == ViaExpiry:
		typ = NoticeDecisionExpired
	case in.Decision != nil:
		typ = NoticeDecisionDecided
	}
	d := NoticeData{Tenant: in.Tenant, Agent: in.Agent, ThreadID: in.ThreadID, RunID: in.RunID, DecisionID: in.ID,
		ToolCallID: in.ToolCallID, Tool: in.Tool, Description: in.Description, Args: in.Args, Reason: in.Reason,
		Subagent: in.Subagent, ExpiresAt: in.ExpiresAt, Decision: in.Decision}
	if in.Needed() > 1 {
		d.ApprovalsNeeded = in.Needed()
	}
	return newNotice(typ, d, at)
}

// RunNotice is the notice of a run's end: run.completed for Idle,
// run.failed for Failed, and for Waiting with an error (a run that failed
// with its calls left in doubt); ok is false otherwise (a run that paused
// on decisions is reported by their decision.pending notices).
func RunNotice(tenant, agent, threadID, runID string, status ThreadStatus, errText string, at time.Time) (n Notice, ok bool, err error) {
	typ := NoticeRunCompleted
	switch {
	case status == Idle:
	case status == Failed, status == Waiting && errText != "":
		// A run that failed, or was cancelled, while its calls ran and
		// left them in doubt (Waiting with its error) failed all the same.
		typ = NoticeRunFailed
	default:
		return Notice{}, false, nil
	}
	n, err = newNotice(typ, NoticeData{Tenant: tenant, Agent: agent, ThreadID: threadID, RunID: runID, Error: errText}, at)
	return n, err == nil, err
}

func newNotice(typ string, d NoticeData, at time.Time) (Notice, error) {
	if len(d.Args) > 0 && !json.Valid(d.Args) {
		d.Args = nil
	}
	b, err := json.Marshal(d)
	if err != nil {
		return Notice{}, fmt.Errorf("%w: notice %s: %w", ErrInvalid, typ, err)
	}
	return Notice{ID: ids.New("msg"), Type: typ, Tenant: d.Tenant, ThreadID: d.ThreadID, At: at.UTC(), Data: b}, nil
}

// DeliveryStatus is where a notice's delivery to one endpoint is.
type DeliveryStatus string

// Delivery statuses.
const (
	// DeliveryPending: not yet delivered; attempted again at NextAt.
	DeliveryPending DeliveryStatus = "pending"
	// DeliveryDelivered: the endpoint answered 2xx.
	DeliveryDelivered DeliveryStatus = "delivered"
	// DeliveryFailed: every attempt of the retry schedule failed.
	DeliveryFailed DeliveryStatus = "failed"
)

// Delivery is a notice's delivery to one endpoint.
type Delivery struct {
	Notice
	Endpoint string         `json:"endpoint"`
	Status   DeliveryStatus `json:"status"`
	Attempts int            `json:"attempts"`
	// NextAt is when a pending delivery is attempted next.
	NextAt time.Time `json:"nextAttemptAt"`
	// LastStatus is the HTTP status of the last attempt (0: none, or no
	// answer); LastError says why it failed.
	LastStatus  int        `json:"lastStatus,omitempty"`
	LastError   string     `json:"lastError,omitempty"`
	DeliveredAt *time.Time `json:"deliveredAt,omitempty"`
	// TraceParent is the W3C traceparent of the span that stored the
	// notice ("" for none): its deliveries are part of that trace.
	TraceParent string `json:"-"`
}

// ClaimDeliveries asks for due pending deliveries to the given endpoints:
// each is leased to Owner until LeaseUntil, so that of several replicas
// exactly one attempts it (another takes it over only once the lease
// lapsed, e.g. the owner died mid-attempt).
type ClaimDeliveries struct {
	Endpoints  []string
	Owner      string
	Now        time.Time
	LeaseUntil time.Time
	Limit      int
	// Push claims the A2A push deliveries (endpoints PushEndpoint of any
	// config) instead of Endpoints'.
	Push bool
}

// DeliveryAttempt is the outcome of one attempt of a leased delivery.
type DeliveryAttempt struct {
	ID       string
	Endpoint string
	Owner    string
	At       time.Time
	// Delivered: the endpoint answered 2xx.
	Delivered bool
	// HTTPStatus is the endpoint's answer (0 when there was none).
	HTTPStatus int
	Error      string
	// NextAt is when to try again after a failed attempt; zero gives up
	// (the delivery is failed).
	NextAt time.Time
}

// WebhookRef is how outbox rows name a configured webhook endpoint: "whk_"
// and 16 hex digits of the URL's SHA-256. A row holds no token or user
// info of the URL, and keeps naming the same endpoint when the list is
// reordered; an endpoint removed from the configuration matches no row.
func WebhookRef(endpointURL string) string {
	sum := sha256.Sum256([]byte(endpointURL))
	return "whk_" + hex.EncodeToString(sum[:8])
}

// WebhookRefs is WebhookRef of each URL, in order: what SetWebhooks takes.
func WebhookRefs(endpointURLs []string) []string {
	out := make([]string, len(endpointURLs))
	for i, u := range endpointURLs {
		out[i] = WebhookRef(u)
	}
	return out
}

// LegacyEndpoint reports whether an outbox row's endpoint is a URL, as rows
// written before WebhookRef hold; a driver replaces those at open.
func LegacyEndpoint(endpoint string) bool {
	return strings.HasPrefix(endpoint, "http://") || strings.HasPrefix(endpoint, "https://")
}

// Outbox is the webhook outbox of a store driver: the notices its
// transactions write, and their deliveries.
type Outbox interface {
	// SetWebhooks sets the endpoints every notice is delivered to (none:
	// no notice is written), as the references rows store (WebhookRef of
	// each URL, never the URL: it may hold a token). Call it once, before
	// the store is used.
	SetWebhooks(endpoints []string)
	// ClaimDeliveries leases up to c.Limit due pending deliveries to
	// c.Endpoints (NextAt at or before c.Now, no lease held at c.Now),
	// oldest first. Concurrent claimers get disjoint sets.
	ClaimDeliveries(ctx context.Context, c ClaimDeliveries) ([]Delivery, error)
	// RecordAttempt records an attempt of a delivery c.Owner leased:
	// delivered, or failed and due again at NextAt (or failed for good),
	// releasing the lease. ErrLeaseLost when the lease is no longer
	// c.Owner's.
	RecordAttempt(ctx context.Context, a DeliveryAttempt) error
	// ListDeliveries returns the tenant's deliveries, newest first.
	ListDeliveries(ctx context.Context, tenant string, limit int) ([]Delivery, error)
	// SweepDeliveries deletes the delivered and failed deliveries (of
	// every tenant) of notices from before before, and returns how many. It
	// first marks failed (StaleDelivery) the deliveries still pending of
	// notices from before staleBefore: no dispatcher attempts them any more
	// (their endpoint was removed from the configuration), so they are
	// shown as failed instead of pending forever.
	SweepDeliveries(ctx context.Context, before, staleBefore time.Time) (int, error)
}

// PendingNotices are the decision.pending notices of a checkpoint's new
// interrupts (an interrupt without an agent has the thread's).
func PendingNotices(agent string, ins []EncodedInterrupt) ([]Notice, error) {
	out := make([]Notice, 0, len(ins))
	for _, r := range ins {
		in := r.In
		if in.Agent == "" {
			in.Agent = agent
		}
		n, err := DecisionNotice(&in, r.CreatedAt)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// StaleDelivery is the LastError of a delivery SweepDeliveries gave up on.
const StaleDelivery = "not delivered within the retry schedule: is the endpoint still configured?"

// AttemptOutcome is the status and next attempt time an attempt leaves.
func AttemptOutcome(a DeliveryAttempt) (DeliveryStatus, time.Time) {
	switch {
	case a.Delivered:
		return DeliveryDelivered, a.At
	case a.NextAt.IsZero():
		return DeliveryFailed, a.At
	}
	return DeliveryPending, a.NextAt
}

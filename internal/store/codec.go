package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
)

// FormatVersion is the version of the JSON layouts a driver writes: the
// canonical message and event JSON, thread state, interrupt arguments and
// decisions. Drivers record it beside every stored JSON value so a later
// release can recognise and migrate rows written by this one.
const FormatVersion = 1

// EmptyState is the state of a thread that has none.
const EmptyState = "{}"

// Default and maximum page sizes of the list methods.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// ErrUnknownFormat means a stored value was written in a format version this
// build cannot read (a newer release wrote it).
var ErrUnknownFormat = errors.New("stored value has an unknown format version")

// ErrInvalid marks a request a driver refuses before touching the database
// (a missing id, a FinishRun status that is not Idle, Waiting or Failed,
// state that is not a JSON object, text with a NUL byte or invalid UTF-8).
var ErrInvalid = errors.New("invalid store request")

// CheckText returns ErrInvalid naming the first of the name/value pairs
// whose value holds a NUL byte or is not valid UTF-8: every driver refuses
// such ids, names and filters alike (PostgreSQL's text columns cannot hold
// them), before touching the database.
func CheckText(op string, pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if v := pairs[i+1]; strings.IndexByte(v, 0) >= 0 || !utf8.ValidString(v) {
			return fmt.Errorf("%w: %s: %s holds a NUL byte or invalid UTF-8", ErrInvalid, op, pairs[i])
		}
	}
	return nil
}

// checkJSONText returns ErrInvalid when stored JSON text is not valid
// UTF-8 (encoding/json passes raw values through unchecked).
func checkJSONText(op, name string, raw []byte) error {
	if !utf8.Valid(raw) {
		return fmt.Errorf("%w: %s: %s is not valid UTF-8", ErrInvalid, op, name)
	}
	return nil
}

// CleanText makes free text (a description, an error) storable by every
// driver: invalid UTF-8 becomes U+FFFD and NUL bytes are dropped.
func CleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "")
}

// CheckFormat returns ErrUnknownFormat unless v is a format this build reads.
func CheckFormat(v int) error {
	if v != FormatVersion {
		return fmt.Errorf("%w: %d", ErrUnknownFormat, v)
	}
	return nil
}

// DecodeMessage decodes a stored message written in format v.
func DecodeMessage(v int, data []byte) (message.Message, error) {
	var m message.Message
	if err := CheckFormat(v); err != nil {
		return m, err
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("decode stored message: %w", err)
	}
	return m, nil
}

// DecodeEvent decodes a stored event written in format v. Format 1 events
// written before ToolCallEnd had an arguments field carry the call's
// arguments in delta; they read as today's (Arguments set, Delta empty).
func DecodeEvent(v int, data []byte) (event.Event, error) {
	var e event.Event
	if err := CheckFormat(v); err != nil {
		return e, err
	}
	if err := json.Unmarshal(data, &e); err != nil {
		return e, fmt.Errorf("decode stored event: %w", err)
	}
	if e.Type == event.ToolCallEnd && e.Arguments == "" && e.Delta != "" {
		e.Arguments, e.Delta = e.Delta, ""
	}
	return e, nil
}

// DecodeDecision decodes a stored decision written in format v; nil data
// (no decision yet) gives nil.
func DecodeDecision(v int, data []byte) (*Decision, error) {
	if data == nil {
		return nil, nil
	}
	if err := CheckFormat(v); err != nil {
		return nil, err
	}
	d := new(Decision)
	if err := json.Unmarshal(data, d); err != nil {
		return nil, fmt.Errorf("decode stored decision: %w", err)
	}
	return d, nil
}

// InterruptColumns are the stored columns of an interrupt that every driver
// decodes the same way; a driver scans them beside the others (description,
// creation time), whose types are its own.
type InterruptColumns struct {
	// V is the format version of the row's JSON values.
	V      int
	Status string
	// Args, Allowed (the allowed decisions), Schema (the response schema,
	// nil when NULL) and Decision (nil until decided) are JSON text.
	Args, Allowed, Schema, Decision []byte
	// Needed is approvals_needed; Approvals the approvals so far as JSON
	// text (empty or [] for none).
	Needed    int
	Approvals []byte
}

// Decode checks the format version and sets in's Args, AllowedDecisions,
// ResponseSchema, Status and Decision from c; errors name in.ID.
func (c InterruptColumns) Decode(in *Interrupt) error {
	if err := CheckFormat(c.V); err != nil {
		return fmt.Errorf("interrupt %s: %w", in.ID, err)
	}
	in.Args = json.RawMessage(c.Args)
	if err := json.Unmarshal(c.Allowed, &in.AllowedDecisions); err != nil {
		return fmt.Errorf("interrupt %s: allowed decisions: %w", in.ID, err)
	}
	if c.Schema != nil {
		in.ResponseSchema = json.RawMessage(c.Schema)
	}
	in.Status = InterruptStatus(c.Status)
	d, err := DecodeDecision(c.V, c.Decision)
	if err != nil {
		return fmt.Errorf("interrupt %s: %w", in.ID, err)
	}
	in.Decision = d
	in.ApprovalsNeeded = c.Needed
	if len(c.Approvals) > 0 {
		if err := json.Unmarshal(c.Approvals, &in.Approvals); err != nil {
			return fmt.Errorf("interrupt %s: approvals: %w", in.ID, err)
		}
		if len(in.Approvals) == 0 {
			in.Approvals = nil
		}
	}
	return nil
}

// encodeApprovals returns approvals as stored JSON text ("[]" for none).
func encodeApprovals(a []Approval) (string, error) {
	if a == nil {
		a = []Approval{}
	}
	b, err := json.Marshal(a)
	if err != nil {
		return "", fmt.Errorf("%w: approvals: %w", ErrInvalid, err)
	}
	return string(b), nil
}

// EncodeMessages encodes messages as stored, one JSON text each; none gives
// nil. A message that does not encode is ErrInvalid.
func EncodeMessages(msgs []message.Message) ([]string, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	out := make([]string, len(msgs))
	for i := range msgs {
		// Every field of a message is a string, which json.Marshal writes
		// as valid UTF-8 (bad bytes become U+FFFD): no check is needed.
		b, err := json.Marshal(&msgs[i])
		if err != nil {
			return nil, fmt.Errorf("%w: message %d: %w", ErrInvalid, i, err)
		}
		out[i] = string(b)
	}
	return out, nil
}

// EncodeEvents encodes events as stored: thread and run filled in when
// empty, Seq left to the seq column (zero in the JSON); none gives nil. The
// caller's events are not changed. An event that does not encode is
// ErrInvalid.
func EncodeEvents(evs []event.Event, threadID, runID string) ([]string, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	out := make([]string, len(evs))
	for i := range evs {
		e := evs[i]
		e.Seq = 0
		if e.ThreadID == "" {
			e.ThreadID = threadID
		}
		if e.RunID == "" {
			e.RunID = runID
		}
		b, err := json.Marshal(&e)
		if err != nil {
			return nil, fmt.Errorf("%w: event %d: %w", ErrInvalid, i, err)
		}
		if !utf8.Valid(b) {
			return nil, fmt.Errorf("%w: event %d is not valid UTF-8", ErrInvalid, i)
		}
		out[i] = string(b)
	}
	return out, nil
}

// StampEvents writes the stored identity of committed events back to the
// caller's slice: Seq, counting up to last (the Seq of the last one), and
// the thread and run where they were empty.
func StampEvents(evs []event.Event, threadID, runID string, last int64) {
	first := last - int64(len(evs)) + 1
	for i := range evs {
		evs[i].Seq = first + int64(i)
		if evs[i].ThreadID == "" {
			evs[i].ThreadID = threadID
		}
		if evs[i].RunID == "" {
			evs[i].RunID = runID
		}
	}
}

// EncodedInterrupt is an interrupt of a checkpoint prepared for insertion
// as pending.
type EncodedInterrupt struct {
	// In is the interrupt with the checkpoint's tenant and thread, and its
	// run unless the interrupt names another.
	In Interrupt
	// Args is the arguments as JSON text, {} when there are none.
	Args string
	// Allowed is the allowed decisions as JSON text.
	Allowed string
	// Schema is the response schema as JSON text, "" when there is none.
	Schema string
	// CreatedAt is the interrupt's, or now when that is zero.
	CreatedAt time.Time
}

// EncodeInterrupts prepares a checkpoint's interrupts for insertion; none
// gives nil. Arguments or a response schema that are not JSON are
// ErrInvalid.
func EncodeInterrupts(c Checkpoint, now func() time.Time) ([]EncodedInterrupt, error) {
	if len(c.Interrupts) == 0 {
		return nil, nil
	}
	out := make([]EncodedInterrupt, len(c.Interrupts))
	for i, in := range c.Interrupts {
		in.Tenant, in.ThreadID = c.Tenant, c.ThreadID
		if in.RunID == "" {
			in.RunID = c.RunID
		}
		if err := CheckText("interrupt", "ID", in.ID, "RunID", in.RunID, "Agent", in.Agent, "ToolCallID", in.ToolCallID,
			"Tool", in.Tool, "Subagent", in.Subagent, "Owner", in.Owner); err != nil {
			return nil, err
		}
		in.Description = CleanText(in.Description)
		switch in.Reason {
		case "":
			in.Reason = ReasonApproval
		case ReasonApproval, ReasonInDoubt, ReasonElicitation:
		default:
			return nil, fmt.Errorf("%w: interrupt %s: unknown reason %q", ErrInvalid, in.ID, in.Reason)
		}
		r := EncodedInterrupt{In: in, Args: "{}"}
		if err := checkJSONText("interrupt "+in.ID, "args", in.Args); err != nil {
			return nil, err
		}
		if err := checkJSONText("interrupt "+in.ID, "response schema", in.ResponseSchema); err != nil {
			return nil, err
		}
		if len(in.Args) > 0 {
			if !json.Valid(in.Args) {
				return nil, fmt.Errorf("%w: interrupt %s: args are not JSON", ErrInvalid, in.ID)
			}
			r.Args = string(in.Args)
		}
		if len(in.ResponseSchema) > 0 {
			if !json.Valid(in.ResponseSchema) {
				return nil, fmt.Errorf("%w: interrupt %s: response schema is not JSON", ErrInvalid, in.ID)
			}
			r.Schema = string(in.ResponseSchema)
		}
		allowed, err := json.Marshal(in.AllowedDecisions)
		if err != nil {
			return nil, fmt.Errorf("%w: interrupt %s: %w", ErrInvalid, in.ID, err)
		}
		r.Allowed = string(allowed)
		r.CreatedAt = in.CreatedAt
		if r.CreatedAt.IsZero() {
			r.CreatedAt = now()
		}
		out[i] = r
	}
	return out, nil
}

// EncodeDecided prepares an already decided interrupt of no thread (see
// Store.RecordDecided): the row as EncodeInterrupts makes it, its status and
// its decision as stored JSON. A zero decision time is the creation time.
func EncodeDecided(in Interrupt, now func() time.Time) (EncodedInterrupt, InterruptStatus, []byte, error) {
	if in.ThreadID != "" || in.Decision == nil || in.ID == "" || in.Tenant == "" {
		return EncodedInterrupt{}, "", nil, fmt.Errorf("%w: interrupt %q: a decided record needs an id, a tenant and a decision, and no thread", ErrInvalid, in.ID)
	}
	rows, err := EncodeInterrupts(Checkpoint{Tenant: in.Tenant, RunID: in.RunID, Interrupts: []Interrupt{in}}, now)
	if err != nil {
		return EncodedInterrupt{}, "", nil, err
	}
	d := *in.Decision
	if d.At.IsZero() {
		d.At = rows[0].CreatedAt
	}
	d.At = d.At.UTC()
	status, dj, err := EncodeDecision(d)
	if err != nil {
		return EncodedInterrupt{}, "", nil, err
	}
	return rows[0], status, dj, nil
}

// EncodeDecision returns the status d gives its interrupt and d as stored
// JSON. A decision that does not encode is ErrInvalid.
func EncodeDecision(d Decision) (InterruptStatus, []byte, error) {
	status := Rejected
	if d.Approved {
		status = Approved
	}
	dj, err := json.Marshal(d)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := checkJSONText("decision", "editedArgs", dj); err != nil {
		return "", nil, err
	}
	return status, dj, nil
}

// StateArg is replacement state as a query argument: nil (NULL, which keeps
// the stored state) when raw is empty, else its text.
func StateArg(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return string(raw)
}

// CheckState returns ErrInvalid unless raw is a JSON object.
func CheckState(raw json.RawMessage) error {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		return fmt.Errorf("%w: state must be a JSON object", ErrInvalid)
	}
	return checkJSONText("state", "state", t)
}

// Limit returns n clamped to (0, MaxLimit], with def for n <= 0.
func Limit(n, def int) int {
	switch {
	case n <= 0:
		return def
	case n > MaxLimit:
		return MaxLimit
	}
	return n
}

// Validate checks the fields every driver needs: ids, a lease, and state
// (when set, that is non-empty) that is a JSON object.
func (b BeginRun) Validate() error {
	if err := required("BeginRun", "Tenant", b.Tenant, "ThreadID", b.ThreadID, "Agent", b.Agent, "RunID", b.RunID); err != nil {
		return err
	}
	if err := CheckText("BeginRun", "Tenant", b.Tenant, "ThreadID", b.ThreadID, "Agent", b.Agent, "RunID", b.RunID,
		"Owner", b.Owner); err != nil {
		return err
	}
	if err := checkJSONText("BeginRun", "Options", b.Options); err != nil {
		return err
	}
	if b.LeaseUntil.IsZero() {
		return fmt.Errorf("%w: BeginRun: LeaseUntil is required", ErrInvalid)
	}
	if len(b.State) > 0 {
		return CheckState(b.State)
	}
	return nil
}

// Validate checks the fields every driver needs.
func (c Claim) Validate() error {
	if err := required("Claim", "Tenant", c.Tenant, "ThreadID", c.ThreadID, "RunID", c.RunID); err != nil {
		return err
	}
	if err := CheckText("Claim", "Tenant", c.Tenant, "ThreadID", c.ThreadID, "RunID", c.RunID, "Owner", c.Owner); err != nil {
		return err
	}
	if c.LeaseUntil.IsZero() {
		return fmt.Errorf("%w: Claim: LeaseUntil is required", ErrInvalid)
	}
	return nil
}

// Unmarked returns the tool calls whose started markers c deletes: those
// of its tool results and of its in-doubt interrupts.
func (c Checkpoint) Unmarked() []string {
	var ids []string
	for _, m := range c.Messages {
		if m.Role == message.Tool && m.ToolCallID != "" {
			ids = append(ids, m.ToolCallID)
		}
	}
	for _, in := range c.Interrupts {
		if in.Reason == ReasonInDoubt {
			ids = append(ids, in.ToolCallID)
		}
	}
	return ids
}

// Validate checks the fields every driver needs.
func (c Checkpoint) Validate() error {
	if err := required("Checkpoint", "Tenant", c.Tenant, "ThreadID", c.ThreadID, "RunID", c.RunID); err != nil {
		return err
	}
	if err := CheckText("Checkpoint", "Tenant", c.Tenant, "ThreadID", c.ThreadID, "RunID", c.RunID); err != nil {
		return err
	}
	for _, in := range c.Interrupts {
		if in.ID == "" {
			return fmt.Errorf("%w: Checkpoint: an interrupt has no id", ErrInvalid)
		}
	}
	if err := CheckCallInterrupts(c.Tenant, c.ThreadID, c.Started); err != nil {
		return err
	}
	for _, id := range c.Started {
		if id == "" {
			return fmt.Errorf("%w: Checkpoint: a started call has no id", ErrInvalid)
		}
	}
	if len(c.State) > 0 {
		return CheckState(c.State)
	}
	return nil
}

// Validate checks the fields every driver needs.
func (f FinishRun) Validate() error {
	if err := required("FinishRun", "Tenant", f.Tenant, "ThreadID", f.ThreadID, "RunID", f.RunID); err != nil {
		return err
	}
	if err := CheckText("FinishRun", "Tenant", f.Tenant, "ThreadID", f.ThreadID, "RunID", f.RunID); err != nil {
		return err
	}
	switch f.Status {
	case Idle, Waiting, Failed:
		return nil
	}
	return fmt.Errorf("%w: FinishRun: status %q is not idle, waiting or failed", ErrInvalid, f.Status)
}

// CheckSession checks the tenant and id of a Studio session operation.
func CheckSession(op, tenant, id string) error {
	return required(op, "Tenant", tenant, "ID", id)
}

// required checks name/value pairs for empty values.
func required(op string, pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			return fmt.Errorf("%w: %s: %s is required", ErrInvalid, op, pairs[i])
		}
	}
	return nil
}

// OptionsArg binds run options as stored: "{}" when empty.
func OptionsArg(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	return string(raw)
}

// Encode validates a BeginRun and encodes its input messages and events as
// stored.
func (b BeginRun) Encode() (msgs, evs []string, err error) {
	if err := b.Validate(); err != nil {
		return nil, nil, err
	}
	if msgs, err = EncodeMessages(b.Input); err != nil {
		return nil, nil, err
	}
	evs, err = EncodeEvents(b.Events, b.ThreadID, b.RunID)
	return msgs, evs, err
}

// Encode validates a Checkpoint and encodes its messages and events as
// stored.
func (c Checkpoint) Encode() (msgs, evs []string, err error) {
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	if msgs, err = EncodeMessages(c.Messages); err != nil {
		return nil, nil, err
	}
	evs, err = EncodeEvents(c.Events, c.ThreadID, c.RunID)
	return msgs, evs, err
}

// Encode validates a FinishRun and encodes its events as stored.
func (f FinishRun) Encode() (evs []string, err error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return EncodeEvents(f.Events, f.ThreadID, f.RunID)
}

// Validate checks the filter's text and the tenant's (CheckText).
func (f ThreadFilter) Validate(tenant string) error {
	return CheckText("ListThreads", "tenant", tenant, "Agent", f.Agent, "Status", string(f.Status), "User", f.User)
}

// Validate checks the filter's text and the tenant's (CheckText).
func (f InterruptFilter) Validate(tenant string) error {
	return CheckText("ListInterrupts", "tenant", tenant, "ThreadID", f.ThreadID, "Agent", f.Agent, "Status", string(f.Status), "User", f.User)
}

// CheckCallInterrupts checks the text of CallInterrupts' arguments
// (CheckText).
func CheckCallInterrupts(tenant, threadID string, toolCallIDs []string) error {
	pairs := []string{"tenant", tenant, "threadID", threadID}
	for _, id := range toolCallIDs {
		pairs = append(pairs, "toolCallID", id)
	}
	return CheckText("CallInterrupts", pairs...)
}

// Validate checks a journal entry before it is stored.
func (e JournalEntry) Validate() error {
	if err := required("PutJournal", "Tenant", e.Tenant, "Key", e.Key); err != nil {
		return err
	}
	if e.ExpiresAt.IsZero() {
		return fmt.Errorf("%w: PutJournal: ExpiresAt is required", ErrInvalid)
	}
	if len(e.State) > 0 {
		return CheckState(e.State)
	}
	return nil
}

// Encode validates a journal entry and encodes its messages (one JSON
// array) and state as stored.
func (e JournalEntry) Encode() (msgs, state string, err error) {
	if err := e.Validate(); err != nil {
		return "", "", err
	}
	list := e.Messages
	if list == nil {
		list = []message.Message{}
	}
	b, err := json.Marshal(list)
	if err != nil {
		return "", "", fmt.Errorf("%w: journal messages: %w", ErrInvalid, err)
	}
	state = EmptyState
	if len(e.State) > 0 {
		state = string(e.State)
	}
	return string(b), state, nil
}

// DecodeJournal sets a journal entry's Messages and State from their stored
// JSON, written in format v.
func DecodeJournal(e *JournalEntry, v int, msgs, state []byte) error {
	if err := CheckFormat(v); err != nil {
		return fmt.Errorf("journal %s: %w", e.Key, err)
	}
	if err := json.Unmarshal(msgs, &e.Messages); err != nil {
		return fmt.Errorf("journal %s: decode messages: %w", e.Key, err)
	}
	e.State = json.RawMessage(state)
	return nil
}

// CheckResponse checks the tenant and id naming a stored response (or the
// tenant and thread of NextResponse): both are required, and hold no NUL
// byte or invalid UTF-8.
func CheckResponse(op, tenant, id string) error {
	if err := required(op, "tenant", tenant, "id", id); err != nil {
		return err
	}
	return CheckText(op, "tenant", tenant, "id", id)
}

// Validate checks a response before PutResponse stores it: it needs an ID,
// a Tenant, a ThreadID and a Seq above zero; its text holds no NUL byte or
// invalid UTF-8, and its Request, when set, is JSON.
func (r Response) Validate() error {
	const op = "PutResponse"
	if err := required(op, "ID", r.ID, "Tenant", r.Tenant, "ThreadID", r.ThreadID); err != nil {
		return err
	}
	if r.Seq <= 0 {
		return fmt.Errorf("%w: %s: Seq must be above zero, not %d", ErrInvalid, op, r.Seq)
	}
	if err := CheckText(op, "ID", r.ID, "Tenant", r.Tenant, "ThreadID", r.ThreadID, "PreviousID", r.PreviousID); err != nil {
		return err
	}
	if len(r.Request) > 0 {
		if !json.Valid(r.Request) {
			return fmt.Errorf("%w: %s: Request is not JSON", ErrInvalid, op)
		}
		return checkJSONText(op, "Request", r.Request)
	}
	return nil
}

// Validate checks a response key before ClaimResponseKey records it: it
// needs a Tenant, a Key, a Digest, a ThreadID and an ExpiresAt, and its text
// (replace, the thread it may take over, included) holds no NUL byte or
// invalid UTF-8.
func (k ResponseKey) Validate(replace string) error {
	const op = "ClaimResponseKey"
	if err := required(op, "Tenant", k.Tenant, "Key", k.Key, "Digest", k.Digest, "ThreadID", k.ThreadID); err != nil {
		return err
	}
	if k.ExpiresAt.IsZero() {
		return fmt.Errorf("%w: %s: ExpiresAt is required", ErrInvalid, op)
	}
	return CheckText(op, "Tenant", k.Tenant, "Key", k.Key, "Digest", k.Digest, "ThreadID", k.ThreadID, "replace", replace)
}

// Encode validates a response and returns its Request as stored: "{}" when
// empty.
func (r Response) Encode() (request string, err error) {
	if err := r.Validate(); err != nil {
		return "", err
	}
	if len(r.Request) == 0 {
		return EmptyState, nil
	}
	return string(r.Request), nil
}

package a2a

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
)

// AnswerArtifactID is the id of the one artifact a task has: the agent's
// answer text, in order across the turn's model steps.
const AnswerArtifactID = "answer"

// InterruptMetadataKey marks the data parts of an INPUT_REQUIRED status
// message that are pending decisions (part metadata {"stackbone":
// "interrupt"}).
const InterruptMetadataKey = "stackbone"

// Interrupt is the data part of a pending decision in an INPUT_REQUIRED
// status message: what to decide and the form of the answer.
type Interrupt struct {
	ID               string          `json:"id"`
	ToolCallID       string          `json:"toolCallId"`
	Tool             string          `json:"tool"`
	Arguments        json.RawMessage `json:"arguments,omitempty"`
	Description      string          `json:"description,omitempty"`
	AllowedDecisions []string        `json:"allowedDecisions"`
	ResponseSchema   json.RawMessage `json:"responseSchema,omitempty"`
	// Reason is approval, in_doubt or elicitation.
	Reason   string `json:"reason,omitempty"`
	Subagent string `json:"subagent,omitempty"`
}

// Tracker folds a turn's engine events (live, or replayed from the store)
// into its task, and says which stream events each one yields: a status
// update when the state changes, an artifact update for each piece of the
// answer's text.
type Tracker struct {
	task  Task
	text  strings.Builder
	sent  bool // an artifact update went out
	now   func() time.Time
	lastM string
	msgs  []Message
	any   bool
	// statuses counts the status messages, for their ids.
	statuses int
	// at is the Unix millisecond time of the event being applied (0: none).
	at int64
}

// stamp is the time of the event being applied, else the clock's.
func (t *Tracker) stamp() string {
	if t.at > 0 {
		return stampOf(time.UnixMilli(t.at))
	}
	return stampOf(t.now())
}

// NewTracker is the tracker of task id in context (thread) contextID,
// submitted at first.
func NewTracker(id, contextID string, now func() time.Time) *Tracker {
	t := &Tracker{now: now}
	t.task = Task{ID: id, ContextID: contextID, Status: TaskStatus{State: StateSubmitted, Timestamp: stampOf(now())}}
	return t
}

func stampOf(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// State is the task's state so far.
func (t *Tracker) State() TaskState { return t.task.Status.State }

// SetState moves the task to state (with no message) without an event: a
// state read from the thread rather than from its events (a decision made
// out of band resumed it).
func (t *Tracker) SetState(s TaskState) {
	if t.task.Status.State != s {
		t.task.Status = TaskStatus{State: s, Timestamp: stampOf(t.now())}
	}
}

// Task is the task as folded so far, with at most historyLength messages
// of its history (nil: all; 0: none).
func (t *Tracker) Task(historyLength *int, artifacts bool) Task {
	out := t.task
	if artifacts && t.text.Len() > 0 {
		out.Artifacts = []Artifact{{ArtifactID: AnswerArtifactID, Name: "answer", Parts: []Part{TextPart(t.text.String())}}}
	}
	h := t.msgs
	if historyLength != nil {
		n := max(*historyLength, 0)
		if len(h) > n {
			h = h[len(h)-n:]
		}
	}
	if len(h) > 0 {
		out.History = append([]Message(nil), h...)
	}
	return out
}

// Apply folds e into the task and returns the stream events it yields.
// A status it changes is stamped with the event's time (the tracker's
// clock for an event without one).
func (t *Tracker) Apply(e event.Event) []StreamResponse {
	t.at = e.Time
	switch e.Type {
	case event.RunStarted:
		if t.task.Status.State != StateWorking {
			return t.status(StateWorking, nil)
		}
	case event.TextDelta:
		piece := t.piece(e)
		if piece == "" {
			return nil
		}
		t.text.WriteString(piece)
		t.addHistory(e.MessageID, e.Delta)
		up := &TaskArtifactUpdateEvent{TaskID: t.task.ID, ContextID: t.task.ContextID, Append: t.sent,
			Artifact: Artifact{ArtifactID: AnswerArtifactID, Name: "answer", Parts: []Part{TextPart(piece)}}}
		t.sent = true
		return []StreamResponse{{ArtifactUpdate: up}}
	case event.RunFinished:
		if e.Outcome != nil && e.Outcome.Type == event.Interrupt {
			return t.status(StateInputRequired, t.interruptMessage(e.Outcome))
		}
		return t.status(StateCompleted, nil)
	case event.RunError:
		state := StateFailed
		switch e.Code {
		case "cancelled":
			state = StateCanceled
		case "budget_exceeded":
			state = StateRejected
		}
		var msg *Message
		if e.Message != "" {
			msg = t.agentMessage(TextPart(e.Message))
		}
		return t.status(state, msg)
	}
	return nil
}

// piece is a text delta's text, with a blank line before the first delta
// of a later message (wire.TextJoiner's rule).
func (t *Tracker) piece(e event.Event) string {
	if e.MessageID != t.lastM {
		t.lastM = e.MessageID
		if t.any && e.Delta != "" {
			return "\n\n" + e.Delta
		}
	}
	if e.Delta != "" {
		t.any = true
	}
	return e.Delta
}

func (t *Tracker) addHistory(id, delta string) {
	if n := len(t.msgs); n > 0 && t.msgs[n-1].MessageID == id {
		*t.msgs[n-1].Parts[0].Text += delta
		return
	}
	t.msgs = append(t.msgs, Message{MessageID: id, ContextID: t.task.ContextID, TaskID: t.task.ID, Role: RoleAgent,
		Parts: []Part{TextPart(delta)}})
}

func (t *Tracker) status(s TaskState, msg *Message) []StreamResponse {
	t.task.Status = TaskStatus{State: s, Message: msg, Timestamp: t.stamp()}
	return []StreamResponse{{StatusUpdate: &TaskStatusUpdateEvent{TaskID: t.task.ID, ContextID: t.task.ContextID, Status: t.task.Status}}}
}

func (t *Tracker) agentMessage(parts ...Part) *Message {
	t.statuses++
	return &Message{MessageID: t.task.ID + "-status-" + strconv.Itoa(t.statuses),
		ContextID: t.task.ContextID, TaskID: t.task.ID, Role: RoleAgent, Parts: parts}
}

// interruptMessage is the status message of a paused turn: the waiting
// note as text, then one data part per pending decision.
func (t *Tracker) interruptMessage(o *event.Outcome) *Message {
	var parts []Part
	if note, ok := event.WaitingNote(o); ok {
		parts = append(parts, TextPart(note))
	}
	args := map[string]json.RawMessage{}
	for _, c := range o.PendingCalls {
		args[c.ID] = c.ArgsJSON()
	}
	for _, in := range o.Interrupts {
		d := Interrupt{ID: in.ID, ToolCallID: in.ToolCallID, Tool: in.Tool, Arguments: args[in.ToolCallID], Description: in.Description,
			AllowedDecisions: in.AllowedDecisions, ResponseSchema: in.ResponseSchema, Reason: in.Reason, Subagent: in.Subagent}
		if d.Reason == "" {
			d.Reason = "approval"
		}
		b, _ := json.Marshal(d)
		parts = append(parts, Part{Data: b, MediaType: "application/json", Metadata: map[string]any{InterruptMetadataKey: "interrupt"}})
	}
	return t.agentMessage(parts...)
}

// Decision is a client's answer to a pending decision, sent as a data part
// of a message on an INPUT_REQUIRED task: {"decision": "approve" | "reject"
// | "retry" | "skip", "id"?: the interrupt (all pending ones when absent),
// "message"?: a note for the model, "arguments"?: edited arguments (an
// approve)}.
type Decision struct {
	Decision  string          `json:"decision"`
	ID        string          `json:"id,omitempty"`
	Message   string          `json:"message,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Payload is d as the engine's decision payload (engine.Answer.Payload):
// {"approved", "editedArgs"?, "message"?} for approve and reject, or
// {"decision", "message"?} for an in-doubt call's retry and skip.
func (d Decision) Payload() (json.RawMessage, *Error) {
	var v map[string]any
	switch d.Decision {
	case "approve", "reject":
		v = map[string]any{"approved": d.Decision == "approve"}
		if len(d.Arguments) > 0 {
			if d.Decision != "approve" {
				return nil, Errorf(CodeInvalidParams, "Edited arguments go with an approve, not a reject.")
			}
			v["editedArgs"] = d.Arguments
		}
	case "retry", "skip":
		v = map[string]any{"decision": d.Decision}
	default:
		return nil, Errorf(CodeInvalidParams, `A decision is "approve", "reject", "retry" or "skip", not %q.`, d.Decision)
	}
	if d.Message != "" {
		v["message"] = d.Message
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, Errorf(CodeInvalidParams, "Invalid decision: %v.", err)
	}
	return b, nil
}

// Decisions are the decision data parts of m (parts whose data object has
// a "decision" field), and whether m holds anything else.
func Decisions(m *Message) (ds []Decision, other bool) {
	for _, p := range m.Parts {
		if len(p.Data) > 0 {
			var d Decision
			if json.Unmarshal(p.Data, &d) == nil && d.Decision != "" {
				ds = append(ds, d)
				continue
			}
		}
		if p.Text != nil && strings.TrimSpace(*p.Text) == "" {
			continue
		}
		other = true
	}
	return ds, other
}

// UserMessage is an A2A message from a client as the engine's user
// message: text parts joined by blank lines, data parts as their JSON
// text, image files (raw bytes or a URL with an image/* media type) as
// image parts. Any other file is ContentTypeNotSupported.
func UserMessage(m *Message) (message.Message, *Error) {
	if m == nil || len(m.Parts) == 0 {
		return message.Message{}, Errorf(CodeInvalidParams, "The message needs at least one part.")
	}
	if m.Role != "" && m.Role != RoleUser {
		return message.Message{}, Errorf(CodeInvalidParams, "A client's message has role ROLE_USER, not %q.", m.Role)
	}
	var texts []string
	var parts []message.Part
	for _, p := range m.Parts {
		switch {
		case p.Text != nil:
			texts = append(texts, *p.Text)
		case len(p.Data) > 0:
			texts = append(texts, string(p.Data))
		case len(p.Raw) > 0 || p.URL != "":
			if !strings.HasPrefix(p.MediaType, "image/") {
				return message.Message{}, Errorf(CodeContentTypeNotSupported,
					"Files of media type %q are not supported: send text, data, or images (image/*).", p.MediaType)
			}
			mp := message.Part{Type: "image", MediaType: p.MediaType, URL: p.URL}
			if len(p.Raw) > 0 {
				mp.Data = base64.StdEncoding.EncodeToString(p.Raw)
			}
			parts = append(parts, mp)
		default:
			return message.Message{}, Errorf(CodeInvalidParams, "A part holds text, raw, url or data.")
		}
	}
	return message.Message{Role: message.User, Content: strings.Join(texts, "\n\n"), Parts: parts}, nil
}

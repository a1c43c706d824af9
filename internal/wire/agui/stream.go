package agui

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/decision"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/wire/sse"
)

// Stream encodes a run's canonical events as AG-UI events. It guarantees the
// order a 1.0 client verifies: RUN_STARTED (or RUN_ERROR) first, every text
// message, tool call, step and subagent it opened closed before the one
// terminal RUN_FINISHED or RUN_ERROR, and nothing after it.
type Stream struct {
	out             sse.Frames
	threadID, runID string
	now             func() time.Time
	started, done   bool
	texts, tools    openSet
	steps           []openStep
	stepDepth       map[openStep]int
	subagents       openSet
	seenSubagents   map[string]bool
	subagentIDs     map[string]string // runtime subagent run id → wire id
	reasoningN      map[string]int    // reasoning blocks written per assistant message
	messageOwner    map[string]string
	// preV1 is set for a client older than AG-UI 1.0 (see ForClient).
	preV1 bool
	// held are the ids of the messages the client holds, in its order: the
	// request's, then each MESSAGES_SNAPSHOT's.
	held []string
}

// openSet is an insertion-ordered set of open ids with their owner (the
// subagent run they belong to, "" for the agent itself).
type openSet struct {
	order []string
	owner map[string]string
}

func (o *openSet) has(id string) bool { _, ok := o.owner[id]; return ok }

func (o *openSet) add(id, owner string) {
	if o.owner == nil {
		o.owner = map[string]string{}
	}
	o.owner[id] = owner
	o.order = append(o.order, id)
}

func (o *openSet) remove(id string) {
	delete(o.owner, id)
	for i, v := range o.order {
		if v == id {
			o.order = append(o.order[:i], o.order[i+1:]...)
			return
		}
	}
}

type openStep struct{ name, owner string }

// NewStream starts an encoder for one run. threadID and runID are echoed on
// RUN_STARTED and RUN_FINISHED (the request's, so a client sees its own ids);
// now stamps events that carry no time.
func NewStream(out sse.Frames, threadID, runID string, now func() time.Time) *Stream {
	if now == nil {
		now = time.Now
	}
	return &Stream{out: out, threadID: threadID, runID: runID, now: now,
		seenSubagents: map[string]bool{}, subagentIDs: map[string]string{}, reasoningN: map[string]int{}, messageOwner: map[string]string{}, stepDepth: map[openStep]int{}}
}

// ForClient adapts the stream to the client that sent req and returns it.
//
// A client that declares no protocolVersion of 1.0 or later (@ag-ui/client
// 0.0.x, which CopilotKit 1.x pins) validates RUN_FINISHED's outcome
// strictly: it gets no pendingToolCallIds (it derives pending calls from the
// stream, as 1.0 does when the list is absent) and no "cancelled" outcome,
// which it does not know.
//
// The request's message ids are what the client holds; MESSAGES_SNAPSHOT
// is written so that the client's reducer (which keeps the messages it holds
// in place and appends the others) ends up in the snapshot's order.
func (s *Stream) ForClient(req *RunAgentInput) *Stream {
	s.preV1 = !atLeastV1(req.ProtocolVersion)
	s.held = s.held[:0]
	for _, m := range req.Messages {
		if m.ID != "" {
			s.held = append(s.held, m.ID)
		}
	}
	return s
}

// atLeastV1 reports whether an AG-UI protocolVersion ("major.minor") is 1.0
// or later.
func atLeastV1(v string) bool {
	major, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(major)
	return err == nil && n >= 1
}

// Done reports whether the terminal event was written.
func (s *Stream) Done() bool { return s.done }

func (s *Stream) stamp(t string, ms int64) base {
	if ms == 0 {
		ms = s.now().UnixMilli()
	}
	return base{Type: t, Timestamp: ms}
}

func (s *Stream) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.out.Data(b)
}

// owner is the (wire) subagent run an event belongs to, when that subagent
// is open in this stream; "" attributes the event to the agent itself.
func (s *Stream) owner(runtimeID string) string {
	if id, ok := s.subagentIDs[runtimeID]; ok && s.subagents.has(id) {
		return id
	}
	return ""
}

// subagentRunID is the AG-UI subagentRunId of the subagent a `task` call
// started. It is derived from the call, so the live events, a later
// MESSAGES_SNAPSHOT (from stored messages) and a run that continues the same
// subagent after a decision all name it alike.
func subagentRunID(taskCallID string) string { return "sub_" + taskCallID }

// Write encodes one event.
func (s *Stream) Write(e event.Event) error {
	if s.done {
		return nil
	}
	if !s.started && e.Type != event.RunStarted && e.Type != event.RunError {
		if err := s.start(e.RunID, 0); err != nil {
			return err
		}
	}
	switch e.Type {
	case event.RunStarted:
		if s.started {
			return nil
		}
		return s.start(e.RunID, e.Time)
	case event.TextStart:
		return s.openText(e)
	case event.TextDelta:
		if e.Delta == "" {
			return nil
		}
		if err := s.openText(e); err != nil {
			return err
		}
		return s.write(textContent{base: s.stamp("TEXT_MESSAGE_CONTENT", e.Time), MessageID: e.MessageID, Delta: e.Delta,
			SubagentRunID: s.texts.owner[e.MessageID]})
	case event.TextEnd:
		return s.closeText(e.MessageID, e.Time)
	case event.ToolCallStart:
		if e.ToolCallID == "" || s.tools.has(e.ToolCallID) {
			return nil
		}
		owner, ok := s.messageOwner[e.MessageID]
		if !ok {
			owner = s.owner(e.SubagentRunID)
		}
		s.tools.add(e.ToolCallID, owner)
		s.hold(e.MessageID)
		return s.write(toolStart{base: s.stamp("TOOL_CALL_START", e.Time), ToolCallID: e.ToolCallID, ToolCallName: e.ToolName,
			ParentMessageID: e.MessageID, SubagentRunID: owner})
	case event.ToolCallArgs:
		if e.Delta == "" || !s.tools.has(e.ToolCallID) {
			return nil
		}
		return s.write(toolArgs{base: s.stamp("TOOL_CALL_ARGS", e.Time), ToolCallID: e.ToolCallID, Delta: e.Delta,
			SubagentRunID: s.tools.owner[e.ToolCallID]})
	case event.ToolCallEnd:
		return s.closeTool(e.ToolCallID, e.Time)
	case event.ToolResult:
		if err := s.closeTool(e.ToolCallID, e.Time); err != nil {
			return err
		}
		s.hold(e.MessageID)
		return s.write(toolResult{base: s.stamp("TOOL_CALL_RESULT", e.Time), MessageID: e.MessageID, ToolCallID: e.ToolCallID,
			Content: e.Content, Role: "tool", SubagentRunID: s.owner(e.SubagentRunID)})
	case event.StateSnapshot:
		snap := bytes.TrimSpace(e.Snapshot)
		if len(snap) == 0 {
			snap = json.RawMessage(`{}`)
		}
		return s.write(stateSnapshot{base: s.stamp("STATE_SNAPSHOT", e.Time), Snapshot: snap})
	case event.StateDelta:
		patch := bytes.TrimSpace(e.Patch)
		if len(patch) == 0 || string(patch) == "[]" || string(patch) == "null" {
			return nil
		}
		return s.write(stateDelta{base: s.stamp("STATE_DELTA", e.Time), Delta: patch})
	case event.MessagesSnapshot:
		return s.messagesSnapshot(wireMessages(e.Messages, !s.preV1), e.Time)
	case event.StepStarted:
		if e.StepName == "" {
			return nil
		}
		owner := s.owner(e.SubagentRunID)
		key := openStep{e.StepName, owner}
		if s.stepDepth[key] > 0 {
			// Same-name work running side by side stays one step until
			// the last of it finishes.
			s.stepDepth[key]++
			return nil
		}
		s.stepDepth[key] = 1
		s.steps = append(s.steps, key)
		return s.write(step{base: s.stamp("STEP_STARTED", e.Time), StepName: e.StepName, SubagentRunID: owner})
	case event.StepFinished:
		for i := len(s.steps) - 1; i >= 0; i-- {
			if s.steps[i].name == e.StepName {
				if s.stepDepth[s.steps[i]] > 1 {
					s.stepDepth[s.steps[i]]--
					return nil
				}
				return s.closeStep(i, e.Time)
			}
		}
		return nil
	case event.SubagentStarted:
		if e.SubagentRunID == "" {
			return nil
		}
		id := e.SubagentRunID
		if e.ParentToolCallID != "" {
			id = subagentRunID(e.ParentToolCallID)
		}
		if s.seenSubagents[id] {
			return nil
		}
		s.seenSubagents[id] = true
		s.subagentIDs[e.SubagentRunID] = id
		s.subagents.add(id, "")
		name := e.Subagent
		if name == "" {
			name = e.StepName
		}
		if name == "" {
			name = "subagent"
		}
		return s.write(subagentStarted{base: s.stamp("SUBAGENT_STARTED", e.Time), SubagentRunID: id, Name: name, ParentToolCallID: e.ParentToolCallID})
	case event.SubagentFinished:
		id := s.owner(e.SubagentRunID)
		if id == "" {
			return nil
		}
		return s.closeSubagent(id, e.Message, e.Time)
	case event.Reasoning:
		return s.reasoning(e)
	case event.QuestionAsked:
		if e.Question == nil {
			return nil
		}
		// A question a running tool asks: the run goes on once it is
		// answered, here by a resume of this interrupt while the run streams.
		return s.write(custom{base: s.stamp("CUSTOM", e.Time), Name: QuestionEvent, Value: interruptOf(*e.Question)})
	case event.RunFinished:
		if err := s.closeAll("", e.Time); err != nil {
			return err
		}
		s.done = true
		fin := runFinished{base: s.stamp("RUN_FINISHED", e.Time), ThreadID: s.threadID, RunID: s.runIDOr(e.RunID), Outcome: outcomeOf(e.Outcome)}
		if s.preV1 {
			// A pre-1.0 client rejects the key it does not know.
			fin.Outcome.PendingToolCallIDs = nil
		}
		if e.Usage != nil {
			u := e.Usage
			fin.Usage = []tokenUsage{{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.InputTokens + u.OutputTokens}}
		}
		return s.write(fin)
	case event.RunError:
		if e.Code == engine.CodeCancelled && !s.preV1 && !s.done {
			// A cancelled run (a Stop through the API, Studio or a follow-up
			// that interrupts it) is an outcome in 1.0, not an error.
			if err := s.closeAll("", e.Time); err != nil {
				return err
			}
			s.started, s.done = true, true
			return s.write(runFinished{base: s.stamp("RUN_FINISHED", e.Time), ThreadID: s.threadID, RunID: s.runIDOr(e.RunID),
				Outcome: &outcome{Type: "cancelled"}})
		}
		return s.Fail(apierror.OfRunError(e), e.Time)
	}
	return nil
}

// reasoning writes a finished block of the model's reasoning as one AG-UI
// reasoning span holding one reasoning message (REASONING_START,
// REASONING_MESSAGE_START, _CONTENT, _END, REASONING_END), all closed at
// once. A client older than 1.0 gets nothing: @ag-ui/client 0.0.x (which
// CopilotKit 1.x pins) validates event types against its own enum, which
// has no REASONING_*, and would fail the run.
func (s *Stream) reasoning(e event.Event) error {
	if s.preV1 || e.Content == "" || e.MessageID == "" {
		return nil
	}
	s.reasoningN[e.MessageID]++
	id := reasoningID(e.MessageID, s.reasoningN[e.MessageID])
	s.hold(id)
	owner, ok := s.messageOwner[e.MessageID]
	if !ok {
		owner = s.owner(e.SubagentRunID)
	}
	for _, v := range []any{
		reasoningSpan{base: s.stamp("REASONING_START", e.Time), MessageID: id, SubagentRunID: owner},
		reasoningMessageStart{base: s.stamp("REASONING_MESSAGE_START", e.Time), MessageID: id, Role: "reasoning", SubagentRunID: owner},
		reasoningMessage{base: s.stamp("REASONING_MESSAGE_CONTENT", e.Time), MessageID: id, Delta: e.Content, SubagentRunID: owner},
		reasoningMessage{base: s.stamp("REASONING_MESSAGE_END", e.Time), MessageID: id, SubagentRunID: owner},
		reasoningSpan{base: s.stamp("REASONING_END", e.Time), MessageID: id, SubagentRunID: owner},
	} {
		if err := s.write(v); err != nil {
			return err
		}
	}
	return nil
}

// messagesSnapshot writes MESSAGES_SNAPSHOT so that an AG-UI client holds
// msgs in their order afterwards. Its reducer keeps the messages it already
// holds where they are and appends the snapshot's others, so a client that
// reopens a thread holding only its new input would show that input above
// the restored history. When that would happen, a first snapshot holds only
// the history before the first message the client holds (the reducer drops
// what a snapshot leaves out); the full snapshot then appends the rest in
// order.
func (s *Stream) messagesSnapshot(msgs []wireMessage, ms int64) error {
	if !s.keepsOrder(msgs) {
		held := make(map[string]bool, len(s.held))
		for _, id := range s.held {
			held[id] = true
		}
		k := 0
		for k < len(msgs) && !held[msgs[k].ID] {
			k++
		}
		if err := s.write(messagesSnapshot{base: s.stamp("MESSAGES_SNAPSHOT", ms), Messages: msgs[:k:k]}); err != nil {
			return err
		}
	}
	s.held = s.held[:0]
	for _, m := range msgs {
		s.held = append(s.held, m.ID)
	}
	return s.write(messagesSnapshot{base: s.stamp("MESSAGES_SNAPSHOT", ms), Messages: msgs})
}

// hold records a message the stream made the client hold (a text, a tool
// call's message, a tool result), after those it holds: a turn streamed to
// a client that holds none of its messages (a reloaded page) then gets its
// MESSAGES_SNAPSHOT in order too.
func (s *Stream) hold(id string) {
	if id != "" && !slices.Contains(s.held, id) {
		s.held = append(s.held, id)
	}
}

// keepsOrder reports whether the client's reducer, applying msgs to the
// messages it holds, ends with msgs in their order: the held messages msgs
// lists must come first, in msgs' order.
func (s *Stream) keepsOrder(msgs []wireMessage) bool {
	in := make(map[string]bool, len(msgs))
	for _, m := range msgs {
		in[m.ID] = true
	}
	i := 0
	for _, id := range s.held {
		if !in[id] {
			continue // dropped by the snapshot, or the client's own (reasoning)
		}
		if i >= len(msgs) || msgs[i].ID != id {
			return false
		}
		i++
	}
	return true
}

func (s *Stream) runIDOr(id string) string {
	if s.runID != "" {
		return s.runID
	}
	return id
}

func (s *Stream) start(runID string, ms int64) error {
	s.started = true
	if s.runID == "" {
		s.runID = runID
	}
	return s.write(runStarted{base: s.stamp("RUN_STARTED", ms), ThreadID: s.threadID, RunID: s.runID, ProtocolVersion: ProtocolVersion})
}

func (s *Stream) openText(e event.Event) error {
	if e.MessageID == "" || s.texts.has(e.MessageID) {
		return nil
	}
	owner := s.owner(e.SubagentRunID)
	s.texts.add(e.MessageID, owner)
	s.messageOwner[e.MessageID] = owner
	s.hold(e.MessageID)
	return s.write(textStart{base: s.stamp("TEXT_MESSAGE_START", e.Time), MessageID: e.MessageID, Role: "assistant", SubagentRunID: owner})
}

func (s *Stream) closeText(id string, ms int64) error {
	if !s.texts.has(id) {
		return nil
	}
	owner := s.texts.owner[id]
	s.texts.remove(id)
	return s.write(textEnd{base: s.stamp("TEXT_MESSAGE_END", ms), MessageID: id, SubagentRunID: owner})
}

func (s *Stream) closeTool(id string, ms int64) error {
	if !s.tools.has(id) {
		return nil
	}
	owner := s.tools.owner[id]
	s.tools.remove(id)
	return s.write(toolEnd{base: s.stamp("TOOL_CALL_END", ms), ToolCallID: id, SubagentRunID: owner})
}

func (s *Stream) closeStep(i int, ms int64) error {
	st := s.steps[i]
	delete(s.stepDepth, st)
	s.steps = append(s.steps[:i], s.steps[i+1:]...)
	return s.write(step{base: s.stamp("STEP_FINISHED", ms), StepName: st.name, SubagentRunID: st.owner})
}

// closeSubagent closes what the subagent left open, then the subagent:
// status "success" or "suspended" becomes SUBAGENT_FINISHED's outcome,
// "error" a SUBAGENT_ERROR, anything else a SUBAGENT_FINISHED without one.
func (s *Stream) closeSubagent(id, status string, ms int64) error {
	for _, m := range append([]string(nil), s.texts.order...) {
		if s.texts.owner[m] == id {
			if err := s.closeText(m, ms); err != nil {
				return err
			}
		}
	}
	for _, c := range append([]string(nil), s.tools.order...) {
		if s.tools.owner[c] == id {
			if err := s.closeTool(c, ms); err != nil {
				return err
			}
		}
	}
	for i := len(s.steps) - 1; i >= 0; i-- {
		if s.steps[i].owner == id {
			if err := s.closeStep(i, ms); err != nil {
				return err
			}
		}
	}
	s.subagents.remove(id)
	switch status {
	case "error":
		return s.write(subagentError{base: s.stamp("SUBAGENT_ERROR", ms), SubagentRunID: id, Message: "The subagent failed."})
	case "success", "suspended":
		return s.write(subagentFinished{base: s.stamp("SUBAGENT_FINISHED", ms), SubagentRunID: id, Outcome: &subagentOutcome{Type: status}})
	}
	return s.write(subagentFinished{base: s.stamp("SUBAGENT_FINISHED", ms), SubagentRunID: id})
}

// closeAll closes every open entity, subagents (with their own work) first.
// status is how open subagents end ("error" when the run failed).
func (s *Stream) closeAll(status string, ms int64) error {
	for len(s.subagents.order) > 0 {
		if err := s.closeSubagent(s.subagents.order[len(s.subagents.order)-1], status, ms); err != nil {
			return err
		}
	}
	for len(s.texts.order) > 0 {
		if err := s.closeText(s.texts.order[0], ms); err != nil {
			return err
		}
	}
	for len(s.tools.order) > 0 {
		if err := s.closeTool(s.tools.order[0], ms); err != nil {
			return err
		}
	}
	for len(s.steps) > 0 {
		if err := s.closeStep(len(s.steps)-1, ms); err != nil {
			return err
		}
	}
	return nil
}

// Fail ends the stream with a RUN_ERROR: as the only event when nothing was
// written yet (AG-UI allows RUN_ERROR first), otherwise after closing what is
// open. ms is the event time (0: now).
func (s *Stream) Fail(e *apierror.Error, ms int64) error {
	if s.done {
		return nil
	}
	if s.started {
		if err := s.closeAll("error", ms); err != nil {
			return err
		}
	}
	s.started, s.done = true, true
	msg := e.Message
	if msg == "" {
		msg = "The run failed."
	}
	return s.write(runError{base: s.stamp("RUN_ERROR", ms), Message: msg, Code: e.Code})
}

// outcomeOf maps a run's outcome: an interrupt lists its pauses, a success
// names the frontend tool calls the client must answer.
func outcomeOf(o *event.Outcome) *outcome {
	if o == nil {
		return &outcome{Type: "success"}
	}
	switch o.Type {
	case event.Interrupt:
		if len(o.Interrupts) > 0 {
			out := &outcome{Type: "interrupt"}
			for _, it := range o.Interrupts {
				out.Interrupts = append(out.Interrupts, interruptOf(it))
			}
			return out
		}
	}
	out := &outcome{Type: "success"}
	for _, c := range o.PendingCalls {
		out.PendingToolCallIDs = append(out.PendingToolCallIDs, c.ID)
	}
	return out
}

func interruptOf(it event.InterruptInfo) interrupt {
	// An in-doubt call (it may already have run before a crash) keeps its
	// reason, an open string in AG-UI; an approval is a "tool_call".
	def := decision.Of(it.Reason)
	reason := "tool_call"
	if def.Named {
		reason = string(def.Kind)
	}
	out := interrupt{ID: it.ID, Reason: reason, ToolCallID: it.ToolCallID, Description: it.Description,
		Message: it.Description, AllowedDecisions: it.AllowedDecisions}
	if out.AllowedDecisions == nil {
		out.AllowedDecisions = []string{}
	}
	if rs := bytes.TrimSpace(it.ResponseSchema); len(rs) > 0 && rs[0] == '{' {
		out.ResponseSchema = rs
	}
	// description and allowedDecisions also go under metadata.stackbone:
	// the 1.0 client strips the top-level ones (with a warning), and
	// metadata is the one place both 0.0.x and 1.0 clients keep silently.
	meta := map[string]any{"tool": it.Tool, "allowedDecisions": out.AllowedDecisions}
	if def.Named {
		meta["reason"] = string(def.Kind)
	}
	if it.Description != "" {
		meta["description"] = it.Description
	}
	if it.Subagent != "" {
		meta["subagent"] = it.Subagent
	}
	out.Metadata = map[string]any{"stackbone": meta}
	return out
}

package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/store"
)

// DefaultJournalTTL is how long the steps of a stateless turn are kept for
// a client that retries it.
const DefaultJournalTTL = 10 * time.Minute

// journal is where a stateless turn records its completed tool steps, so a
// client retrying the turn (an SDK that retries a 5xx) continues it from the
// step that failed instead of running its server tools again.
type journal struct {
	key, digest string
	// base is how many of the execution's messages came from the request;
	// those after it are the recorded steps.
	base int
	// replay are the steps an earlier attempt recorded, shown again at
	// the start of this one.
	replay []message.Message
	// writing is closed when the write in flight ends.
	writing chan struct{}
	// stored is set once the turn has an entry (an earlier attempt's, or
	// one this attempt wrote): only then is there one to close.
	stored bool
}

// turnDigest is the digest of what defines a turn: agent, messages as sent,
// client tools and options (the response format included). It is computed
// before the request's messages are given ids.
func turnDigest(in Input) (string, error) {
	b, err := json.Marshal(struct {
		Agent         string                `json:"agent"`
		Messages      []message.Message     `json:"messages"`
		ClientTools   []model.ToolDef       `json:"clientTools,omitempty"`
		ToolChoice    string                `json:"toolChoice,omitempty"`
		MaxTokens     int                   `json:"maxTokens,omitempty"`
		StopSequences []string              `json:"stopSequences,omitempty"`
		Temperature   *float64              `json:"temperature,omitempty"`
		Format        *model.ResponseFormat `json:"responseFormat,omitempty"`
		Continues     string                `json:"continues,omitempty"`
	}{in.Agent, in.Messages, in.ClientTools, in.ToolChoice, in.MaxTokens, in.StopSequences, in.Temperature, in.ResponseFormat, continues(in)})
	if err != nil {
		return "", fmt.Errorf("digest the turn: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// continues is the name of the turn in goes on from, "" for none: part of
// a turn's digest, so a request continuing another turn is not its retry.
func continues(in Input) string {
	if in.Continues == nil {
		return ""
	}
	return in.Continues.Name
}

// journalKey names a turn's journal entry within its tenant: the client's
// Idempotency-Key when sent, else the request digest.
func journalKey(in Input, digest string) string {
	if in.IdempotencyKey == "" {
		return "req:" + digest
	}
	return "key:" + keyDigest(in.IdempotencyKey)
}

// keyDigest is what the store keeps of a client's Idempotency-Key ("" for
// none): its SHA-256.
func keyDigest(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// openJournal looks up what an earlier attempt of this stateless turn
// recorded and, when there is something, continues from it: x.msgs gets the
// recorded steps after the request's messages and x.state their state.
func (x *execution) openJournal(ctx context.Context, digest string) error {
	j := &journal{key: journalKey(x.in, digest), digest: digest, base: len(x.msgs)}
	e, err := x.r.Store.GetJournal(ctx, x.tenant, j.key, x.r.Now())
	if errors.Is(err, store.ErrNotFound) {
		x.journal = j
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the turn journal: %w", err)
	}
	if e.Digest != digest {
		e := inputError(FieldIdempotencyKey, "This Idempotency-Key was used with a different request in the last minutes; send a new key for a new request.")
		e.Code = CodeIdempotencyKeyReused
		return e
	}
	j.stored = true
	x.journal = j
	if len(e.Messages) == 0 {
		return nil
	}
	if doubt := x.inDoubtCalls(e.Messages); len(doubt) > 0 {
		x.r.Logger.Warn("retried stateless turn refused: calls of an earlier attempt started without a recorded result",
			"agent", x.spec.Name, "run", x.runID, "calls", doubt)
		return &CallInDoubtError{Calls: doubt}
	}
	j.replay = e.Messages
	x.msgs = slices.Concat(x.msgs, e.Messages)
	if len(e.State) > 0 {
		x.state = e.State
	}
	for _, m := range e.Messages {
		if m.Role == message.Assistant && m.TaskCallID == "" {
			x.priorSteps++
		}
	}
	x.r.Logger.Info("retried stateless turn continues from its journal", "agent", x.spec.Name,
		"run", x.runID, "recordedMessages", len(e.Messages))
	return nil
}

// replayJournal shows the steps an earlier attempt recorded as this run's
// events (without running anything), so the retried turn's answer is the
// whole answer: the text the model said before its tool calls included.
func (x *execution) replayJournal() {
	if x.journal == nil {
		return
	}
	for _, m := range x.journal.replay {
		if m.TaskCallID != "" {
			continue
		}
		switch m.Role {
		case message.Assistant:
			if m.Content != "" {
				x.emit(event.Event{Type: event.TextStart, MessageID: m.ID})
				x.emit(event.Event{Type: event.TextDelta, MessageID: m.ID, Delta: m.Content})
				x.emit(event.Event{Type: event.TextEnd, MessageID: m.ID})
			}
			for _, c := range m.ToolCalls {
				x.emit(event.Event{Type: event.ToolCallStart, MessageID: m.ID, ToolCallID: c.ID, ToolName: c.Name})
				x.emit(event.Event{Type: event.ToolCallArgs, MessageID: m.ID, ToolCallID: c.ID, Delta: c.Arguments})
				x.emit(event.Event{Type: event.ToolCallEnd, MessageID: m.ID, ToolCallID: c.ID})
			}
		case message.Tool:
			x.emit(event.Event{Type: event.ToolResult, MessageID: m.ID, ToolCallID: m.ToolCallID, ToolName: m.ToolName,
				Content: m.Content, IsError: m.IsError})
		}
	}
	x.journal.replay = nil
}

// record stores the steps of a stateless turn so far (one statement) after
// a tool step. The write runs while the next step asks the model, and
// settleJournal waits for it before the turn reports its end, so a client
// cannot retry before its steps are stored. A failure is logged, not fatal:
// the step already ran.
func (x *execution) record(ctx context.Context) {
	if x.journal == nil || x.scope != "" {
		return
	}
	x.settleJournal()
	now := x.r.Now()
	e := store.JournalEntry{Tenant: x.tenant, Key: x.journal.key, Digest: x.journal.digest,
		Messages: slices.Clip(x.msgs[x.journal.base:]), State: x.state, UpdatedAt: now, ExpiresAt: now.Add(x.r.JournalTTL)}
	done := make(chan struct{})
	x.journal.writing = done
	x.journal.stored = true
	go func() {
		defer close(done)
		if err := x.r.Store.PutJournal(context.WithoutCancel(ctx), e); err != nil {
			x.r.Logger.Warn("record a stateless turn's step; a retry of the turn would run its tools again",
				"agent", x.spec.Name, "run", x.runID, "err", err)
		}
	}()
}

// inDoubtCalls lists, as name(arguments), the calls of the recorded steps'
// last model step that started (the step is recorded before calls that are
// not idempotent run: the journal's started marker) and have no result.
func (x *execution) inDoubtCalls(recorded []message.Message) []string {
	var out []string
	for _, c := range message.PendingCalls(recorded) {
		// A tool gone since (an agent reload) may have run all the same.
		if t := x.tools[c.Name]; !c.Client && (t == nil && !x.isClientTool(c.Name) || t != nil && !t.Idempotent) {
			out = append(out, c.Name+"("+c.Arguments+")")
		}
	}
	return out
}

// markJournal records the steps of a stateless turn so far, the model's
// tool-call message last, before calls that are not idempotent run (one
// synchronous statement): a retry after the process died while they ran
// finds them started and refuses to run them again (CallInDoubtError). A
// failure to write it fails the turn before the calls run.
func (x *execution) markJournal(ctx context.Context) error {
	if x.journal == nil || x.scope != "" {
		return nil
	}
	x.settleJournal()
	now := x.r.Now()
	x.journal.stored = true
	err := x.r.Store.PutJournal(ctx, store.JournalEntry{Tenant: x.tenant, Key: x.journal.key, Digest: x.journal.digest,
		Messages: slices.Clip(x.msgs[x.journal.base:]), State: x.state, UpdatedAt: now, ExpiresAt: now.Add(x.r.JournalTTL)})
	if err != nil {
		return fmt.Errorf("record a stateless turn's calls before they run: %w", err)
	}
	return nil
}

// closeJournal ends the journal entry of a turn that succeeded when it is
// keyed by the request's digest: an identical request after a success is a
// new turn (the same question asked again, perhaps by another user of the
// key), not a retry, and must run its tools afresh. An entry keyed by the
// client's Idempotency-Key stays for the window, as that key promises.
func (x *execution) closeJournal(ctx context.Context) {
	j := x.journal
	if j == nil || x.scope != "" || !strings.HasPrefix(j.key, "req:") || !j.stored {
		return // no entry: a turn without a tool step wrote none
	}
	now := x.r.Now()
	e := store.JournalEntry{Tenant: x.tenant, Key: j.key, Digest: j.digest, UpdatedAt: now, ExpiresAt: now}
	if err := x.r.Store.PutJournal(context.WithoutCancel(ctx), e); err != nil {
		x.r.Logger.Warn("close a stateless turn's journal; an identical request in the window would reuse its tool results",
			"agent", x.spec.Name, "run", x.runID, "err", err)
	}
}

// settleJournal waits for the journal write in flight, if any.
func (x *execution) settleJournal() {
	if x.journal != nil && x.journal.writing != nil {
		<-x.journal.writing
		x.journal.writing = nil
	}
}

// SweepJournal deletes expired journal entries of stateless turns.
func (r *Runner) SweepJournal(ctx context.Context, now time.Time) (int, error) {
	n, err := r.Store.SweepJournal(ctx, now)
	if err != nil {
		return 0, fmt.Errorf("sweep the turn journal: %w", err)
	}
	return n, nil
}

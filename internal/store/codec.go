package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

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
// state that is not a JSON object).
var ErrInvalid = errors.New("invalid store request")

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

// DecodeEvent decodes a stored event written in format v.
func DecodeEvent(v int, data []byte) (event.Event, error) {
	var e event.Event
	if err := CheckFormat(v); err != nil {
		return e, err
	}
	if err := json.Unmarshal(data, &e); err != nil {
		return e, fmt.Errorf("decode stored event: %w", err)
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

// CheckState returns ErrInvalid unless raw is a JSON object.
func CheckState(raw json.RawMessage) error {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		return fmt.Errorf("%w: state must be a JSON object", ErrInvalid)
	}
	return nil
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
	if c.LeaseUntil.IsZero() {
		return fmt.Errorf("%w: Claim: LeaseUntil is required", ErrInvalid)
	}
	return nil
}

// Validate checks the fields every driver needs.
func (c Checkpoint) Validate() error {
	if err := required("Checkpoint", "Tenant", c.Tenant, "ThreadID", c.ThreadID, "RunID", c.RunID); err != nil {
		return err
	}
	for _, in := range c.Interrupts {
		if in.ID == "" {
			return fmt.Errorf("%w: Checkpoint: an interrupt has no id", ErrInvalid)
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
	switch f.Status {
	case Idle, Waiting, Failed:
		return nil
	}
	return fmt.Errorf("%w: FinishRun: status %q is not idle, waiting or failed", ErrInvalid, f.Status)
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

package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrScheduleExists: the tenant has a schedule of that id, or of that name
// for that agent.
var ErrScheduleExists = errors.New("a schedule with that name exists")

// Schedule sources (Schedule.Source).
const (
	// ScheduleAPI is a schedule created through the API (POST /v1/schedules).
	ScheduleAPI = "api"
	// ScheduleFile is a schedule an agent file declares: written by the
	// server at each load, deleted when the file no longer declares it.
	ScheduleFile = "file"
)

// Catch-up policies (Schedule.CatchUp).
const (
	// CatchUpOne runs a firing missed while no scheduler ran once, late (the
	// latest one missed; never a burst).
	CatchUpOne = "one"
	// CatchUpNone skips missed firings.
	CatchUpNone = "none"
)

// NewThread is the Schedule.Thread of a schedule whose every firing starts
// a new thread.
const NewThread = "new"

// Firing statuses (Firing.Status, Schedule.LastStatus).
const (
	FiringClaimed   = "claimed"
	FiringStarted   = "started"
	FiringCompleted = "completed"
	FiringWaiting   = "waiting"
	FiringFailed    = "failed"
)

// Schedule is an agent turn that runs on a cron schedule, in a tenant.
type Schedule struct {
	Tenant string `json:"tenant"`
	ID     string `json:"id"`
	Name   string `json:"name"`
	Agent  string `json:"agent"`
	// Cron is a five-field cron expression or a descriptor (@every 15m,
	// @daily); Timezone the IANA zone it is read in ("" UTC).
	Cron     string `json:"cron"`
	Timezone string `json:"timezone,omitempty"`
	// Input is the user message of each run.
	Input string `json:"input"`
	// Thread is the thread the runs go on, or NewThread.
	Thread string `json:"thread"`
	// CatchUp is CatchUpOne or CatchUpNone.
	CatchUp string `json:"catchUp"`
	// Key is the key label the runs count under ("": the tenant's admin).
	Key     string `json:"key,omitempty"`
	Enabled bool   `json:"enabled"`
	// Source is ScheduleAPI or ScheduleFile.
	Source    string    `json:"source"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// NextAt is the next due firing (nil: none, e.g. disabled).
	NextAt *time.Time `json:"nextAt,omitempty"`
	// LastDueAt and the Last fields are the latest firing's (nil and empty
	// before the first).
	LastDueAt    *time.Time `json:"lastDueAt,omitempty"`
	LastStatus   string     `json:"lastStatus,omitempty"`
	LastError    string     `json:"lastError,omitempty"`
	LastThreadID string     `json:"lastThreadId,omitempty"`
	LastRunID    string     `json:"lastRunId,omitempty"`
}

// Firing is one claimed firing of a schedule.
type Firing struct {
	Tenant     string    `json:"tenant"`
	ScheduleID string    `json:"scheduleId"`
	DueAt      time.Time `json:"dueAt"`
	// Manual is true for a run asked for through the API (run now).
	Manual    bool       `json:"manual"`
	Owner     string     `json:"-"`
	ClaimedAt time.Time  `json:"claimedAt"`
	ThreadID  string     `json:"threadId"`
	RunID     string     `json:"runId"`
	Status    string     `json:"status"`
	Error     string     `json:"error,omitempty"`
	EndedAt   *time.Time `json:"endedAt,omitempty"`
}

// ClaimFiring claims one due firing of a schedule (Store.ClaimFiring).
type ClaimFiring struct {
	Firing
	// NextAt, when set, is the schedule's next due firing after this one:
	// the schedule's next_at moves to it (never back).
	NextAt time.Time
}

// FinishFiring records where a claimed firing's run went (Store.FinishFiring).
type FinishFiring struct {
	Tenant     string
	ScheduleID string
	DueAt      time.Time
	// Status is FiringStarted, FiringCompleted, FiringWaiting or
	// FiringFailed.
	Status string
	Error  string
	// At is when the status was reached (EndedAt for a final status).
	At time.Time
}

// ScheduleStore keeps schedules and their claimed firings.
type ScheduleStore interface {
	// CreateSchedule stores a new schedule; a taken id, or a name the
	// tenant already gave a schedule of the agent, is ErrScheduleExists.
	CreateSchedule(ctx context.Context, s Schedule) error
	// UpdateSchedule replaces a schedule's definition (name, cron,
	// timezone, input, thread, catch-up, key, enabled, next_at, updated_at);
	// ErrNotFound for an unknown one, ErrScheduleExists for a taken name.
	UpdateSchedule(ctx context.Context, s Schedule) error
	// GetSchedule returns ErrNotFound for an unknown (or foreign) schedule.
	GetSchedule(ctx context.Context, tenant, id string) (*Schedule, error)
	// ListSchedules lists the tenant's schedules by agent, then name.
	ListSchedules(ctx context.Context, tenant string) ([]Schedule, error)
	// DeleteSchedule deletes a schedule and its firings; ErrNotFound for an
	// unknown one.
	DeleteSchedule(ctx context.Context, tenant, id string) error
	// SyncFileSchedules makes the tenant's agent-file schedules (Source
	// ScheduleFile) exactly defs, in one transaction: new ones are
	// created, changed ones updated (a changed cron or timezone takes the
	// def's NextAt, else the stored one is kept), missing ones deleted.
	SyncFileSchedules(ctx context.Context, tenant string, defs []Schedule, now time.Time) error
	// DueSchedules lists, across tenants, the enabled schedules whose
	// NextAt is at or before now, soonest first, at most limit.
	DueSchedules(ctx context.Context, now time.Time, limit int) ([]Schedule, error)
	// ClaimFiring inserts the firing unless one of its schedule and due
	// time exists (INSERT … ON CONFLICT DO NOTHING) and moves the
	// schedule's NextAt forward, in one transaction: of concurrent claims
	// of one firing exactly one gets true. An unknown schedule is
	// ErrNotFound.
	ClaimFiring(ctx context.Context, c ClaimFiring) (bool, error)
	// AdvanceSchedule moves a schedule's NextAt forward to next (never
	// back) without a firing: missed firings skipped (CatchUpNone).
	AdvanceSchedule(ctx context.Context, tenant, id string, next time.Time) error
	// FinishFiring records a claimed firing's status (and the schedule's
	// last status, when it is the schedule's latest firing); ErrNotFound
	// for an unknown firing.
	FinishFiring(ctx context.Context, f FinishFiring) error
	// ListFirings lists a schedule's firings, latest due first.
	ListFirings(ctx context.Context, tenant, scheduleID string, limit int) ([]Firing, error)
	// StaleFirings lists, across tenants, the firings still claimed (their
	// run never reported starting) that were claimed before before: their
	// claimer died between the claim and the run's start. Oldest first, at
	// most limit.
	StaleFirings(ctx context.Context, before time.Time, limit int) ([]Firing, error)
	// OpenFirings lists, across tenants, the firings whose run started
	// and whose outcome is not final yet (started, or waiting on a
	// decision), claimed at or before before: oldest first, at most limit.
	OpenFirings(ctx context.Context, before time.Time, limit int) ([]Firing, error)
	// RetakeFiring gives a stale firing to f.Owner (claimed at f.ClaimedAt)
	// if it is still claimed and was claimed before before: one
	// conditional update, so of concurrent retakes exactly one gets true.
	RetakeFiring(ctx context.Context, f Firing, before time.Time) (bool, error)
}

// Validate checks what every stored schedule needs.
func (s Schedule) Validate(op string) error {
	if s.Tenant == "" || s.ID == "" || s.Name == "" || s.Agent == "" || s.Cron == "" || s.Thread == "" {
		return fmt.Errorf("%w: %s: tenant, id, name, agent, cron and thread are required", ErrInvalid, op)
	}
	switch s.CatchUp {
	case CatchUpOne, CatchUpNone:
	default:
		return fmt.Errorf("%w: %s: catchUp %q is not one or none", ErrInvalid, op, s.CatchUp)
	}
	switch s.Source {
	case ScheduleAPI, ScheduleFile:
	default:
		return fmt.Errorf("%w: %s: source %q is not api or file", ErrInvalid, op, s.Source)
	}
	return CheckText(op, "tenant", s.Tenant, "id", s.ID, "name", s.Name, "agent", s.Agent, "cron", s.Cron,
		"timezone", s.Timezone, "input", s.Input, "thread", s.Thread, "key", s.Key)
}

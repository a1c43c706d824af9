package schedule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/clock"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/ids"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
)

// DefaultEvery is how often a Scheduler looks for due firings.
const DefaultEvery = time.Second

// DefaultLate is Config.Late when zero: how late a firing of a schedule
// with catch-up none may still run.
const DefaultLate = time.Minute

// DefaultStale is Config.Stale when zero.
const DefaultStale = time.Minute

// Starter starts durable turns (engine.Runner).
type Starter interface {
	Start(ctx context.Context, in engine.Input) (*engine.Run, error)
}

// Store is what a Scheduler needs of the store.
type Store interface {
	store.ScheduleStore
	GetThread(ctx context.Context, tenant, id string) (*store.Thread, error)
	ListRuns(ctx context.Context, tenant, threadID string) ([]store.RunRecord, error)
}

// Config is what New builds a Scheduler from. Store and Runner are
// required.
type Config struct {
	Store  Store
	Runner Starter
	Logger *slog.Logger
	// Clock paces the loop and tells the time (the real clock when nil).
	Clock clock.Clock
	// NewID makes thread and run ids (ids.New when nil).
	NewID ids.Generator
	// Owner names this process on the firings it claims.
	Owner string
	// Every is how often Run looks for due firings (DefaultEvery when
	// zero).
	Every time.Duration
	// Late is how late a firing of a catch-up none schedule may be and
	// still run (DefaultLate when zero): one found later was missed while
	// no scheduler ran, and is skipped.
	Late time.Duration
	// Stale is how long a firing may stay claimed without its run
	// starting before another scheduler takes it over (its claimer died
	// in between); DefaultStale when zero.
	Stale time.Duration
	// KeyLabel returns the key label a tenant's runs count under when the
	// schedule names none (the tenant's admin key's); nil: the tenant.
	KeyLabel func(tenant string) string
}

// Scheduler fires due schedules: each due firing is claimed in the store
// (one row per schedule and due time), and the replica whose claim wins
// starts the run.
type Scheduler struct {
	cfg Config
	clk clock.Clock
	wg  sync.WaitGroup
}

// New builds a Scheduler.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Store == nil || cfg.Runner == nil {
		return nil, errors.New("schedule: Store and Runner are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NewID == nil {
		cfg.NewID = ids.New
	}
	if cfg.Owner == "" {
		cfg.Owner = ids.New("node")
	}
	if cfg.Every <= 0 {
		cfg.Every = DefaultEvery
	}
	if cfg.Late <= 0 {
		cfg.Late = DefaultLate
	}
	if cfg.Stale <= 0 {
		cfg.Stale = DefaultStale
	}
	if cfg.KeyLabel == nil {
		cfg.KeyLabel = func(tenant string) string { return tenant }
	}
	return &Scheduler{cfg: cfg, clk: clock.Or(cfg.Clock)}, nil
}

// Run fires due schedules every Config.Every until ctx ends; the first look
// is at once (a firing missed while no scheduler ran is caught up on start).
func (s *Scheduler) Run(ctx context.Context) {
	t := s.clk.NewTicker(s.cfg.Every)
	defer t.Stop()
	for {
		if _, err := s.Tick(ctx, s.clk.Now()); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("schedules: fire due firings", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// Wait waits until the outcome of every run the scheduler started is
// recorded.
func (s *Scheduler) Wait() { s.wg.Wait() }

// tickLimit bounds the schedules one Tick fires.
const tickLimit = 100

// Tick fires the schedules due at now and returns how many runs this
// scheduler started (firings other replicas claimed first are not counted).
func (s *Scheduler) Tick(ctx context.Context, now time.Time) (int, error) {
	due, err := s.cfg.Store.DueSchedules(ctx, now, tickLimit)
	if err != nil {
		return 0, err
	}
	started := 0
	var errs []error
	for _, sc := range due {
		ok, err := s.fireDue(ctx, sc, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("schedule %s (%s/%s): %w", sc.ID, sc.Tenant, sc.Name, err))
		}
		if ok {
			started++
		}
	}
	n, err := s.retakeStale(ctx, now)
	if err != nil {
		errs = append(errs, err)
	}
	if err := s.settle(ctx, now); err != nil {
		errs = append(errs, err)
	}
	return started + n, errors.Join(errs...)
}

// settle records the outcome of the open firings (started, or waiting on
// a decision) whose runs have ended since, as their runs' records tell:
// the run of a process that died (recovered by the engine after a
// restart, on any replica) or the resumed run after a decision. A firing
// whose thread still runs its turn, or still waits on its decision, is
// left as it is without reading its runs.
func (s *Scheduler) settle(ctx context.Context, now time.Time) error {
	open, err := s.cfg.Store.OpenFirings(ctx, now, tickLimit)
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range open {
		th, err := s.cfg.Store.GetThread(ctx, f.Tenant, f.ThreadID)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			errs = append(errs, err)
			continue
		case th.Status == store.Running || th.Status == store.Queued,
			th.Status == store.Waiting && f.Status == store.FiringWaiting:
			continue
		}
		status, msg, err := s.outcome(ctx, f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if status == "" || status == f.Status {
			continue
		}
		f.Status, f.Error = status, msg
		s.finish(ctx, &f, s.cfg.Logger.With("schedule", f.ScheduleID, "tenant", f.Tenant, "thread", f.ThreadID, "run", f.RunID))
	}
	return errors.Join(errs...)
}

// outcome is where firing f's run stands, as its run records say: the
// last run of its chain (the run, then each run resumed from the one
// before) completed, failed or waits on a decision; "" while it runs.
func (s *Scheduler) outcome(ctx context.Context, f store.Firing) (status, msg string, err error) {
	runs, err := s.cfg.Store.ListRuns(ctx, f.Tenant, f.ThreadID)
	if errors.Is(err, store.ErrNotFound) {
		return store.FiringFailed, "the run's thread was deleted", nil
	}
	if err != nil {
		return "", "", err
	}
	// The run under the firing's run id; else, when its process died
	// before recording it, the run that recovered its turn: the first of
	// the thread's runs since the claim (the thread ran nothing else
	// before the recovery).
	first := f.RunID
	if !slices.ContainsFunc(runs, func(r store.RunRecord) bool { return r.ID == first }) {
		first = ""
		for _, r := range runs { // oldest first
			if !r.StartedAt.Before(f.ClaimedAt) && r.ResumedFrom == "" {
				first = r.ID
				break
			}
		}
	}
	var last *store.RunRecord
	for id := first; id != ""; {
		next := ""
		for i := range runs {
			switch {
			case runs[i].ID == id:
				last = &runs[i]
			case runs[i].ResumedFrom == id:
				next = runs[i].ID
			}
		}
		if next == id {
			break
		}
		id = next
	}
	if last == nil {
		// Its thread runs nothing (settle read it first), yet no run of
		// the firing was recorded: it can no longer end.
		return store.FiringFailed, "the run left no record", nil
	}
	switch last.Status {
	case string(store.Idle):
		return store.FiringCompleted, "", nil
	case string(store.Waiting):
		return store.FiringWaiting, "", nil
	case string(store.Failed), engine.CodeCancelled: // a stopped run records the cancel's code
		if last.Error == "" {
			return store.FiringFailed, "the run " + last.Status, nil
		}
		return store.FiringFailed, last.Error, nil
	}
	return "", "", nil
}

// retakeStale takes over the firings whose claimer died between the claim
// and the run's start, and starts their runs with the ids chosen at the
// claim, unless the run began after all (its thread holds it; the
// engine's recovery goes on with it). It returns how many runs it started.
func (s *Scheduler) retakeStale(ctx context.Context, now time.Time) (int, error) {
	stale, err := s.cfg.Store.StaleFirings(ctx, now.Add(-s.cfg.Stale), tickLimit)
	if err != nil || len(stale) == 0 {
		return 0, err
	}
	started := 0
	var errs []error
	for _, f := range stale {
		f.Owner, f.ClaimedAt = s.cfg.Owner, now
		ok, err := s.cfg.Store.RetakeFiring(ctx, f, now.Add(-s.cfg.Stale))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok {
			continue // another scheduler took it
		}
		log := s.cfg.Logger.With("schedule", f.ScheduleID, "tenant", f.Tenant, "thread", f.ThreadID, "due", f.DueAt)
		th, err := s.cfg.Store.GetThread(ctx, f.Tenant, f.ThreadID)
		switch {
		case err == nil && th.RunID == f.RunID:
			log.Info("schedules: a stale firing's run had begun; its recovery goes on with it", "run", f.RunID)
			f.Status = store.FiringStarted
			s.finish(ctx, &f, log)
			continue
		case err != nil && !errors.Is(err, store.ErrNotFound):
			errs = append(errs, err)
			continue
		}
		sc, err := s.cfg.Store.GetSchedule(ctx, f.Tenant, f.ScheduleID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		log.Info("schedules: starting a firing its claimer left unstarted", "run", f.RunID)
		if s.start(ctx, *sc, &f) == nil {
			started++
		}
	}
	return started, errors.Join(errs...)
}

// fireDue claims and runs the firing of sc due at now, if any: the latest
// firing at or before now (never the earlier ones missed), or none when it
// is later than Late and sc does not catch up.
func (s *Scheduler) fireDue(ctx context.Context, sc store.Schedule, now time.Time) (bool, error) {
	c, err := Parse(sc.Cron, sc.Timezone)
	if err != nil {
		return false, err
	}
	due := c.Latest(*sc.NextAt, now)
	if due.IsZero() {
		return false, nil
	}
	next := c.Next(due) // after now: due is the latest at or before it
	if next.IsZero() {
		next = now.Add(100 * 365 * 24 * time.Hour) // never again
	}
	if sc.CatchUp == store.CatchUpNone && now.Sub(due) > s.cfg.Late {
		s.cfg.Logger.Info("schedules: missed firing skipped (catchUp none)", "schedule", sc.ID, "tenant", sc.Tenant, "due", due)
		return false, s.cfg.Store.AdvanceSchedule(ctx, sc.Tenant, sc.ID, next)
	}
	if now.Sub(due) > s.cfg.Late {
		s.cfg.Logger.Info("schedules: catching up a missed firing, once", "schedule", sc.ID, "tenant", sc.Tenant, "due", due)
	}
	f, ok, err := s.claim(ctx, sc, due, next, false, now)
	if err != nil || !ok {
		return false, err
	}
	// A run that does not start (its thread is busy or waits on a
	// decision, the agent is gone) is the firing's recorded outcome.
	return s.start(ctx, sc, f) == nil, nil
}

// RunNow runs a schedule at once (POST /v1/schedules/{id}/run): a firing
// of its own, due now, whatever the schedule's next firing.
func (s *Scheduler) RunNow(ctx context.Context, tenant, id string) (*store.Firing, error) {
	sc, err := s.cfg.Store.GetSchedule(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	now := s.clk.Now()
	// A manual firing is due when it was asked for; one asked for in the
	// same microsecond as another is due a microsecond later.
	due := now.UTC().Truncate(time.Microsecond)
	for range 1000 {
		f, ok, err := s.claim(ctx, *sc, due, time.Time{}, true, now)
		if err != nil {
			return nil, err
		}
		if ok {
			return f, s.start(ctx, *sc, f)
		}
		due = due.Add(time.Microsecond)
	}
	return nil, fmt.Errorf("schedule %q: no free due time for a manual firing at %s", id, now.Format(time.RFC3339Nano))
}

// claim claims sc's firing due at due, choosing its thread and run ids.
func (s *Scheduler) claim(ctx context.Context, sc store.Schedule, due, next time.Time, manual bool, now time.Time) (*store.Firing, bool, error) {
	thread := sc.Thread
	if thread == store.NewThread {
		thread = s.cfg.NewID("thread")
	}
	f := store.Firing{Tenant: sc.Tenant, ScheduleID: sc.ID, DueAt: due.UTC().Truncate(time.Microsecond), Manual: manual,
		Owner: s.cfg.Owner, ClaimedAt: now, ThreadID: thread, RunID: s.cfg.NewID("run"), Status: store.FiringClaimed}
	ok, err := s.cfg.Store.ClaimFiring(ctx, store.ClaimFiring{Firing: f, NextAt: next})
	if err != nil {
		return nil, false, err
	}
	return &f, ok, nil
}

// start starts a claimed firing's run and records its outcome when it
// ends; a run that does not start is recorded as failed, and its error
// returned.
func (s *Scheduler) start(ctx context.Context, sc store.Schedule, f *store.Firing) error {
	key := sc.Key
	if key == "" {
		key = s.cfg.KeyLabel(sc.Tenant)
	}
	// The firing's own idempotency key: each firing is a new turn, never
	// taken for a retry of the last one because its input is the same.
	in := engine.Input{Tenant: sc.Tenant, Agent: sc.Agent, Key: key, ThreadID: f.ThreadID, RunID: f.RunID,
		IdempotencyKey: "schedule:" + sc.ID + ":" + f.DueAt.Format(time.RFC3339Nano),
		DecidedBy:      key, Messages: []message.Message{{Role: message.User, Content: sc.Input}}}
	log := s.cfg.Logger.With("schedule", sc.ID, "tenant", sc.Tenant, "agent", sc.Agent, "thread", f.ThreadID, "due", f.DueAt)
	run, err := s.cfg.Runner.Start(context.WithoutCancel(ctx), in)
	if err != nil {
		log.Warn("schedules: the run did not start", "err", err)
		f.Status, f.Error = store.FiringFailed, err.Error()
		s.finish(ctx, f, log)
		return err
	}
	log.Info("schedules: run started", "run", run.ID)
	f.Status = store.FiringStarted
	s.finish(ctx, f, log)
	s.wg.Add(1)
	f = new(*f) // the caller keeps its copy
	go func() {
		defer s.wg.Done()
		f.Status = store.FiringCompleted
		for e := range run.Events() {
			switch {
			case e.Type == event.RunError:
				f.Status, f.Error = store.FiringFailed, e.Message
			case e.Type == event.RunFinished && e.Outcome != nil && e.Outcome.Type == event.Interrupt:
				f.Status = store.FiringWaiting
			}
		}
		s.finish(context.WithoutCancel(ctx), f, log)
	}()
	return nil
}

// finish records f's status.
func (s *Scheduler) finish(ctx context.Context, f *store.Firing, log *slog.Logger) {
	if err := s.cfg.Store.FinishFiring(ctx, store.FinishFiring{Tenant: f.Tenant, ScheduleID: f.ScheduleID, DueAt: f.DueAt,
		Status: f.Status, Error: f.Error, At: s.clk.Now()}); err != nil {
		log.Warn("schedules: record the firing's outcome", "status", f.Status, "err", err)
	}
}

// FileID is the id of the schedule name an agent file declares for agent:
// the same on every replica and every load.
func FileID(agentName, name string) string {
	h := sha256.Sum256([]byte(agentName + "\x00" + name))
	return "sch_" + hex.EncodeToString(h[:10])
}

// FileSchedules returns the schedules the agents' files declare, as
// SyncFileSchedules takes them, their next firing the first at or after
// now. A declaration that does not parse is an error naming it.
func FileSchedules(specs []*agent.Spec, now time.Time) ([]store.Schedule, error) {
	var out []store.Schedule
	var errs []error
	for _, sp := range specs {
		for _, d := range sp.Schedules {
			sc, err := Define(store.Schedule{ID: FileID(sp.Name, d.Name), Name: d.Name, Agent: sp.Name, Cron: d.Cron,
				Timezone: d.Timezone, Input: d.Input, Thread: d.Thread, CatchUp: d.CatchUp, Key: d.Key, Enabled: true,
				Source: store.ScheduleFile}, now)
			if err != nil {
				errs = append(errs, fmt.Errorf("agent %s: schedule %q: %w", sp.Name, d.Name, err))
				continue
			}
			out = append(out, sc)
		}
	}
	return out, errors.Join(errs...)
}

// Define checks a schedule's definition and fills its defaults (thread
// new, catch-up one) and its next firing (the first at or after now; none
// when disabled). Problems are *SpecError.
func Define(sc store.Schedule, now time.Time) (store.Schedule, error) {
	if sc.Name == "" {
		return sc, &SpecError{"name", "name is required"}
	}
	if err := ids.CheckClient(sc.Name); err != nil {
		return sc, &SpecError{"name", fmt.Sprintf("name %v", err)}
	}
	if sc.Input == "" {
		return sc, &SpecError{"input", "input is required: the user message each run starts with"}
	}
	if sc.Thread == "" {
		sc.Thread = store.NewThread
	}
	if err := ids.CheckClient(sc.Thread); err != nil {
		return sc, &SpecError{"thread", fmt.Sprintf("thread %v", err)}
	}
	switch sc.CatchUp {
	case "":
		sc.CatchUp = store.CatchUpOne
	case store.CatchUpOne, store.CatchUpNone:
	default:
		return sc, &SpecError{"catchUp", fmt.Sprintf("catchUp must be 'one' or 'none', not %q", sc.CatchUp)}
	}
	c, err := Parse(sc.Cron, sc.Timezone)
	if err != nil {
		return sc, err
	}
	sc.NextAt = nil
	if sc.Enabled {
		n := c.First(now)
		if n.IsZero() {
			return sc, &SpecError{"cron", fmt.Sprintf("%q never fires again", sc.Cron)}
		}
		sc.NextAt = &n
	}
	return sc, nil
}

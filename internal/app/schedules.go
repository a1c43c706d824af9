package app

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/clock"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/schedule"
	"github.com/stackbone/stackbone/internal/server"
	"github.com/stackbone/stackbone/internal/store"
)

// NewScheduler builds the scheduler of a server: it starts the runs of due
// schedules on runner, counted under the schedule's key label or the
// tenant's admin key's (ScheduleTenants).
func NewScheduler(cfg *config.Config, st store.Store, runner *engine.Runner, logger *slog.Logger) (*schedule.Scheduler, error) {
	return schedule.New(schedule.Config{Store: st, Runner: runner, Logger: logger, Clock: cfg.Clock, NewID: runner.NewID,
		Owner: runner.Owner, KeyLabel: func(tenant string) string { return AdminLabel(cfg, tenant) }})
}

// AdminLabel is the label of the tenant's first admin key (the tenant when
// it has none): the principal a schedule without a key label runs as.
func AdminLabel(cfg *config.Config, tenant string) string {
	for _, k := range cfg.Keys {
		if k.Tenant == tenant && (k.Role == "" || k.Role == config.RoleAdmin) && k.Label != "" {
			return k.Label
		}
	}
	return tenant
}

// ScheduleTenants are the tenants agent-file schedules run in: every tenant
// with an admin key, or the dev tenant when no key is configured.
func ScheduleTenants(cfg *config.Config) []string {
	var out []string
	for _, k := range cfg.Keys {
		if (k.Role == "" || k.Role == config.RoleAdmin) && !slices.Contains(out, k.Tenant) {
			out = append(out, k.Tenant)
		}
	}
	if len(cfg.Keys) == 0 {
		out = []string{server.DevTenant}
	}
	return out
}

// SyncSchedules writes the agents' file schedules to the store, for every
// tenant of ScheduleTenants, removing those the files no longer declare.
// A declaration that does not parse is logged and left out (the loader
// checks them, so only a store written by another build can hold one).
func SyncSchedules(ctx context.Context, cfg *config.Config, st store.Store, specs []*agent.Spec, logger *slog.Logger) error {
	now := clock.Or(cfg.Clock).Now()
	defs, err := schedule.FileSchedules(specs, now)
	if err != nil {
		logger.Warn("schedules: agent-file schedules left out", "err", err)
	}
	for _, tenant := range ScheduleTenants(cfg) {
		if err := st.SyncFileSchedules(ctx, tenant, defs, now); err != nil {
			return err
		}
	}
	return nil
}

// syncSchedulesAfter logs a failed SyncSchedules.
func syncSchedulesAfter(ctx context.Context, cfg *config.Config, st store.Store, specs []*agent.Spec, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := SyncSchedules(ctx, cfg, st, specs, logger); err != nil {
		logger.Error("schedules: write the agent-file schedules", "err", err)
	}
}

package postgres

import (
	"context"
	"embed"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stackbone/stackbone/internal/store"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// loadMigrations returns the embedded migrations in version order.
func loadMigrations() ([]store.Migration, error) {
	return store.LoadMigrations(migrationFiles, "migrations")
}

// migrateLockKey is the first key of the advisory lock that serialises the
// migrations of one schema (the second is a hash of the schema's name).
const migrateLockKey = 0x5b0e

// migrate applies the migrations the schema's schema_version lacks, in
// one transaction holding an advisory lock, so replicas opening at once
// apply them once.
func migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit

	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))`, migrateLockKey); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		version    integer     NOT NULL PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	applied, err := appliedVersions(ctx, tx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	pending, err := store.PendingMigrations(ms, applied)
	if err != nil {
		return err
	}
	for _, m := range pending {
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("migrate %s: %w", m.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_version (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			return fmt.Errorf("migrate %s: %w", m.Name, err)
		}
		logger.Info("postgres migration applied", "migration", m.Name)
	}
	return tx.Commit(ctx)
}

// appliedVersions reads the versions schema_version records.
func appliedVersions(ctx context.Context, tx pgx.Tx) ([]int, error) {
	rows, err := tx.Query(ctx, `SELECT version FROM schema_version`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int])
}

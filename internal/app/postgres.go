package app

import (
	"context"
	"log/slog"

	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/store/postgres"
)

// startBridge connects the runner's bus to the other replicas when st is the
// PostgreSQL store, so a thread's live events reach its subscribers on every
// replica. Call it after NewRunner and before the runner or the server is
// used; call stop before closing the store. For another store it does
// nothing.
func startBridge(ctx context.Context, st store.Store, runner *engine.Runner, logger *slog.Logger) (stop func(), err error) {
	pg, ok := st.(*postgres.Store)
	if !ok {
		return func() {}, nil
	}
	br, err := postgres.StartBridge(ctx, pg, runner.Bus, logger)
	if err != nil {
		return nil, err
	}
	return func() { _ = br.Close() }, nil
}

package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/stackbone/stackbone/internal/store"
)

// Options are the seams of MainWith. cmd/stackbone passes none; the CLI
// tests, which run their own test binary as stackbone, set them.
type Options struct {
	// WrapStore wraps the store dev and start open (config.Config's
	// WrapStore).
	WrapStore func(store.Store) store.Store
}

// Main is the stackbone process: it runs the command line on the process's
// arguments and standard streams, cancels on SIGINT or SIGTERM, and exits
// with the command's code. cmd/stackbone calls it.
func Main() { MainWith(Options{}) }

// MainWith is Main with opts: the CLI tests call it when their test binary
// runs as stackbone.
func MainWith(opts Options) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Execute(ctx, opts, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

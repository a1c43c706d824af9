package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Main is the stackbone process: it runs the command line on the process's
// arguments and standard streams, cancels on SIGINT or SIGTERM, and exits
// with the command's code. cmd/stackbone calls it, and so do the CLI tests,
// which run their own test binary as stackbone.
func Main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Command stackbone hosts TypeScript agents over the OpenAI, Anthropic and
// AG-UI wires. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/stackbone/stackbone/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

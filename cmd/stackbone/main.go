// Command stackbone hosts TypeScript agents over the OpenAI, Anthropic and
// AG-UI wires. See README.md.
package main

import "github.com/stackbone/stackbone/internal/cli"

func main() { cli.Main() }

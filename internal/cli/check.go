package cli

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/stackbone/stackbone/internal/app"
	"github.com/stackbone/stackbone/internal/config"
)

// checkCmd is `agents check`: it bundles and loads every agent file and
// resolves its model, as dev does, without serving or starting MCP servers.
func checkCmd() *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Load DIR/agents without serving; exit 1 with file:line:col on an error (for CI)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, specs, err := projectAgents(cmd, &f, app.CheckAgents)
			if err != nil {
				return err
			}
			if len(specs) == 0 {
				return fmt.Errorf("no agents in %s", filepath.Join(cfg.Dir, "agents"))
			}
			for _, s := range specs {
				fmt.Fprintf(cmd.OutOrStdout(), "ok  %s  %s\n", s.Name, app.RelSource(cfg.Dir, s.Source))
			}
			return nil
		},
	}
	f.bind(cmd, config.Dev)
	return cmd
}

package cli

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/stackbone/stackbone/internal/scaffold"
)

func initCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "init [DIR]",
		Short: "Create a project in DIR (default .): an offline agent, its types and config",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			wrote, err := scaffold.Write(dir, force)
			var ee *scaffold.ExistsError
			if errors.As(err, &ee) {
				fmt.Fprintf(cmd.ErrOrStderr(), "stackbone: %s already holds files init would write; nothing was written (--force overwrites them):\n", dir)
				for _, p := range ee.Paths {
					fmt.Fprintln(cmd.ErrOrStderr(), "  "+filepath.Join(dir, filepath.FromSlash(p)))
				}
				return &exitError{code: 1}
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Created a Stackbone project in %s:\n", dir)
			for _, p := range wrote {
				fmt.Fprintln(out, "  "+p)
			}
			fmt.Fprintf(out, `
Next:
  stackbone dev --dir %[1]s            # serves agents/assistant.ts offline on the scripted model
  curl -s http://127.0.0.1:7100/v1/chat/completions -H 'content-type: application/json' \
    -d '{"model":"assistant","messages":[{"role":"user","content":"What is the weather in Paris?"}]}'
  stackbone agents check --dir %[1]s   # loads the agents without serving (for CI)

A real model: in agents/assistant.ts use model: 'openai/gpt-4o-mini' and set OPENAI_API_KEY.
Editor types: tsconfig.json points 'stackbone' at types/stackbone (npx tsc --noEmit type-checks).
`, dir)
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "overwrite files that exist")
	return cmd
}

package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/store"
)

// schedulesCmd is `stackbone schedules list|add|rm|run`, through the
// server's /v1/schedules API.
func schedulesCmd() *cobra.Command {
	var c client
	cmd := &cobra.Command{Use: "schedules", Short: "List, add, remove and run schedules"}
	c.bind(cmd)

	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the tenant's schedules with their next and last firing",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c.init()
			var page struct {
				Data []store.Schedule `json:"data"`
			}
			if err := c.do("GET", "/v1/schedules", nil, &page); err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(page.Data)
			}
			w := newTable(cmd.OutOrStdout())
			fmt.Fprintln(w, "ID\tAGENT\tNAME\tCRON\tTHREAD\tNEXT\tLAST\tOUTCOME")
			for _, s := range page.Data {
				cron := s.Cron
				if s.Timezone != "" {
					cron += " (" + s.Timezone + ")"
				}
				next := "-"
				if s.NextAt != nil {
					next = s.NextAt.Local().Format(time.DateTime)
				} else if !s.Enabled {
					next = "disabled"
				}
				last, outcome := "-", "-"
				if s.LastDueAt != nil {
					last, outcome = s.LastDueAt.Local().Format(time.DateTime), s.LastStatus
					if s.LastError != "" {
						outcome += ": " + truncate(s.LastError, 40)
					}
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", clean(s.ID), clean(s.Agent), clean(s.Name), clean(cron),
					truncate(s.Thread, 24), next, last, clean(outcome))
			}
			return w.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	var body struct {
		agent.Schedule
		Agent   string `json:"agent"`
		Enabled bool   `json:"enabled"`
	}
	var disabled bool
	add := &cobra.Command{
		Use:   "add",
		Short: "Create a schedule (an admin key's)",
		Example: `  stackbone schedules add --agent reports --name daily --cron '0 9 * * 1-5' \
    --timezone Europe/Paris --input 'Send the daily report' --thread daily-report`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c.init()
			body.Enabled = !disabled
			var s store.Schedule
			if err := c.do("POST", "/v1/schedules", body, &s); err != nil {
				return err
			}
			next := "none (disabled)"
			if s.NextAt != nil {
				next = s.NextAt.Local().Format(time.DateTime + " MST")
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Created schedule %s (%s of agent %s); next firing %s.\n", clean(s.ID), clean(s.Name), clean(s.Agent), next)
			return nil
		},
	}
	f := add.Flags()
	f.StringVar(&body.Name, "name", "", "schedule name, unique for the agent (required)")
	f.StringVar(&body.Agent, "agent", "", "agent to run (required)")
	f.StringVar(&body.Cron, "cron", "", "five-field cron ('0 9 * * 1-5') or a descriptor ('@every 15m', '@daily') (required)")
	f.StringVar(&body.Timezone, "timezone", "", "IANA time zone the cron is read in (default UTC)")
	f.StringVar(&body.Input, "input", "", "user message each run starts with (required)")
	f.StringVar(&body.Thread, "thread", "", "thread the runs go on, or 'new' for a new thread per run (default new)")
	f.StringVar(&body.CatchUp, "catch-up", "", "a firing missed while the server was down: 'one' runs it once on start (default), 'none' skips it")
	f.StringVar(&body.Key, "key", "", "API key label the runs count under (default the tenant's admin)")
	f.BoolVar(&disabled, "disabled", false, "create it disabled")

	rm := &cobra.Command{
		Use:   "rm <id>",
		Short: "Delete a schedule (one created through the API)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.init()
			seg, err := pathID(args[0])
			if err != nil {
				return err
			}
			if err := c.do("DELETE", "/v1/schedules/"+seg, nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Deleted schedule %s.\n", clean(args[0]))
			return nil
		},
	}

	run := &cobra.Command{
		Use:   "run <id>",
		Short: "Run a schedule now, whatever its next firing",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.init()
			seg, err := pathID(args[0])
			if err != nil {
				return err
			}
			var fr store.Firing
			if err := c.do("POST", "/v1/schedules/"+seg+"/run", nil, &fr); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Started run %s on thread %s (stackbone threads show %s).\n", clean(fr.RunID), clean(fr.ThreadID), clean(fr.ThreadID))
			return nil
		},
	}
	cmd.AddCommand(list, add, rm, run)
	return cmd
}

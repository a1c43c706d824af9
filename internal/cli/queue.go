package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stackbone/stackbone/internal/server"
)

// queueCmd is `stackbone threads queue <id> [--json]`: the follow-ups that
// wait in a thread's queue (GET /v1/threads/{id}/queue), next first.
func queueCmd(c *client) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "queue <id>",
		Short: "List the follow-ups waiting in a thread's queue",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.init()
			path, err := threadPath(args[0], "/queue")
			if err != nil {
				return err
			}
			var list server.QueueList
			if err := c.do("GET", path, nil, &list); err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(list)
			}
			out := cmd.OutOrStdout()
			if len(list.Data) == 0 {
				_, err = fmt.Fprintf(out, "thread %s: no follow-up waits\n", clean(args[0]))
				return err
			}
			for _, q := range list.Data {
				text := ""
				for _, m := range q.Messages {
					if m.Role == "user" {
						text = m.Content
					}
				}
				if len(text) > 60 {
					text = text[:57] + "..."
				}
				if _, err := fmt.Fprintf(out, "%d  %s  %s  %q\n", q.Position, clean(q.ID), q.CreatedAt.Format("2006-01-02 15:04:05"), clean(text)); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the queue as JSON")
	return cmd
}

// unqueueCmd is `stackbone threads unqueue <id> <run>`: a follow-up leaves
// the thread's queue before its turn starts (DELETE
// /v1/threads/{id}/queue/{run}).
func unqueueCmd(c *client) *cobra.Command {
	return &cobra.Command{
		Use:   "unqueue <id> <run>",
		Short: "Remove a follow-up from a thread's queue before it runs",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.init()
			seg, err := pathID(args[1])
			if err != nil {
				return err
			}
			path, err := threadPath(args[0], "/queue/"+seg)
			if err != nil {
				return err
			}
			var res server.QueueRemoved
			if err := c.do("DELETE", path, nil, &res); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "thread %s: %s left the queue\n", clean(args[0]), clean(res.ID))
			return err
		},
	}
}

package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/stackbone/stackbone/internal/server"
	"github.com/stackbone/stackbone/internal/store"
)

// threadPath is /v1/threads/{id}, the id escaped as one segment, then
// rest.
func threadPath(id, rest string) (string, error) {
	seg, err := pathID(id)
	if err != nil {
		return "", err
	}
	return "/v1/threads/" + seg + rest, nil
}

// branchesCmd is `stackbone threads branches <id> [--json]`.
func branchesCmd(c *client) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "branches <id>",
		Short: "List a thread's branches",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.init()
			path, err := threadPath(args[0], "/branches")
			if err != nil {
				return err
			}
			var list server.BranchList
			if err := c.do("GET", path, nil, &list); err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(list)
			}
			w := newTable(cmd.OutOrStdout())
			fmt.Fprintln(w, "ID\tPARENT\tFORK-AT\tMESSAGES\tTIP\tHEAD")
			for _, b := range list.Data {
				parent, fork, head := strconv.FormatInt(b.Parent, 10), clean(b.ForkMessageID), ""
				if b.ID == 0 {
					parent, fork = "-", "-"
				}
				if b.Head {
					head = "*"
				}
				fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\t%s\n", b.ID, parent, fork, b.Messages, clean(b.TipMessageID), head)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// forkAt is the JSON of --at: an event seq when it is a whole number,
// else a message id.
func forkAt(at string) any {
	if n, err := strconv.ParseInt(at, 10, 64); err == nil {
		return n
	}
	return at
}

// forkCmd is `stackbone threads fork <id> [--at <message id|event seq>]
// [--id <new id>] [--json]`.
func forkCmd(c *client) *cobra.Command {
	var (
		at, newID string
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "fork <id>",
		Short: "Copy a thread's conversation up to a message into a new thread",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.init()
			path, err := threadPath(args[0], "/fork")
			if err != nil {
				return err
			}
			body := map[string]any{}
			if cmd.Flags().Changed("at") {
				body["at"] = forkAt(at)
			}
			if cmd.Flags().Changed("id") {
				body["threadId"] = newID
			}
			var view json.RawMessage
			if err := c.do("POST", path, body, &view); err != nil {
				return err
			}
			if asJSON {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), string(view))
				return err
			}
			var th struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(view, &th); err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), clean(th.ID))
			return err
		},
	}
	cmd.Flags().StringVar(&at, "at", "", "the fork's last message: a message id, or an event seq (default: the whole head)")
	cmd.Flags().StringVar(&newID, "id", "", "the new thread's id (default: a new thr_… id)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the new thread as JSON")
	return cmd
}

// headCmd is `stackbone threads head <id> (--branch N | --at <message
// id>)`.
func headCmd(c *client) *cobra.Command {
	var (
		branch int64
		at     string
	)
	cmd := &cobra.Command{
		Use:   "head <id>",
		Short: "Switch a thread's head to a branch, or rewind it to a message",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			byBranch, byAt := cmd.Flags().Changed("branch"), cmd.Flags().Changed("at")
			if byBranch == byAt {
				return errors.New("give exactly one of --branch and --at")
			}
			c.init()
			path, err := threadPath(args[0], "/head")
			if err != nil {
				return err
			}
			body := map[string]any{"branch": branch}
			if byAt {
				body = map[string]any{"at": at}
			}
			var view struct {
				ID         string `json:"id"`
				HeadBranch int64  `json:"headBranch"`
			}
			if err := c.do("POST", path, body, &view); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "thread %s: head is branch %d\n", clean(view.ID), view.HeadBranch)
			return err
		},
	}
	cmd.Flags().Int64Var(&branch, "branch", 0, "the branch to make the head")
	cmd.Flags().StringVar(&at, "at", "", "a message id to rewind to")
	return cmd
}

// cancelCmd is `stackbone threads cancel <id> [--json]`: it stops the
// thread's running turn (POST /v1/threads/{id}/cancel) and says what
// happened.
func cancelCmd(c *client) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "cancel <id>",
		Short: "Stop a thread's running turn",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.init()
			path, err := threadPath(args[0], "/cancel")
			if err != nil {
				return err
			}
			var res server.ThreadCancel
			if err := c.do("POST", path, nil, &res); err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
			}
			id, out := clean(res.ID), cmd.OutOrStdout()
			switch {
			case !res.Cancelled:
				_, err = fmt.Fprintf(out, "thread %s: nothing was running (status %s)\n", id, res.Status)
			case res.Status == store.Running:
				_, err = fmt.Fprintf(out, "thread %s: cancel asked; the turn is still stopping\n", id)
			default:
				_, err = fmt.Fprintf(out, "thread %s: turn cancelled (status %s)\n", id, res.Status)
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the answer as JSON")
	return cmd
}

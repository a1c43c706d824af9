package cli

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/stackbone/stackbone/internal/decision"
	"github.com/stackbone/stackbone/internal/store"
)

// client talks to a running server's HTTP API.
type client struct {
	base, key string
	http      *http.Client
}

func (c *client) bind(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&c.base, "url", "", "server URL (env STACKBONE_URL; default http://127.0.0.1:7100)")
	cmd.PersistentFlags().StringVar(&c.key, "api-key", "", "API key (env STACKBONE_API_KEY)")
}

func (c *client) init() {
	if c.base == "" {
		c.base = os.Getenv("STACKBONE_URL")
	}
	if c.base == "" {
		c.base = "http://127.0.0.1:7100"
	}
	c.base = strings.TrimRight(c.base, "/")
	if c.key == "" {
		c.key = os.Getenv("STACKBONE_API_KEY")
	}
	c.http = &http.Client{Timeout: 30 * time.Second}
}

// apiError is an error body from the server.
type apiError struct {
	Status  int
	Message string
	Details []string
}

func (e *apiError) Error() string {
	msg := e.Message
	if len(e.Details) > 0 {
		msg += " (" + strings.Join(e.Details, "; ") + ")"
	}
	return msg
}

func (c *client) do(method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-stackbone-client", "cli")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the server at %s: %v", c.base, rootCause(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var env struct {
			Error struct {
				Message string   `json:"message"`
				Details []string `json:"details"`
			} `json:"error"`
		}
		if json.Unmarshal(b, &env) == nil && env.Error.Message != "" {
			return &apiError{Status: resp.StatusCode, Message: env.Error.Message, Details: env.Error.Details}
		}
		return &apiError{Status: resp.StatusCode, Message: fmt.Sprintf("server answered %s", resp.Status)}
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// pathID escapes an id as one path segment. "." and ".." are escaped as
// %2E so that neither the client nor the server's router cleans them away
// as dot segments; an empty id is refused.
func pathID(id string) (string, error) {
	if id == "" {
		return "", errors.New("the id is empty")
	}
	esc := url.PathEscape(id)
	if id == "." || id == ".." {
		esc = strings.ReplaceAll(esc, ".", "%2E")
	}
	return esc, nil
}

// getOne reads the resource collection/id (GET /v1/{collection}/{id}) as
// raw JSON.
func (c *client) getOne(collection, id string) (json.RawMessage, error) {
	seg, err := pathID(id)
	if err != nil {
		return nil, err
	}
	var v json.RawMessage
	if err := c.do("GET", "/v1/"+collection+"/"+seg, nil, &v); err != nil {
		return nil, err
	}
	return v, nil
}

func rootCause(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 2, 4, 2, ' ', 0) }

func age(t time.Time) string {
	d := time.Since(t).Round(time.Second)
	switch {
	case d < time.Minute:
		return d.String()
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// clean replaces control characters (terminal escapes a model could put
// into a description or arguments) so what is printed is what is approved.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || (r >= 0x7f && r < 0xa0) {
			return '?'
		}
		return r
	}, s)
}

func truncate(s string, n int) string {
	s = clean(strings.ReplaceAll(s, "\n", " "))
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

func hitlCmd(stdin io.Reader) *cobra.Command {
	var c client
	cmd := &cobra.Command{Use: "hitl", Short: "List and decide tool calls waiting on a human"}
	c.bind(cmd)

	var asJSON bool
	var thread, agentName, status string
	list := &cobra.Command{
		Use:   "list",
		Short: "List pending decisions (or, with --status, decided ones and their audit)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c.init()
			q := url.Values{}
			if status != "" {
				q.Set("status", status)
			}
			if thread != "" {
				q.Set("thread", thread)
			}
			if agentName != "" {
				q.Set("agent", agentName)
			}
			var page struct {
				Data []store.Interrupt `json:"data"`
			}
			if err := c.do("GET", "/v1/hitl?"+q.Encode(), nil, &page); err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(page.Data)
			}
			if len(page.Data) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "No %s decisions.\n", cmp.Or(status, "pending"))
				return nil
			}
			w := newTable(cmd.OutOrStdout())
			if status != "" && status != string(store.Pending) {
				fmt.Fprintln(w, "ID\tAGENT\tTHREAD\tTOOL\tSTATUS\tAUDIT\tAGE")
				for _, it := range page.Data {
					st := string(it.Status)
					if it.Decision != nil && it.Decision.Kind != "" {
						st += " (" + clean(it.Decision.Kind) + ")"
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", clean(it.ID), clean(it.Agent), threadCell(it.ThreadID), clean(it.Tool),
						st, audit(it.Decision), age(it.CreatedAt))
				}
				return w.Flush()
			}
			fmt.Fprintln(w, "ID\tAGENT\tTHREAD\tTOOL\tREASON\tDESCRIPTION\tAGE")
			for _, it := range page.Data {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", clean(it.ID), clean(it.Agent), truncate(it.ThreadID, 24), clean(it.Tool),
					clean(cmp.Or(it.Reason, string(decision.Approval))), truncate(it.Description, 48), age(it.CreatedAt))
			}
			// Each kind listed says, once, how its decisions are made.
			hinted := map[decision.Kind]bool{}
			for _, it := range page.Data {
				if def := decision.Of(it.Reason); def.Hint != "" && !hinted[def.Kind] {
					hinted[def.Kind] = true
					fmt.Fprintln(cmd.OutOrStdout(), def.Hint)
				}
			}
			return w.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	list.Flags().StringVar(&status, "status", "", "pending (default), approved or rejected; decided ones show their audit")
	list.Flags().StringVar(&thread, "thread", "", "only this thread")
	list.Flags().StringVar(&agentName, "agent", "", "only this agent")

	var editArgs string
	var yes bool
	approve := &cobra.Command{
		Use:   "approve <id>",
		Short: "Approve a pending tool call (optionally with edited arguments)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.init()
			body := map[string]any{}
			if editArgs != "" {
				if !json.Valid([]byte(editArgs)) {
					return errors.New("--args is not valid JSON")
				}
				body["editedArgs"] = json.RawMessage(editArgs)
			}
			return decideCmd(cmd, &c, stdin, args[0], "approve", body, yes)
		},
	}
	approve.Flags().StringVar(&editArgs, "args", "", "replacement arguments as JSON (needs edit to be allowed)")
	approve.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")

	var msg string
	var yesReject bool
	reject := &cobra.Command{
		Use:   "reject <id>",
		Short: "Reject a pending tool call",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.init()
			body := map[string]any{}
			if msg != "" {
				body["message"] = msg
			}
			return decideCmd(cmd, &c, stdin, args[0], "reject", body, yesReject)
		},
	}
	reject.Flags().StringVar(&msg, "message", "", "a message for the model")
	reject.Flags().BoolVar(&yesReject, "yes", false, "do not ask for confirmation")

	var yesRetry bool
	retry := &cobra.Command{
		Use:   "retry <id>",
		Short: "Run an in-doubt tool call again (it may already have run before a crash)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.init()
			return decideCmd(cmd, &c, stdin, args[0], "retry", map[string]any{}, yesRetry)
		},
	}
	retry.Flags().BoolVar(&yesRetry, "yes", false, "do not ask for confirmation")

	var skipMsg string
	var yesSkip bool
	skip := &cobra.Command{
		Use:   "skip <id>",
		Short: "Do not run an in-doubt tool call again; the model is told its outcome is unknown (or --message)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.init()
			body := map[string]any{}
			if skipMsg != "" {
				body["message"] = skipMsg
			}
			return decideCmd(cmd, &c, stdin, args[0], "skip", body, yesSkip)
		},
	}
	skip.Flags().StringVar(&skipMsg, "message", "", "the call's result for the model (what you know of its outcome)")
	skip.Flags().BoolVar(&yesSkip, "yes", false, "do not ask for confirmation")

	cmd.AddCommand(list, approve, reject, retry, skip)
	return cmd
}

// decideCmd confirms (on a terminal) and sends a decision.
func decideCmd(cmd *cobra.Command, c *client, stdin io.Reader, id, verb string, body map[string]any, yes bool) error {
	seg, err := pathID(id)
	if err != nil {
		return err
	}
	if !yes {
		f, ok := stdin.(*os.File)
		if !ok || !term.IsTerminal(int(f.Fd())) {
			return fmt.Errorf("refusing to %s without confirmation: not a terminal; pass --yes", verb)
		}
		var it store.Interrupt
		if err := c.do("GET", "/v1/hitl/"+seg, nil, &it); err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		args, _ := json.MarshalIndent(it.Args, "  ", "  ")
		fmt.Fprintf(out, "Tool:        %s (agent %s, thread %s)\n", clean(it.Tool), clean(it.Agent), clean(it.ThreadID))
		if it.Description != "" {
			fmt.Fprintf(out, "Description: %s\n", clean(it.Description))
		}
		fmt.Fprintf(out, "Arguments:\n  %s\n", args)
		if e, ok := body["editedArgs"]; ok {
			fmt.Fprintf(out, "Edited arguments: %s\n", e)
		}
		fmt.Fprintf(out, "%s this call? [y/N] ", strings.ToUpper(verb[:1])+verb[1:])
		line, _ := bufio.NewReader(stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			fmt.Fprintln(out, "Nothing decided.")
			return &exitError{code: 1}
		}
	}
	var it store.Interrupt
	if err := c.do("POST", "/v1/hitl/"+seg+"/"+verb, body, &it); err != nil {
		return err
	}
	past := map[string]string{"approve": "Approved", "reject": "Rejected", "retry": "Retrying", "skip": "Skipped"}[verb]
	fmt.Fprintf(cmd.OutOrStdout(), "%s %s (%s on thread %s; %s).\n", past, clean(it.ID), clean(it.Tool), clean(it.ThreadID), audit(it.Decision))
	return nil
}

// audit says how a decision was made: the channel the server proved
// (decidedVia), what the client claimed to be, and the deciding key.
func audit(d *store.Decision) string {
	if d == nil {
		return "-"
	}
	s := "decidedVia " + clean(d.Via)
	if d.ClaimedVia != "" {
		s += ", claims " + clean(d.ClaimedVia)
	}
	if d.By != "" {
		s += ", by " + clean(d.By)
	}
	return s
}

// threadCell is a thread id for a table; a stateless turn's record has none.
func threadCell(id string) string {
	if id == "" {
		return "(stateless)"
	}
	return truncate(id, 24)
}

func threadsCmd() *cobra.Command {
	var c client
	cmd := &cobra.Command{Use: "threads", Short: "Inspect threads"}
	c.bind(cmd)
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List threads",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c.init()
			var page struct {
				Data []store.Thread `json:"data"`
			}
			if err := c.do("GET", "/v1/threads", nil, &page); err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(page.Data)
			}
			w := newTable(cmd.OutOrStdout())
			fmt.Fprintln(w, "ID\tAGENT\tSTATUS\tUPDATED")
			for _, t := range page.Data {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s ago\n", clean(t.ID), clean(t.Agent), t.Status, age(t.UpdatedAt))
			}
			return w.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	show := &cobra.Command{
		Use:   "show <id>",
		Short: "Show a thread with its messages",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.init()
			v, err := c.getOne("threads", args[0])
			if err != nil {
				return err
			}
			var buf bytes.Buffer
			_ = json.Indent(&buf, v, "", "  ")
			fmt.Fprintln(cmd.OutOrStdout(), buf.String())
			return nil
		},
	}
	cmd.AddCommand(list, show, branchesCmd(&c), forkCmd(&c), headCmd(&c), cancelCmd(&c), queueCmd(&c), unqueueCmd(&c))
	return cmd
}

package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stackbone/stackbone/internal/server"
)

// usd writes a known cost in dollars; a nil one is "unknown", never $0.
func usd(v *float64) string {
	if v == nil {
		return "unknown"
	}
	return dollars(*v)
}

func dollars(v float64) string {
	switch a := v; {
	case a == 0:
		return "$0"
	case a < 0.01 && a > -0.01:
		// Two significant digits, never an exponent: $0.000068, $0.0000001.
		digits := -int(math.Floor(math.Log10(math.Abs(v)))) + 1
		return "$" + strings.TrimRight(strconv.FormatFloat(v, 'f', digits, 64), "0")
	case a < 1 && a > -1:
		return "$" + strconv.FormatFloat(v, 'f', 4, 64)
	}
	return "$" + strconv.FormatFloat(v, 'f', 2, 64)
}

// cost is a cost with its completeness: "unknown" when no model call had a
// price, "$0.012 + unknown" when some had none.
func cost(v *float64, complete bool) string {
	if v == nil {
		return "unknown"
	}
	if !complete {
		return usd(v) + " + unknown"
	}
	return usd(v)
}

// ms writes milliseconds as a duration rounded for a table (1.234s, 12ms).
func ms(d float64) string {
	if d < 1 {
		return strconv.FormatFloat(d, 'f', 2, 64) + "ms" // ASCII, not µs
	}
	t := time.Duration(d * float64(time.Millisecond))
	switch {
	case t >= time.Second:
		t = t.Round(time.Millisecond)
	case t >= time.Millisecond:
		t = t.Round(100 * time.Microsecond)
	}
	return t.String()
}

// printJSON writes a raw API answer indented.
func printJSON(w io.Writer, raw json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

var groupBys = []string{"agent", "model", "key", "day", "thread"}

func usageCmd() *cobra.Command {
	var c client
	var from, to, groupBy string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Show tokens and cost by agent, model, key, day or thread, with the budgets",
		Long: "Show the tenant's tokens and cost over a period (default: the last 30 days), grouped by agent,\n" +
			"model, key or day, the threads that cost most, and each budget's use. A cost is \"unknown\"\n" +
			"when a model has no price in stackbone.json.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c.init()
			ok := false
			for _, g := range groupBys {
				ok = ok || g == groupBy
			}
			if !ok {
				return fmt.Errorf("--group-by %q: want one of %s", groupBy, strings.Join(groupBys, ", "))
			}
			q := url.Values{"group_by": {groupBy}}
			if from != "" {
				q.Set("from", from)
			}
			if to != "" {
				q.Set("to", to)
			}
			var raw json.RawMessage
			if err := c.do("GET", "/v1/usage?"+q.Encode(), nil, &raw); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, raw)
			}
			var u server.UsageReport
			if err := json.Unmarshal(raw, &u); err != nil {
				return fmt.Errorf("the server's usage answer: %v", err)
			}
			return printUsage(out, &u, groupBy)
		},
	}
	c.bind(cmd)
	cmd.Flags().StringVar(&from, "from", "", "start of the period: YYYY-MM-DD or RFC 3339 (default: 30 days ago)")
	cmd.Flags().StringVar(&to, "to", "", "end of the period: YYYY-MM-DD or RFC 3339 (default: now)")
	cmd.Flags().StringVar(&groupBy, "group-by", "agent", "agent, model, key, day or thread")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the server's JSON")
	return cmd
}

func printUsage(out io.Writer, u *server.UsageReport, groupBy string) error {
	to := "now"
	if u.To != nil {
		to = clean(*u.To)
	}
	fmt.Fprintf(out, "Usage from %s to %s by %s\n\n", clean(u.From), to, clean(groupBy))
	w := newTable(out)
	fmt.Fprintln(w, strings.ToUpper(groupBy)+"\tINPUT\tCACHED\tOUTPUT\tREASONING\tTOTAL\tCOST\tRUNS\tMODEL CALLS")
	row := func(name string, g server.UsageRowView) {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\n", name, g.InputTokens, g.CachedInputTokens, g.OutputTokens,
			g.ReasoningTokens, g.TotalTokens, cost(g.CostUSD, g.CostComplete), g.Runs, g.ModelCalls)
	}
	for _, g := range u.Data {
		name := clean(g.Group)
		if name == "" {
			name = "(none)"
		}
		row(name, g)
	}
	row("TOTAL", u.Total)
	if err := w.Flush(); err != nil {
		return err
	}
	if len(u.TopThreads) > 0 {
		fmt.Fprintln(out, "\nTop threads by cost")
		w = newTable(out)
		fmt.Fprintln(w, "THREAD\tAGENT\tTOKENS\tCOST")
		for _, t := range u.TopThreads {
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", truncate(t.ThreadID, 40), clean(t.Agent), t.TotalTokens, cost(t.CostUSD, t.CostComplete))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "\nBudgets")
	if len(u.Budgets) == 0 {
		fmt.Fprintln(out, "No budgets configured (stackbone.json \"budgets\").")
		return nil
	}
	w = newTable(out)
	fmt.Fprintln(w, "NAME\tSCOPE\tPERIOD\tTOKENS\tSPEND\tRESETS\tSTATUS")
	for _, b := range u.Budgets {
		scope := clean(b.Scope)
		if b.Match != "" {
			scope += " " + clean(b.Match)
		}
		tokens, spend := "-", "-"
		if b.LimitTokens != nil {
			tokens = fmt.Sprintf("%d / %d (%s)", b.UsedTokens, *b.LimitTokens, percent(float64(b.UsedTokens), float64(*b.LimitTokens)))
		}
		if b.LimitUSD != nil {
			spend = fmt.Sprintf("%s / %s (%s)", dollars(b.UsedUSD), dollars(*b.LimitUSD), percent(b.UsedUSD, *b.LimitUSD))
		}
		status := "ok"
		if b.Exceeded {
			status = "EXCEEDED"
		}
		resets := clean(b.ResetsAt)
		if t, err := time.Parse(time.RFC3339, b.ResetsAt); err == nil {
			resets = t.UTC().Format("2006-01-02 15:04Z")
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", clean(b.Name), scope, clean(b.Period), tokens, spend, resets, status)
	}
	return w.Flush()
}

func percent(used, limit float64) string {
	if limit <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", used/limit*100)
}

func runsCmd() *cobra.Command {
	var c client
	cmd := &cobra.Command{Use: "runs", Short: "Inspect runs: their model and tool calls, tokens and cost"}
	c.bind(cmd)
	var asJSON bool
	show := &cobra.Command{
		Use:   "show RUN_ID",
		Short: "Show a run and its steps (model calls and tool calls)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.init()
			raw, err := c.getOne("runs", args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, raw)
			}
			var r server.RunView
			if err := json.Unmarshal(raw, &r); err != nil {
				return fmt.Errorf("the server's run answer: %v", err)
			}
			return printRun(out, &r)
		},
	}
	show.Flags().BoolVar(&asJSON, "json", false, "print the server's JSON")
	cmd.AddCommand(show)
	return cmd
}

func printRun(out io.Writer, r *server.RunView) error {
	w := newTable(out)
	field := func(k, v string) { fmt.Fprintf(w, "%s\t%s\n", k, v) }
	field("Run:", clean(r.ID))
	thread := clean(r.ThreadID)
	if thread == "" {
		thread = "(stateless)"
	}
	field("Thread:", thread)
	field("Agent:", clean(r.Agent))
	if r.Key != "" {
		field("Key:", clean(r.Key))
	}
	status := clean(r.Status)
	if r.Error != "" {
		status += ": " + truncate(r.Error, 100)
	}
	field("Status:", status)
	runStart, _ := time.Parse(time.RFC3339Nano, r.StartedAt)
	field("Started:", runStart.UTC().Format("2006-01-02 15:04:05.000Z"))
	if r.DurationMs != nil {
		field("Duration:", ms(*r.DurationMs))
	} else {
		field("Duration:", "(running)")
	}
	if r.ResumedFrom != "" {
		field("Resumed from:", clean(r.ResumedFrom))
	}
	trace := clean(r.TraceID)
	if trace == "" {
		trace = "-"
	}
	if r.TraceURL != "" {
		trace += "  " + clean(r.TraceURL)
	}
	field("Trace:", trace)
	field("Tokens:", fmt.Sprintf("%d (input %d, cached %d, output %d, reasoning %d)", r.Usage.TotalTokens, r.Usage.InputTokens,
		r.Usage.CachedInputTokens, r.Usage.OutputTokens, r.Usage.ReasoningTokens))
	field("Cost:", cost(r.CostUSD, r.CostComplete))
	field("Calls:", fmt.Sprintf("%d model, %d tool", r.ModelCalls, r.ToolCalls))
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out)
	if len(r.Steps) == 0 {
		fmt.Fprintln(out, "No steps.")
	} else {
		w = newTable(out)
		fmt.Fprintln(w, "#\tKIND\tNAME\tSTART\tDURATION\tTOKENS\tCOST\tATTEMPTS\tOUTCOME")
		depth := map[string]int{}
		for _, s := range r.Steps {
			if s.Kind == "tool" && s.ToolCallID != "" {
				depth[s.ToolCallID] = depth[s.ParentToolCallID] + 1
				if s.ParentToolCallID == "" {
					depth[s.ToolCallID] = 1
				}
			}
		}
		for i, s := range r.Steps {
			name := clean(s.Name)
			if s.Subagent != "" {
				name = strings.Repeat("  ", max(depth[s.ParentToolCallID], 1)) + "└ " + clean(s.Subagent) + ": " + name
			}
			stepStart, _ := time.Parse(time.RFC3339Nano, s.StartedAt)
			start := "+" + ms(float64(stepStart.Sub(runStart).Microseconds())/1000)
			tokens, c, attempts := "-", "-", "-"
			if s.Kind == "model" && s.Usage != nil {
				tokens = strconv.Itoa(s.Usage.TotalTokens)
				c = usd(s.CostUSD)
				attempts = strconv.Itoa(max(s.Attempts, 1))
			}
			outcome := clean(s.Outcome)
			if s.Error != "" {
				outcome += ": " + truncate(s.Error, 60)
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", i+1, clean(s.Kind), name, start, ms(s.DurationMs), tokens, c, attempts, outcome)
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if len(r.Decisions) > 0 {
		fmt.Fprintln(out)
		w = newTable(out)
		fmt.Fprintln(w, "DECISION\tKIND\tTOOL\tSTATUS\tDECIDED BY\tVIA")
		for _, d := range r.Decisions {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", clean(d.ID), clean(d.Kind), clean(d.Tool), clean(d.Status), dash(clean(d.DecidedBy)), dash(clean(d.DecidedVia)))
		}
		return w.Flush()
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

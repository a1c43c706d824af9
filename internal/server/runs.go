package server

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/usage"
	"github.com/stackbone/stackbone/internal/wire/httpjson"
)

// UsageView is token usage in the API's JSON.
type UsageView struct {
	InputTokens       int `json:"inputTokens"`
	OutputTokens      int `json:"outputTokens"`
	CachedInputTokens int `json:"cachedInputTokens"`
	ReasoningTokens   int `json:"reasoningTokens"`
	TotalTokens       int `json:"totalTokens"`
}

func usageView(u event.Usage) UsageView {
	return UsageView{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedInputTokens: u.CachedInputTokens,
		ReasoningTokens: u.ReasoningTokens, TotalTokens: u.InputTokens + u.OutputTokens}
}

// StepView is one model or tool call of a run (GET /v1/runs/{id}).
type StepView struct {
	ID               string     `json:"id"`
	Kind             string     `json:"kind"`
	Name             string     `json:"name"`
	Provider         string     `json:"provider,omitempty"`
	Model            string     `json:"model,omitempty"`
	ResponseModel    string     `json:"responseModel,omitempty"`
	ResponseID       string     `json:"responseId,omitempty"`
	ToolCallID       string     `json:"toolCallId,omitempty"`
	Subagent         string     `json:"subagent"`
	ParentToolCallID string     `json:"parentToolCallId"`
	StartedAt        string     `json:"startedAt"`
	DurationMs       float64    `json:"durationMs"`
	FirstChunkMs     *float64   `json:"firstChunkMs,omitempty"`
	Usage            *UsageView `json:"usage,omitempty"`
	CostUSD          *float64   `json:"costUsd"`
	FinishReason     string     `json:"finishReason,omitempty"`
	Attempts         int        `json:"attempts,omitempty"`
	Outcome          string     `json:"outcome"`
	Error            string     `json:"error,omitempty"`
	Content          any        `json:"content,omitempty"`
}

// RunDecisionView is a decision a run waited on.
type RunDecisionView struct {
	ID         string  `json:"id"`
	Kind       string  `json:"kind"`
	Tool       string  `json:"tool"`
	ToolCallID string  `json:"toolCallId"`
	Status     string  `json:"status"`
	DecidedBy  string  `json:"decidedBy,omitempty"`
	DecidedVia string  `json:"decidedVia,omitempty"`
	CreatedAt  string  `json:"createdAt"`
	DecidedAt  *string `json:"decidedAt"`
}

// RunView is a run (GET /v1/threads/{id}/runs, GET /v1/runs/{id}).
type RunView struct {
	ID           string            `json:"id"`
	Object       string            `json:"object"`
	ThreadID     string            `json:"threadId"`
	Agent        string            `json:"agent"`
	Key          string            `json:"key"`
	Status       string            `json:"status"`
	Error        string            `json:"error,omitempty"`
	StartedAt    string            `json:"startedAt"`
	EndedAt      *string           `json:"endedAt"`
	DurationMs   *float64          `json:"durationMs"`
	TraceID      string            `json:"traceId"`
	TraceURL     string            `json:"traceUrl,omitempty"`
	ResumedFrom  string            `json:"resumedFrom,omitempty"`
	Usage        UsageView         `json:"usage"`
	CostUSD      *float64          `json:"costUsd"`
	CostComplete bool              `json:"costComplete"`
	ModelCalls   int               `json:"modelCalls"`
	ToolCalls    int               `json:"toolCalls"`
	Steps        []StepView        `json:"steps,omitempty"`
	Decisions    []RunDecisionView `json:"decisions,omitempty"`
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// cost is the API's cost of a sum of nanos with unpriced calls among
// calls: null when nothing of it is priced.
func cost(nanos int64, unpriced, calls int) (*float64, bool) {
	if calls > 0 && unpriced == calls {
		return nil, false
	}
	v := usage.USD(nanos)
	return &v, unpriced == 0
}

// runView is a run with its totals (r.Totals), or with steps and the totals
// they sum to when steps are given.
func (s *Server) runView(r store.RunRecord, steps []store.Step) RunView {
	v := RunView{ID: r.ID, Object: "run", ThreadID: r.ThreadID, Agent: r.Agent, Key: r.Key, Status: r.Status, Error: r.Error,
		StartedAt: stamp(r.StartedAt), TraceID: r.TraceID, ResumedFrom: r.ResumedFrom}
	if r.EndedAt != nil {
		e := stamp(*r.EndedAt)
		d := ms(r.EndedAt.Sub(r.StartedAt))
		v.EndedAt, v.DurationMs = &e, &d
	}
	if r.TraceID != "" && s.Config.TraceURL != "" {
		v.TraceURL = strings.ReplaceAll(s.Config.TraceURL, "{traceId}", r.TraceID)
	}
	withSteps := steps != nil
	if withSteps {
		r.Totals = store.RunTotals{}
	}
	for _, st := range steps {
		sv := StepView{ID: st.ID, Kind: st.Kind, Name: st.Name, ToolCallID: st.ToolCallID, Subagent: st.Subagent,
			ParentToolCallID: st.ParentCallID, StartedAt: stamp(st.StartedAt), DurationMs: ms(st.Duration), Outcome: st.Outcome, Error: st.Error}
		if st.Kind == store.StepModel {
			r.Totals.ModelCalls++
			r.Totals.Usage = r.Totals.Usage.Add(st.Usage)
			if st.CostNanos == nil {
				r.Totals.Unpriced++
			} else {
				r.Totals.CostNanos += *st.CostNanos
				c := usage.USD(*st.CostNanos)
				sv.CostUSD = &c
			}
			uv := usageView(st.Usage)
			sv.Usage, sv.Provider, sv.Model, sv.ResponseModel, sv.ResponseID = &uv, st.Provider, st.Name, st.ResponseModel, st.ResponseID
			sv.FinishReason, sv.Attempts = st.FinishReason, st.Attempts
			if st.FirstChunk != nil {
				f := ms(*st.FirstChunk)
				sv.FirstChunkMs = &f
			}
			if len(st.Content) > 0 {
				sv.Content = st.Content
			}
		} else {
			r.Totals.ToolCalls++
		}
		v.Steps = append(v.Steps, sv)
	}
	t := r.Totals
	v.ModelCalls, v.ToolCalls, v.Usage = t.ModelCalls, t.ToolCalls, usageView(t.Usage)
	v.CostUSD, v.CostComplete = cost(t.CostNanos, t.Unpriced, t.ModelCalls)
	if withSteps && v.Steps == nil {
		v.Steps = []StepView{}
	}
	return v
}

// listRuns is GET /v1/threads/{id}/runs: the thread's runs, oldest first,
// each with its totals.
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) error {
	tenant := PrincipalFrom(r.Context()).Tenant
	id := r.PathValue("id")
	if _, err := s.Store.GetThread(r.Context(), tenant, id); errors.Is(err, store.ErrNotFound) {
		return apierror.New(apierror.NotFound, "not_found", fmt.Sprintf("No thread has the id %q.", id))
	} else if err != nil {
		return err
	}
	runs, err := s.Store.ListRuns(r.Context(), tenant, id)
	if err != nil {
		return err
	}
	data := make([]RunView, 0, len(runs))
	var total store.RunTotals
	for _, run := range runs {
		data = append(data, s.runView(run, nil))
		total = total.Add(run.Totals)
	}
	c, complete := cost(total.CostNanos, total.Unpriced, total.ModelCalls)
	return httpjson.Write(w, http.StatusOK, map[string]any{"object": "list", "data": data,
		"total": UsageRowView{UsageView: usageView(total.Usage), CostUSD: c, CostComplete: complete, Runs: len(runs), ModelCalls: total.ModelCalls}})
}

// getRun is GET /v1/runs/{id}: a run, its steps and the decisions it
// waited on.
func (s *Server) getRun(w http.ResponseWriter, r *http.Request) error {
	tenant := PrincipalFrom(r.Context()).Tenant
	id := r.PathValue("id")
	d, err := s.Store.GetRun(r.Context(), tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		return apierror.New(apierror.NotFound, "not_found", fmt.Sprintf("No run has the id %q.", id))
	}
	if err != nil {
		return err
	}
	if err := s.seesThread(r, d.ThreadID); err != nil {
		if apierror.From(err).Kind == apierror.NotFound {
			return apierror.New(apierror.NotFound, "not_found", fmt.Sprintf("No run has the id %q.", id))
		}
		return err
	}
	steps := d.Steps
	if steps == nil {
		steps = []store.Step{}
	}
	v := s.runView(d.RunRecord, steps)
	v.Decisions = []RunDecisionView{}
	if d.ThreadID != "" {
		for _, st := range []store.InterruptStatus{store.Pending, store.Approved, store.Rejected} {
			its, err := s.Store.ListInterrupts(r.Context(), tenant, store.InterruptFilter{ThreadID: d.ThreadID, Status: st, Limit: store.MaxLimit})
			if err != nil {
				return err
			}
			for _, it := range its {
				if it.RunID != d.ID {
					continue
				}
				dv := RunDecisionView{ID: it.ID, Kind: it.Reason, Tool: it.Tool, ToolCallID: it.ToolCallID, Status: string(it.Status),
					CreatedAt: stamp(it.CreatedAt)}
				if dv.Kind == "" {
					dv.Kind = store.ReasonApproval
				}
				if it.Decision != nil {
					at := stamp(it.Decision.At)
					dv.DecidedBy, dv.DecidedVia, dv.DecidedAt = it.Decision.By, it.Decision.Via, &at
				}
				v.Decisions = append(v.Decisions, dv)
			}
		}
		sort.Slice(v.Decisions, func(i, j int) bool { return v.Decisions[i].CreatedAt < v.Decisions[j].CreatedAt })
	}
	return httpjson.Write(w, http.StatusOK, v)
}

// UsageReport is GET /v1/usage.
type UsageReport struct {
	Object string `json:"object"`
	From   string `json:"from"`
	// To is null for "now".
	To         *string         `json:"to"`
	GroupBy    string          `json:"groupBy"`
	Data       []UsageRowView  `json:"data"`
	Total      UsageRowView    `json:"total"`
	TopThreads []TopThreadView `json:"topThreads"`
	Budgets    []BudgetView    `json:"budgets"`
}

// UsageRowView is a group of GET /v1/usage.
type UsageRowView struct {
	Group string `json:"group,omitempty"`
	UsageView
	CostUSD      *float64 `json:"costUsd"`
	CostComplete bool     `json:"costComplete"`
	Runs         int      `json:"runs"`
	ModelCalls   int      `json:"modelCalls"`
}

// TopThreadView is a thread among the costliest.
type TopThreadView struct {
	ThreadID     string   `json:"threadId"`
	Agent        string   `json:"agent"`
	TotalTokens  int      `json:"totalTokens"`
	CostUSD      *float64 `json:"costUsd"`
	CostComplete bool     `json:"costComplete"`
}

// BudgetView is a budget and its use in the current period.
type BudgetView struct {
	Name        string   `json:"name"`
	Scope       string   `json:"scope"`
	Match       string   `json:"match"`
	Period      string   `json:"period"`
	LimitTokens *int64   `json:"limitTokens"`
	LimitUSD    *float64 `json:"limitUsd"`
	UsedTokens  int64    `json:"usedTokens"`
	UsedUSD     float64  `json:"usedUsd"`
	ResetsAt    string   `json:"resetsAt"`
	Exceeded    bool     `json:"exceeded"`
}

func usageRowView(u store.UsageRow) UsageRowView {
	c, complete := cost(u.CostNanos, u.Unpriced, u.ModelCalls)
	return UsageRowView{Group: u.Group, UsageView: usageView(u.Usage), CostUSD: c, CostComplete: complete, Runs: u.Runs, ModelCalls: u.ModelCalls}
}

// parseDay reads a usage bound: RFC 3339, or a day (YYYY-MM-DD, UTC).
func parseDay(param, v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return time.Time{}, apierror.Invalid(param, "%s must be an RFC 3339 time or a day (YYYY-MM-DD), not %q.", param, v)
}

// usageReport is GET /v1/usage: the tenant's tokens and costs from from to
// to (default: the last 30 days), by group_by, with the costliest threads
// and the budgets that apply to the tenant.
func (s *Server) usageReport(w http.ResponseWriter, r *http.Request) error {
	tenant := PrincipalFrom(r.Context()).Tenant
	q := r.URL.Query()
	now := s.Now()
	to := time.Time{}
	from := now.AddDate(0, 0, -30)
	var err error
	if v := q.Get("from"); v != "" {
		if from, err = parseDay("from", v); err != nil {
			return err
		}
	}
	if v := q.Get("to"); v != "" {
		if to, err = parseDay("to", v); err != nil {
			return err
		}
		if len(v) == len(time.DateOnly) {
			to = to.AddDate(0, 0, 1) // a day bound includes the day
		}
	}
	group := q.Get("group_by")
	if group == "" {
		group = "agent"
	}
	switch group {
	case "agent", "model", "key", "day", "thread":
	default:
		return apierror.Invalid("group_by", "group_by must be agent, model, key, day or thread, not %q.", group)
	}
	f := store.UsageFilter{Tenant: tenant, From: from, To: to, GroupBy: group}
	rows, err := s.Store.Usage(r.Context(), f)
	if err != nil {
		return err
	}
	f.GroupBy = ""
	total, err := s.Store.Usage(r.Context(), f)
	if err != nil {
		return err
	}
	f.GroupBy, f.Limit = "thread", 10
	top, err := s.Store.Usage(r.Context(), f)
	if err != nil {
		return err
	}
	body := UsageReport{Object: "usage", From: stamp(from), GroupBy: group, Data: []UsageRowView{}, TopThreads: []TopThreadView{}, Budgets: []BudgetView{}}
	if !to.IsZero() {
		t := stamp(to)
		body.To = &t
	}
	for _, u := range rows {
		body.Data = append(body.Data, usageRowView(u))
	}
	if len(total) == 1 {
		body.Total = usageRowView(total[0])
	}
	for _, u := range top {
		c, complete := cost(u.CostNanos, u.Unpriced, u.ModelCalls)
		body.TopThreads = append(body.TopThreads, TopThreadView{ThreadID: u.Group, Agent: u.Agent,
			TotalTokens: u.Usage.InputTokens + u.Usage.OutputTokens, CostUSD: c, CostComplete: complete})
	}
	for _, b := range s.Runner.Budgets {
		if b.Tenant != "" && b.Tenant != tenant {
			continue
		}
		st, err := b.Status(r.Context(), s.Store, tenant, now)
		if err != nil {
			return err
		}
		body.Budgets = append(body.Budgets, BudgetView{Name: b.Name, Scope: b.Scope, Match: b.Match, Period: b.Period,
			LimitTokens: b.Tokens, LimitUSD: b.USD, UsedTokens: st.UsedTokens, UsedUSD: usage.USD(st.UsedNanos),
			ResetsAt: stamp(st.ResetsAt), Exceeded: st.Exceeded})
	}
	return httpjson.Write(w, http.StatusOK, body)
}

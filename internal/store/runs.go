package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stackbone/stackbone/internal/event"
)

// Step kinds.
const (
	StepModel = "model"
	StepTool  = "tool"
)

// Step outcomes.
const (
	OutcomeOK        = "ok"
	OutcomeError     = "error"
	OutcomeRejected  = "rejected"
	OutcomeInDoubt   = "in_doubt"
	OutcomeTimedOut  = "timed_out"
	OutcomeCancelled = "cancelled"
	// OutcomePaused: a call (a subagent's task) stopped on a decision.
	OutcomePaused = "paused"
)

// Step is one model call or tool call of a run, as the run inspector,
// usage and budgets read it back. It is written with the checkpoint the
// step already makes (Checkpoint.Steps, FinishRun.Steps), or with a
// stateless run's record (RecordRun).
type Step struct {
	ID       string
	Tenant   string
	ThreadID string
	RunID    string
	Agent    string
	// Key is the label of the API key the run's turn came with.
	Key string
	// Kind is StepModel or StepTool; Name the model (as sent upstream) or
	// the tool.
	Kind string
	Name string
	// Provider, ResponseModel and ResponseID describe a model call.
	Provider      string
	ResponseModel string
	ResponseID    string
	// ToolCallID is a tool call's id.
	ToolCallID string
	// Subagent names the subagent whose step it is, ParentCallID its task
	// call.
	Subagent     string
	ParentCallID string
	StartedAt    time.Time
	Duration     time.Duration
	// FirstChunk is the time to a model call's first chunk (nil: none
	// came, or a tool call).
	FirstChunk *time.Duration
	Usage      event.Usage
	// CostNanos is a model call's cost in billionths of a US dollar; nil
	// when its price is unknown (never 0 for unknown).
	CostNanos    *int64
	FinishReason string
	Attempts     int
	// Outcome is one of the Outcome* values.
	Outcome string
	Error   string
	// Content is what a model call sent and got back, kept only when the
	// operator asked for it (redacted).
	Content json.RawMessage
}

// RunRecord is a run as the run inspector lists it.
type RunRecord struct {
	Tenant   string
	ThreadID string
	ID       string
	Agent    string
	Key      string
	// TraceID and SpanID are the run's invoke_agent span (hex; empty when
	// tracing is off).
	TraceID string
	SpanID  string
	// ResumedFrom is the run this one continues after a pause.
	ResumedFrom string
	// Status is running, idle, waiting, failed or released.
	Status    string
	Error     string
	StartedAt time.Time
	EndedAt   *time.Time
	// TurnSeq is the event sequence number of the first event of the
	// run's turn (0: recorded before runs recorded it); ListRuns fills it.
	TurnSeq int64
	// Totals sum the run's steps (ListRuns fills them).
	Totals RunTotals
}

// RunTotals sum a run's steps.
type RunTotals struct {
	ModelCalls, ToolCalls int
	Usage                 event.Usage
	CostNanos             int64
	// Unpriced counts the model calls of unknown price.
	Unpriced int
}

// Add sums two runs' totals.
func (t RunTotals) Add(o RunTotals) RunTotals {
	return RunTotals{ModelCalls: t.ModelCalls + o.ModelCalls, ToolCalls: t.ToolCalls + o.ToolCalls, Usage: t.Usage.Add(o.Usage),
		CostNanos: t.CostNanos + o.CostNanos, Unpriced: t.Unpriced + o.Unpriced}
}

// RunDetail is a run with its steps.
type RunDetail struct {
	RunRecord
	Steps []Step
}

const stepCols = `tenant, id, thread_id, run_id, agent, key_label, kind, name, provider, response_model, response_id,
	tool_call_id, subagent, parent_call_id, started_at, day, duration_us, first_chunk_us, input_tokens, output_tokens,
	cached_tokens, reasoning_tokens, cost_nanos, finish_reason, attempts, outcome, error, content`

// stepArgs are a step's column values, in stepCols' order.
func stepArgs(s Step) []any {
	var first, cost, content any
	if s.FirstChunk != nil {
		first = s.FirstChunk.Microseconds()
	}
	if s.CostNanos != nil {
		cost = *s.CostNanos
	}
	if len(s.Content) > 0 {
		content = CleanText(string(s.Content))
	}
	start := s.StartedAt.UTC()
	return []any{s.Tenant, s.ID, s.ThreadID, s.RunID, s.Agent, s.Key, s.Kind, s.Name, s.Provider, s.ResponseModel, s.ResponseID,
		s.ToolCallID, s.Subagent, s.ParentCallID, start, start.Format(time.DateOnly), s.Duration.Microseconds(), first,
		int64(s.Usage.InputTokens), int64(s.Usage.OutputTokens), int64(s.Usage.CachedInputTokens), int64(s.Usage.ReasoningTokens),
		cost, s.FinishReason, int64(s.Attempts), s.Outcome, CleanText(s.Error), content}
}

// stepTypes are the types of stepCols.
var stepTypes = []string{"text", "text", "text", "text", "text", "text", "text", "text", "text", "text", "text",
	"text", "text", "text", "timestamptz", "text", "bigint", "bigint", "bigint", "bigint",
	"bigint", "bigint", "bigint", "text", "bigint", "text", "text", "text"}

// stepValues is the typed select list of one step's columns, parameters
// from p on.
func stepValues(p int) string { return typedParams(p, stepTypes) }

// typedParams is a list of parameters from p on, each cast to its type:
// PostgreSQL types each (SQLite drops the casts).
func typedParams(p int, types []string) string {
	var b strings.Builder
	for i, t := range types {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "$%d::%s", p+i, t)
	}
	return b.String()
}

var (
	// stepHeldSQL inserts a step of a durable run, on the condition that
	// the run holds the thread ($1-$3), as every statement of a run's
	// transaction (its commit may come with the last statement).
	stepHeldSQL = `INSERT INTO run_steps (` + stepCols + `) SELECT ` + stepValues(4) + ` FROM threads t WHERE ` + runHeld
	// stepSQL inserts a step of a stateless run.
	stepSQL = `INSERT INTO run_steps (` + stepCols + `) VALUES (` + stepValues(1) + `)`
	// runHeldSQL records a durable run (its first checkpoint, or its end),
	// on the condition that it holds the thread.
	// It records the run's turn and the conversation's last message as
	// the run sees it (where the turn ended, once its last run ended).
	runHeldSQL = `INSERT INTO runs (` + runCols + `, turn_seq, end_seq)
		SELECT t.tenant, t.id, t.run_id, t.agent, $4::text, $5::text, $6::text, $7::text, $8::text, $9::text, $10::timestamptz, $11::timestamptz,
			t.turn_seq, ` + headTip + `
		FROM threads t WHERE ` + runHeld + runUpsert + `, turn_seq = excluded.turn_seq, end_seq = excluded.end_seq`
	// runSQL records a run that holds no thread.
	runSQL = `INSERT INTO runs (` + runCols + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)` + runUpsert
)

// headTip is, on threads t, the sequence number of the last message of
// the head's conversation: the thread's counter when it never branched,
// else the head branch's last message, or its fork point when it has none.
const headTip = `CASE WHEN t.branch_seq = 0 THEN t.message_seq ELSE coalesce(
		(SELECT max(m.seq) FROM messages m WHERE m.tenant = t.tenant AND m.thread_id = t.id AND m.branch = t.head_branch),
		(SELECT b.fork_seq FROM branches b WHERE b.tenant = t.tenant AND b.thread_id = t.id AND b.id = t.head_branch), 0) END`

// TurnEnd returns the sequence number of the last message of the turn that
// began at event seq turnSeq of the thread, as its last run to end left it
// (on the branch the turn ran on); ErrNotFound when no run of that turn has
// ended.
func (db *DB) TurnEnd(ctx context.Context, tenant, threadID string, turnSeq int64) (int64, error) {
	if err := CheckText("turn end", "tenant", tenant, "threadID", threadID); err != nil {
		return 0, db.invalid(err)
	}
	var end int64
	err := db.d.Read().QueryRow(ctx, `SELECT end_seq FROM runs
		WHERE tenant = $1 AND thread_id = $2 AND turn_seq = $3 AND ended_at IS NOT NULL AND end_seq > 0
		ORDER BY started_at DESC, ended_at DESC LIMIT 1`, tenant, threadID, turnSeq).Scan(&end)
	if errors.Is(err, ErrNoRows) {
		return 0, fmt.Errorf("%s: thread %q: no ended run of the turn at %d: %w", db.name, threadID, turnSeq, ErrNotFound)
	}
	if err != nil {
		return 0, db.read("turn end", err)
	}
	return end, nil
}

// RunTurn returns the event sequence number of the first event of the
// turn that run runID of the thread belongs to (store.Thread.Turn.Seq when
// it ran); ErrNotFound when the thread has no recorded run of that id, or
// only one recorded before runs recorded their turn. A run is recorded at
// its first checkpoint: a running run not yet recorded is the thread's
// (Thread.RunID, Thread.Turn).
func (db *DB) RunTurn(ctx context.Context, tenant, threadID, runID string) (int64, error) {
	if err := CheckText("run turn", "tenant", tenant, "threadID", threadID, "run", runID); err != nil {
		return 0, db.invalid(err)
	}
	var seq int64
	err := db.d.Read().QueryRow(ctx, `SELECT turn_seq FROM runs WHERE tenant = $1 AND thread_id = $2 AND id = $3 AND turn_seq > 0`,
		tenant, threadID, runID).Scan(&seq)
	if errors.Is(err, ErrNoRows) {
		return 0, fmt.Errorf("%s: thread %q: no recorded run %q: %w", db.name, threadID, runID, ErrNotFound)
	}
	if err != nil {
		return 0, db.read("run turn", err)
	}
	return seq, nil
}

// RunThread returns the thread run runID of the tenant belongs to and its
// turn's first event: the latest recorded run of that id that recorded its
// turn, else the thread whose current run it is (a run is recorded at its
// first checkpoint); ErrNotFound when neither knows it.
func (db *DB) RunThread(ctx context.Context, tenant, runID string) (string, int64, error) {
	if err := CheckText("run thread", "tenant", tenant, "run", runID); err != nil {
		return "", 0, db.invalid(err)
	}
	var thread string
	var seq int64
	err := db.d.Read().QueryRow(ctx, `SELECT thread_id, turn_seq FROM runs WHERE tenant = $1 AND id = $2 AND thread_id <> '' AND turn_seq > 0
		ORDER BY started_at DESC LIMIT 1`, tenant, runID).Scan(&thread, &seq)
	if errors.Is(err, ErrNoRows) {
		err = db.d.Read().QueryRow(ctx, `SELECT id, turn_seq FROM threads WHERE tenant = $1 AND run_id = $2 AND turn_seq > 0
			ORDER BY updated_at DESC LIMIT 1`, tenant, runID).Scan(&thread, &seq)
	}
	if errors.Is(err, ErrNoRows) {
		return "", 0, fmt.Errorf("%s: run %q: %w", db.name, runID, ErrNotFound)
	}
	if err != nil {
		return "", 0, db.read("run thread", err)
	}
	return thread, seq, nil
}

// runUpsert updates a recorded run with its later record: its status, end
// and error, and its span once it has one (a run's first record may come
// before its span starts).
const runUpsert = `
	ON CONFLICT (tenant, thread_id, id) DO UPDATE SET status = excluded.status, error = excluded.error, ended_at = excluded.ended_at,
		trace_id = CASE WHEN excluded.trace_id = '' THEN runs.trace_id ELSE excluded.trace_id END,
		span_id = CASE WHEN excluded.span_id = '' THEN runs.span_id ELSE excluded.span_id END`

// dailyCols and dailyTypes are the columns of usage_daily a model step
// adds to, and their types.
const dailyCols = `tenant, day, agent, key_label, provider, model, input_tokens, output_tokens, cached_tokens, reasoning_tokens,
	cost_nanos, unpriced, calls`

var dailyTypes = []string{"text", "text", "text", "text", "text", "text", "bigint", "bigint", "bigint", "bigint", "bigint", "bigint", "bigint"}

// dailyAdd adds an inserted row's sums to the day's existing one.
const dailyAdd = ` ON CONFLICT (tenant, day, agent, key_label, provider, model) DO UPDATE SET
	input_tokens = usage_daily.input_tokens + excluded.input_tokens, output_tokens = usage_daily.output_tokens + excluded.output_tokens,
	cached_tokens = usage_daily.cached_tokens + excluded.cached_tokens, reasoning_tokens = usage_daily.reasoning_tokens + excluded.reasoning_tokens,
	cost_nanos = usage_daily.cost_nanos + excluded.cost_nanos, unpriced = usage_daily.unpriced + excluded.unpriced,
	calls = usage_daily.calls + excluded.calls`

var (
	// dailyHeldSQL adds a durable run's model step to its day, on the
	// condition that the run holds the thread ($1-$3).
	dailyHeldSQL = `INSERT INTO usage_daily (` + dailyCols + `) SELECT ` + typedParams(4, dailyTypes) + ` FROM threads t WHERE ` + runHeld + dailyAdd
	// dailySQL adds a stateless run's model step to its day.
	dailySQL = `INSERT INTO usage_daily (` + dailyCols + `) VALUES (` + typedParams(1, dailyTypes) + `)` + dailyAdd
)

// dailyArgs are a model step's usage_daily values, in dailyCols' order.
func dailyArgs(s Step) []any {
	var cost, unpriced int64
	if s.CostNanos != nil {
		cost = *s.CostNanos
	} else {
		unpriced = 1
	}
	return []any{s.Tenant, s.StartedAt.UTC().Format(time.DateOnly), s.Agent, s.Key, s.Provider, s.Name,
		int64(s.Usage.InputTokens), int64(s.Usage.OutputTokens), int64(s.Usage.CachedInputTokens), int64(s.Usage.ReasoningTokens),
		cost, unpriced, int64(1)}
}

// queueRun queues the statements that record a durable run's record (when
// r is set) and its steps (a model step's usage in its day too),
// conditional on the run holding the thread.
func queueRun(tx Tx, tenant, threadID, runID string, r *RunRecord, steps []Step) {
	held := []any{tenant, threadID, runID}
	if r != nil {
		tx.Queue(runHeldSQL, append(held, r.Key, r.TraceID, r.SpanID, r.ResumedFrom, r.Status, CleanText(r.Error),
			TimeArg(r.StartedAt), TimePtrArg(r.EndedAt))...)
	}
	for _, s := range steps {
		s.Tenant, s.ThreadID, s.RunID = tenant, threadID, runID
		tx.Queue(stepHeldSQL, append(held[:3:3], stepArgs(s)...)...)
		if s.Kind == StepModel {
			tx.Queue(dailyHeldSQL, append(held[:3:3], dailyArgs(s)...)...)
		}
	}
}

// RecordRun stores a run that holds no thread (a stateless turn) with its
// steps, in one transaction.
func (db *DB) RecordRun(ctx context.Context, r RunRecord, steps []Step) error {
	if err := CheckText("record run", "tenant", r.Tenant, "run", r.ID); err != nil {
		return db.invalid(err)
	}
	return db.d.Write(ctx, "record run", func(tx Tx) error {
		tx.Queue(runSQL, r.Tenant, r.ThreadID, r.ID, r.Agent, r.Key, r.TraceID, r.SpanID, r.ResumedFrom, r.Status, CleanText(r.Error),
			TimeArg(r.StartedAt), TimePtrArg(r.EndedAt))
		for _, s := range steps {
			s.Tenant, s.ThreadID, s.RunID = r.Tenant, r.ThreadID, r.ID
			if s.Agent == "" {
				s.Agent = r.Agent
			}
			tx.Queue(stepSQL, stepArgs(s)...)
			if s.Kind == StepModel {
				tx.Queue(dailySQL, dailyArgs(s)...)
			}
		}
		return nil
	})
}

const runCols = `tenant, thread_id, id, agent, key_label, trace_id, span_id, resumed_from, status, error, started_at, ended_at`

func scanRun(r Row) (*RunRecord, error) {
	var x RunRecord
	err := r.Scan(&x.Tenant, &x.ThreadID, &x.ID, &x.Agent, &x.Key, &x.TraceID, &x.SpanID, &x.ResumedFrom, &x.Status, &x.Error,
		ScanTime(&x.StartedAt), ScanTimePtr(&x.EndedAt))
	if err != nil {
		return nil, err
	}
	return &x, nil
}

// ListRuns returns a thread's runs, oldest first (at most 1000), each with
// its totals, in one read.
func (db *DB) ListRuns(ctx context.Context, tenant, threadID string) ([]RunRecord, error) {
	if err := CheckText("list runs", "tenant", tenant, "thread", threadID); err != nil {
		return nil, db.invalid(err)
	}
	rows, err := db.d.Read().Query(ctx, `SELECT r.tenant, r.thread_id, r.id, r.agent, r.key_label, r.trace_id, r.span_id,
			r.resumed_from, r.status, r.error, r.started_at, r.ended_at, r.turn_seq,
			COALESCE(SUM(CASE WHEN s.kind = 'model' THEN 1 ELSE 0 END), 0)::bigint,
			COALESCE(SUM(CASE WHEN s.kind = 'tool' THEN 1 ELSE 0 END), 0)::bigint,
			COALESCE(SUM(s.input_tokens), 0)::bigint, COALESCE(SUM(s.output_tokens), 0)::bigint,
			COALESCE(SUM(s.cached_tokens), 0)::bigint, COALESCE(SUM(s.reasoning_tokens), 0)::bigint,
			COALESCE(SUM(s.cost_nanos), 0)::bigint,
			COALESCE(SUM(CASE WHEN s.kind = 'model' AND s.cost_nanos IS NULL THEN 1 ELSE 0 END), 0)::bigint
		FROM runs r LEFT JOIN run_steps s ON s.tenant = r.tenant AND s.run_id = r.id AND s.thread_id = r.thread_id
		WHERE r.tenant = $1 AND r.thread_id = $2
		GROUP BY r.tenant, r.thread_id, r.id, r.agent, r.key_label, r.trace_id, r.span_id, r.resumed_from, r.status, r.error,
			r.started_at, r.ended_at, r.turn_seq
		ORDER BY r.started_at, r.id LIMIT 1000`, tenant, threadID)
	if err != nil {
		return nil, db.read("list runs", err)
	}
	defer rows.Close()
	var out []RunRecord
	for rows.Next() {
		var (
			x                                      RunRecord
			model, tool, in, outT, cach, reas, cst int64
			unpriced                               int64
		)
		if err := rows.Scan(&x.Tenant, &x.ThreadID, &x.ID, &x.Agent, &x.Key, &x.TraceID, &x.SpanID, &x.ResumedFrom, &x.Status,
			&x.Error, ScanTime(&x.StartedAt), ScanTimePtr(&x.EndedAt), &x.TurnSeq, &model, &tool, &in, &outT, &cach, &reas, &cst, &unpriced); err != nil {
			return nil, db.read("list runs", err)
		}
		x.Totals = RunTotals{ModelCalls: int(model), ToolCalls: int(tool), CostNanos: cst, Unpriced: int(unpriced),
			Usage: event.Usage{InputTokens: int(in), OutputTokens: int(outT), CachedInputTokens: int(cach), ReasoningTokens: int(reas)}}
		out = append(out, x)
	}
	return out, db.read("list runs", rows.Err())
}

// LastRun returns the latest run of a thread, or nil when it has none.
func (db *DB) LastRun(ctx context.Context, tenant, threadID string) (*RunRecord, error) {
	r, err := scanRun(db.d.Read().QueryRow(ctx, `SELECT `+runCols+` FROM runs WHERE tenant = $1 AND thread_id = $2
		ORDER BY started_at DESC, id DESC LIMIT 1`, tenant, threadID))
	if errors.Is(err, ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, db.read("last run", err)
	}
	return r, nil
}

// GetRun returns a run of the tenant with its steps in start order, or
// ErrNotFound. A run id a client chose may name runs of several threads:
// the latest is returned.
func (db *DB) GetRun(ctx context.Context, tenant, id string) (*RunDetail, error) {
	if err := CheckText("get run", "tenant", tenant, "run", id); err != nil {
		return nil, db.invalid(err)
	}
	r, err := scanRun(db.d.Read().QueryRow(ctx, `SELECT `+runCols+` FROM runs WHERE tenant = $1 AND id = $2
		ORDER BY started_at DESC LIMIT 1`, tenant, id))
	if errors.Is(err, ErrNoRows) {
		return nil, fmt.Errorf("%s: get run %q: %w", db.name, id, ErrNotFound)
	}
	if err != nil {
		return nil, db.read("get run", err)
	}
	rows, err := db.d.Read().Query(ctx, `SELECT `+stepCols+` FROM run_steps WHERE tenant = $1 AND run_id = $2 AND thread_id = $3
		ORDER BY started_at, id`, tenant, id, r.ThreadID)
	if err != nil {
		return nil, db.read("get run", err)
	}
	defer rows.Close()
	d := &RunDetail{RunRecord: *r}
	for rows.Next() {
		var (
			s                   Step
			dur                 int64
			first, cost         sql.NullInt64
			in, out, cach, reas int64
			attempts            int64
			day                 string
			content             sql.NullString
		)
		if err := rows.Scan(&s.Tenant, &s.ID, &s.ThreadID, &s.RunID, &s.Agent, &s.Key, &s.Kind, &s.Name, &s.Provider,
			&s.ResponseModel, &s.ResponseID, &s.ToolCallID, &s.Subagent, &s.ParentCallID, ScanTime(&s.StartedAt), &day,
			&dur, &first, &in, &out, &cach, &reas, &cost, &s.FinishReason, &attempts, &s.Outcome, &s.Error, &content); err != nil {
			return nil, db.read("get run", err)
		}
		s.Duration = time.Duration(dur) * time.Microsecond
		if first.Valid {
			f := time.Duration(first.Int64) * time.Microsecond
			s.FirstChunk = &f
		}
		if cost.Valid {
			c := cost.Int64
			s.CostNanos = &c
		}
		s.Usage = event.Usage{InputTokens: int(in), OutputTokens: int(out), CachedInputTokens: int(cach), ReasoningTokens: int(reas)}
		s.Attempts = int(attempts)
		if content.Valid {
			s.Content = json.RawMessage(content.String)
		}
		d.Steps = append(d.Steps, s)
	}
	return d, db.read("get run", rows.Err())
}

// DailyUsage sums the tenant's model calls from f.From's UTC day on (whole
// days; f.To, GroupBy and Limit are not read), of f.Agent or f.Key when
// set, from the daily sums: what a budget's period has spent, in a read of
// a few rows a day however many calls were made. Runs is not counted.
func (db *DB) DailyUsage(ctx context.Context, f UsageFilter) (UsageRow, error) {
	if err := CheckText("daily usage", "tenant", f.Tenant, "agent", f.Agent, "key", f.Key); err != nil {
		return UsageRow{}, db.invalid(err)
	}
	q := `SELECT COALESCE(SUM(input_tokens), 0)::bigint, COALESCE(SUM(output_tokens), 0)::bigint,
		COALESCE(SUM(cached_tokens), 0)::bigint, COALESCE(SUM(reasoning_tokens), 0)::bigint, COALESCE(SUM(cost_nanos), 0)::bigint,
		COALESCE(SUM(unpriced), 0)::bigint, COALESCE(SUM(calls), 0)::bigint
		FROM usage_daily WHERE tenant = $1 AND day >= $2`
	args := []any{f.Tenant, f.From.UTC().Format(time.DateOnly)}
	if f.Agent != "" {
		args = append(args, f.Agent)
		q += fmt.Sprintf(` AND agent = $%d`, len(args))
	}
	if f.Key != "" {
		args = append(args, f.Key)
		q += fmt.Sprintf(` AND key_label = $%d`, len(args))
	}
	var in, out, cach, reas, cost, unpriced, calls int64
	if err := db.d.Read().QueryRow(ctx, q, args...).Scan(&in, &out, &cach, &reas, &cost, &unpriced, &calls); err != nil {
		return UsageRow{}, db.read("daily usage", err)
	}
	return UsageRow{Usage: event.Usage{InputTokens: int(in), OutputTokens: int(out), CachedInputTokens: int(cach), ReasoningTokens: int(reas)},
		CostNanos: cost, Unpriced: int(unpriced), ModelCalls: int(calls)}, nil
}

// UsageFilter selects the model calls usage sums.
type UsageFilter struct {
	Tenant string
	// From and To bound the calls' start (To exclusive; zero: unbounded).
	From, To time.Time
	// Agent and Key, when set, keep only that agent's or key label's calls.
	Agent, Key string
	// GroupBy is "agent", "model", "key", "day", "thread" or "" (one total).
	GroupBy string
	// Limit bounds the groups (0: all); groups come by cost, then tokens,
	// highest first, for GroupBy thread, else in group order.
	Limit int
}

// UsageRow is the usage of a group of model calls.
type UsageRow struct {
	Group      string
	Agent      string // the group's agent (GroupBy thread)
	Usage      event.Usage
	CostNanos  int64
	Unpriced   int // model calls of unknown price
	Runs       int
	ModelCalls int
}

var usageGroups = map[string]string{"": "''::text", "agent": "agent", "model": "CASE WHEN provider = '' THEN name ELSE provider || '/' || name END",
	"key": "key_label", "day": "day", "thread": "thread_id"}

// Usage sums the tokens and costs of the tenant's model calls by f.GroupBy.
func (db *DB) Usage(ctx context.Context, f UsageFilter) ([]UsageRow, error) {
	group, ok := usageGroups[f.GroupBy]
	if !ok {
		return nil, db.invalid(fmt.Errorf("usage: unknown grouping %q: %w", f.GroupBy, ErrInvalid))
	}
	if err := CheckText("usage", "tenant", f.Tenant, "agent", f.Agent, "key", f.Key); err != nil {
		return nil, db.invalid(err)
	}
	where := []string{`tenant = $1`, `kind = 'model'`}
	args := []any{f.Tenant}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if !f.From.IsZero() {
		add(`started_at >= $%d::timestamptz`, f.From.UTC())
	}
	if !f.To.IsZero() {
		add(`started_at < $%d::timestamptz`, f.To.UTC())
	}
	if f.Agent != "" {
		add(`agent = $%d`, f.Agent)
	}
	if f.Key != "" {
		add(`key_label = $%d`, f.Key)
	}
	if f.GroupBy == "thread" {
		where = append(where, `thread_id <> ''`)
	}
	order := `g`
	if f.GroupBy == "thread" {
		order = `COALESCE(SUM(cost_nanos), 0) DESC, SUM(input_tokens + output_tokens) DESC, g`
	}
	q := `SELECT ` + group + ` AS g, COALESCE(MAX(agent), ''), COALESCE(SUM(input_tokens), 0)::bigint, COALESCE(SUM(output_tokens), 0)::bigint,
		COALESCE(SUM(cached_tokens), 0)::bigint, COALESCE(SUM(reasoning_tokens), 0)::bigint, COALESCE(SUM(cost_nanos), 0)::bigint,
		COALESCE(SUM(CASE WHEN cost_nanos IS NULL THEN 1 ELSE 0 END), 0)::bigint, COUNT(DISTINCT run_id), COUNT(*)
		FROM run_steps WHERE ` + strings.Join(where, " AND ")
	if f.GroupBy != "" {
		q += ` GROUP BY ` + group + ` ORDER BY ` + order
	}
	if f.Limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, f.Limit)
	}
	rows, err := db.d.Read().Query(ctx, q, args...)
	if err != nil {
		return nil, db.read("usage", err)
	}
	defer rows.Close()
	var out []UsageRow
	for rows.Next() {
		var (
			u                          UsageRow
			in, outT, cach, reas, cost int64
			unpriced, runs, calls      int64
		)
		if err := rows.Scan(&u.Group, &u.Agent, &in, &outT, &cach, &reas, &cost, &unpriced, &runs, &calls); err != nil {
			return nil, db.read("usage", err)
		}
		u.Usage = event.Usage{InputTokens: int(in), OutputTokens: int(outT), CachedInputTokens: int(cach), ReasoningTokens: int(reas)}
		u.CostNanos, u.Unpriced, u.Runs, u.ModelCalls = cost, int(unpriced), int(runs), int(calls)
		out = append(out, u)
	}
	return out, db.read("usage", rows.Err())
}

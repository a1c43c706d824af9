package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

type runJSON struct {
	ID           string  `json:"id"`
	ThreadID     string  `json:"threadId"`
	Agent        string  `json:"agent"`
	Key          string  `json:"key"`
	Status       string  `json:"status"`
	ResumedFrom  string  `json:"resumedFrom"`
	TraceID      string  `json:"traceId"`
	EndedAt      *string `json:"endedAt"`
	ModelCalls   int     `json:"modelCalls"`
	ToolCalls    int     `json:"toolCalls"`
	CostUSD      *float64
	CostComplete bool `json:"costComplete"`
	Usage        struct {
		InputTokens  int `json:"inputTokens"`
		OutputTokens int `json:"outputTokens"`
		TotalTokens  int `json:"totalTokens"`
	} `json:"usage"`
	Steps []struct {
		Kind       string   `json:"kind"`
		Name       string   `json:"name"`
		Provider   string   `json:"provider"`
		ToolCallID string   `json:"toolCallId"`
		Subagent   string   `json:"subagent"`
		Outcome    string   `json:"outcome"`
		CostUSD    *float64 `json:"costUsd"`
		DurationMs float64  `json:"durationMs"`
		Attempts   int      `json:"attempts"`
		Content    any      `json:"content"`
		Usage      *struct {
			InputTokens  int `json:"inputTokens"`
			OutputTokens int `json:"outputTokens"`
		} `json:"usage"`
	} `json:"steps"`
	Decisions []struct {
		Tool      string `json:"tool"`
		Status    string `json:"status"`
		DecidedBy string `json:"decidedBy"`
	} `json:"decisions"`
}

func (r *runJSON) UnmarshalJSON(b []byte) error {
	type plain runJSON
	var aux struct {
		plain
		Cost *float64 `json:"costUsd"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*r = runJSON(aux.plain)
	r.CostUSD = aux.Cost
	return nil
}

func getJSON(t *testing.T, url string, out any, hdr ...string) int {
	t.Helper()
	res := call(t, http.MethodGet, url, "", hdr...)
	if res.status == http.StatusOK {
		if err := json.Unmarshal(res.body, out); err != nil {
			t.Fatalf("GET %s: %v in %s", url, err, res.body)
		}
	}
	return res.status
}

func threadRuns(t *testing.T, env *stacktest.Env, thread string, hdr ...string) []runJSON {
	t.Helper()
	var list struct {
		Data []runJSON `json:"data"`
	}
	if st := getJSON(t, env.URL+"/v1/threads/"+thread+"/runs", &list, hdr...); st != http.StatusOK {
		t.Fatalf("GET runs of %s: %d", thread, st)
	}
	return list.Data
}

// TestRunsOfAToolTurn: a tool turn on a session is one run of two model
// calls and a tool call whose tokens add up to what the client was told,
// on both stores; an unpriced model's cost is unknown, never 0, and a
// price in stackbone.json prices it.
func TestRunsOfAToolTurn(t *testing.T) {
	t.Parallel()
	drivers := map[string]func(t *testing.T) store.Store{
		"sqlite":   func(*testing.T) store.Store { return nil },
		"postgres": func(t *testing.T) store.Store { return stacktest.Postgres(t, "runs_tool") },
	}
	for driver, open := range drivers {
		t.Run(driver, func(t *testing.T) {
			for _, priced := range []bool{false, true} {
				env := stacktest.New(t, stacktest.Options{Store: open(t), Configure: func(cfg *config.Config) {
					if priced {
						price := `{"prices": {"openai/test-model": {"input": 2, "output": 8}}}`
						if err := os.WriteFile(filepath.Join(cfg.Dir, "stackbone.json"), []byte(price), 0o644); err != nil {
							t.Fatal(err)
						}
					}
				}})
				sess := "runs-tool-" + driver
				res, err := client(env, session(sess)).Chat.Completions.New(context.Background(), params(user("what is the weather")))
				if err != nil {
					t.Fatal(err)
				}
				var runs []runJSON
				stacktest.WaitFor(t, "the run's end", func() bool {
					runs = threadRuns(t, env, sess)
					return len(runs) == 1 && runs[0].EndedAt != nil
				})
				r := runs[0]
				var list struct {
					Total struct {
						TotalTokens int `json:"totalTokens"`
						Runs        int `json:"runs"`
					} `json:"total"`
				}
				getJSON(t, env.URL+"/v1/threads/"+sess+"/runs", &list)
				if list.Total.Runs != 1 || list.Total.TotalTokens != r.Usage.TotalTokens {
					t.Fatalf("the thread's total %+v; want its one run's %d tokens", list.Total, r.Usage.TotalTokens)
				}
				var byThread struct {
					Data []struct {
						Group       string `json:"group"`
						TotalTokens int    `json:"totalTokens"`
					} `json:"data"`
				}
				getJSON(t, env.URL+"/v1/usage?group_by=thread", &byThread)
				if len(byThread.Data) != 1 || byThread.Data[0].Group != sess || byThread.Data[0].TotalTokens != r.Usage.TotalTokens {
					t.Fatalf("usage by thread %+v; want the session's %d tokens", byThread.Data, r.Usage.TotalTokens)
				}
				if r.ModelCalls != 2 || r.ToolCalls != 1 || r.Agent != "assistant" || r.Status != "idle" {
					t.Fatalf("run = %+v; want 2 model calls and 1 tool call, idle", r)
				}
				if r.Usage.InputTokens != int(res.Usage.PromptTokens) || r.Usage.OutputTokens != int(res.Usage.CompletionTokens) || r.Usage.TotalTokens == 0 {
					t.Fatalf("run usage %+v; the client was told %d in, %d out", r.Usage, res.Usage.PromptTokens, res.Usage.CompletionTokens)
				}
				var d runJSON
				if st := getJSON(t, env.URL+"/v1/runs/"+r.ID, &d); st != http.StatusOK {
					t.Fatalf("GET run: %d", st)
				}
				if len(d.Steps) != 3 || d.Steps[0].Kind != "model" || d.Steps[1].Kind != "tool" || d.Steps[1].Name != "get_weather" ||
					d.Steps[1].Outcome != "ok" || d.Steps[2].Kind != "model" || d.Steps[0].Provider != "openai" || d.Steps[0].Name != "test-model" {
					t.Fatalf("steps = %+v", d.Steps)
				}
				if d.Steps[0].Content == nil {
					t.Fatalf("dev mode keeps a model call's content: %+v", d.Steps[0])
				}
				sum := 0
				for _, s := range d.Steps {
					if s.Usage != nil {
						sum += s.Usage.InputTokens
					}
				}
				if sum != r.Usage.InputTokens {
					t.Fatalf("the steps' input tokens add to %d; the run says %d", sum, r.Usage.InputTokens)
				}
				if !priced {
					if r.CostUSD != nil || r.CostComplete || d.Steps[0].CostUSD != nil {
						t.Fatalf("an unpriced model's cost: run %v (complete %v), step %v; want unknown", r.CostUSD, r.CostComplete, d.Steps[0].CostUSD)
					}
					continue
				}
				want := (float64(r.Usage.InputTokens)*2 + float64(r.Usage.OutputTokens)*8) / 1e6
				if r.CostUSD == nil || !r.CostComplete || diff(*r.CostUSD, want) > 1e-12 {
					t.Fatalf("priced run cost %v (complete %v); want %v", r.CostUSD, r.CostComplete, want)
				}
			}
		})
	}
}

func diff(a, b float64) float64 {
	if a > b {
		return a - b
	}
	return b - a
}

// TestRunsPausedThenApproved: the run that paused for approval and the run
// the approval resumed are two runs of the thread; the second names the
// first, and the first shows who decided.
func TestRunsPausedThenApproved(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	sess := "runs-paused"
	pause(t, env, sess, "refund please")
	its, err := env.Store.ListInterrupts(context.Background(), "dev", store.InterruptFilter{ThreadID: sess})
	if err != nil || len(its) != 1 {
		t.Fatalf("pending = %v, %v", its, err)
	}
	if res := call(t, http.MethodPost, env.URL+"/v1/hitl/"+its[0].ID+"/approve", `{}`); res.status != http.StatusOK {
		t.Fatalf("approve: %d %s", res.status, res.body)
	}
	var runs []runJSON
	stacktest.WaitFor(t, "the resumed run's end", func() bool {
		runs = threadRuns(t, env, sess)
		return len(runs) == 2 && runs[1].EndedAt != nil
	})
	if runs[0].Status != "waiting" || runs[1].ResumedFrom != runs[0].ID || runs[1].Status != "idle" {
		t.Fatalf("runs = %+v; want a waiting run, then one resumed from it", runs)
	}
	var first, second runJSON
	getJSON(t, env.URL+"/v1/runs/"+runs[0].ID, &first)
	getJSON(t, env.URL+"/v1/runs/"+runs[1].ID, &second)
	if len(first.Decisions) != 1 || first.Decisions[0].Status != "approved" || first.Decisions[0].DecidedBy == "" || first.Decisions[0].Tool != "refund" {
		t.Fatalf("the paused run's decisions = %+v", first.Decisions)
	}
	if len(second.Steps) != 2 || second.Steps[0].Kind != "tool" || second.Steps[0].Name != "refund" || second.Steps[1].Kind != "model" {
		t.Fatalf("the resumed run's steps = %+v; want the refund, then the answer", second.Steps)
	}
}

// TestUsageAndTenants: stateless turns count in /v1/usage; a tenant sees
// only its own usage and runs.
func TestUsageAndTenants(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: []config.Key{
		{Secret: "sk-a", Tenant: "acme", Label: "ci"}, {Secret: "sk-b", Tenant: "globex"}}})
	auth := func(k string) []string { return []string{"Authorization", "Bearer " + k} }
	res := call(t, http.MethodPost, env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"hi"}]}`, auth("sk-a")...)
	if res.status != http.StatusOK {
		t.Fatalf("stateless turn: %d %s", res.status, res.body)
	}
	var turn struct {
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	_ = json.Unmarshal(res.body, &turn)
	type report struct {
		Data []struct {
			Group       string `json:"group"`
			InputTokens int    `json:"inputTokens"`
			Runs        int    `json:"runs"`
		} `json:"data"`
		Total struct {
			InputTokens  int `json:"inputTokens"`
			OutputTokens int `json:"outputTokens"`
		} `json:"total"`
	}
	var rep report
	stacktest.WaitFor(t, "the stateless turn's usage", func() bool {
		getJSON(t, env.URL+"/v1/usage?group_by=key", &rep, auth("sk-a")...)
		return rep.Total.InputTokens > 0
	})
	if rep.Total.InputTokens != turn.Usage.PromptTokens || rep.Total.OutputTokens != turn.Usage.CompletionTokens ||
		len(rep.Data) != 1 || rep.Data[0].Group != "ci" || rep.Data[0].Runs != 1 {
		t.Fatalf("usage = %+v; the client was told %+v", rep, turn.Usage)
	}
	var other report
	getJSON(t, env.URL+"/v1/usage", &other, auth("sk-b")...)
	if other.Total.InputTokens != 0 || len(other.Data) != 0 {
		t.Fatalf("another tenant's usage = %+v; want none", other)
	}
	if res := call(t, http.MethodGet, env.URL+"/v1/usage?group_by=color", "", auth("sk-a")...); res.status != http.StatusBadRequest {
		t.Fatalf("group_by=color: %d; want 400", res.status)
	}
	// A thread's runs are its tenant's only.
	if res := call(t, http.MethodPost, env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"hi"}]}`,
		append(auth("sk-a"), "x-stackbone-session", "acme-thread")...); res.status != http.StatusOK {
		t.Fatalf("session turn: %d", res.status)
	}
	runs := threadRuns(t, env, "acme-thread", auth("sk-a")...)
	if len(runs) != 1 {
		t.Fatalf("runs = %+v", runs)
	}
	if res := call(t, http.MethodGet, env.URL+"/v1/threads/acme-thread/runs", "", auth("sk-b")...); res.status != http.StatusNotFound {
		t.Fatalf("another tenant's thread runs: %d; want 404", res.status)
	}
	if res := call(t, http.MethodGet, env.URL+"/v1/runs/"+runs[0].ID, "", auth("sk-b")...); res.status != http.StatusNotFound {
		t.Fatalf("another tenant's run: %d; want 404", res.status)
	}
}

// TestGenAIMetrics: /metrics carries the GenAI client metrics of each model
// call (tokens by type, duration) by agent, provider and model, and the
// tool calls' duration by tool; the token sums are the run's.
func TestGenAIMetrics(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	res, err := client(env).Chat.Completions.New(context.Background(), params(user("what is the weather")))
	if err != nil {
		t.Fatal(err)
	}
	labels := `agent="assistant",gen_ai_provider_name="openai",gen_ai_request_model="test-model"`
	want := []string{
		`gen_ai_client_token_usage_sum{` + labels + `,gen_ai_token_type="input"} ` + strconv.FormatInt(res.Usage.PromptTokens, 10),
		`gen_ai_client_token_usage_sum{` + labels + `,gen_ai_token_type="output"} ` + strconv.FormatInt(res.Usage.CompletionTokens, 10),
		`gen_ai_client_operation_duration_seconds_count{agent="assistant",error_type="",gen_ai_provider_name="openai",gen_ai_request_model="test-model"} 2`,
		`stackbone_tool_call_duration_seconds_count{agent="assistant",outcome="ok",tool="get_weather"} 1`,
	}
	var m string
	defer func() {
		if t.Failed() {
			t.Logf("metrics:\n%s", m)
		}
	}()
	stacktest.WaitFor(t, "the metrics", func() bool {
		m = call(t, "GET", env.URL+"/metrics", "").String()
		for _, w := range want {
			if !strings.Contains(m, w) {
				return false
			}
		}
		return true
	})
}

// TestUsageOnEveryWire: a tool turn on each wire's official client counts
// in /v1/usage exactly the tokens that wire told its client, on both stores.
func TestUsageOnEveryWire(t *testing.T) {
	t.Parallel()
	drivers := map[string]func(t *testing.T) store.Store{
		"sqlite":   func(*testing.T) store.Store { return nil },
		"postgres": func(t *testing.T) store.Store { return stacktest.Postgres(t, "usage_wires") },
	}
	for driver, open := range drivers {
		t.Run(driver, func(t *testing.T) {
			env := stacktest.New(t, stacktest.Options{Store: open(t)})
			total := func() (int, int) {
				var rep struct {
					Total struct {
						InputTokens  int `json:"inputTokens"`
						OutputTokens int `json:"outputTokens"`
					} `json:"total"`
				}
				getJSON(t, env.URL+"/v1/usage", &rep)
				return rep.Total.InputTokens, rep.Total.OutputTokens
			}
			wantIn, wantOut := 0, 0
			expect := func(wire string, in, out int) {
				t.Helper()
				wantIn, wantOut = wantIn+in, wantOut+out
				stacktest.WaitFor(t, wire+"'s usage", func() bool {
					gotIn, gotOut := total()
					return gotIn == wantIn && gotOut == wantOut
				})
			}
			chat, err := client(env, session("usage-chat-"+driver)).Chat.Completions.New(context.Background(), params(user("what is the weather")))
			if err != nil {
				t.Fatal(err)
			}
			expect("chat completions", int(chat.Usage.PromptTokens), int(chat.Usage.CompletionTokens))
			ac := antClient(env)
			msg, err := ac.Messages.New(context.Background(), antParams(antUser("what is the weather")))
			if err != nil {
				t.Fatal(err)
			}
			expect("anthropic messages", int(msg.Usage.InputTokens), int(msg.Usage.OutputTokens))
			resp, err := client(env).Responses.New(context.Background(), ask("what is the weather"))
			if err != nil {
				t.Fatal(err)
			}
			expect("responses", int(resp.Usage.InputTokens), int(resp.Usage.OutputTokens))
		})
	}
}

package server_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// pickScript is stacktest.DefaultScript with a turn that hands work to the
// built-in general-purpose subagent ("research …").
var pickScript = `[
 {"when": {"lastTool": "task"}, "reply": {"text": "Summary: {{lastTool}}"}},
 {"when": {"lastUser": "research", "afterTool": false}, "reply": {"toolCalls": [{"name": "task", "arguments": {"description": "dig up facts", "subagent_type": "general-purpose"}}]}},
 {"when": {"lastUser": "dig up facts", "afterTool": false}, "reply": {"text": "Facts."}},` + strings.TrimPrefix(stacktest.DefaultScript, "[")

// pickEnv is a stack whose assistant lists a fallback model
// (model: ['openai/test-model', 'openai/backup-model']), in mode.
func pickEnv(t *testing.T, mode config.Mode, keys ...config.Key) *stacktest.Env {
	return stacktest.New(t, stacktest.Options{Mode: mode, Keys: keys, Script: pickScript, Agents: func(env *stacktest.Env) []*agent.Spec {
		specs := stacktest.DefaultAgents(env, "openai/test-model")
		specs[0].Fallbacks = []string{"openai/backup-model"}
		return specs
	}})
}

// lastUpstreamModel is the model name the mock upstream was last asked for.
func lastUpstreamModel(t *testing.T, env *stacktest.Env) string {
	t.Helper()
	r, ok := env.Upstream.Last()
	if !ok {
		t.Fatal("the model was never called")
	}
	return r.Request.Model
}

// runModels are the models of the model steps of a run, as the run
// inspector shows them (GET /v1/runs/{id}).
func runModels(t *testing.T, env *stacktest.Env, runID string, hdr ...string) []string {
	t.Helper()
	var run struct {
		Steps []struct{ Kind, Name, Provider string }
	}
	if st := getJSON(t, env.URL+"/v1/runs/"+runID, &run, hdr...); st != 200 {
		t.Fatalf("GET /v1/runs/%s: %d", runID, st)
	}
	var out []string
	for _, s := range run.Steps {
		if s.Kind == store.StepModel {
			out = append(out, s.Provider+"/"+s.Name)
		}
	}
	return out
}

// TestAGUIPickModel: in dev, forwardedProps.model runs the turn on one of
// the agent's models (the mock upstream is asked for the fallback, the run
// record names it), and the turn's run goes on with it after a decision;
// the next turn without it is back on the agent's own model.
func TestAGUIPickModel(t *testing.T) {
	t.Parallel()
	env := pickEnv(t, config.Dev)
	pick := `"forwardedProps":{"model":"openai/backup-model"}`
	body := strings.Replace(aguiInput("th-pick", "run-1", "hello"), `"forwardedProps":{}`, pick, 1)
	s := aguiPost(t, env, "assistant", body)
	checkTerminal(t, s)
	if s.text() != "echo: hello" {
		t.Fatalf("text %q", s.text())
	}
	if m := lastUpstreamModel(t, env); m != "backup-model" {
		t.Fatalf("the upstream was asked for %q, want the picked backup-model", m)
	}
	if got := runModels(t, env, "run-1"); fmt.Sprint(got) != "[openai/backup-model]" {
		t.Fatalf("the run record's model steps are %v", got)
	}

	// A turn that pauses on the picked model resumes on it.
	body = strings.Replace(aguiInput("th-pick", "run-2", "refund my order"), `"forwardedProps":{}`, pick, 1)
	paused := aguiPost(t, env, "assistant", body)
	out, _ := paused.last()["outcome"].(map[string]any)
	if out["type"] != "interrupt" {
		t.Fatalf("want a pause, got %v", paused.last())
	}
	id := out["interrupts"].([]any)[0].(map[string]any)["id"].(string)
	resume := fmt.Sprintf(`{"threadId":"th-pick","runId":"run-3","messages":[],"forwardedProps":{},"resume":[{"interruptId":%q,"status":"resolved","payload":{"approved":true}}]}`, id)
	r := aguiPost(t, env, "assistant", resume)
	checkTerminal(t, r)
	if !strings.HasPrefix(r.text(), "Refund result:") {
		t.Fatalf("resumed text %q", r.text())
	}
	if m := lastUpstreamModel(t, env); m != "backup-model" {
		t.Fatalf("the resumed run asked the upstream for %q, want the turn's backup-model", m)
	}

	// A subagent on the agent's model follows the pick too.
	before := env.Upstream.Count()
	body = strings.Replace(aguiInput("th-pick", "run-5", "research Paris"), `"forwardedProps":{}`, pick, 1)
	sr := aguiPost(t, env, "assistant", body)
	checkTerminal(t, sr)
	if !strings.Contains(sr.text(), "Summary: Facts.") {
		t.Fatalf("the subagent turn answered %q", sr.text())
	}
	reqs := env.Upstream.Requests()[before:]
	if len(reqs) != 3 {
		t.Fatalf("the subagent turn made %d model calls, want 3 (agent, subagent, agent)", len(reqs))
	}
	for _, r := range reqs {
		if r.Request.Model != "backup-model" {
			t.Fatalf("a call of the subagent turn asked for %q, want the picked backup-model", r.Request.Model)
		}
	}

	// Without a pick, the agent's own model answers.
	checkTerminal(t, aguiPost(t, env, "assistant", aguiInput("th-pick", "run-4", "hello again")))
	if m := lastUpstreamModel(t, env); m != "test-model" {
		t.Fatalf("a turn without a pick asked for %q, want the agent's test-model", m)
	}
}

// TestAGUIPickModelRefused: a model that is not one of the agent's, a
// value that is not a model reference, and any pick on `stackbone start`
// are a RUN_ERROR naming why; nothing is stored and the model is not
// called.
func TestAGUIPickModelRefused(t *testing.T) {
	t.Parallel()
	dev := pickEnv(t, config.Dev)
	admin := config.Key{Secret: "sk-pick-admin-0123456789", Tenant: "acme"}
	start := pickEnv(t, config.Start, admin)
	cases := []struct {
		name   string
		env    *stacktest.Env
		tenant string
		model  string
		code   string
		msg    string
		hdr    []string
	}{
		{"not the agent's", dev, "dev", `"openai/gpt-4o"`, "model_not_allowed", "pick one of openai/test-model, openai/backup-model", nil},
		{"not a string", dev, "dev", `42`, "invalid_request", "forwardedProps.model", nil},
		{"start mode", start, "acme", `"openai/backup-model"`, "model_choice_dev_only", "`stackbone dev` only",
			[]string{"Authorization", "Bearer " + admin.Secret}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			thread := fmt.Sprintf("th-refused-%d", i)
			body := strings.Replace(aguiInput(thread, "run-1", "hello"), `"forwardedProps":{}`, `"forwardedProps":{"model":`+c.model+`}`, 1)
			e := checkRunError(t, aguiPost(t, c.env, "assistant", body, c.hdr...), c.code)
			if !strings.Contains(e["message"].(string), c.msg) {
				t.Fatalf("message %q lacks %q", e["message"], c.msg)
			}
			if _, err := c.env.Store.GetThread(t.Context(), c.tenant, thread); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("a refused pick stored thread %s (%v)", thread, err)
			}
			if n := c.env.Upstream.Count(); n != 0 {
				t.Fatalf("a refused pick reached the model (%d calls)", n)
			}
		})
	}
}

package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// queuedAgents are the default agents and "queued", the assistant with
// multitask: enqueue in its agent file.
func queuedAgents(env *stacktest.Env) []*agent.Spec {
	specs := stacktest.DefaultAgents(env, "openai/test-model")
	q := *specs[0]
	q.Name, q.Multitask = "queued", agent.MultitaskEnqueue
	return append(specs, &q)
}

// upstreamControl lets a Node script hold or cut env's model calls: POST
// /hold?marker=M holds the next call after the get_weather step of a turn
// whose last user message holds M, until POST /release?marker=M; POST
// /break?marker=M lets that call stream one piece of its answer, then
// stall until the server goes away from it (a cancel).
func upstreamControl(t *testing.T, env *stacktest.Env) string {
	t.Helper()
	var mu sync.Mutex
	held := map[string]func(){}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := r.URL.Query().Get("marker")
		when := script.When{LastUser: m, LastTool: "get_weather"}
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/hold":
			held[m] = env.Upstream.HoldOnce(when)
		case "/release":
			if rel, ok := held[m]; ok {
				rel()
			}
		case "/break":
			env.Upstream.BreakOnce(when, 1, modeltest.Stall)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(func() {
		srv.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, rel := range held {
			rel()
		}
	})
	return srv.URL
}

// multitaskResult is one case of tests/clients/multitask.mjs.
type multitaskResult struct {
	Name    string   `json:"name"`
	OK      bool     `json:"ok"`
	Error   string   `json:"error"`
	Session string   `json:"session"`
	First   string   `json:"firstMarker"`
	Second  string   `json:"secondMarker"`
	Partial string   `json:"partial"`
	Thread  []string `json:"thread"`
	// QueuedFor is how long after the first turn's end the queued turn's
	// first text came (ms).
	QueuedFor int `json:"queuedFor"`
	// Rejected is how the client surfaced the 409 (reject), FirstEnd how
	// it surfaced the stopped turn's end (interrupt, rollback, reject).
	Rejected json.RawMessage `json:"rejected"`
	FirstEnd json.RawMessage `json:"firstEnd"`
}

// multitaskScript is the default script with a longer answer after the
// weather tool, streamed in several pieces (one of them gets out before a
// cut).
var multitaskScript = `[{"when":{"lastTool":"get_weather","lastUser":"weather report"},` +
	`"reply":{"text":"Tool said: {{lastTool}}, sunny all morning, clouds after noon, a light wind from the west."}},` +
	stacktest.DefaultScript[1:]

// promptsOf are the model requests, on any of envs, whose last user message
// is content (the tool steps after it too), each as role:content lines.
func promptsOf(envs []*stacktest.Env, content string) [][]string {
	var out [][]string
	for _, env := range envs {
		for _, r := range env.Upstream.Requests() {
			msgs := r.Request.Messages
			i := len(msgs) - 1
			for i >= 0 && msgs[i].Role != message.User {
				i--
			}
			if i < 0 || msgs[i].Content != content {
				continue
			}
			var lines []string
			for _, m := range msgs {
				lines = append(lines, string(m.Role)+":"+m.Content)
			}
			out = append(out, lines)
		}
	}
	return out
}

// TestMultitaskClients runs tests/clients/multitask.mjs on SQLite and on
// two replicas of one PostgreSQL database (the first request to one, the
// follow-up to the other): the openai Node SDK on Chat Completions and on
// Responses, @anthropic-ai/sdk, the AI SDK's openai() (Responses) and
// openai.chat(), each with enqueue, interrupt, rollback and reject (the
// script checks what each client surfaces), and the agent file's
// multitask: enqueue. Here, per case: the first turn's tool ran once and
// the model was called twice for it (the tool step, the answer); then
//   - enqueue: the follow-up's one model call saw the first turn's whole
//     answer, and the first question once;
//   - interrupt: the follow-up's one model call saw the first question once
//     and the partial answer the client had streamed;
//   - rollback: the follow-up's one model call saw the follow-up alone;
//   - reject: the follow-up never reached the model.
func TestMultitaskClients(t *testing.T) {
	t.Parallel()
	node, dir := nodeFixture(t, "clients", filepath.Join("openai", "package.json"), filepath.Join("ai", "package.json"),
		filepath.Join("@anthropic-ai", "sdk", "package.json"))
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			a, b := stacktest.Replicas(t, driver == "postgres", stacktest.Options{Script: multitaskScript, Agents: queuedAgents})
			envs := []*stacktest.Env{a}
			if b != a {
				envs = append(envs, b)
			}
			ctl := upstreamControl(t, a)
			var out struct {
				Results []multitaskResult `json:"results"`
			}
			runErr := runNodeScript(t, node, dir, "multitask.mjs", &out, a.URL, b.URL, ctl, "mt-"+driver)
			if len(out.Results) != 21 {
				t.Fatalf("want 21 cases, got %d: %+v (%v)", len(out.Results), out.Results, runErr)
			}
			for _, r := range out.Results {
				if !r.OK {
					t.Errorf("%s: %s", r.Name, r.Error)
					continue
				}
				checkMultitaskCase(t, envs, r)
				if strings.HasSuffix(r.Name, "enqueue") {
					t.Logf("%s (%s): the queued turn's first text %d ms after the first turn's end", r.Name, driver, r.QueuedFor)
				} else {
					t.Logf("%s (%s): the stopped turn ended %s; rejected %s", r.Name, driver, r.FirstEnd, r.Rejected)
				}
			}
			weather := 0
			for _, env := range envs {
				weather += env.Calls.Get("get_weather")
			}
			if weather != len(out.Results) {
				t.Errorf("get_weather ran %d times for %d first turns; want once each", weather, len(out.Results))
			}
			if runErr != nil && !t.Failed() {
				t.Fatal(runErr)
			}
		})
	}
}

// checkMultitaskCase checks what the model saw in one case of
// multitask.mjs.
func checkMultitaskCase(t *testing.T, envs []*stacktest.Env, r multitaskResult) {
	t.Helper()
	strategy := r.Name[strings.LastIndex(r.Name, " ")+1:]
	if got := promptsOf(envs, r.First); len(got) != 2 {
		t.Errorf("%s: %d model calls for the first turn; want 2 (the tool step, the answer): %q", r.Name, len(got), got)
		return
	}
	got := promptsOf(envs, r.Second)
	if strategy == "reject" {
		if len(got) != 0 {
			t.Errorf("%s: the rejected follow-up reached the model: %q", r.Name, got)
		}
		return
	}
	if len(got) != 1 {
		t.Errorf("%s: %d model calls for the follow-up; want 1: %q", r.Name, len(got), got)
		return
	}
	p := got[0]
	questions := 0
	for _, l := range p {
		if l == "user:"+r.First {
			questions++
		}
	}
	answer := ""
	if i := slices.Index(p, "user:"+r.Second); i > 0 && strings.HasPrefix(p[i-1], "assistant:") {
		answer = strings.TrimPrefix(p[i-1], "assistant:")
	}
	full := `Tool said: {"city":"Paris","temp_c":21}, sunny all morning, clouds after noon, a light wind from the west.`
	switch strategy {
	case "enqueue":
		if questions != 1 || answer != full {
			t.Errorf("%s: the queued turn's model saw %q; want the first question once and its answer %q", r.Name, p, full)
		}
		// The queued turn began once the first had ended, as the runs
		// record them.
		runs, err := envs[0].Store.ListRuns(t.Context(), "dev", r.Session)
		if err != nil || len(runs) != 2 || runs[0].EndedAt == nil || runs[1].StartedAt.Before(*runs[0].EndedAt) {
			t.Errorf("%s: runs %+v (%v); want the queued run started after the first ended", r.Name, runs, err)
		}
	case "interrupt":
		if questions != 1 || answer == "" || answer == full || !strings.HasPrefix(full, answer) || !strings.HasSuffix(r.Partial, answer) {
			t.Errorf("%s: the model saw %q after the interrupt; want the first question once and the partial answer (the client saw %q)", r.Name, p, r.Partial)
		}
	case "rollback":
		if !slices.Equal(p, []string{"user:" + r.Second}) {
			t.Errorf("%s: the model saw %q after the rollback; want the follow-up alone", r.Name, p)
		}
	}
}

// TestMultitaskAGUIClients runs tests/agui/multitask.mjs on SQLite and on
// two replicas of one PostgreSQL database: @ag-ui/client 1.0, 0.0.59 and
// headless CopilotKit 1.75 each send a second message with
// forwardedProps.multitask enqueue, interrupt, rollback and reject while a
// run streams (the script checks the events each client surfaces:
// RUN_FINISHED and its outcome, RUN_ERROR, MESSAGES_SNAPSHOT). Here, as
// for the other wires: the first turn's tool ran once and the model was
// called twice for it, and the follow-up's model call saw what its
// strategy leaves (the whole first answer, the partial one, nothing of the
// first turn, or no call at all).
func TestMultitaskAGUIClients(t *testing.T) {
	t.Parallel()
	node, dir := nodeFixture(t, "agui", filepath.Join("@ag-ui", "client", "package.json"),
		filepath.Join("agui-client-0059", "package.json"), filepath.Join("@copilotkit", "core", "package.json"))
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			a, b := stacktest.Replicas(t, driver == "postgres", stacktest.Options{Script: multitaskScript})
			envs := []*stacktest.Env{a}
			if b != a {
				envs = append(envs, b)
			}
			var out struct {
				Results []multitaskResult `json:"results"`
			}
			runErr := runNodeScript(t, node, dir, "multitask.mjs", &out, a.URL, b.URL, upstreamControl(t, a), "mtagui-"+driver)
			if len(out.Results) != 12 {
				t.Fatalf("want 12 cases, got %d: %+v (%v)", len(out.Results), out.Results, runErr)
			}
			for _, r := range out.Results {
				if !r.OK {
					t.Errorf("%s: %s", r.Name, r.Error)
					continue
				}
				checkMultitaskCase(t, envs, r)
				if strings.HasSuffix(r.Name, "enqueue") {
					t.Logf("%s (%s): the queued run started %d ms after the first run's RUN_FINISHED", r.Name, driver, r.QueuedFor)
				}
			}
			weather := 0
			for _, env := range envs {
				weather += env.Calls.Get("get_weather")
			}
			if weather != len(out.Results) {
				t.Errorf("get_weather ran %d times for %d first turns; want once each", weather, len(out.Results))
			}
			if runErr != nil && !t.Failed() {
				t.Fatal(runErr)
			}
		})
	}
}

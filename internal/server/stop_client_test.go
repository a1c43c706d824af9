package server_test

import (
	"path/filepath"
	"testing"

	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestStopClients: Stop, then a new message at once, with each client in
// its default mode (tests/clients/stop.mjs: the openai Node SDK and the AI
// SDK on Chat Completions and on Responses, @anthropic-ai/sdk on Messages;
// tests/agui/stop.mjs:
// @ag-ui/client's abortRun).
// Each gets the new message's answer, with no 409 and no lease wait; the
// time from the stop to the answer is logged (the README quotes it).
func TestStopClients(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	release := env.Upstream.Stall(script.When{LastUser: "long story"})
	defer release()

	node, dir := nodeFixture(t, "clients", filepath.Join("openai", "package.json"), filepath.Join("ai", "package.json"))
	var out struct {
		Results []struct {
			Name   string `json:"name"`
			OK     bool   `json:"ok"`
			Error  string `json:"error"`
			Millis int    `json:"stopToAnswerMs"`
		} `json:"results"`
	}
	if err := runNodeScript(t, node, dir, "stop.mjs", &out, env.URL, "assistant", "stop"); err != nil && len(out.Results) == 0 {
		t.Fatal(err)
	}
	if len(out.Results) != 5 {
		t.Fatalf("want 5 cases, got %+v", out.Results)
	}
	for _, r := range out.Results {
		if !r.OK {
			t.Errorf("%s: %s", r.Name, r.Error)
			continue
		}
		t.Logf("%s: stop → answer %d ms", r.Name, r.Millis)
	}

	anode, adir := nodeFixture(t, "agui", filepath.Join("@ag-ui", "client", "package.json"))
	var ag struct {
		Millis int      `json:"stopToAnswerMs"`
		Answer string   `json:"answer"`
		Error  string   `json:"error"`
		Events []string `json:"secondEvents"`
	}
	if err := runNodeScript(t, anode, adir, "stop.mjs", &ag, env.URL, "stop-agui"); err != nil {
		t.Fatal(err)
	}
	if ag.Error != "" || ag.Answer != "echo: agui: never mind, hi" {
		t.Fatalf("@ag-ui/client after the stop: answer %q, error %q, events %v", ag.Answer, ag.Error, ag.Events)
	}
	t.Logf("@ag-ui/client: stop → answer %d ms", ag.Millis)
}

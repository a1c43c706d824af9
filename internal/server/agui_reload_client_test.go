package server_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/testwait"
)

// TestAGUIReloadClients runs tests/agui/reload.mjs, the reload-safe chat
// recipes: a page starts a run on a turn held at the model and reloads
// (its run aborted); the reloaded page's agent, with the same threadId and
// no messages, reattaches — @ag-ui/client 1.0's HttpAgent through
// runAgent(), headless CopilotKit 1.75 through connectAgent() with an
// HttpAgent whose connect() runs the thread. Once the reloaded page's run
// started the model answers: the page holds the question and the whole
// answer, its run ran from RUN_STARTED to RUN_FINISHED with the snapshots,
// the clients warned of nothing, and the model was asked once.
func TestAGUIReloadClients(t *testing.T) {
	t.Parallel()
	node, dir := nodeFixture(t, "agui", filepath.Join("@ag-ui", "client", "package.json"), filepath.Join("@copilotkit", "core", "package.json"))
	for _, which := range []string{"httpagent", "copilotkit"} {
		t.Run(which, func(t *testing.T) {
			t.Parallel()
			env := stacktest.New(t, stacktest.Options{})
			release := env.Upstream.HoldOnce(script.When{LastUser: "long story"})
			t.Cleanup(release)
			ready := filepath.Join(t.TempDir(), "ready")
			var out struct {
				Answer   string     `json:"answer"`
				Messages [][]string `json:"messages"`
				Events   []string   `json:"events"`
				Warnings []string   `json:"warnings"`
				Error    string     `json:"error"`
			}
			done := make(chan error, 1)
			go func() {
				done <- runNodeScript(t, node, dir, "reload.mjs", &out, env.URL, "reload-"+which, which, ready)
			}()
			testwait.Until(t, "the reloaded page's run to start", func() bool {
				_, err := os.Stat(ready)
				return err == nil
			})
			if n := env.Upstream.Count(); n != 1 {
				t.Fatalf("%d model calls before the answer; want the held one", n)
			}
			release()
			if err := testwait.Recv(t, done, "reload.mjs"); err != nil {
				t.Fatal(err)
			}
			if out.Error != "" || len(out.Warnings) > 0 {
				t.Fatalf("%s: error %q, warnings %v (events %v)", which, out.Error, out.Warnings, out.Events)
			}
			want := [][]string{{"user", "tell me a long story"}, {"assistant", reloadAnswer}}
			if out.Answer != reloadAnswer || !slices.EqualFunc(out.Messages, want, slices.Equal) {
				t.Fatalf("%s: the reloaded page holds %v (answer %q); want %v", which, out.Messages, out.Answer, want)
			}
			ev := strings.Join(out.Events, " ")
			if len(out.Events) == 0 || out.Events[0] != "RUN_STARTED" || out.Events[len(out.Events)-1] != "RUN_FINISHED" ||
				!strings.Contains(ev, "STATE_SNAPSHOT") || !strings.Contains(ev, "MESSAGES_SNAPSHOT") || !strings.Contains(ev, "TEXT_MESSAGE_CONTENT") {
				t.Fatalf("%s: the reloaded page's run: %v", which, out.Events)
			}
			if n := env.Upstream.Count(); n != 1 {
				t.Fatalf("%d model calls; want 1", n)
			}
		})
	}
}

package server_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestAGUIBranchesClients runs tests/agui/branches.mjs on SQLite and
// PostgreSQL: @ag-ui/client 1.0, 0.0.59 (what CopilotKit pins) and headless
// CopilotKit 1.75 each run a turn, a second turn, a regenerate of the second
// answer (the messages up to the second question, with their ids), an edit
// of the second question (same id, new text) and a turn going on from the
// edit; each branching run's MESSAGES_SNAPSHOT holds exactly its branch (the
// script checks). Here: the model saw exactly the branch on each run, and
// the thread keeps every answer on three branches, the edit's line as its
// head. A fourth thread branches from before a tool changed the shared
// state, and the branching run starts from the state as it was there.
func TestAGUIBranchesClients(t *testing.T) {
	t.Parallel()
	node, dir := nodeFixture(t, "agui", filepath.Join("@ag-ui", "client", "package.json"),
		filepath.Join("agui-client-0059", "package.json"), filepath.Join("@copilotkit", "core", "package.json"))
	for driver, open := range branchDrivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			env := stacktest.New(t, stacktest.Options{Store: open(t)})
			runClientCases(t, node, dir, "branches.mjs", 4, env.URL, "aguibr")
			for _, tag := range []string{"v1", "v0059", "copilotkit"} {
				checkAGUIBranches(t, env, tag, "aguibr-"+tag)
			}
			checkAGUIStateBranch(t, env, "aguibr-state")
		})
	}
}

// checkAGUIBranches checks what the model saw and what the store holds
// after branches.mjs's conversation for tag on thread id.
func checkAGUIBranches(t *testing.T, env *stacktest.Env, tag, id string) {
	t.Helper()
	q1, q2, q2e, q3 := tag+" first question", tag+" second question", tag+" second question, edited", tag+" after the edit"
	first := []string{"user:" + q1, "assistant:echo: " + q1}
	second := append(slices.Clone(first), "user:"+q2)
	if got := modelSaw(env, q2); len(got) != 2 || !slices.Equal(got[0], second) || !slices.Equal(got[1], second) {
		t.Errorf("%s: the second question and its regenerate: the model saw %q; want twice %q", tag, got, second)
	}
	edited := append(slices.Clone(first), "user:"+q2e)
	if got := modelSaw(env, q2e); len(got) != 1 || !slices.Equal(got[0], edited) {
		t.Errorf("%s: the edit: the model saw %q; want %q", tag, got, edited)
	}
	on := append(slices.Clone(edited), "assistant:echo: "+q2e, "user:"+q3)
	if got := modelSaw(env, q3); len(got) != 1 || !slices.Equal(got[0], on) {
		t.Errorf("%s: after the edit: the model saw %q; want %q", tag, got, on)
	}
	msgs, err := env.Store.Messages(context.Background(), "dev", id)
	if err != nil {
		t.Fatal(err)
	}
	var head []string
	for _, m := range msgs {
		head = append(head, string(m.Role)+":"+m.Content)
	}
	if want := append(slices.Clone(on), "assistant:echo: "+q3); !slices.Equal(head, want) {
		t.Errorf("%s: the thread's conversation is %q; want %q", tag, head, want)
	}
	bs, err := env.Store.Branches(context.Background(), "dev", id)
	if err != nil || len(bs) != 3 {
		t.Errorf("%s: branches %+v, %v; want 3 (the first line, the regenerate, the edit)", tag, bs, err)
	}
}

// checkAGUIStateBranch checks the state case of branches.mjs: the model
// saw only the first turn and the edited question, and the thread's state
// is the client's last change.
func checkAGUIStateBranch(t *testing.T, env *stacktest.Env, id string) {
	t.Helper()
	q2e := "state second note, edited"
	want := []string{"user:state first note", "assistant:echo: state first note", "user:" + q2e}
	if got := modelSaw(env, q2e); len(got) != 2 || !slices.Equal(got[0], want) || !slices.Equal(got[1], want) {
		t.Errorf("state: the edit and its regenerate: the model saw %q; want twice %q", got, want)
	}
	if got := env.Calls.Get("set_draft"); got != 1 {
		t.Errorf("set_draft ran %d times; want once", got)
	}
	var st map[string]any
	if err := json.Unmarshal(env.Thread(t, "dev", id).State, &st); err != nil || st["draft"] != "v2" {
		t.Errorf("state: the thread's state is %v (%v); want draft v2", st, err)
	}
	bs, err := env.Store.Branches(context.Background(), "dev", id)
	if err != nil || len(bs) != 3 {
		t.Errorf("state: branches %+v, %v; want 3 (the first line, the edit, its regenerate)", bs, err)
	}
}

package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/tool"
)

// stateKeys are the keys random edits use: JSON Pointer's escapes ("/" and
// "~") and other awkward names among them. The empty key is left out:
// evanphx/json-patch v5.9.11 cannot address it inside a path ("//0" fails),
// although the patches are right (fast-json-patch, which @ag-ui/client
// uses, applies them).
var stateKeys = []string{"a", "b", "a/b", "~", "~1", "~0", "x~/y", "/", " ", "-", "0", "ünï", `q"t`, "deep", "~01"}

// stateMutator makes random edits to a JSON document.
type stateMutator struct {
	mu  sync.Mutex
	rnd *rand.Rand
}

func (m *stateMutator) value(depth int) any {
	switch n := m.rnd.IntN(10); {
	case n == 0:
		return nil
	case n == 1:
		return m.rnd.IntN(2) == 0
	case n == 2:
		return m.rnd.IntN(1000) - 500
	case n == 3:
		return float64(m.rnd.IntN(100)) / 4
	case n <= 5 || depth >= 3:
		return stateKeys[m.rnd.IntN(len(stateKeys))] + fmt.Sprint(m.rnd.IntN(10))
	case n <= 7:
		obj := map[string]any{}
		for range m.rnd.IntN(4) {
			obj[stateKeys[m.rnd.IntN(len(stateKeys))]] = m.value(depth + 1)
		}
		return obj
	default:
		arr := []any{}
		for range m.rnd.IntN(4) {
			arr = append(arr, m.value(depth+1))
		}
		return arr
	}
}

// edit changes one random place of doc (an object or array) and returns it.
func (m *stateMutator) edit(doc any) any {
	switch x := doc.(type) {
	case map[string]any:
		if len(x) > 0 && m.rnd.IntN(3) == 0 {
			k := sortedKeys(x)[m.rnd.IntN(len(x))]
			switch c := x[k].(type) {
			case map[string]any, []any:
				x[k] = m.edit(c)
				return x
			}
		}
		k := stateKeys[m.rnd.IntN(len(stateKeys))]
		if _, ok := x[k]; ok && m.rnd.IntN(3) == 0 {
			delete(x, k)
		} else {
			x[k] = m.value(0)
		}
		return x
	case []any:
		if len(x) > 0 && m.rnd.IntN(3) == 0 {
			i := m.rnd.IntN(len(x))
			switch c := x[i].(type) {
			case map[string]any, []any:
				x[i] = m.edit(c)
				return x
			}
		}
		switch op := m.rnd.IntN(4); {
		case op == 0 || len(x) == 0:
			return append(x, m.value(1))
		case op == 1:
			i := m.rnd.IntN(len(x))
			return append(x[:i], x[i+1:]...)
		case op == 2:
			i := m.rnd.IntN(len(x) + 1)
			return append(x[:i], append([]any{m.value(1)}, x[i:]...)...)
		default:
			x[m.rnd.IntN(len(x))] = m.value(1)
			return x
		}
	}
	return doc
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// tool returns a tool that applies a few random edits to the shared state.
func (m *stateMutator) tool(name string) *tool.Tool {
	return &tool.Tool{Name: name, Description: "Edit the shared state at random",
		Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
			m.mu.Lock()
			defer m.mu.Unlock()
			st := map[string]any{}
			if err := json.Unmarshal(c.State, &st); err != nil {
				return tool.Result{}, err
			}
			var doc any = st
			for range 1 + m.rnd.IntN(4) {
				doc = m.edit(doc)
			}
			b, err := json.Marshal(doc)
			return tool.Result{Content: `{"ok":true}`, State: b}, err
		}}
}

func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// TestAGUIStateDeltasReplayToStoredState: whatever a tool does to the shared
// state, a client that applies the streamed STATE_DELTA patches (RFC 6902)
// to the run's STATE_SNAPSHOT ends with exactly the state the server stored.
func TestAGUIStateDeltasReplayToStoredState(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("AGUI_STATE_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d", seed)
	mut := &stateMutator{rnd: rand.New(rand.NewPCG(seed, 7))}
	script := `[
	 {"when":{"lastTool":"mutate_b"},"reply":{"text":"done"}},
	 {"when":{"lastTool":"mutate_a"},"reply":{"toolCalls":[{"name":"mutate_b"}]}},
	 {"reply":{"toolCalls":[{"name":"mutate_a"},{"name":"mutate_a"}]}}
	]`
	env := stacktest.New(t, stacktest.Options{Script: script, Agents: func(env *stacktest.Env) []*agent.Spec {
		return []*agent.Spec{{Name: "mutator", Model: "openai/test-model",
			Tools: []*tool.Tool{mut.tool("mutate_a"), mut.tool("mutate_b")}}}
	}})

	var client any // the state a client holds across runs
	deltas := 0
	for run := range 25 {
		s := aguiRead(t, env, "mutator", aguiInput("th-state", fmt.Sprintf("run-%d", run), "mutate"), true)
		checkTerminal(t, s)
		snap := s.first("STATE_SNAPSHOT")
		if snap == nil {
			t.Fatalf("run %d has no STATE_SNAPSHOT", run)
		}
		snapJSON, _ := json.Marshal(snap["snapshot"])
		if run > 0 && !reflect.DeepEqual(decodeJSON(t, snapJSON), client) {
			t.Fatalf("run %d opens with %s, but the client holds %v", run, snapJSON, client)
		}
		doc := snapJSON
		for _, d := range s.all("STATE_DELTA") {
			ops, _ := d["delta"].([]any)
			for _, op := range ops {
				o := op.(map[string]any)
				if _, has := o["value"]; (o["op"] == "add" || o["op"] == "replace" || o["op"] == "test") && !has {
					t.Fatalf("an %s without value: %v", o["op"], o)
				}
			}
			raw, _ := json.Marshal(d["delta"])
			patch, err := jsonpatch.DecodePatch(raw)
			if err != nil {
				t.Fatalf("run %d: delta %s is not a JSON Patch: %v", run, raw, err)
			}
			next, err := patch.Apply(doc)
			if err != nil {
				t.Fatalf("run %d: delta %s does not apply to %s: %v", run, raw, doc, err)
			}
			doc = next
			deltas++
		}
		client = decodeJSON(t, doc)
		view := call(t, "GET", env.URL+"/v1/threads/th-state", "")
		var th struct {
			State json.RawMessage `json:"state"`
		}
		if err := json.Unmarshal(view.body, &th); err != nil {
			t.Fatal(err)
		}
		if stored := decodeJSON(t, th.State); !reflect.DeepEqual(client, stored) {
			t.Fatalf("run %d: patched client state\n%s\n!= stored state\n%s\nsnapshot %s\ndeltas %s", run, doc, th.State, snapJSON, aguiJSON(s.all("STATE_DELTA")))
		}
	}
	if deltas < 25 {
		t.Fatalf("only %d deltas were streamed", deltas)
	}
}

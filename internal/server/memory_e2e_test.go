package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/agent/tsload"
	"github.com/stackbone/stackbone/internal/app"
	"github.com/stackbone/stackbone/internal/clock"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/memory"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/testwait"
	"github.com/stackbone/stackbone/internal/tool"
)

// memScript drives the memory agent: "remember …" calls remember, "which
// tea …" recalls, "note …" runs the TypeScript tool that uses ctx.store.
const memScript = `[
 {"when": {"lastTool": "remember"}, "reply": {"text": "Noted."}},
 {"when": {"lastTool": "recall"}, "reply": {"text": "Recalled: {{lastTool}}"}},
 {"when": {"lastTool": "save_note"}, "reply": {"text": "Note tool: {{lastTool}}"}},
 {"when": {"lastUser": "remember"}, "reply": {"toolCalls": [{"name": "remember", "arguments": {"fact": "The user's favourite tea is genmaicha", "key": "tea"}}]}},
 {"when": {"lastUser": "which tea"}, "reply": {"toolCalls": [{"name": "recall", "arguments": {"query": "favourite tea"}}]}},
 {"when": {"lastUser": "note"}, "reply": {"toolCalls": [{"name": "save_note", "arguments": {"text": "buy green tea and rice"}}]}},
 {"reply": {"text": "echo: {{lastUser}}"}}
]`

// memAgent is an agent file with memory: true and a tool that uses every
// ctx.store operation.
const memAgent = `import { defineDeepAgent, tool } from 'stackbone';
export default defineDeepAgent({
  name: 'mem', model: 'openai/test-model', instructions: 'You remember things.',
  memory: true,
  tools: {
    save_note: tool({
      description: 'Save a note',
      parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
      async execute({ text }, ctx) {
        const ns = ['notes', ctx.threadId];
        await ctx.store.put(ns, 'n1', { text, kind: 'note' }, { ttl: 60, index: ['text'] });
        await ctx.store.put(ns, 'n2', { text: 'call the plumber', kind: 'todo' });
        const got = await ctx.store.get(ns, 'n1');
        const missing = await ctx.store.get(ns, 'nope');
        const found = await ctx.store.search(['notes'], { query: 'green tea', limit: 1 });
        const todos = await ctx.store.search(['notes'], { filter: { kind: 'todo' } });
        await ctx.store.delete(ns, 'n2');
        const after = await ctx.store.search(['notes']);
        const nss = await ctx.store.listNamespaces(['notes']);
        let refused = '';
        try { await ctx.store.put(['bad.label'], 'k', { a: 1 }); } catch (e) { refused = e.message; }
        return { saved: got.value.text, expires: typeof got.expiresAt, missing, nearest: found.map((i) => i.key),
          scored: typeof found[0].score, todos: todos.map((i) => i.key), left: after.length, namespaces: nss, refused };
      },
    }),
  },
});
`

// memStack is a stack serving memAgent with the mock's embeddings
// (stackbone.json "embeddings"), on st (nil: SQLite).
func memStack(t *testing.T, st store.Store, mode config.Mode, keys []config.Key, clk clock.Clock) *stacktest.Env {
	t.Helper()
	opts := memOptions(t, clk)
	opts.Store, opts.Mode, opts.Keys = st, mode, keys
	return stacktest.New(t, opts)
}

// memOptions are the options of a stack serving the memory agent (mem.ts,
// memory: true) with the mock's embeddings; clk, when not nil, is its
// clock.
func memOptions(t *testing.T, clk clock.Clock) stacktest.Options {
	t.Helper()
	return stacktest.Options{Script: memScript,
		Configure: func(cfg *config.Config) {
			if clk != nil {
				cfg.Clock = clk
			}
			if err := os.WriteFile(filepath.Join(cfg.Dir, "stackbone.json"), []byte(`{"embeddings": "openai/text-embedding-3-small"}`), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		Agents: func(env *stacktest.Env) []*agent.Spec {
			file := filepath.Join(env.Config.Dir, "agents", "mem.ts")
			if err := os.WriteFile(file, []byte(memAgent), 0o644); err != nil {
				t.Fatal(err)
			}
			spec, err := tsload.LoadFile(context.Background(), env.Config.Dir, file, tsload.Options{})
			if err != nil {
				t.Fatalf("load the agent file: %v", err)
			}
			return []*agent.Spec{spec}
		}}
}

// onBothStores runs fn on SQLite and on PostgreSQL (bothStores).
func onBothStores(t *testing.T, fn func(t *testing.T, st store.Store)) {
	for _, d := range bothStores {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			fn(t, d.open(t))
		})
	}
}

// memTurn runs one durable chat turn of the memory agent and returns its
// answer.
func memTurn(t *testing.T, env *stacktest.Env, thread, user, text string, hdr ...string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "mem", "messages": []map[string]string{{"role": "user", "content": text}}})
	h := append([]string{"x-stackbone-session", thread}, hdr...)
	if user != "" {
		h = append(h, "x-stackbone-user", user)
	}
	r := call(t, "POST", env.URL+"/v1/chat/completions", string(body), h...)
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if r.status != 200 || json.Unmarshal(r.body, &out) != nil || len(out.Choices) != 1 {
		t.Fatalf("turn %q on %s: %d %s", text, thread, r.status, r.body)
	}
	return out.Choices[0].Message.Content
}

// TestMemoryToolsAcrossThreads: an agent with memory: true remembers a
// fact in one thread (the model calls remember) and recalls it in another
// thread of the same user (the model calls recall and gets the fact as the
// tool result), by semantic search on the mock's embeddings; another
// user's recall finds nothing. On SQLite and PostgreSQL.
func TestMemoryToolsAcrossThreads(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, st store.Store) {
		env := memStack(t, st, config.Dev, nil, nil)
		if got := memTurn(t, env, "thread-a", "u1", "Please remember: my favourite tea is genmaicha"); got != "Noted." {
			t.Fatalf("first turn: %q", got)
		}
		if n := env.Upstream.Count(); n != 2 {
			t.Fatalf("model calls after the first turn: %d", n)
		}
		it, err := env.Runner.Memory.Get(t.Context(), "dev", []string{"users", "u1"}, "tea", false)
		if err != nil {
			t.Fatalf("the remembered fact: %v", err)
		}
		if !strings.Contains(string(it.Value), "genmaicha") || !it.Indexed {
			t.Fatalf("stored fact: %s (indexed %v)", it.Value, it.Indexed)
		}
		got := memTurn(t, env, "thread-b", "u1", "Which tea do I like?")
		if n := env.Upstream.Count(); n != 4 {
			t.Fatalf("model calls after the second turn: %d", n)
		}
		res := lastToolResult(t, env)
		if !strings.Contains(res, "genmaicha") || !strings.Contains(res, `"key":"tea"`) || !strings.Contains(res, `"score":`) {
			t.Fatalf("recall's result: %s", res)
		}
		if !strings.Contains(got, "genmaicha") {
			t.Fatalf("second turn: %q", got)
		}
		if n := len(env.Upstream.Embeddings()); n != 2 {
			t.Fatalf("embeddings calls: %d (the put, the query)", n)
		}
		memTurn(t, env, "thread-c", "u2", "Which tea do I like?")
		if res := lastToolResult(t, env); res != `{"memories":[]}` {
			t.Fatalf("another user's recall: %s", res)
		}
		memTurn(t, env, "thread-d", "", "Which tea do I like?")
		if res := lastToolResult(t, env); res != `{"memories":[]}` {
			t.Fatalf("an anonymous recall: %s", res)
		}
		if r := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"mem","messages":[{"role":"user","content":"hi"}]}`,
			"x-stackbone-user", "a.b"); r.status != 400 || !strings.Contains(string(r.body), "x-stackbone-user") {
			t.Fatalf("a dotted user id: %d %s", r.status, r.body)
		}
	})
}

// TestMemoryStoreFromATSTool: a TypeScript tool puts, gets, searches
// (semantic and filtered), deletes and lists namespaces through ctx.store,
// and a refused put rejects with the store's reason.
func TestMemoryStoreFromATSTool(t *testing.T) {
	t.Parallel()
	env := memStack(t, nil, config.Dev, nil, nil)
	memTurn(t, env, "notes-1", "", "note this")
	var res struct {
		Saved, Expires, Refused string
		Missing                 any
		Nearest, Todos          []string
		Scored                  string
		Left                    int
		Namespaces              [][]string
	}
	raw := lastToolResult(t, env)
	if err := json.Unmarshal([]byte(raw), &res); err != nil {
		t.Fatalf("tool result %s: %v", raw, err)
	}
	if res.Saved != "buy green tea and rice" || res.Expires != "string" || res.Missing != nil || len(res.Nearest) != 1 || res.Nearest[0] != "n1" ||
		res.Scored != "number" || len(res.Todos) != 1 || res.Todos[0] != "n2" || res.Left != 1 ||
		len(res.Namespaces) != 1 || strings.Join(res.Namespaces[0], "/") != "notes/notes-1" ||
		!strings.Contains(res.Refused, "ctx.store.put") || !strings.Contains(res.Refused, "'.'") {
		t.Fatalf("tool result: %s", raw)
	}
}

type storeItem struct {
	Namespace []string        `json:"namespace"`
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	ExpiresAt *time.Time      `json:"expires_at"`
	Score     *float64        `json:"score"`
}

func searchItems(t *testing.T, env *stacktest.Env, body string, hdr ...string) []storeItem {
	t.Helper()
	r := call(t, "POST", env.URL+"/v1/store/items/search", body, hdr...)
	var out struct {
		Items []storeItem `json:"items"`
	}
	if r.status != 200 || json.Unmarshal(r.body, &out) != nil || out.Items == nil {
		t.Fatalf("search %s: %d %s", body, r.status, r.body)
	}
	return out.Items
}

func namespaces(t *testing.T, env *stacktest.Env, body string, hdr ...string) string {
	t.Helper()
	r := call(t, "POST", env.URL+"/v1/store/namespaces", body, hdr...)
	var out struct {
		Namespaces [][]string `json:"namespaces"`
	}
	if r.status != 200 || json.Unmarshal(r.body, &out) != nil || out.Namespaces == nil {
		t.Fatalf("namespaces %s: %d %s", body, r.status, r.body)
	}
	var parts []string
	for _, ns := range out.Namespaces {
		parts = append(parts, strings.Join(ns, "."))
	}
	return strings.Join(parts, " ")
}

func badRequest(t *testing.T, what string, r apiResp, param string) {
	t.Helper()
	var e schedErr
	if r.status != 400 || json.Unmarshal(r.body, &e) != nil || e.Error.Type != "invalid_request_error" || (param != "" && e.Error.Param != param) {
		t.Fatalf("%s: want a 400 on %q, got %d %s", what, param, r.status, r.body)
	}
}

// TestStoreAPI: the /v1/store routes with LangGraph's request shapes: put
// (204), get by dotted namespace, semantic search with a query and a
// filter, namespaces with prefix and max_depth, delete; bad requests are
// 400s in the API's error format that write nothing. On SQLite and
// PostgreSQL.
func TestStoreAPI(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, st store.Store) {
		env := memStack(t, st, config.Dev, nil, nil)
		for _, b := range []string{
			`{"namespace":["users","u1","prefs"],"key":"drink","value":{"text":"likes green tea","kind":"pref"},"index":null,"ttl":null}`,
			`{"namespace":["users","u1","prefs"],"key":"editor","value":{"text":"uses neovim for go","kind":"pref"},"index":["text"]}`,
			`{"namespace":["users","u1"],"key":"city","value":{"text":"lives in lyon","kind":"fact"},"index":false,"ttl":30}`,
			`{"namespace":["users","u2"],"key":"city","value":{"text":"lives in oslo","kind":"fact"}}`,
		} {
			if r := call(t, "PUT", env.URL+"/v1/store/items", b); r.status != 204 {
				t.Fatalf("put %s: %d %s", b, r.status, r.body)
			}
		}
		r := call(t, "GET", env.URL+"/v1/store/items?namespace=users.u1.prefs&key=drink", "")
		var it storeItem
		if r.status != 200 || json.Unmarshal(r.body, &it) != nil || it.Key != "drink" || strings.Join(it.Namespace, ".") != "users.u1.prefs" ||
			!strings.Contains(string(it.Value), "green tea") || it.CreatedAt.IsZero() || it.ExpiresAt != nil {
			t.Fatalf("get: %d %s", r.status, r.body)
		}
		r = call(t, "GET", env.URL+"/v1/store/items?namespace=users.u1&key=city&refresh_ttl=true", "")
		if r.status != 200 || json.Unmarshal(r.body, &it) != nil || it.ExpiresAt == nil {
			t.Fatalf("get with a ttl: %d %s", r.status, r.body)
		}
		if r := call(t, "GET", env.URL+"/v1/store/items?namespace=users.u1&key=nope", ""); r.status != 404 {
			t.Fatalf("get unknown: %d %s", r.status, r.body)
		}
		items := searchItems(t, env, `{"namespace_prefix":["users","u1"],"query":"what tea does the user drink","limit":2}`)
		if len(items) != 2 || items[0].Key != "drink" || items[0].Score == nil {
			t.Fatalf("semantic search: %+v", items)
		}
		items = searchItems(t, env, `{"namespace_prefix":["users"],"filter":{"kind":"fact"},"limit":10,"offset":0}`)
		if len(items) != 2 || items[0].Score != nil {
			t.Fatalf("filtered search: %+v", items)
		}
		if got := namespaces(t, env, `{"prefix":["users"],"max_depth":2,"limit":10,"offset":0}`); got != "users.u1 users.u2" {
			t.Fatalf("namespaces max_depth 2: %q", got)
		}
		if got := namespaces(t, env, `{"suffix":["prefs"]}`); got != "users.u1.prefs" {
			t.Fatalf("namespaces suffix: %q", got)
		}
		if r := call(t, "DELETE", env.URL+"/v1/store/items", `{"namespace":["users","u2"],"key":"city"}`); r.status != 204 {
			t.Fatalf("delete: %d %s", r.status, r.body)
		}
		if got := namespaces(t, env, ``); got != "users.u1 users.u1.prefs" {
			t.Fatalf("namespaces after the delete: %q", got)
		}

		before := len(searchItems(t, env, `{"limit":100}`))
		for _, c := range []struct{ body, param string }{
			{`{"namespace":["users","x"],"key":"k","value":[1,2]}`, "value"},
			{`{"namespace":["users.x"],"key":"k","value":{"a":1}}`, "namespace"},
			{`{"namespace":[],"key":"k","value":{"a":1}}`, "namespace"},
			{`{"namespace":["users","x"],"key":"","value":{"a":1}}`, "key"},
			{`{"namespace":["users","x"],"key":"k","value":{"a":1},"ttl":-5}`, "ttl"},
			{`{"namespace":["users","x"],"key":"k","value":{"a":1},"index":"text"}`, "index"},
			{`{"namespace":["users","x"],"key":"k","value":{"a":"` + strings.Repeat("x", store.MaxMemoryValueBytes) + `"}}`, "value"},
			{`{"namespace":["users","x"],"key":"k","value":{"a":1},"extra":true}`, ""},
		} {
			badRequest(t, "put "+c.body[:min(len(c.body), 80)], call(t, "PUT", env.URL+"/v1/store/items", c.body), c.param)
		}
		badRequest(t, "search with a bad limit", call(t, "POST", env.URL+"/v1/store/items/search", `{"limit":0}`), "limit")
		badRequest(t, "get without a key", call(t, "GET", env.URL+"/v1/store/items?namespace=users", ""), "namespace")
		if after := len(searchItems(t, env, `{"limit":100}`)); after != before {
			t.Fatalf("refused puts wrote: %d items, %d before", after, before)
		}
	})
}

// TestStoreAPITenantsAndRoles: two tenants' keys see only their own
// items; a caller key may write, an approver key only read.
func TestStoreAPITenantsAndRoles(t *testing.T) {
	t.Parallel()
	keys := append(append([]config.Key{}, roleKeys...), config.Key{Tenant: "globex", Secret: "sk-globex-001", Role: config.RoleAdmin, Label: "globex"})
	env := memStack(t, nil, config.Start, keys, nil)
	acme := []string{"Authorization", "Bearer sk-caller-001"}
	globex := []string{"Authorization", "Bearer sk-globex-001"}
	approver := []string{"Authorization", "Bearer sk-approver-1"}
	if r := call(t, "PUT", env.URL+"/v1/store/items", `{"namespace":["shared"],"key":"k","value":{"owner":"acme"}}`, acme...); r.status != 204 {
		t.Fatalf("acme put: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", env.URL+"/v1/store/items?namespace=shared&key=k", "", globex...); r.status != 404 {
		t.Fatalf("globex reading acme's item: %d %s", r.status, r.body)
	}
	if got := searchItems(t, env, `{"query":"owner acme"}`, globex...); len(got) != 0 {
		t.Fatalf("globex's search: %+v", got)
	}
	if got := namespaces(t, env, `{}`, globex...); got != "" {
		t.Fatalf("globex's namespaces: %q", got)
	}
	if r := call(t, "DELETE", env.URL+"/v1/store/items", `{"namespace":["shared"],"key":"k"}`, globex...); r.status != 204 {
		t.Fatalf("globex delete: %d %s", r.status, r.body)
	}
	if r := call(t, "PUT", env.URL+"/v1/store/items", `{"namespace":["shared"],"key":"k","value":{"owner":"globex"}}`, globex...); r.status != 204 {
		t.Fatalf("globex put: %d %s", r.status, r.body)
	}
	r := call(t, "GET", env.URL+"/v1/store/items?namespace=shared&key=k", "", approver...)
	if r.status != 200 || !strings.Contains(string(r.body), `"owner":"acme"`) {
		t.Fatalf("acme's item read by acme's approver: %d %s", r.status, r.body)
	}
	forbiddenRole(t, "approver put", call(t, "PUT", env.URL+"/v1/store/items", `{"namespace":["shared"],"key":"k","value":{"owner":"x"}}`, approver...))
	forbiddenRole(t, "approver delete", call(t, "DELETE", env.URL+"/v1/store/items", `{"namespace":["shared"],"key":"k"}`, approver...))
	if got := searchItems(t, env, `{}`, approver...); len(got) != 1 || !strings.Contains(string(got[0].Value), "acme") {
		t.Fatalf("acme's items after the refused writes: %+v", got)
	}
	if r := call(t, "GET", env.URL+"/v1/store/items?namespace=shared&key=k", ""); r.status != 401 {
		t.Fatalf("no key: %d", r.status)
	}
}

// TestMemorySweepOnTheFakeClock: an item put with a TTL is gone from reads
// once the clock passes its expiry, and the recovery loop deletes its row.
func TestMemorySweepOnTheFakeClock(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(schedT0)
	env := memStack(t, nil, config.Dev, nil, fake)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go app.RecoverLoop(ctx, env.Runner, env.Config, slog.New(slog.DiscardHandler))
	if err := fake.AwaitTimers(testwait.Context(t), 1); err != nil {
		t.Fatal(err)
	}
	if r := call(t, "PUT", env.URL+"/v1/store/items", `{"namespace":["tmp"],"key":"k","value":{"a":1},"ttl":1}`); r.status != 204 {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	if r := call(t, "PUT", env.URL+"/v1/store/items", `{"namespace":["tmp"],"key":"keep","value":{"a":2}}`); r.status != 204 {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	rows := func() int {
		// Read as of the put: the expired row is seen until it is deleted.
		got, err := env.Store.MemorySearch(context.Background(), store.MemorySearch{Tenant: "dev", Now: schedT0, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	if n := rows(); n != 2 {
		t.Fatalf("rows: %d", n)
	}
	fake.Advance(61 * time.Second)
	if r := call(t, "GET", env.URL+"/v1/store/items?namespace=tmp&key=k", ""); r.status != 404 {
		t.Fatalf("expired item: %d %s", r.status, r.body)
	}
	fake.Advance(env.Config.Lease) // the loop's next ticks sweep
	stacktest.WaitFor(t, "the sweep", func() bool { return rows() == 1 })
	if r := call(t, "GET", env.URL+"/v1/store/items?namespace=tmp&key=keep", ""); r.status != 200 {
		t.Fatalf("the item without a TTL: %d %s", r.status, r.body)
	}
}

// TestLangGraphStoreClient runs tests/langgraph/store.mjs: LangGraph's JS
// SDK store client puts, gets (refreshTtl), searches (semantic on the
// mock's embeddings, and filtered), lists namespaces, gets a 400 and
// deletes, against the /v1/store routes with an API key (x-api-key).
func TestLangGraphStoreClient(t *testing.T) {
	t.Parallel()
	node, dir := nodeFixture(t, "langgraph", filepath.Join("@langchain", "langgraph-sdk", "package.json"))
	keys := []config.Key{{Tenant: "acme", Secret: "sk-acme-store", Role: config.RoleCaller, Label: "app"}}
	env := memStack(t, nil, config.Start, keys, nil)
	var out struct {
		Results []struct {
			Name  string `json:"name"`
			OK    bool   `json:"ok"`
			Error string `json:"error"`
		} `json:"results"`
	}
	runErr := runNodeScript(t, node, dir, "store.mjs", &out, env.URL, "sk-acme-store")
	if len(out.Results) != 5 {
		t.Fatalf("want 5 cases, got %+v (%v)", out.Results, runErr)
	}
	for _, r := range out.Results {
		if !r.OK {
			t.Errorf("%s: %s", r.Name, r.Error)
		}
	}
	if runErr != nil && !t.Failed() {
		t.Fatal(runErr)
	}
	if got, err := env.Runner.Memory.Get(t.Context(), "acme", []string{"users", "u1"}, "tea", false); err != nil || !strings.Contains(string(got.Value), "genmaicha") {
		t.Fatalf("the SDK's item in acme's store: %+v %v", got, err)
	}
}

// TestMemoryUserSurvivesApproval: a durable turn's end user
// (x-stackbone-user) is kept with the run, so the tool that runs after an
// approval, in the resumed run, writes the memory of the same user; the
// built-in recall of a later turn of that user finds it.
func TestMemoryUserSurvivesApproval(t *testing.T) {
	t.Parallel()
	script := `[
 {"when": {"lastTool": "pin"}, "reply": {"text": "Pinned."}},
 {"when": {"lastTool": "recall"}, "reply": {"text": "Recalled: {{lastTool}}"}},
 {"when": {"lastUser": "pin"}, "reply": {"toolCalls": [{"name": "pin", "arguments": {"fact": "pinned by the approved call"}}]}},
 {"when": {"lastUser": "recall"}, "reply": {"toolCalls": [{"name": "recall", "arguments": {"query": "pinned"}}]}},
 {"reply": {"text": "echo: {{lastUser}}"}}
]`
	var (
		mu    sync.Mutex
		users []string
	)
	env := stacktest.New(t, stacktest.Options{Script: script, Agents: func(env *stacktest.Env) []*agent.Spec {
		pin := &tool.Tool{Name: "pin", Description: "Pin a fact for the user", Approval: &tool.Approval{},
			Parameters: json.RawMessage(`{"type":"object","properties":{"fact":{"type":"string"}},"required":["fact"]}`),
			Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
				mu.Lock()
				users = append(users, c.UserID)
				mu.Unlock()
				var a struct{ Fact string }
				_ = json.Unmarshal(c.Args, &a)
				v, _ := json.Marshal(map[string]string{"fact": a.Fact})
				if _, err := c.Store.Put(ctx, memory.Namespace(memory.DefaultNamespace, c.UserID), "pinned", v, tool.MemoryPut{}); err != nil {
					return tool.Result{}, err
				}
				return tool.Result{Content: `{"ok":true}`}, nil
			}}
		return []*agent.Spec{{Name: "mem", Model: "openai/test-model", Instructions: "You pin.", Tools: []*tool.Tool{pin}, Memory: &agent.Memory{}}}
	}})
	memTurn(t, env, "pin-thread", "u9", "pin this")
	it := pendingOf(t, env, "pin-thread")
	if r := call(t, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", ""); r.status != 200 {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	waitIdle(t, env, "pin-thread")
	mu.Lock()
	defer mu.Unlock()
	if len(users) != 1 || users[0] != "u9" {
		t.Fatalf("the resumed run's tool saw users %q", users)
	}
	if _, err := env.Runner.Memory.Get(t.Context(), "dev", []string{"users", "u9"}, "pinned", false); err != nil {
		t.Fatalf("u9's pinned fact: %v", err)
	}
	memTurn(t, env, "recall-thread", "u9", "recall it")
	if res := lastToolResult(t, env); !strings.Contains(res, "pinned by the approved call") {
		t.Fatalf("recall: %s", res)
	}
}

// TestMemoryOfSignedInUsers: with end users' tokens the memory tools keep
// each signed-in user's facts under their own id (the token's sub), and the
// x-stackbone-user header cannot name someone else: alice remembers while
// sending bob's name in the header, the fact is alice's, bob's recall finds
// nothing and alice's, in another thread, finds it.
func TestMemoryOfSignedInUsers(t *testing.T) {
	t.Parallel()
	s := newJWTStack(t, memOptions(t, nil))
	env := s.env
	alice, bob := "Bearer "+s.token(t, "alice"), "Bearer "+s.token(t, "bob")
	if got := memTurn(t, env, "alice-1", "bob", "Please remember: my favourite tea is genmaicha", "Authorization", alice); got != "Noted." {
		t.Fatalf("alice's first turn: %q", got)
	}
	if _, err := env.Runner.Memory.Get(t.Context(), "acme", []string{"users", "alice"}, "tea", false); err != nil {
		t.Fatalf("alice's fact: %v", err)
	}
	if _, err := env.Runner.Memory.Get(t.Context(), "acme", []string{"users", "bob"}, "tea", false); err == nil {
		t.Fatal("the header put alice's fact under bob's name")
	}
	memTurn(t, env, "bob-1", "", "Which tea do I like?", "Authorization", bob)
	if res := lastToolResult(t, env); res != `{"memories":[]}` {
		t.Fatalf("bob's recall: %s", res)
	}
	if got := memTurn(t, env, "alice-2", "", "Which tea do I like?", "Authorization", alice); !strings.Contains(got, "genmaicha") {
		t.Fatalf("alice's recall in another thread: %q", got)
	}
}

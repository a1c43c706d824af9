package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// TestConversationsClients runs tests/clients/conversations.mjs: openai-node
// creates a conversation with an item and metadata, retrieves and updates
// it, adds, lists, retrieves and deletes items, continues it with
// responses.create({conversation}) (the items it was created with are the
// turn's history, and the turns join its items), then deletes it; the
// Agents SDK's OpenAIConversationsSession adds, gets and pops items, runs
// an agent with the session and clears it.
func TestConversationsClients(t *testing.T) {
	node, dir := nodeFixture(t, "clients", filepath.Join("@openai", "agents", "package.json"))
	env := stacktest.New(t, stacktest.Options{Script: responsesScript})
	var out struct {
		Results []struct {
			Name         string `json:"name"`
			OK           bool   `json:"ok"`
			Error        string `json:"error"`
			Conversation string `json:"conversation"`
		} `json:"results"`
	}
	runErr := runNodeScript(t, node, dir, "conversations.mjs", &out, env.URL, "assistant")
	if len(out.Results) != 6 {
		t.Fatalf("want 6 cases, got %+v (%v)", out.Results, runErr)
	}
	conv := ""
	for _, r := range out.Results {
		if !r.OK {
			t.Errorf("%s: %s", r.Name, r.Error)
		}
		if r.Conversation != "" {
			conv = r.Conversation
		}
	}
	if runErr != nil && !t.Failed() {
		t.Fatal(runErr)
	}
	if t.Failed() {
		return
	}
	// The conversation's thread begins with the item it was created with,
	// before the first response's input: the model was sent it.
	msgs, err := env.Store.Messages(context.Background(), "dev", conv)
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, m := range msgs {
		if m.Role == message.User {
			users = append(users, m.Content)
		}
	}
	want := []string{"remember the word kiwi", "and one to keep", "hello conversation", "second turn", "a late note", "third turn"}
	if strings.Join(users, "|") != strings.Join(want, "|") {
		t.Fatalf("thread %s user messages %q, want %q", conv, users, want)
	}
	// The deleted conversation's thread stays, for audit.
	if th := env.Thread(t, "dev", conv); th.Agent != "assistant" {
		t.Fatalf("thread %+v", th)
	}
}

// TestConversationsTenants: another tenant's conversation is a 404 on
// every route, and nothing it sends changes it, on SQLite and PostgreSQL.
func TestConversationsTenants(t *testing.T) {
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			opts := stacktest.Options{Script: responsesScript, Mode: config.Start, Keys: []config.Key{
				{Tenant: "acme", Secret: "sk-acme-0001", Label: "acme"},
				{Tenant: "evil", Secret: "sk-evil-0001", Label: "evil"},
			}}
			if driver == "postgres" {
				opts.Store = stacktest.Postgres(t, "conv_tenants")
			}
			env := stacktest.New(t, opts)
			call := func(key, method, path, body string) (int, map[string]any) {
				t.Helper()
				req, err := http.NewRequest(method, env.URL+path, strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				raw, _ := io.ReadAll(res.Body)
				var v map[string]any
				if err := json.Unmarshal(raw, &v); err != nil {
					t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, raw)
				}
				return res.StatusCode, v
			}
			const acme, evil = "sk-acme-0001", "sk-evil-0001"
			st, c := call(acme, "POST", "/v1/conversations", `{"items":[{"role":"user","content":"acme secret"}],"metadata":{"k":"v"}}`)
			if st != 200 {
				t.Fatalf("create: %d %v", st, c)
			}
			id := c["id"].(string)
			if st, r := call(acme, "POST", "/v1/responses", `{"model":"assistant","conversation":"`+id+`","input":"hi"}`); st != 200 {
				t.Fatalf("response: %d %v", st, r)
			}
			st, list := call(acme, "GET", "/v1/conversations/"+id+"/items?order=asc", "")
			if st != 200 || len(list["data"].([]any)) != 3 {
				t.Fatalf("acme items: %d %v", st, list)
			}
			item := list["data"].([]any)[0].(map[string]any)["id"].(string)
			// A second, pending item, so an item delete has something to take.
			if st, r := call(acme, "POST", "/v1/conversations/"+id+"/items", `{"items":[{"role":"user","content":"pending"}]}`); st != 200 {
				t.Fatalf("add: %d %v", st, r)
			}
			pending := ""
			_, list = call(acme, "GET", "/v1/conversations/"+id+"/items", "")
			pending = list["data"].([]any)[0].(map[string]any)["id"].(string)

			for _, rt := range []struct{ method, path, body string }{
				{"GET", "/v1/conversations/" + id, ""},
				{"POST", "/v1/conversations/" + id, `{"metadata":{"k":"evil"}}`},
				{"GET", "/v1/conversations/" + id + "/items", ""},
				{"POST", "/v1/conversations/" + id + "/items", `{"items":[{"role":"user","content":"injected"}]}`},
				{"GET", "/v1/conversations/" + id + "/items/" + item, ""},
				{"DELETE", "/v1/conversations/" + id + "/items/" + pending, ""},
				{"DELETE", "/v1/conversations/" + id, ""},
			} {
				st, v := call(evil, rt.method, rt.path, rt.body)
				e, _ := v["error"].(map[string]any)
				if st != 404 || e == nil || e["type"] == nil {
					t.Errorf("evil %s %s: %d %v, want a 404 in OpenAI's envelope", rt.method, rt.path, st, v)
				}
			}
			// acme's conversation is as it was.
			st, got := call(acme, "GET", "/v1/conversations/"+id, "")
			if st != 200 || got["metadata"].(map[string]any)["k"] != "v" {
				t.Fatalf("acme after: %d %v", st, got)
			}
			_, list = call(acme, "GET", "/v1/conversations/"+id+"/items?order=asc", "")
			var texts []string
			for _, d := range list["data"].([]any) {
				for _, p := range d.(map[string]any)["content"].([]any) {
					texts = append(texts, p.(map[string]any)["text"].(string))
				}
			}
			if strings.Join(texts, "|") != "acme secret|hi|echo: hi|pending" {
				t.Fatalf("acme items after evil's calls: %q", texts)
			}
			if _, err := env.Store.GetThread(context.Background(), "evil", id); err == nil {
				t.Fatalf("evil has a thread %s", id)
			} else if !strings.Contains(err.Error(), store.ErrNotFound.Error()) {
				t.Fatal(err)
			}
			// Ids are checked as on the other routes.
			if st, v := call(acme, "GET", "/v1/conversations/conv%01x", ""); st != 400 || v["error"].(map[string]any)["code"] != "invalid_id" {
				t.Fatalf("bad id: %d %v", st, v)
			}
		})
	}
}

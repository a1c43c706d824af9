package engine_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// chat posts one durable turn and returns the answer text.
func chat(t *testing.T, env *stacktest.Env, model, session, text string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "messages": []any{map[string]any{"role": "user", "content": text}}})
	req, _ := http.NewRequest("POST", env.URL+"/v1/chat/completions", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-stackbone-session", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("chat: %d %s", resp.StatusCode, b)
	}
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	_ = json.Unmarshal(b, &out)
	return out.Choices[0].Message.Content
}

func state(t *testing.T, env *stacktest.Env, thread string) map[string]any {
	t.Helper()
	var st map[string]any
	if err := json.Unmarshal(env.Thread(t, "dev", thread).State, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func toolResults(t *testing.T, env *stacktest.Env, thread string) []message.Message {
	t.Helper()
	msgs, err := env.Store.Messages(context.Background(), "dev", thread)
	if err != nil {
		t.Fatal(err)
	}
	var out []message.Message
	for _, m := range msgs {
		if m.Role == message.Tool {
			out = append(out, m)
		}
	}
	return out
}

func TestWriteTodos(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{Script: `[
	 {"when":{"afterTool":true},"reply":{"text":"planned"}},
	 {"when":{"lastUser":"twice"},"reply":{"toolCalls":[
	   {"name":"write_todos","arguments":{"todos":[{"content":"a","status":"pending"}]}},
	   {"name":"write_todos","arguments":{"todos":[{"content":"b","status":"pending"}]}}]}},
	 {"reply":{"toolCalls":[{"name":"write_todos","arguments":{"todos":[{"content":"Write the draft","status":"completed"},{"content":"Send it","status":"in_progress"}]}}]}}
	]`})
	if got := chat(t, env, "assistant", "todos", "plan the work"); got != "planned" {
		t.Fatalf("answer %q", got)
	}
	todos := state(t, env, "todos")["todos"].([]any)
	first, second := todos[0].(map[string]any), todos[1].(map[string]any)
	if first["content"] != "Write the draft" || first["done"] != true || second["done"] != false || second["status"] != "in_progress" {
		t.Fatalf("todos %v", todos)
	}

	chat(t, env, "assistant", "todos2", "twice please")
	res := toolResults(t, env, "todos2")
	if len(res) != 2 || res[0].IsError || !res[1].IsError || !strings.Contains(res[1].Content, "once per step") {
		t.Fatalf("second write_todos of a step must be refused: %+v", res)
	}
	todos = state(t, env, "todos2")["todos"].([]any)
	if len(todos) != 1 || todos[0].(map[string]any)["content"] != "a" {
		t.Fatalf("the refused call changed the list: %v", todos)
	}
}

func TestVirtualFiles(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{Script: `[
	 {"when":{"lastTool":"write_file","lastUser":"write"},"reply":{"text":"written"}},
	 {"when":{"lastUser":"write"},"reply":{"toolCalls":[
	   {"name":"write_file","arguments":{"file_path":"/notes/a.md","content":"hello world\nhello again"}},
	   {"name":"write_file","arguments":{"file_path":"/notes/b.md","content":"second file"}}]}},
	 {"when":{"lastTool":"edit_file","lastUser":"ambiguous"},"reply":{"text":"{{lastTool}}"}},
	 {"when":{"lastUser":"ambiguous"},"reply":{"toolCalls":[{"name":"edit_file","arguments":{"file_path":"/notes/a.md","old_string":"hello","new_string":"bye"}}]}},
	 {"when":{"lastTool":"edit_file"},"reply":{"text":"edited"}},
	 {"when":{"lastUser":"edit"},"reply":{"toolCalls":[{"name":"edit_file","arguments":{"file_path":"/notes/a.md","old_string":"hello world","new_string":"goodbye world"}}]}},
	 {"when":{"lastTool":"read_file"},"reply":{"text":"{{lastTool}}"}},
	 {"when":{"lastUser":"missing"},"reply":{"toolCalls":[{"name":"read_file","arguments":{"file_path":"/nope.md"}}]}},
	 {"when":{"lastUser":"read"},"reply":{"toolCalls":[{"name":"read_file","arguments":{"file_path":"/notes/a.md","offset":1,"limit":1}}]}},
	 {"when":{"lastTool":"ls"},"reply":{"text":"{{lastTool}}"}},
	 {"reply":{"toolCalls":[{"name":"ls","arguments":{"path":"/notes"}}]}}
	]`})
	chat(t, env, "assistant", "fs", "write two files")
	files := state(t, env, "fs")["files"].(map[string]any)
	if len(files) != 2 {
		t.Fatalf("two write_file calls of one step must both land: %v", files)
	}
	a := files["/notes/a.md"].(map[string]any)
	if a["content"] != "hello world\nhello again" || a["modifiedAt"] == "" {
		t.Fatalf("file a %v", a)
	}
	if got := chat(t, env, "assistant", "fs", "ambiguous edit"); !strings.Contains(got, "occurs 2 times") {
		t.Fatalf("ambiguous edit: %q", got)
	}
	chat(t, env, "assistant", "fs", "edit it")
	a = state(t, env, "fs")["files"].(map[string]any)["/notes/a.md"].(map[string]any)
	if a["content"] != "goodbye world\nhello again" {
		t.Fatalf("edit: %v", a)
	}
	if got := chat(t, env, "assistant", "fs", "read line two"); got != "     2\thello again" {
		t.Fatalf("read_file: %q", got)
	}
	if got := chat(t, env, "assistant", "fs", "read a missing file"); !strings.Contains(got, "does not exist") {
		t.Fatalf("missing file: %q", got)
	}
	if got := chat(t, env, "assistant", "fs", "list"); got != `["/notes/a.md","/notes/b.md"]` {
		t.Fatalf("ls: %q", got)
	}
}

// subagentScript drives a parent that hands work to "researcher", whose
// requests are told apart by its instructions.
const subagentScript = `[
 {"when":{"system":"researcher instructions","lastTool":"refund"},"reply":{"text":"research done after refund"}},
 {"when":{"system":"researcher instructions","lastTool":"write_file"},"reply":{"text":"found: the answer is 42"}},
 {"when":{"system":"researcher instructions","lastUser":"refund"},"reply":{"toolCalls":[{"name":"write_file","arguments":{"file_path":"/sub.md","content":"before the pause"}},{"name":"refund","arguments":{"orderId":"sub","amount":7}}]}},
 {"when":{"system":"researcher instructions"},"reply":{"toolCalls":[
   {"name":"write_todos","arguments":{"todos":[{"content":"sub todo","status":"pending"}]}},
   {"name":"write_file","arguments":{"file_path":"/research.md","content":"42"}}]}},
 {"when":{"lastTool":"task"},"reply":{"text":"Subagent said: {{lastTool}}"}},
 {"when":{"lastUser":"refund"},"reply":{"toolCalls":[{"name":"task","arguments":{"description":"please refund order sub","subagent_type":"researcher"}}]}},
 {"reply":{"toolCalls":[{"name":"task","arguments":{"description":"find the answer","subagent_type":"researcher"}}]}}
]`

func withResearcher(env *stacktest.Env) []*agent.Spec {
	specs := stacktest.DefaultAgents(env, "openai/test-model")
	specs[0].Subagents = []agent.Subagent{{Name: "researcher", Description: "Looks things up", Instructions: "researcher instructions"}}
	return specs
}

func TestTaskRunsSubagent(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{Script: subagentScript, Agents: withResearcher})
	if got := chat(t, env, "assistant", "task", "research something"); got != "Subagent said: found: the answer is 42" {
		t.Fatalf("answer %q", got)
	}
	st := state(t, env, "task")
	files, _ := st["files"].(map[string]any)
	if _, ok := files["/research.md"]; !ok {
		t.Fatalf("the subagent's files must merge into the parent's state: %v", st)
	}
	if _, ok := st["todos"]; ok {
		t.Fatalf("the subagent's todos must stay its own: %v", st)
	}
	// The parent's last model call saw only its own conversation.
	last, _ := env.Upstream.Last()
	for _, m := range last.Request.Messages {
		if strings.Contains(m.Content, "find the answer") && m.Role == message.User {
			t.Fatalf("the parent saw the subagent's conversation: %+v", last.Request.Messages)
		}
	}
	if len(last.Request.Messages) != 3 {
		t.Fatalf("parent history %+v", last.Request.Messages)
	}
}

func TestApprovalInsideSubagent(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{Script: subagentScript, Agents: withResearcher})
	chat(t, env, "assistant", "subpause", "refund via the researcher")
	its, err := env.Store.ListInterrupts(context.Background(), "dev", store.InterruptFilter{ThreadID: "subpause"})
	if err != nil || len(its) != 1 {
		t.Fatalf("want one pending decision: %v %v", its, err)
	}
	if its[0].Subagent != "researcher" || its[0].Tool != "refund" {
		t.Fatalf("the interrupt must say which subagent: %+v", its[0])
	}
	if env.Thread(t, "dev", "subpause").Status != store.Waiting {
		t.Fatal("the whole run must pause")
	}
	if files, _ := state(t, env, "subpause")["files"].(map[string]any); files["/sub.md"] == nil {
		t.Fatalf("files the subagent wrote before the pause must be kept: %v", state(t, env, "subpause"))
	}
	req, _ := http.NewRequest("POST", env.URL+"/v1/hitl/"+its[0].ID+"/approve", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("approve: %v %v", err, resp.Status)
	}
	resp.Body.Close()
	stacktest.WaitFor(t, "resume", func() bool { return env.Thread(t, "dev", "subpause").Status == store.Idle })
	if env.Calls.Get("refund") != 1 {
		t.Fatalf("refund ran %d times", env.Calls.Get("refund"))
	}
	msgs, _ := env.Store.Messages(context.Background(), "dev", "subpause")
	if last := msgs[len(msgs)-1]; last.Content != "Subagent said: research done after refund" || last.TaskCallID != "" {
		t.Fatalf("the resume must continue the subagent, then the parent: %+v", last)
	}
	if files, _ := state(t, env, "subpause")["files"].(map[string]any); files["/sub.md"] == nil {
		t.Fatalf("the subagent's file is lost after the resume: %v", state(t, env, "subpause"))
	}
}

func TestBuiltinsCanBeTurnedOff(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{Agents: func(env *stacktest.Env) []*agent.Spec {
		specs := stacktest.DefaultAgents(env, "openai/test-model")
		specs[0].NoTodos, specs[0].NoFiles = true, true
		return specs
	}})
	chat(t, env, "assistant", "off", "hello")
	last, _ := env.Upstream.Last()
	var names []string
	for _, tl := range last.Request.Tools {
		names = append(names, tl.Name)
	}
	got := strings.Join(names, ",")
	if strings.Contains(got, "write_todos") || strings.Contains(got, "read_file") || !strings.Contains(got, "task") {
		t.Fatalf("tools offered: %s", got)
	}
}

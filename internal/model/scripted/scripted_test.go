package scripted_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/model/scripted"
)

const demo = `[
  {"when": {"lastTool": "get_weather"}, "reply": {"text": "Forecast: {{lastTool}}"}},
  {"when": {"lastUser": "weather"}, "reply": {"text": "Let me look that up.", "toolCalls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}},
  {"when": {"lastUser": "down"}, "reply": {"error": {"status": 503, "message": "overloaded"}}},
  {"when": {"lastUser": "slow"}, "reply": {"text": "zzz", "delayMs": 5000}},
  {"when": {"lastUser": "hello"}, "reply": {"text": "Hello! How can I help you today?"}}
]`

func writeScript(t *testing.T, dir, name, src string) string {
	t.Helper()
	path := filepath.Join(dir, name+scripted.FileSuffix)
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func ask(text string) model.Request {
	return model.Request{Model: "demo", Messages: []message.Message{{Role: message.User, Content: text}}}
}

func TestReadsScriptNextToAgent(t *testing.T) {
	dir := t.TempDir()
	writeScript(t, dir, "demo", demo)
	p, err := scripted.Open(dir, "demo")
	if err != nil {
		t.Fatal(err)
	}
	st, err := modeltest.Collect(p.Stream(context.Background(), ask("hello")))
	if err != nil {
		t.Fatal(err)
	}
	if st.Text != "Hello! How can I help you today?" || st.Stop != event.StopEnd || st.Chunks[model.Text] < 2 {
		t.Fatalf("got %+v", st)
	}
	if _, err := scripted.Open(dir, "missing"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing script: got %v", err)
	}
	if _, err := scripted.Open(dir, "../demo"); !errors.Is(err, scripted.ErrBadName) {
		t.Fatalf("path in name: got %v", err)
	}
}

func TestToolTurn(t *testing.T) {
	p := scripted.New(script.MustParse(demo))
	st, err := modeltest.Collect(p.Stream(context.Background(), ask("weather?")))
	if err != nil {
		t.Fatal(err)
	}
	if st.Stop != event.StopToolCalls || len(st.ToolCalls) != 1 || st.ToolCalls[0].Arguments != `{"city":"Paris"}` || st.Chunks[model.ToolCallArgs] < 2 {
		t.Fatalf("got %+v", st)
	}
	req := ask("weather?")
	req.Messages = append(req.Messages,
		message.Message{Role: message.Assistant, Content: st.Text, ToolCalls: st.ToolCalls},
		message.Message{Role: message.Tool, ToolCallID: st.ToolCalls[0].ID, ToolName: "get_weather", Content: "sunny"})
	st, err = modeltest.Collect(p.Stream(context.Background(), req))
	if err != nil || st.Text != "Forecast: sunny" {
		t.Fatalf("got %q, %v", st.Text, err)
	}
}

func TestErrors(t *testing.T) {
	p := scripted.New(script.MustParse(demo))
	_, err := modeltest.Collect(p.Stream(context.Background(), ask("server down")))
	var me *model.Error
	if !errors.As(err, &me) || me.Status != 503 || me.Message != "overloaded" {
		t.Fatalf("got %v", err)
	}
	_, err = modeltest.Collect(p.Stream(context.Background(), ask("nothing matches")))
	if !errors.As(err, &me) || me.Status != 400 || !errors.Is(err, script.ErrNoMatch) {
		t.Fatalf("got %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := modeltest.Collect(p.Stream(ctx, ask("slow"))); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
}

// Editing the script file changes the answers without a restart.
func TestReloadsChangedScript(t *testing.T) {
	dir := t.TempDir()
	path := writeScript(t, dir, "demo", `[{"reply":{"text":"first"}}]`)
	p, err := scripted.Open(dir, "demo")
	if err != nil {
		t.Fatal(err)
	}
	writeScript(t, dir, "demo", `[{"reply":{"text":"second version"}}]`)
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	st, err := modeltest.Collect(p.Stream(context.Background(), ask("x")))
	if err != nil || st.Text != "second version" {
		t.Fatalf("got %q, %v", st.Text, err)
	}
}

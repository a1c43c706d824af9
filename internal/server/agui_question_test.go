package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
)

// askerAgent's confirm tool asks a human (as an MCP server's elicitation
// does) and reports the answer.
func askerAgent(*stacktest.Env) []*agent.Spec {
	confirm := &tool.Tool{Name: "confirm", Description: "Ask before acting", Timeout: time.Minute,
		Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
			a, err := c.Ask(ctx, tool.Question{Message: "Why delete the record?", Schema: json.RawMessage(
				`{"type":"object","properties":{"reason":{"type":"string"}},"required":["reason"]}`)})
			if err != nil {
				return tool.Result{}, err
			}
			return tool.Result{Content: fmt.Sprintf("accepted=%v %s", a.Accepted, a.Content)}, nil
		}}
	return []*agent.Spec{{Name: "asker", Model: "openai/test-model", Instructions: "Help.", Tools: []*tool.Tool{confirm}}}
}

const askerScript = `[{"when": {"lastTool": "confirm"}, "reply": {"text": "Result: {{lastTool}}"}},
 {"reply": {"toolCalls": [{"name": "confirm", "arguments": {}}]}}]`

// waitPending waits for the one pending decision of a thread (read over
// the HTTP API) and returns it.
func waitPending(t *testing.T, env *stacktest.Env, thread string) store.Interrupt {
	t.Helper()
	var it store.Interrupt
	stacktest.WaitFor(t, "a pending decision on "+thread, func() bool {
		r := call(t, "GET", env.URL+"/v1/hitl?thread="+thread, "")
		var page struct{ Data []store.Interrupt }
		if json.Unmarshal(r.body, &page) != nil || len(page.Data) != 1 {
			return false
		}
		it = page.Data[0]
		return true
	})
	return it
}

// TestAGUIAnswersAQuestion: on AG-UI, a question a running tool asks is a
// CUSTOM "stackbone.question" event carrying the interrupt; a resume that
// answers it lets the run go on, and streams the rest of it; the first
// stream ends with the same answer.
func TestAGUIAnswersAQuestion(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{Script: askerScript, Agents: askerAgent})
	first := make(chan aguiStream, 1)
	go func() {
		first <- aguiPost(t, env, "asker", `{"threadId":"ag-q","runId":"r1","messages":[{"id":"u1","role":"user","content":"delete it"}],"tools":[],"context":[],"state":{},"forwardedProps":{}}`)
	}()
	q := waitPending(t, env, "ag-q")
	resume := func(run, payload string) aguiStream {
		return aguiPost(t, env, "asker", `{"threadId":"ag-q","runId":"`+run+`","messages":[],"tools":[],"context":[],"resume":[{"interruptId":"`+q.ID+`","status":"resolved","payload":`+payload+`}]}`)
	}
	// An answer off the question's schema changes nothing.
	bad := resume("r2", `{"editedArgs":{"why":1}}`)
	checkRunError(t, bad, "invalid_resume_payload")
	if d, _ := env.Store.GetInterrupt(context.Background(), "dev", q.ID); d.Status != store.Pending {
		t.Fatalf("a bad answer decided the question: %+v", d)
	}
	ans := resume("r3", `{"editedArgs":{"reason":"cleanup"}}`)
	if ans.status != 200 || ans.events[0]["type"] != "RUN_STARTED" || ans.events[0]["runId"] != "r3" ||
		!strings.Contains(ans.body, `Result: accepted=true {\"reason\":\"cleanup\"}`) || ans.events[len(ans.events)-1]["type"] != "RUN_FINISHED" {
		t.Fatalf("the answering resume:\n%s", ans.body)
	}
	f := <-first
	var custom map[string]any
	for _, e := range f.events {
		if e["type"] == "CUSTOM" && e["name"] == "stackbone.question" {
			custom = e
		}
	}
	v, _ := custom["value"].(map[string]any)
	if v == nil || v["id"] != q.ID || v["reason"] != "elicitation" || v["description"] != "Why delete the record?" {
		t.Fatalf("the question event: %v\n%s", custom, f.body)
	}
	if !strings.Contains(f.body, `Result: accepted=true`) || f.events[len(f.events)-1]["type"] != "RUN_FINISHED" {
		t.Fatalf("the first stream:\n%s", f.body)
	}
	if d, _ := env.Store.GetInterrupt(context.Background(), "dev", q.ID); d.Status != store.Approved || d.Decision.Via != "agui" {
		t.Fatalf("decision %+v", d)
	}
}

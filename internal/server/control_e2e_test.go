package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// echoBilling is an agent "billing" without tools: its turns are model
// calls only.
func echoBilling(*stacktest.Env) []*agent.Spec {
	return []*agent.Spec{{Name: "billing", Model: "openai/test-model", Instructions: "You bill."}}
}

// onlyThread is the one thread of tenant dev in a stack's store.
func onlyThread(t *testing.T, env *stacktest.Env) *store.Thread {
	t.Helper()
	ths, err := env.Store.ListThreads(context.Background(), "dev", store.ThreadFilter{Limit: 10})
	if err != nil || len(ths) != 1 {
		t.Fatalf("threads of dev: %d, %v; want one", len(ths), err)
	}
	return &ths[0]
}

// responseStatus reads a stored response's status through a stack.
func responseStatus(t *testing.T, env *stacktest.Env, id string) string {
	t.Helper()
	r := call(t, "GET", env.URL+"/v1/responses/"+id, "")
	var body struct{ Status string }
	if r.status != 200 || json.Unmarshal([]byte(r.body), &body) != nil {
		t.Fatalf("GET %s: %d %s", id, r.status, r.body)
	}
	return body.Status
}

// TestResponsesCancelOnAnotherReplica: a background response whose run
// waits on a stalled upstream on replica A, cancelled through replica B
// (on SQLite, one process: the same stack). The cancel answers cancelled
// only once the run has stopped: by then the thread no longer runs, A
// reads the response cancelled too, the upstream got no further attempt,
// and the next turn (previous_response_id, through B) is admitted. A
// second background response, deleted through B, stops as well.
func TestResponsesCancelOnAnotherReplica(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			a, b := stacktest.Replicas(t, driver == "postgres", stacktest.Options{Script: billingScript, Agents: echoBilling})
			release := a.Upstream.Stall(script.When{LastUser: "stall"})
			t.Cleanup(release) // before the stacks wait for their runs

			first := mustPost(t, a.URL, chargeBody("stall, please", "background"), "")
			if first.status != 200 || first.id == "" {
				t.Fatalf("background request on A: %d %s", first.status, first.raw)
			}
			stacktest.WaitFor(t, "the model call on A", func() bool { return a.Upstream.Count() >= 1 })
			if got := responseStatus(t, b, first.id); got != "in_progress" {
				t.Fatalf("the response through B before the cancel: %s", got)
			}

			r := call(t, "POST", b.URL+"/v1/responses/"+first.id+"/cancel", "")
			var cancelled struct{ Status string }
			if r.status != 200 || json.Unmarshal([]byte(r.body), &cancelled) != nil || cancelled.Status != "cancelled" {
				t.Fatalf("cancel through B: %d %s", r.status, r.body)
			}
			if th := onlyThread(t, b); th.Status == store.Running || th.Status == store.Queued {
				t.Fatalf("the cancel answered cancelled while the thread is %s", th.Status)
			}
			if got := responseStatus(t, a, first.id); got != "cancelled" {
				t.Fatalf("the response through A after the cancel: %s", got)
			}
			if n := a.Upstream.Count(); n != 1 {
				t.Fatalf("the upstream got %d calls, want the one the cancel stopped", n)
			}
			next := mustPost(t, b.URL, fmt.Sprintf(`{"model":"billing","input":"hello again","previous_response_id":%q}`, first.id), "")
			if next.status != 200 || next.state != "completed" || next.text != "echo: hello again" {
				t.Fatalf("the next turn through B: %d %s", next.status, next.raw)
			}

			// Deleting a running response stops its run too.
			calls := a.Upstream.Count()
			second := mustPost(t, a.URL, fmt.Sprintf(`{"model":"billing","input":"stall again","previous_response_id":%q,"background":true}`, next.id), "")
			if second.status != 200 || second.id == "" {
				t.Fatalf("second background request on A: %d %s", second.status, second.raw)
			}
			stacktest.WaitFor(t, "the second model call on A", func() bool { return a.Upstream.Count() > calls })
			if r := call(t, "DELETE", b.URL+"/v1/responses/"+second.id, ""); r.status != 200 {
				t.Fatalf("delete through B: %d %s", r.status, r.body)
			}
			if th := onlyThread(t, a); th.Status == store.Running || th.Status == store.Queued {
				t.Fatalf("the delete answered while the thread is %s", th.Status)
			}
			if n := a.Upstream.Count(); n != calls+1 {
				t.Fatalf("the upstream got %d calls, want %d", n, calls+1)
			}
		})
	}
}

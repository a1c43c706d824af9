package mcp_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// TestMCPWaitingReportedOnAnotherReplica: a call on replica A answers that
// its session waits on a human decision; once the decision is made, the
// next call on the session comes through replica B and reports the
// paused turn's outcome, and the call after it, through A, does not report
// it again (two replicas on PostgreSQL: the waiting pause is stored).
func TestMCPWaitingReportedOnAnotherReplica(t *testing.T) {
	a, b := stacktest.Replicas(t, true, stacktest.Options{})
	for _, v := range protocols {
		t.Run(v, func(t *testing.T) {
			session := "mcp-replicas-" + v
			csA, csB := connect(t, a, v, "", nil), connect(t, b, v, "", nil)
			res := callAgent(t, csA, "assistant", map[string]any{"message": "refund my order", "session": session})
			its := decisions(t, a, "dev", session)
			if len(its) != 1 || its[0].Status != store.Pending || !strings.Contains(text(res), "Waiting on a human decision") {
				t.Fatalf("first call on A = %q, decisions %+v", text(res), its)
			}
			resp, err := http.Post(b.URL+"/v1/hitl/"+its[0].ID+"/approve", "application/json", nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("approve: %d %s", resp.StatusCode, body)
			}
			stacktest.WaitFor(t, "the resumed turn to end", func() bool {
				th, err := b.Store.GetThread(t.Context(), "dev", session)
				return err == nil && th.Status == store.Idle
			})

			res = callAgent(t, csB, "assistant", map[string]any{"message": "thanks", "session": session})
			got := text(res)
			if !strings.Contains(got, "Outcome of the earlier request") || !strings.Contains(got, `Refund result: {"refunded":19.99`) ||
				!strings.HasSuffix(got, "echo: thanks") {
				t.Fatalf("the next call, on B = %q", got)
			}
			res = callAgent(t, csA, "assistant", map[string]any{"message": "bye", "session": session})
			if text(res) != "echo: bye" {
				t.Fatalf("the call after it, on A = %q", text(res))
			}
		})
	}
}

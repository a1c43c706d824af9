package server_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/testwait"
)

// TestEnqueueAcrossReplicas: a turn runs on replica A of one PostgreSQL
// (or the one SQLite stack); four follow-ups sent with enqueue alternate
// between replica B and A. Each request stays open on the replica it came
// to, whichever replica runs its turn; after the running turn ends all four
// run in the order they were queued, each once: every request gets its own
// answer and the model is asked once per turn in all.
func TestEnqueueAcrossReplicas(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			a, b := stacktest.Replicas(t, driver == "postgres", stacktest.Options{})
			calls := func() int {
				if a == b {
					return a.Upstream.Count()
				}
				return a.Upstream.Count() + b.Upstream.Count()
			}
			const session = "eq-replicas"
			release, running, _ := busyThread(t, a, session)
			before := calls()

			answers := make([]chan apiResp, 4)
			for i := range answers {
				via := b
				if i%2 == 1 {
					via = a
				}
				answers[i] = make(chan apiResp, 1)
				body := fmt.Sprintf(`{"model":"assistant","stream":%v,"messages":[{"role":"user","content":"follow-up %d"}]}`, i%2 == 0, i+1)
				go func() {
					answers[i] <- call(t, "POST", via.URL+"/v1/chat/completions", body, "x-stackbone-session", session, "x-stackbone-multitask", "enqueue")
				}()
				testwait.Until(t, "the follow-up to be queued", func() bool { return queued(t, a, session) == i+1 })
			}
			if n := calls(); n != before {
				t.Fatalf("queued follow-ups called the model %d times", n-before)
			}
			release()
			if r := testwait.Recv(t, running, "the long story"); r.status != 200 || !strings.Contains(string(r.body), "echo: tell me a long story") {
				t.Fatalf("the running turn: %d %s", r.status, r.body)
			}
			for i, c := range answers {
				r := testwait.Recv(t, c, "a follow-up's answer")
				if want := fmt.Sprintf("echo: follow-up %d", i+1); r.status != 200 || !strings.Contains(string(r.body), want) {
					t.Fatalf("follow-up %d: %d %s; want %q", i+1, r.status, r.body, want)
				}
			}
			if n := calls(); n != before+4 {
				t.Fatalf("%d model calls for four queued turns", n-before)
			}
			want := []string{"user:hi", "assistant:echo: hi", "user:tell me a long story", "assistant:echo: tell me a long story"}
			for i := range 4 {
				want = append(want, fmt.Sprintf("user:follow-up %d", i+1), fmt.Sprintf("assistant:echo: follow-up %d", i+1))
			}
			if got := headLines(t, b, session); !slices.Equal(got, want) {
				t.Fatalf("thread:\n%q\nwant\n%q", got, want)
			}
			if n := queued(t, b, session); n != 0 {
				t.Fatalf("%d turns left in the queue", n)
			}
		})
	}
}

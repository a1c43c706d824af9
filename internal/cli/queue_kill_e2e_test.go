package cli_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
)

// TestKillWithThreeQueued: three follow-ups wait in a thread's queue
// (x-stackbone-multitask: enqueue) behind a turn whose model call is under
// way when the process is killed -9. Started again on the same data, the
// server finishes the running turn and then answers the three follow-ups,
// in the order they were sent, each once: the model is asked for each
// exactly once, and the thread holds each answer right after its question.
func TestKillWithThreeQueued(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		testKillWithQueue(t, nil)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		testKillWithQueue(t, []string{"STACKBONE_DB=" + postgresURL(t), "STACKBONE_LEASE=1s"})
	})
}

func testKillWithQueue(t *testing.T, dbEnv []string) {
	mock := modeltest.Handler(modeltest.OpenAI, script.MustParse(`[{"reply":{"text":"echo: {{lastUser}}"}}]`))
	up := httptest.NewServer(mock)
	defer up.Close()
	led := newLedger(t)
	dir := ledgerDir(t, led.URL)
	env := append([]string{"OPENAI_BASE_URL=" + up.URL + "/v1", "OPENAI_API_KEY=sk-test"}, dbEnv...)
	args := []string{"dev", "--dir", dir, "--addr", "127.0.0.1:0"}
	const session = "kill-queue"
	post := func(base, text string, hdr ...string) (*http.Response, error) {
		req, _ := http.NewRequest("POST", base+"/v1/chat/completions",
			strings.NewReader(fmt.Sprintf(`{"model":"shop","messages":[{"role":"user","content":%q}]}`, text)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-stackbone-session", session)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		return http.DefaultClient.Do(req)
	}
	queueLen := func(base string) int {
		var q struct{ Data []struct{ ID string } }
		getJSON(t, base+"/v1/threads/"+session+"/queue", &q)
		return len(q.Data)
	}

	a := startServer(t, env, args...)
	if resp, err := post(a.URL(), "hi"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("first turn: %v %v", resp, err)
	}
	release := mock.HoldOnce(script.When{LastUser: "long story"})
	defer release()
	go post(a.URL(), "tell me a long story") //nolint:errcheck // the process dies under it
	waitUntil(t, "the long story's model call", 10*time.Second, func() bool { return mock.Count() == 2 })
	for i := 1; i <= 3; i++ {
		go post(a.URL(), fmt.Sprintf("follow-up %d", i), "x-stackbone-multitask", "enqueue") //nolint:errcheck // as above
		waitUntil(t, "follow-up to be queued", 10*time.Second, func() bool { return queueLen(a.URL()) == i })
	}
	a.Kill(t)
	release()
	if n := mock.Count(); n != 2 {
		t.Fatalf("%d model calls before the kill; want 2 (none for a queued follow-up)", n)
	}

	b := startServer(t, env, args...)
	type thread struct {
		Status   string `json:"status"`
		Messages []struct{ Role, Content string }
	}
	var th thread
	waitUntil(t, "the restarted server to answer the queue", 30*time.Second, func() bool {
		th = thread{}
		getJSON(t, b.URL()+"/v1/threads/"+session, &th)
		return th.Status == "idle" && queueLen(b.URL()) == 0 && len(th.Messages) == 10
	})
	var got []string
	for _, m := range th.Messages {
		got = append(got, m.Role+":"+m.Content)
	}
	want := []string{"user:hi", "assistant:echo: hi", "user:tell me a long story", "assistant:echo: tell me a long story",
		"user:follow-up 1", "assistant:echo: follow-up 1", "user:follow-up 2", "assistant:echo: follow-up 2",
		"user:follow-up 3", "assistant:echo: follow-up 3"}
	if !slices.Equal(got, want) {
		t.Fatalf("thread after restart:\n%q\nwant\n%q", got, want)
	}
	asked := map[string]int{}
	for _, r := range mock.Requests() {
		if msgs := r.Request.Messages; len(msgs) > 0 {
			asked[msgs[len(msgs)-1].Content]++
		}
	}
	for i := 1; i <= 3; i++ {
		if n := asked[fmt.Sprintf("follow-up %d", i)]; n != 1 {
			t.Errorf("the model was asked %d times for follow-up %d; want once", n, i)
		}
	}
}

package cli_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
)

// TestA2APushSurvivesKill: a push notification whose first attempt failed
// (the receiver answered 503) is retried by the next process after a kill
// -9: each delivery the killed process attempted (by webhook-id) goes out,
// with the task's COMPLETED status and the client's token.
func TestA2APushSurvivesKill(t *testing.T) {
	t.Parallel()
	type hit struct {
		id, token string
		body      []byte
		status    int
	}
	var (
		mu   sync.Mutex
		hits []hit
		down = true
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		h := hit{id: r.Header.Get("webhook-id"), token: r.Header.Get("X-A2A-Notification-Token"), body: b, status: 200}
		if down {
			h.status = http.StatusServiceUnavailable
		}
		hits = append(hits, h)
		w.WriteHeader(h.status)
	}))
	defer recv.Close()
	snapshot := func() []hit {
		mu.Lock()
		defer mu.Unlock()
		return append([]hit(nil), hits...)
	}
	up := httptest.NewServer(modeltest.Handler(modeltest.OpenAI, script.MustParse(`[{"reply":{"text":"echo: {{lastUser}}"}}]`)))
	defer up.Close()
	dir := schedulesProject(t)
	env := []string{"OPENAI_BASE_URL=" + up.URL + "/v1", "OPENAI_API_KEY=sk-test", "STACKBONE_A2A_PUSH_ALLOW_PRIVATE=true"}
	args := []string{"dev", "--dir", dir, "--addr", "127.0.0.1:0"}

	a := startServer(t, env, args...)
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"k1","role":"ROLE_USER",
		"parts":[{"text":"hello"}]},"configuration":{"taskPushNotificationConfig":{"url":"` + recv.URL + `/hook","token":"tok-k"}}}}`
	req, _ := http.NewRequest("POST", a.URL()+"/a2a/reports", bytes.NewBufferString(body))
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Result struct {
			Task struct {
				ID     string
				Status struct{ State string }
			}
		}
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := json.Unmarshal(b, &rep); err != nil || rep.Result.Task.Status.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("SendMessage: %d %s", resp.StatusCode, b)
	}
	waitUntil(t, "the first, failed, attempt", 10*time.Second, func() bool { return len(snapshot()) >= 1 })
	a.Kill(t)
	failed := map[string]bool{} // the deliveries the killed process attempted
	for _, h := range snapshot() {
		failed[h.id] = true
	}
	mu.Lock()
	down = false
	mu.Unlock()

	startServer(t, env, args...)
	// A delivery the killed process had claimed but not yet recorded is
	// retaken when its claim's lease ends (3 × notify.DefaultTimeout after
	// the claim): wait longer than that lease.
	waitUntil(t, "the retries from the next process", 45*time.Second, func() bool {
		done := map[string]bool{}
		for _, h := range snapshot() {
			if h.status == 200 && failed[h.id] {
				done[h.id] = true
				if h.token != "tok-k" || !strings.Contains(string(h.body), `"taskId":"`+rep.Result.Task.ID+`"`) ||
					!strings.Contains(string(h.body), `"TASK_STATE_COMPLETED"`) {
					t.Fatalf("the delivered notification: %+v %s", h, h.body)
				}
			}
		}
		return len(done) == len(failed)
	})
}

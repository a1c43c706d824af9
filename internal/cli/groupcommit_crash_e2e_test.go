package cli_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
)

// TestCrashDuringGroupCommitKeepsAcknowledgedTurns runs tool turns on
// several threads at once against SQLite, so that the store commits the
// threads' writes together, kills the server (SIGKILL) while turns are in
// flight and starts it again on the same folder. Every turn a client got
// its answer for is stored in full in its thread, and no tool call reached
// the side effect twice, before or after the restart.
func TestCrashDuringGroupCommitKeepsAcknowledgedTurns(t *testing.T) {
	t.Parallel()
	// The charge tool's side effect: the ledger counts the orders it saw.
	var mu sync.Mutex
	charged := map[string]int{}
	led := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var args struct {
			OrderID string `json:"orderId"`
		}
		_ = json.NewDecoder(r.Body).Decode(&args)
		mu.Lock()
		charged[args.OrderID]++
		mu.Unlock()
		fmt.Fprint(w, `{"ok":true}`)
	}))
	defer led.Close()
	// Each turn charges the order its user message names, then answers
	// with the tool's result.
	sc := script.MustParse(`[
	 {"when":{"lastTool":"charge"},"reply":{"text":"Finished: {{lastTool}}"}},
	 {"when":{"lastUser":"charge order"},"reply":{"toolCalls":[{"name":"charge","arguments":{"orderId":"{{lastUser}}"}}]}},
	 {"reply":{"text":"echo: {{lastUser}}"}}
	]`)
	up := httptest.NewServer(modeltest.Handler(modeltest.OpenAI, sc))
	defer up.Close()

	const key = "acme-secret-key"
	dir := ledgerDir(t, led.URL)
	env := []string{"OPENAI_BASE_URL=" + up.URL + "/v1", "OPENAI_API_KEY=sk-test",
		"STACKBONE_API_KEYS=acme:" + key, "STACKBONE_LEASE=1s"}
	args := []string{"start", "--dir", dir, "--addr", "127.0.0.1:0"}
	a := startServer(t, env, args...)

	// Eight clients, each on its own thread, send turns one after another
	// until the server dies; a turn is acknowledged when its answer came.
	const clients, killAfter = 8, 40
	var (
		ackMu sync.Mutex
		acked = map[string][]string{} // session → acknowledged orders, in order
		nAck  atomic.Int64
		wg    sync.WaitGroup
	)
	client := &http.Client{Timeout: 30 * time.Second}
	for c := range clients {
		session := fmt.Sprintf("gc-%d", c)
		wg.Go(func() {
			for i := 0; ; i++ {
				order := fmt.Sprintf("charge order %s/%d", session, i)
				body := fmt.Sprintf(`{"model":"shop","messages":[{"role":"user","content":%q}]}`, order)
				req, _ := http.NewRequest("POST", a.URL()+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("x-stackbone-session", session)
				resp, err := client.Do(req)
				if err != nil {
					return // the server is gone
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					return
				}
				var cc struct {
					Choices []struct {
						Message struct {
							Content string `json:"content"`
						} `json:"message"`
					} `json:"choices"`
				}
				if json.Unmarshal(b, &cc) != nil || len(cc.Choices) != 1 ||
					!strings.HasPrefix(cc.Choices[0].Message.Content, "Finished: ") ||
					!strings.Contains(cc.Choices[0].Message.Content, session+"/"+fmt.Sprint(i)) {
					t.Errorf("turn %q answered %s", order, b)
					return
				}
				ackMu.Lock()
				acked[session] = append(acked[session], order)
				ackMu.Unlock()
				nAck.Add(1)
			}
		})
	}
	waitUntil(t, fmt.Sprintf("%d acknowledged turns", killAfter), 60*time.Second, func() bool { return nAck.Load() >= killAfter })
	a.Kill(t)
	wg.Wait()

	b := startServer(t, env, args...)
	type thread struct {
		Status   string `json:"status"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	get := func(session string) thread {
		var th thread
		if code := authed(t, "GET", b.URL()+"/v1/threads/"+session, key, nil, &th); code != http.StatusOK {
			t.Fatalf("GET thread %s: %d", session, code)
		}
		return th
	}
	// Recovery resumes the killed runs once their leases lapse: a call
	// that may have run waits as in_doubt, the others finish.
	waitUntil(t, "the restarted server to settle every thread", 30*time.Second, func() bool {
		for c := range clients {
			if s := get(fmt.Sprintf("gc-%d", c)).Status; s == "running" || s == "queued" {
				return false
			}
		}
		return true
	})

	total := 0
	for c := range clients {
		session := fmt.Sprintf("gc-%d", c)
		th := get(session)
		t.Logf("%s: %d turns acknowledged, %s after restart with %d messages", session, len(acked[session]), th.Status, len(th.Messages))
		for _, order := range acked[session] {
			total++
			// The turn in full: the user message, the tool result and the
			// answer, each once.
			var user, tool, answer int
			for _, m := range th.Messages {
				switch {
				case m.Role == "user" && m.Content == order:
					user++
				case m.Role == "tool" && strings.Contains(m.Content, `"orderId":"`+order+`"`):
					tool++
				case m.Role == "assistant" && strings.HasPrefix(m.Content, "Finished: ") &&
					strings.Contains(m.Content, `"orderId":"`+order+`"`):
					answer++
				}
			}
			if user != 1 || tool != 1 || answer != 1 {
				t.Errorf("acknowledged turn %q after restart: %d user messages, %d tool results, %d answers; want 1 each (thread %s: %+v)",
					order, user, tool, answer, th.Status, th.Messages)
			}
		}
	}
	if total < killAfter {
		t.Fatalf("%d turns acknowledged; want at least %d", total, killAfter)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d turns acknowledged, %d orders charged", total, len(charged))
	for order, n := range charged {
		if n != 1 {
			t.Errorf("order %q was charged %d times; want once", order, n)
		}
	}
	for _, orders := range acked {
		for _, order := range orders {
			if charged[order] != 1 {
				t.Errorf("acknowledged order %q was charged %d times; want once", order, charged[order])
			}
		}
	}
}

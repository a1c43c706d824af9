package studio_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) String() string { return string(r.body) }

// do sends one HTTP request; hdr are header name/value pairs.
func do(t testing.TB, method, url, body string, hdr ...string) resp {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, res.Header, b}
}

// pause drives a durable session of agent "assistant" into an approval
// pause through the OpenAI wire. key is the API key ("" in dev mode).
func pause(t testing.TB, env *stacktest.Env, key, session, prompt string) {
	t.Helper()
	body := `{"model":"assistant","messages":[{"role":"user","content":` + jsonString(prompt) + `}]}`
	hdr := []string{"x-stackbone-session", session}
	if key != "" {
		hdr = append(hdr, "Authorization", "Bearer "+key)
	}
	r := do(t, "POST", env.URL+"/v1/chat/completions", body, hdr...)
	if r.status != 200 || !strings.Contains(r.String(), `"finish_reason":"tool_calls"`) {
		t.Fatalf("want a paused call, got %d %s", r.status, r)
	}
}

// chat sends one durable turn and waits for its answer.
func chat(t testing.TB, env *stacktest.Env, session, prompt string) {
	t.Helper()
	body := `{"model":"assistant","messages":[{"role":"user","content":` + jsonString(prompt) + `}]}`
	if r := do(t, "POST", env.URL+"/v1/chat/completions", body, "x-stackbone-session", session); r.status != 200 {
		t.Fatalf("chat: %d %s", r.status, r)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// pending returns the pending decisions of a thread, read through the API.
func pending(t testing.TB, env *stacktest.Env, key, thread string) []store.Interrupt {
	t.Helper()
	var hdr []string
	if key != "" {
		hdr = []string{"Authorization", "Bearer " + key}
	}
	r := do(t, "GET", env.URL+"/v1/hitl?thread="+thread, "", hdr...)
	var page struct {
		Data []store.Interrupt `json:"data"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil {
		t.Fatalf("hitl list: %d %s", r.status, r)
	}
	return page.Data
}

func onePending(t testing.TB, env *stacktest.Env, key, thread string) store.Interrupt {
	t.Helper()
	p := pending(t, env, key, thread)
	if len(p) != 1 {
		t.Fatalf("want one pending decision on %s, got %d", thread, len(p))
	}
	return p[0]
}

// decision reads one decision by id through the store.
func decision(t testing.TB, env *stacktest.Env, tenant, id string) *store.Interrupt {
	t.Helper()
	it, err := env.Store.GetInterrupt(t.Context(), tenant, id)
	if err != nil {
		t.Fatalf("get decision %s: %v", id, err)
	}
	return it
}

func waitIdle(t testing.TB, env *stacktest.Env, tenant, thread string) {
	t.Helper()
	stacktest.WaitFor(t, "thread "+thread+" to go idle", func() bool {
		return env.Thread(t, tenant, thread).Status == store.Idle
	})
}

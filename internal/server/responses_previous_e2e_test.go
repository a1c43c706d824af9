package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestResponsesPreviousResponseBranches: previous_response_id may name
// any response of the caller's conversation. Naming the latest goes on as
// ever; naming an older one goes on from exactly that response, on a new
// branch: the model sees that response's history and the new input, none of
// the turns that followed it. A retry of a request (same body) still gets
// its first attempt's response.
func TestResponsesPreviousResponseBranches(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testPreviousResponseBranches(t, stacktest.New(t, stacktest.Options{})) })
	t.Run("postgres", func(t *testing.T) {
		testPreviousResponseBranches(t, stacktest.New(t, stacktest.Options{Store: stacktest.Postgres(t, "branches")}))
	})
}

func testPreviousResponseBranches(t *testing.T, env *stacktest.Env) {
	next := func(prev, input string) string {
		t.Helper()
		body := fmt.Sprintf(`{"model":"assistant","input":%q}`, input)
		if prev != "" {
			body = fmt.Sprintf(`{"model":"assistant","input":%q,"previous_response_id":%q}`, input, prev)
		}
		r := call(t, "POST", env.URL+"/v1/responses", body)
		var m map[string]any
		if err := json.Unmarshal(r.body, &m); err != nil || r.status != http.StatusOK {
			t.Fatalf("POST %s: %d %s", body, r.status, r.body)
		}
		return m["id"].(string)
	}
	// seen is the conversation the model got on its last call.
	seen := func() []string {
		t.Helper()
		reqs := env.Upstream.Requests()
		var out []string
		for _, m := range reqs[len(reqs)-1].Request.Messages {
			out = append(out, string(m.Role)+":"+m.Content)
		}
		return out
	}
	want := func(what string, msgs ...string) {
		t.Helper()
		if got := seen(); !slices.Equal(got, msgs) {
			t.Fatalf("%s: the model saw %q, want %q", what, got, msgs)
		}
	}
	r1 := next("", "hello")
	r2 := next(r1, "second")
	// A retry of the request that made r2 names r1: it gets r2 again,
	// and the model is not called.
	calls := env.Upstream.Count()
	if again := next(r1, "second"); again != r2 || env.Upstream.Count() != calls {
		t.Fatalf("a retry of r2's request answered %s (%d model calls), want %s (none)", again, env.Upstream.Count()-calls, r2)
	}
	// Another request naming r1 goes on from r1: r2's turn is not in
	// front of the model.
	r3 := next(r1, "something else")
	want("continuing r1 after r2", "user:hello", "assistant:echo: hello", "user:something else")
	// Naming r2 goes back to its line; naming r3 to r3's.
	next(r2, "third")
	want("continuing r2 after r3", "user:hello", "assistant:echo: hello", "user:second", "assistant:echo: second", "user:third")
	r5 := next(r3, "fourth")
	want("continuing r3 after r4", "user:hello", "assistant:echo: hello", "user:something else", "assistant:echo: something else", "user:fourth")
	// The latest goes on from itself, on its branch.
	next(r5, "fifth")
	want("continuing the latest", "user:hello", "assistant:echo: hello", "user:something else", "assistant:echo: something else",
		"user:fourth", "assistant:echo: fourth", "user:fifth")
	// Each response reads as it was answered, whatever came after it.
	for id, text := range map[string]string{r1: "echo: hello", r2: "echo: second", r3: "echo: something else", r5: "echo: fourth"} {
		r := call(t, "GET", env.URL+"/v1/responses/"+id, "")
		var m struct {
			Status     string `json:"status"`
			OutputText string `json:"output_text"`
			Output     []struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"output"`
		}
		if err := json.Unmarshal(r.body, &m); err != nil || r.status != 200 || m.Status != "completed" ||
			len(m.Output) != 1 || len(m.Output[0].Content) != 1 || m.Output[0].Content[0].Text != text {
			t.Errorf("GET %s: %d %s, want completed with %q", id, r.status, r.body, text)
		}
	}
}

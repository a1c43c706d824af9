package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestResponsesPreviousResponseNotLatest: previous_response_id must name
// its conversation's latest response. Naming the one before the latest is
// taken only by a retry of the request that made the latest (it gets that
// response again); any other request naming an older response is refused
// with 409 previous_response_not_latest, whether the conversation went on
// by one turn or more (branching a conversation is not supported).
func TestResponsesPreviousResponseNotLatest(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	post := func(body string) (int, map[string]any) {
		t.Helper()
		r := call(t, "POST", env.URL+"/v1/responses", body)
		var m map[string]any
		if err := json.Unmarshal(r.body, &m); err != nil {
			t.Fatalf("body %d %s", r.status, r.body)
		}
		return r.status, m
	}
	next := func(prev, input string) string {
		t.Helper()
		body := fmt.Sprintf(`{"model":"assistant","input":%q}`, input)
		if prev != "" {
			body = fmt.Sprintf(`{"model":"assistant","input":%q,"previous_response_id":%q}`, input, prev)
		}
		status, m := post(body)
		if status != http.StatusOK {
			t.Fatalf("POST %s: %d %v", body, status, m)
		}
		return m["id"].(string)
	}
	notLatest := func(prev, input string) {
		t.Helper()
		status, m := post(fmt.Sprintf(`{"model":"assistant","input":%q,"previous_response_id":%q}`, input, prev))
		e, _ := m["error"].(map[string]any)
		if status != http.StatusConflict || e["code"] != "previous_response_not_latest" || e["param"] != "previous_response_id" ||
			e["message"] != fmt.Sprintf("Response '%s' is not the latest of its conversation: continue from its latest response (branching a conversation is not supported).", prev) {
			t.Fatalf("previous_response_id %s (%q): %d %v, want 409 previous_response_not_latest", prev, input, status, m)
		}
	}

	r1 := next("", "hello")
	r2 := next(r1, "second")
	// A retry of the request that made r2 names r1: it gets r2 again.
	if again := next(r1, "second"); again != r2 {
		t.Fatalf("a retry of r2's request answered %s, want %s", again, r2)
	}
	// Another request naming r1 branches the conversation: refused, as
	// it is once the conversation went on by more turns.
	notLatest(r1, "something else")
	r3 := next(r2, "third")
	notLatest(r1, "something else")
	notLatest(r1, "second")
	notLatest(r2, "another")
	if got := next(r3, "fourth"); got == "" {
		t.Fatal("continuing from the latest response failed")
	}
}

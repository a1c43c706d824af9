package cli_test

import (
	"io"
	"net/http"
	"regexp"
	"testing"

	"github.com/stackbone/stackbone/internal/app"
)

var gogcRe = regexp.MustCompile(`(?m)^go_gc_gogc_percent (\d+)$`)

// TestServerGCPercent: a server runs its garbage collector at
// app.DefaultGCPercent unless GOGC is set, which wins (as /metrics shows).
func TestServerGCPercent(t *testing.T) {
	t.Parallel()
	dir := shopDir(t, "http://127.0.0.1:1")
	for _, c := range []struct{ gogc, want string }{{"", "400"}, {"100", "100"}} {
		p := startServer(t, []string{"OPENAI_API_KEY=sk-test", "GOGC=" + c.gogc}, "dev", "--dir", dir, "--addr", "127.0.0.1:0")
		resp, err := http.Get(p.URL() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := gogcRe.FindSubmatch(body)
		if m == nil || string(m[1]) != c.want {
			t.Fatalf("GOGC=%q: go_gc_gogc_percent %q; want %s", c.gogc, m, c.want)
		}
	}
	if app.DefaultGCPercent != 400 {
		t.Fatalf("DefaultGCPercent %d: update this test and the README", app.DefaultGCPercent)
	}
}

package studio_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestPlaywright drives Studio's chat playground with Playwright in
// Debian's Chromium (headless, as CI runs it) against the real binary:
// `stackbone dev` on the quickstart's `assistant` (the scripted model) and
// the tests' `shop` agent (tests/studio/project, on the mock OpenAI
// upstream), and `stackbone start` with keys on PostgreSQL for a caller's
// session. tests/studio/studio.mjs holds the cases; each is reported here as
// a subtest. The agent's refund pays through a counter of side effects this
// test serves, and the mock upstream's requests are served to the script, so
// a case can check how often a tool really ran and what the model was sent.
//
// STACKBONE_SCREENSHOTS=1 writes the quickstart's pictures to docs/;
// STACKBONE_PLAYWRIGHT_CASES=a,b runs only the named cases.
func TestPlaywright(t *testing.T) {
	chromium := chromiumPath()
	if chromium == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the Playwright tests need Chromium: %v", errChromiumMissing)
		}
		t.Skipf("the Playwright tests need Chromium: %v", errChromiumMissing)
	}
	node, dir := stacktest.NodeFixture(t, "studio", "playwright-core")
	root := stacktest.RepoRoot(t)
	bin := buildStackbone(t, root)

	raw, err := os.ReadFile(filepath.Join(dir, "mock-script.json"))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := script.Parse(raw)
	if err != nil {
		t.Fatalf("mock-script.json: %v", err)
	}
	upstream := modeltest.NewOpenAI(t, sc)
	effects := newEffects(t, upstream)

	env := []string{"OPENAI_BASE_URL=" + upstream.URL(), "OPENAI_API_KEY=sk-test-upstream", "EFFECTS_URL=" + effects.URL}
	devDir := testProject(t, root)
	dev := startStackbone(t, bin, env, "dev", "--dir", devDir, "--addr", "127.0.0.1:0")

	pg := stacktest.Postgres(t, "studio_pw")
	keys := "acme:sk-acme-admin-0123456789:admin:ops,acme:sk-acme-bob-0123456789ab:caller:bob"
	start := startStackbone(t, bin, append(env, "STACKBONE_API_KEYS="+keys), "start", "--dir", testProject(t, root),
		"--addr", "127.0.0.1:0", "--db", stacktest.PostgresURL()+"&search_path="+pg.Schema())

	cfg, _ := json.Marshal(map[string]any{
		"dev": dev.URL(), "start": start.URL(), "effects": effects.URL, "chromium": chromium,
		"callerKey": "sk-acme-bob-0123456789ab", "adminKey": "sk-acme-admin-0123456789", "tenant": "acme",
		"screenshots": os.Getenv("STACKBONE_SCREENSHOTS") == "1", "docs": filepath.Join(root, "docs"),
		"artifacts": filepath.Join(t.TempDir(), "artifacts"),
		"cases":     os.Getenv("STACKBONE_PLAYWRIGHT_CASES"),
	})
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "studio.mjs"), string(cfg))
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var out struct {
		Browser string
		Results []struct {
			Name, Error string
			OK          bool
			MS          int
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || len(out.Results) == 0 {
		t.Fatalf("studio.mjs printed no results (%v, exit %v):\nstdout: %s\nstderr: %s", err, runErr, stdout.String(), stderr.String())
	}
	t.Logf("Playwright in %s", out.Browser)
	for _, r := range out.Results {
		t.Run(r.Name, func(t *testing.T) {
			t.Logf("%d ms", r.MS)
			if !r.OK {
				t.Fatal(r.Error)
			}
		})
	}
	if runErr != nil && !t.Failed() {
		t.Fatalf("studio.mjs: %v\n%s", runErr, stderr.String())
	}
	if t.Failed() {
		t.Logf("studio.mjs stderr:\n%s", stderr.String())
	}
}

// buildStackbone builds the real binary (go build ./cmd/stackbone) into a
// temporary folder.
func buildStackbone(t *testing.T, root string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "stackbone")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/stackbone")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/stackbone: %v\n%s", err, out)
	}
	return bin
}

// testProject lays out a project folder: the quickstart's agents as a
// newcomer gets them, and the tests' shop agent.
func testProject(t *testing.T, root string) string {
	t.Helper()
	dir := t.TempDir()
	agents := filepath.Join(dir, "agents")
	if err := os.MkdirAll(agents, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"examples/quickstart/agents", "tests/studio/project/agents"} {
		entries, err := os.ReadDir(filepath.Join(root, src))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(root, src, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(agents, e.Name()), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// startStackbone runs `bin args…` and waits for its listening address; the
// process is killed when the test ends (its log is shown if the test
// failed).
func startStackbone(t *testing.T, bin string, env []string, args ...string) *stacktest.Process {
	t.Helper()
	return stacktest.StartProcess(t, bin, env, 2*time.Minute, args...)
}

// effects is the tests' view of the world outside the agents: POST /refund
// is the payment API the shop agent's refund calls (each call a side
// effect, counted), GET /refunds lists them, GET /model lists what the mock
// upstream was sent (role and text of each message, the tools offered).
type effects struct {
	*httptest.Server
	mu      sync.Mutex
	refunds []json.RawMessage
}

func newEffects(t *testing.T, upstream *modeltest.Server) *effects {
	e := &effects{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /refund", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil || !json.Valid(b) {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		e.mu.Lock()
		e.refunds = append(e.refunds, b)
		n := len(e.refunds)
		e.mu.Unlock()
		var a map[string]any
		_ = json.Unmarshal(b, &a)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"refunded": a["amount"], "orderId": a["orderId"], "payment": n})
	})
	mux.HandleFunc("GET /refunds", func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		list := append([]json.RawMessage{}, e.refunds...)
		e.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(list)
	})
	mux.HandleFunc("GET /model", func(w http.ResponseWriter, r *http.Request) {
		type msg struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		}
		type req struct {
			Seq      int      `json:"seq"`
			Messages []msg    `json:"messages"`
			Tools    []string `json:"tools"`
		}
		list := []req{}
		for _, rr := range upstream.Requests() {
			q := req{Seq: rr.Seq, Messages: []msg{}, Tools: []string{}}
			for _, m := range rr.Request.Messages {
				q.Messages = append(q.Messages, msg{Role: string(m.Role), Content: m.Content})
			}
			for _, tl := range rr.Request.Tools {
				q.Tools = append(q.Tools, tl.Name)
			}
			list = append(list, q)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(list)
	})
	e.Server = httptest.NewServer(mux)
	t.Cleanup(e.Close)
	return e
}

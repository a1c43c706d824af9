package stacktest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// RepoRoot is the repository's root: the first folder above the test's
// working directory that holds go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// NodeFixture returns node and a Node fixture folder under tests/, running
// `npm ci` there when one of the package probes (paths under node_modules)
// is missing. Without node or npm the test is skipped, except under
// CI=true, where it fails.
func NodeFixture(t testing.TB, folder string, probes ...string) (node, dir string) {
	t.Helper()
	node, nerr := exec.LookPath("node")
	npm, perr := exec.LookPath("npm")
	if nerr != nil || perr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node and npm are required in CI (node: %v, npm: %v)", nerr, perr)
		}
		t.Skipf("node/npm not installed; tests/%s needs them", folder)
	}
	dir = filepath.Join(RepoRoot(t), "tests", folder)
	for _, p := range probes {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p)); err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund")
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
			}
			break
		}
	}
	return node, dir
}

package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// nodeFixture returns node and a Node fixture folder under tests/, running
// `npm ci` there when one of the package probes (paths under node_modules)
// is missing. Without node or npm the test is skipped, except under CI=true,
// where it fails.
func nodeFixture(t *testing.T, folder string, probes ...string) (node, dir string) {
	t.Helper()
	node, nerr := exec.LookPath("node")
	npm, perr := exec.LookPath("npm")
	if nerr != nil || perr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node and npm are required in CI (node: %v, npm: %v)", nerr, perr)
		}
		t.Skipf("node/npm not installed; tests/%s needs them", folder)
	}
	dir = filepath.Join(repoRoot(t), "tests", folder)
	missing := false
	for _, p := range probes {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p)); err != nil {
			missing = true
		}
	}
	if missing {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}
	return node, dir
}

// runNodeScript runs a fixture's script with args and decodes the one JSON
// document it prints into out. It returns the script's exit error (a
// script exits 1 when one of its cases failed); output that is not JSON
// fails the test.
func runNodeScript(t *testing.T, node, dir, script string, out any, args ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(dir, script)}, args...)...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("%s output is not JSON (%v, exit %v):\nstdout: %s\nstderr: %s", script, err, runErr, stdout.String(), stderr.String())
	}
	if runErr != nil {
		return fmt.Errorf("%s: %w\n%s", script, runErr, stderr.String())
	}
	return nil
}

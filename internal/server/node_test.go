package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/stacktest"
)

// nodeFixture is stacktest.NodeFixture.
func nodeFixture(t *testing.T, folder string, probes ...string) (node, dir string) {
	t.Helper()
	return stacktest.NodeFixture(t, folder, probes...)
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

// startNodeServer starts cmd (a Node fixture that prints {"port": N} on its
// first stdout line once it listens) until the test ends, and returns the
// port; what names it in the failure.
func startNodeServer(t *testing.T, cmd *exec.Cmd, what string) int {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	var got struct{ Port int }
	if err != nil || json.Unmarshal([]byte(line), &got) != nil || got.Port == 0 {
		t.Fatalf("%s did not start: %v %q", what, err, line)
	}
	return got.Port
}

package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestBundleReproduces rebuilds Studio's vendored @ag-ui/client from
// tests/agui/node_modules and fails when the committed file differs: the
// bundle in the binary is exactly what the pinned packages and this
// generator make. Without node_modules it fails on CI (scripts/test.sh runs
// npm ci in tests/agui first) and is skipped elsewhere.
func TestBundleReproduces(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := repoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Bundle(root)
	if errors.Is(err, ErrNotInstalled) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(root, Out))
	if err != nil {
		t.Fatalf("the committed bundle: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s (%d bytes) is not what the generator builds now (%d bytes): run go run ./internal/studio/vendorgen and commit it", Out, len(want), len(got))
	}
	if !bytes.Contains(got, []byte("HttpAgent")) {
		t.Fatal("the bundle does not export HttpAgent")
	}
}

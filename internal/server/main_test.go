package server_test

import (
	"os"
	"testing"

	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestMain runs four tests at once on any machine: most wait on streams,
// timeouts and Node clients rather than compute.
func TestMain(m *testing.M) {
	stacktest.SetParallel(4)
	os.Exit(m.Run())
}

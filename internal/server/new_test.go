package server_test

import (
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/server"
	"github.com/stackbone/stackbone/internal/studio"
)

// TestConstructorsValidate: a server without its settings or runner, and a
// Studio without its server, are refused at construction.
func TestConstructorsValidate(t *testing.T) {
	if _, err := server.New(server.Config{}); err == nil || !strings.Contains(err.Error(), "Settings and Runner") {
		t.Fatalf("server.New with nothing: %v", err)
	}
	if _, err := studio.New(studio.Config{}); err == nil || !strings.Contains(err.Error(), "Server") {
		t.Fatalf("studio.New with nothing: %v", err)
	}
}

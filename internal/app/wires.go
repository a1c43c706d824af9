package app

import (
	"github.com/stackbone/stackbone/internal/studio"
	"github.com/stackbone/stackbone/internal/wire/agui"
	"github.com/stackbone/stackbone/internal/wire/anthropic"
)

// Packages that add routes to the server append their Mount func here, one
// line each, in the initializer of mountedWires.
var mountedWires = func() bool {
	serverExtensions = append(serverExtensions, anthropic.Mount)
	serverExtensions = append(serverExtensions, studio.Mount)
	serverExtensions = append(serverExtensions, agui.Mount)
	return true
}()

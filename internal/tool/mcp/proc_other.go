//go:build !linux

package mcp

import "os/exec"

// dieWithParent does nothing where there is no parent-death signal: a stdio
// server outlives a Stackbone killed by SIGKILL there.
func dieWithParent(*exec.Cmd) {}

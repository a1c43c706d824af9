package mcp

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill a stdio server when Stackbone dies,
// even by SIGKILL (which leaves no time to stop it): its parent-death signal.
func dieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

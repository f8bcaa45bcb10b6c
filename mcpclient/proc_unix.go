//go:build unix

package mcpclient

import (
	"os/exec"
	"syscall"
)

// setProcessGroup makes the child lead a process group of its own, which
// everything it starts joins unless it asks otherwise.
func setProcessGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// killProcessGroup kills every process of the group the child leads. A
// group that is already gone is fine.
func killProcessGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

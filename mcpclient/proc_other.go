//go:build !unix

package mcpclient

import "os/exec"

func setProcessGroup(*exec.Cmd) {}

// killProcessGroup is a no-op where there are no process groups: the
// session's Close already killed the child itself.
func killProcessGroup(int) {}

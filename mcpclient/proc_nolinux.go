//go:build !linux

package mcpclient

import "os/exec"

// dieWithParent has no parent-death signal to use outside Linux: the child
// is stopped with its process group on Stop, and after a SIGKILL of the
// daemon a server sees EOF on stdin and (as MCP stdio servers do) exits;
// what it started itself may outlive it.
func dieWithParent(cmd *exec.Cmd) *exec.Cmd { return cmd }

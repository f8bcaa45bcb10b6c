package testutil

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"
)

// InspectorPackage is the pinned MCP Inspector from npm (.ci/run warms the
// npx cache with it).
const InspectorPackage = "@modelcontextprotocol/inspector@2.12.0"

// inspectorTimeout bounds one Inspector run, npm download included.
const inspectorTimeout = 3 * time.Minute

// Inspector runs the Inspector CLI (npx -y InspectorPackage --cli args...)
// and returns its stdout and exit code: 0, or 5 for a tool call that the
// server answered with a tool error. Any other outcome fails t. Without npx
// the test ends through MissingPeer.
func Inspector(t testing.TB, args ...string) (stdout string, exit int) {
	t.Helper()
	RequireCommand(t, "npx", "install Node.js 20+ (apt-get install -y nodejs npm) to run the Inspector CLI tests")
	ctx, cancel := context.WithTimeout(context.Background(), inspectorTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npx", append([]string{"-y", InspectorPackage, "--cli"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		exit = ee.ExitCode()
	default:
		t.Fatalf("inspector: %v\n%s", err, errb.String())
	}
	if exit != 0 && exit != 5 {
		t.Fatalf("inspector %v: exit %d\nstdout: %s\nstderr: %s", args, exit, out.String(), errb.String())
	}
	return out.String(), exit
}

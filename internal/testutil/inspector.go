package testutil

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// inspectorPackage is the pinned MCP Inspector from npm (.ci/run warms the
// npx cache with it).
const inspectorPackage = "@modelcontextprotocol/inspector@2.12.0"

// inspectorTimeout bounds one Inspector run, npm download included.
const inspectorTimeout = 3 * time.Minute

// inspector runs the Inspector CLI (npx -y inspectorPackage --cli args...)
// and returns its stdout and exit code: 0, or 5 for a tool call that the
// server answered with a tool error. Any other outcome fails t. Without npx
// the test ends through MissingPeer.
func inspector(t testing.TB, args ...string) (stdout string, exit int) {
	t.Helper()
	RequireCommand(t, "npx", "install Node.js 20+ (apt-get install -y nodejs npm) to run the Inspector CLI tests")
	ctx, cancel := context.WithTimeout(context.Background(), inspectorTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npx", append([]string{"-y", inspectorPackage, "--cli"}, args...)...)
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

// CheckAgentTools drives an axocoatl MCP server (package mcpserver, over
// stdio or HTTP) with the Inspector CLI. target is the Inspector's target:
// a URL, or a command with its arguments, with any Inspector flags such as
// -e or --header. The server must have an agent "echo" that repeats its
// input and an agent "broken" whose model fails with "upstream exploded".
// It lists the tools with the Inspector's --strict schema check, then calls
// agent_echo (a result) and agent_broken (a tool error, exit 5).
func CheckAgentTools(t testing.TB, target ...string) {
	t.Helper()
	with := func(args ...string) []string { return append(append([]string{}, target...), args...) }
	out, _ := inspector(t, with("--method", "tools/list", "--strict")...)
	if !strings.Contains(out, `"agent_echo"`) || !strings.Contains(out, `"agent_broken"`) || !strings.Contains(out, `"required"`) {
		t.Errorf("inspector tools/list: %s", out)
	}
	out, exit := inspector(t, with("--method", "tools/call", "--tool-name", "agent_echo", "--tool-arg", "input=from the inspector")...)
	if exit != 0 || !strings.Contains(out, "from the inspector") {
		t.Errorf("inspector agent_echo: exit %d: %s", exit, out)
	}
	out, exit = inspector(t, with("--method", "tools/call", "--tool-name", "agent_broken", "--tool-arg", "input=x")...)
	if exit != 5 || !strings.Contains(out, "upstream exploded") {
		t.Errorf("inspector agent_broken: exit %d (want 5, a tool error): %s", exit, out)
	}
}

package testutil

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The official MCP conformance suite and the Node.js it needs (≥ 22: it
// calls fs.globSync), both pinned and installed from npm like the other
// npm peers, so that Node 20 on PATH serves the rest unchanged.
const (
	ConformanceSpec = "@modelcontextprotocol/conformance@0.1.16"
	Node22Spec      = "node@22.23.3"
)

// Conformance returns the Node 22 binary and the suite's CLI script,
// installing them on first use (NodeModules). Without node and npm to
// install them the test ends through MissingPeer.
func Conformance(t testing.TB) (node, cli string) {
	t.Helper()
	node = filepath.Join(NodeModules(t, Node22Spec), "node", "bin", "node")
	out, err := exec.Command(node, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "v22.") {
		MissingPeer(t, "Node 22 from npm ("+Node22Spec+") does not run here ("+strings.TrimSpace(string(out))+"): the MCP conformance suite needs Node >= 22; .ci/run installs it")
	}
	cli = filepath.Join(NodeModules(t, ConformanceSpec), "@modelcontextprotocol", "conformance", "dist", "index.js")
	return node, cli
}

// RunConformance runs the suite's CLI with args under Node 22 (its
// directory first on PATH, for the commands it spawns) and returns its
// combined output and exit code.
func RunConformance(t testing.TB, node, cli string, timeout time.Duration, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{cli}, args...)...)
	cmd.Dir = t.TempDir() // its results directory goes there
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(node)+string(os.PathListSeparator)+os.Getenv("PATH"), "NO_COLOR=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("conformance %v: no end within %s:\n%s", args, timeout, out.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("conformance %v: %v", args, err)
	}
	return out.String(), code
}

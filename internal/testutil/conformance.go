package testutil

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// CheckBaselineReasons fails t when an entry of an expected-failures file
// has no reason: a "# why" comment on its line.
func CheckBaselineReasons(t testing.TB, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	entry, reason := regexp.MustCompile(`^\s*-\s*\S+`), regexp.MustCompile(`\s#\s*\S`)
	for i, line := range strings.Split(string(data), "\n") {
		if entry.MatchString(line) && !reason.MatchString(line) {
			t.Errorf("%s:%d: %q says not why it is expected to fail", path, i+1, strings.TrimSpace(line))
		}
	}
}

// RequireUnexpectedFailureFails runs the suite in mode ("server" or
// "client") with args and an empty baseline, and fails t unless the run
// fails: args must name a scenario that fails, so this shows that a
// failure outside the baseline fails the run.
func RequireUnexpectedFailureFails(t testing.TB, node, cli, mode string, args ...string) {
	t.Helper()
	empty := filepath.Join(t.TempDir(), "empty.yml")
	if err := os.WriteFile(empty, []byte(mode+": []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := RunConformance(t, node, cli, 5*time.Minute, append(append([]string{mode}, args...), "--expected-failures", empty)...)
	if code == 0 {
		t.Fatalf("a failing scenario outside the baseline passed the run:\n%s", out)
	}
}

// ConformanceSummary is the SUMMARY section of the suite's output (all of
// it when there is none).
func ConformanceSummary(out string) string {
	if i := strings.Index(out, "SUMMARY ==="); i >= 0 {
		return out[max(0, i-8):]
	}
	return out
}

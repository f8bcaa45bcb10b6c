package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// serverBaseline lists the server scenarios expected to fail, each with
// its reason.
var serverBaseline = filepath.Join("testdata", "conformance", "server-baseline.yml")

// The official MCP conformance suite's server scenarios against /mcp: every
// scenario passes or fails as the baseline expects (a new failure fails,
// and so does a baseline entry that starts passing). That a failure not in
// the baseline fails the run is checked too, with one scenario and an
// empty baseline.
func TestMCPConformanceServer(t *testing.T) {
	if testing.Short() {
		t.Skip("installs and runs the conformance suite; skipped with -short")
	}
	checkBaselineReasons(t, serverBaseline)
	node, cli := testutil.Conformance(t)
	td := startDaemon(t, "approval:\n  default: allow\nagents:\n  - id: assistant\n", nil)
	base, err := filepath.Abs(serverBaseline)
	if err != nil {
		t.Fatal(err)
	}
	out, code := testutil.RunConformance(t, node, cli, 10*time.Minute, "server", "--url", td.url+"/mcp", "--expected-failures", base)
	t.Logf("conformance server:\n%s", summary(out))
	if code != 0 {
		t.Fatalf("conformance server: exit %d, want 0 (a failure not in %s, or an entry there that now passes):\n%s", code, serverBaseline, out)
	}

	empty := filepath.Join(t.TempDir(), "empty.yml")
	if err := os.WriteFile(empty, []byte("server: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = testutil.RunConformance(t, node, cli, 2*time.Minute, "server", "--url", td.url+"/mcp", "--scenario", "completion-complete", "--expected-failures", empty)
	if code == 0 {
		t.Fatalf("a failing scenario outside the baseline passed the run:\n%s", out)
	}
}

// checkBaselineReasons fails t when an entry of a baseline file has no
// reason (a "# why" comment on its line).
func checkBaselineReasons(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	entry := regexp.MustCompile(`^\s*-\s*\S+`)
	for i, line := range strings.Split(string(data), "\n") {
		if entry.MatchString(line) && !regexp.MustCompile(`\s#\s*\S`).MatchString(line) {
			t.Errorf("%s:%d: %q says not why it is expected to fail", path, i+1, strings.TrimSpace(line))
		}
	}
}

// summary is the suite's SUMMARY section (the whole output when it has
// none).
func summary(out string) string {
	if i := strings.Index(out, "=== SUMMARY ==="); i >= 0 {
		return out[i:]
	}
	return out
}

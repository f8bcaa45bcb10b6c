package main

import (
	"path/filepath"
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
	testutil.CheckBaselineReasons(t, serverBaseline)
	node, cli := testutil.Conformance(t)
	td := startDaemon(t, "approval:\n  default: allow\nagents:\n  - id: assistant\n", nil)
	base, err := filepath.Abs(serverBaseline)
	if err != nil {
		t.Fatal(err)
	}
	out, code := testutil.RunConformance(t, node, cli, 10*time.Minute, "server", "--url", td.url+"/mcp", "--expected-failures", base)
	t.Logf("conformance server:\n%s", testutil.ConformanceSummary(out))
	if code != 0 {
		t.Fatalf("conformance server: exit %d, want 0 (a failure not in %s, or an entry there that now passes):\n%s", code, serverBaseline, out)
	}
	testutil.RequireUnexpectedFailureFails(t, node, cli, "server", "--url", td.url+"/mcp", "--scenario", "completion-complete")
}

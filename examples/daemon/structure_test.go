package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The daemon is built from the library's public API only: it imports no
// internal/ package of this module, so any outside host can build what the
// daemon builds (the library's own packages use them, as go list -deps
// shows; an outside importer is refused only direct imports).
func TestDaemonImportsNoInternalPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	const module = "github.com/axocoatl/axocoatl-go/"
	n := 0
	for _, pkg := range strings.Fields(string(out)) {
		if !strings.HasPrefix(pkg, module) {
			continue
		}
		n++
		if strings.Contains(pkg, "/internal/") || strings.HasSuffix(pkg, "/internal") {
			t.Errorf("the daemon imports %s", pkg)
		}
	}
	if n == 0 {
		t.Fatalf("go list found only %d imports of the module:\n%s", n, out)
	}
}

// maxDaemonLines bounds the daemon's own code: the CLI, its flags, signals
// and the server's lifecycle; everything it serves is the library's.
const maxDaemonLines = 700

// TestDaemonStaysThin counts the lines of the daemon's non-test Go files.
func TestDaemonStaysThin(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			total++
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if total == 0 || total > maxDaemonLines {
		t.Fatalf("examples/daemon has %d lines of non-test Go, want 1..%d", total, maxDaemonLines)
	}
	t.Logf("%d lines of non-test Go", total)
}

package testutil

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// DaemonPackage is the import path of the axocoatl daemon.
const DaemonPackage = "github.com/axocoatl/axocoatl-go/examples/daemon"

// buildTimeout bounds one build of the daemon: a cold build takes minutes on
// a busy 2-core machine.
const buildTimeout = 15 * time.Minute

// BuildDaemon compiles the daemon as users do (go build), with the race
// detector when race is set, into a directory of t's that is removed when
// the test ends, and returns the binary's path. Each call builds again: the
// compiled packages come from Go's build cache, only the link is repeated.
func BuildDaemon(t testing.TB, race bool) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "axocoatl")
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(ctx, "go", append(args, DaemonPackage)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", DaemonPackage, err, out)
	}
	return bin
}

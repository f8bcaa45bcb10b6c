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

// npmTimeout bounds one npm install (a download on a cold cache).
const npmTimeout = 3 * time.Minute

// NodeModules returns a node_modules directory holding the pinned npm
// package spec (name@version) and its dependencies, for a node script that
// imports the package as a library. Installs are cached per spec under the
// user cache directory (npm's own cache, which .ci/run warms with `npm cache
// add`, makes a first install fast); a new install goes to a temporary
// directory first and is renamed into place, so concurrent test processes
// never see half an install. Without node and npm the test ends through
// MissingPeer.
func NodeModules(t testing.TB, spec string) string {
	t.Helper()
	RequireCommand(t, "node", "install Node.js 20+ (apt-get install -y nodejs npm) to run the npm peer tests")
	RequireCommand(t, "npm", "install npm (apt-get install -y npm) to run the npm peer tests")
	name := spec
	if i := strings.LastIndex(spec, "@"); i > 0 {
		name = spec[:i]
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	root := filepath.Join(cache, "axocoatl-tests", "npm")
	dir := filepath.Join(root, strings.NewReplacer("/", "+", "@", "_").Replace(spec))
	modules := filepath.Join(dir, "node_modules")
	if _, err := os.Stat(filepath.Join(modules, name, "package.json")); err == nil {
		return modules
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(root, "install-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), npmTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--no-save", "--prefix", tmp, spec)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("npm install %s: %v\n%s", spec, err, out.String())
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another process installed it meanwhile: use theirs.
		if _, serr := os.Stat(filepath.Join(modules, name, "package.json")); serr != nil {
			t.Fatalf("npm install %s: moving into place: %v", spec, err)
		}
	}
	return modules
}

// RunNode runs the node script at script (a .mjs file) with args, from a
// temporary directory whose node_modules is modules, so that the script's
// bare imports resolve there. It returns stdout; a non-zero exit fails t
// with both outputs.
func RunNode(t testing.TB, modules, script string, timeout time.Duration, args ...string) string {
	t.Helper()
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, filepath.Base(script))
	if err := os.WriteFile(path, src, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{path}, args...)...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s %v: %v\nstdout: %s\nstderr: %s", filepath.Base(script), args, err, out.String(), errb.String())
	}
	return out.String()
}

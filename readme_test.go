package axocoatl_test

import (
	"encoding/json"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMEEmbedding builds the Go program under the README's
// "## Embedding" heading exactly as it is shown, as a main package of this
// module (through a build overlay, so nothing is written into the tree):
// its imports, its ctx and its error handling must be real.
func TestREADMEEmbedding(t *testing.T) {
	src := readmeGoBlock(t, "## Embedding")
	if !strings.HasPrefix(src, "package main\n") {
		t.Fatalf("the README's embedding block is not a whole program:\n%s", src)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "main.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// A directory that does not exist in the module: the overlay adds it.
	virtual := filepath.Join(wd, "internal", "readmeembedding", "main.go")
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {virtual: file}})
	if err != nil {
		t.Fatal(err)
	}
	overlayFile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-overlay", overlayFile, "-o", filepath.Join(dir, "embedding"), "./internal/readmeembedding")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's embedding program does not build: %v\n%s\n%s", err, out, src)
	}
	if formatted, err := format.Source([]byte(src)); err != nil || string(formatted) != src {
		t.Errorf("the README's embedding program is not gofmt-formatted (%v); gofmt gives:\n%s", err, formatted)
	}
}

// readmeGoBlock returns the first ```go block after heading in README.md.
func readmeGoBlock(t *testing.T, heading string) string {
	t.Helper()
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	i := strings.Index(text, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README.md has no %q heading", heading)
	}
	text = text[i:]
	start := strings.Index(text, "\n```go\n")
	if start < 0 {
		t.Fatalf("no ```go block under %q", heading)
	}
	text = text[start+len("\n```go\n"):]
	end := strings.Index(text, "\n```\n")
	if end < 0 {
		t.Fatalf("the ```go block under %q does not end", heading)
	}
	return text[:end+1]
}

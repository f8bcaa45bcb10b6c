package axocoatl_test

import (
	"encoding/json"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
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

// TestDocsLinks: every relative link of README.md and docs/*.md names a
// file of the repository and, with a #fragment, a heading of that file (as
// GitHub makes anchors of headings), so moving text between documents
// cannot leave a link behind.
func TestDocsLinks(t *testing.T) {
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "README.md")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(withoutCode(string(data)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			resolved := file
			if path != "" {
				resolved = filepath.Join(filepath.Dir(file), path)
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s: link %q: %v", file, target, err)
					continue
				}
			}
			if anchor != "" && !slices.Contains(anchors(t, resolved), anchor) {
				t.Errorf("%s: link %q: %s has no heading with that anchor (has %v)", file, target, resolved, anchors(t, resolved))
			}
		}
	}
}

// withoutCode drops fenced code blocks, whose brackets are not links.
func withoutCode(md string) string {
	var b strings.Builder
	in := false
	for line := range strings.SplitSeq(md, "\n") {
		if strings.HasPrefix(line, "```") {
			in = !in
			continue
		}
		if !in {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// anchors are the GitHub anchors of a Markdown file's headings: lower
// case, punctuation but '-' and '_' dropped, spaces as '-'.
func anchors(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.SplitSeq(withoutCode(string(data)), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}

package axocoatl_test

import (
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// linesPerDocLink is the godoc density every public package keeps: at least
// one doc link ([Engine.ExecuteRequest], [lattice.Bus], ...) per this many
// lines of non-test code, so a reader of the package's documentation can
// follow it to the types and functions it talks about.
const linesPerDocLink = 60

// TestDocLinkDensity counts the doc links godoc resolves in each public
// package's doc comments (the package, its declarations and their fields),
// with the package's own lookup, so a bracketed word that is not a link
// ([redacted], [0]) does not count.
func TestDocLinkDensity(t *testing.T) {
	for dir, pkg := range publicPackages(t) {
		lines, links := 0, 0
		for name, f := range pkg.files {
			src, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			lines += strings.Count(string(src), "\n")
			links += docLinks(pkg.parser, f)
		}
		if need := lines / linesPerDocLink; links < need {
			t.Errorf("%s: %d doc links in %d lines of non-test code; want at least %d (one per %d lines)",
				dir, links, lines, need, linesPerDocLink)
		}
	}
}

type parsedPackage struct {
	files  map[string]*ast.File
	parser *comment.Parser
}

// publicPackages parses every non-test, non-main package of the module
// outside internal/, examples/, bench/ and testdata.
func publicPackages(t *testing.T) map[string]parsedPackage {
	t.Helper()
	fset := token.NewFileSet()
	byDir := map[string]map[string]*ast.File{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "internal", "examples", "bench", "testdata", "node_modules", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" {
			return nil
		}
		dir := filepath.Dir(path)
		if byDir[dir] == nil {
			byDir[dir] = map[string]*ast.File{}
		}
		byDir[dir][path] = f
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string]parsedPackage{}
	for dir, files := range byDir {
		list := make([]*ast.File, 0, len(files))
		for _, f := range files {
			list = append(list, f)
		}
		dp, err := doc.NewFromFiles(fset, list, "github.com/axocoatl/axocoatl-go/"+filepath.ToSlash(dir), doc.PreserveAST)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		pkgs[dir] = parsedPackage{files: files, parser: dp.Parser()}
	}
	if len(pkgs) < 10 {
		t.Fatalf("found only %d public packages; the walk is wrong", len(pkgs))
	}
	return pkgs
}

// docLinks counts the doc links in f's doc comments.
func docLinks(p *comment.Parser, f *ast.File) int {
	n := 0
	count := func(g *ast.CommentGroup) {
		if g != nil {
			n += linksIn(p.Parse(g.Text()).Content)
		}
	}
	count(f.Doc)
	ast.Inspect(f, func(node ast.Node) bool {
		switch d := node.(type) {
		case *ast.GenDecl:
			count(d.Doc)
		case *ast.FuncDecl:
			count(d.Doc)
		case *ast.TypeSpec:
			count(d.Doc)
		case *ast.ValueSpec:
			count(d.Doc)
		case *ast.Field:
			count(d.Doc)
		}
		return true
	})
	return n
}

func linksIn(blocks []comment.Block) int {
	n := 0
	var text func([]comment.Text)
	text = func(ts []comment.Text) {
		for _, t := range ts {
			switch x := t.(type) {
			case *comment.DocLink:
				n++
			case *comment.Link:
				text(x.Text)
			}
		}
	}
	for _, b := range blocks {
		switch x := b.(type) {
		case *comment.Paragraph:
			text(x.Text)
		case *comment.Heading:
			text(x.Text)
		case *comment.List:
			for _, it := range x.Items {
				n += linksIn(it.Content)
			}
		}
	}
	return n
}

package a2awire

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Every file of the module imports the A2A 0.3 types as a2a03 and the 1.0
// ones as a2a1: a bare a2a meant 0.3 in one package and 1.0 in the next.
func TestImportAliases(t *testing.T) {
	want := map[string]string{
		"github.com/a2aproject/a2a-go/a2a":    "a2a03",
		"github.com/a2aproject/a2a-go/v2/a2a": "a2a1",
	}
	root := filepath.Join("..", "..")
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, is := range f.Imports {
			p, _ := strconv.Unquote(is.Path.Value)
			alias, ok := want[p]
			if !ok {
				continue
			}
			files++
			if is.Name == nil || is.Name.Name != alias {
				t.Errorf("%s imports %s without the name %s", path, p, alias)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("no file imports the a2a packages: the walk missed the module")
	}
}

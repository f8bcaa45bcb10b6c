package config_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/a2aremote"
	"github.com/axocoatl/axocoatl-go/approval"
	"github.com/axocoatl/axocoatl-go/mcpclient"
)

const modulePath = "github.com/axocoatl/axocoatl-go"

// The bus knows no module: no file of lattice (or lattice/nats), tests
// included, imports a package of this module outside lattice (but for the
// test helpers of internal/testutil, which import none either), or names
// an event type the Engine or a module publishes, in code, string or
// comment. The names come from the publishers themselves, so an event
// added later is covered. (This test is here because config is the package
// that already imports every module.)
func TestLatticeKnowsNoModule(t *testing.T) {
	names := []string{axocoatl.EventAgentActivated, axocoatl.EventTaskCompleted, axocoatl.EventAgentFailed,
		axocoatl.EventToolCalled, axocoatl.EventToolResult, axocoatl.EventModelResult}
	ap, err := approval.New(approval.Config{})
	if err != nil {
		t.Fatal(err)
	}
	mc, err := mcpclient.New(mcpclient.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ar, err := a2aremote.New(a2aremote.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []axocoatl.EventDeclarer{ap, mc, ar} {
		for typ := range d.Events() {
			names = append(names, typ)
		}
	}
	if len(names) < 15 {
		t.Fatalf("only %d event types found: %v", len(names), names)
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = regexp.QuoteMeta(n)
	}
	slices.Sort(quoted)
	named := regexp.MustCompile(`\b(` + strings.Join(quoted, "|") + `)\b`)

	checked := 0
	checkTree := func(dir string, allowed func(path string, test bool) bool) {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			checked++
			if m := named.FindIndex(src); m != nil {
				line := 1 + strings.Count(string(src[:m[0]]), "\n")
				t.Errorf("%s:%d names the event type %s", path, line, src[m[0]:m[1]])
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if (p == modulePath || strings.HasPrefix(p, modulePath+"/")) && !allowed(p, strings.HasSuffix(path, "_test.go")) {
					t.Errorf("%s imports %s", path, p)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Below the lattice only leaves: the secret type, the config error type
	// (NATS credentials are secrets, validated like every section), the
	// cluster's signatures (which know only the secret type), and in tests
	// the test helpers.
	checkTree(filepath.Join("..", "lattice"), func(p string, test bool) bool {
		return p == modulePath+"/lattice" || strings.HasPrefix(p, modulePath+"/lattice/") ||
			p == modulePath+"/secret" || p == modulePath+"/internal/cfgerr" || p == modulePath+"/internal/clustersig" ||
			test && (p == modulePath+"/internal/testutil" || p == modulePath+"/internal/natstest")
	})
	for _, leaf := range [][]string{{"internal", "testutil"}, {"internal", "natstest"}, {"secret"}, {"internal", "cfgerr"}} {
		// A leaf's own tests may use the module (testutil's test reads
		// its model servers with the real providers): they are not
		// compiled into what imports the leaf.
		checkTree(filepath.Join(append([]string{".."}, leaf...)...), func(_ string, test bool) bool { return test })
	}
	checkTree(filepath.Join("..", "internal", "clustersig"), func(p string, test bool) bool { return p == modulePath+"/secret" || test })
	if checked < 10 {
		t.Fatalf("only %d files checked", checked)
	}
}

package provider_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/axocoatl/axocoatl-go"

// deps lists the packages pkgs build, standard library excluded (go list
// reads the import graph; nothing is compiled).
func deps(t *testing.T, pkgs ...string) []string {
	t.Helper()
	goTool, err := exec.LookPath("go") // go test puts its own go first on PATH
	if err != nil {
		t.Fatalf("the go command is needed to read the import graph: %v", err)
	}
	out, err := exec.Command(goTool, append([]string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, pkgs...)...).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %v: %v\n%s", pkgs, err, stderr)
	}
	return strings.Fields(string(out))
}

// A host pays only for the providers it imports: the build cost of a
// provider (once minutes, with an SDK) must not creep back into hosts that
// use another one, nor into the packages every provider shares. What is
// checked is the import graph, which is what the build time follows.
func TestHostBuildsOnlyItsProvider(t *testing.T) {
	const (
		base      = module + "/agent/provider"
		openai    = base + "/openai"
		anthropic = base + "/anthropic"
	)
	cases := []struct {
		host    string
		without []string
	}{
		{module + "/bench/hosts/openai", []string{anthropic}},
		{module + "/bench/hosts/anthropic", []string{openai}},
		{openai, []string{anthropic}},
		{anthropic, []string{openai}},
		{base, []string{openai, anthropic, base + "/internal/wire"}},
	}
	for _, tc := range cases {
		t.Run(strings.TrimPrefix(tc.host, module+"/"), func(t *testing.T) {
			got := deps(t, tc.host)
			if len(got) == 0 {
				t.Fatal("go list printed no packages")
			}
			for _, p := range got {
				// The providers speak their APIs with net/http and
				// encoding/json: no SDK, no other module at all.
				if !strings.HasPrefix(p, module+"/") {
					t.Errorf("%s builds %s, from outside this module (an SDK?)", tc.host, p)
				}
				for _, w := range tc.without {
					if p == w || strings.HasPrefix(p, w+"/") {
						t.Errorf("%s builds %s", tc.host, p)
					}
				}
			}
			t.Logf("%s builds %d packages of this module: %v", tc.host, len(got), got)
		})
	}
}

// The daemon reads the provider's kind from its config, so it builds every
// provider: through builtin, and still without any SDK.
func TestBuiltinBuildsEveryProviderWithoutSDKs(t *testing.T) {
	got := deps(t, module+"/agent/provider/builtin")
	for _, want := range []string{"openai", "anthropic"} {
		if !slices.Contains(got, module+"/agent/provider/"+want) {
			t.Errorf("builtin does not build the %s provider", want)
		}
	}
	for _, p := range got {
		if !strings.HasPrefix(p, module+"/") {
			t.Errorf("builtin builds %s, from outside this module", p)
		}
	}
}

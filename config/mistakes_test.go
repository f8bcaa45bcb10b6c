package config_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/axocoatl/axocoatl-go/config"
)

// fieldErrors parses text and returns its errors, each a *config.FieldError.
func fieldErrors(t *testing.T, text string, vars map[string]string) []*config.FieldError {
	t.Helper()
	cfg, err := config.ParseWith(context.Background(), "m.yaml", []byte(text), env(vars))
	if err == nil {
		t.Fatalf("accepted (warnings %q):\n%s", cfg.Warnings, text)
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("not a joined error: %T %v", err, err)
	}
	var out []*config.FieldError
	for _, e := range j.Unwrap() {
		var fe *config.FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("not a *config.FieldError: %T %v", e, e)
		}
		if goType.MatchString(fe.Msg) {
			t.Errorf("the message names a Go type: %v", fe)
		}
		out = append(out, fe)
	}
	return out
}

// goType is a qualified Go type name (mcpserver.Config, []agent.Spec).
var goType = regexp.MustCompile(`\b[a-z][a-z0-9]*\.[A-Z][A-Za-z0-9]*\b`)

// A key dedented out of its section (addr: at the top level) is an error
// naming where it belongs: before, it was a warning, validate said ok and
// the daemon listened on the default port. A top-level section of another
// program's config whose name is such a key, but whose value has another
// shape, stays a warning.
func TestDedentedKeyIsAnError(t *testing.T) {
	text := "server:\n  api_token: 0123456789abcdef\naddr: 0.0.0.0:9000\nagents:\n  - id: a\n"
	errs := fieldErrors(t, text, nil)
	if len(errs) != 1 || errs[0].Key != "addr" || errs[0].Line != 3 || !strings.Contains(errs[0].Msg, "did you mean `server.addr`?") {
		t.Fatalf("errors %v", errs)
	}
	// A key of list entries and of a section: every place is named.
	errs = fieldErrors(t, "agents:\n  - id: a\ntimeout: 5m\n", nil)
	if len(errs) != 1 || errs[0].Line != 3 || !strings.Contains(errs[0].Msg, "`agents[].timeout`") || !strings.Contains(errs[0].Msg, "`approval.timeout`") {
		t.Fatalf("errors %v", errs)
	}
	cfg, err := config.ParseWith(context.Background(), "m.yaml", []byte("agents:\n  - id: a\ntools:\n  registry: x\nmemory:\n  backend: x\n"), env(nil))
	if err != nil || len(cfg.Warnings) != 2 {
		t.Fatalf("err %v, warnings %q", err, cfg.Warnings)
	}
}

// mcp_server: holding a list (the entries of mcp_servers) says so, and
// mcp_servers: holding a mapping the other way round; neither names a Go
// type (before: "expected a mapping (mcpserver.Config), got a list").
func TestWrongShapeSuggestsTheSibling(t *testing.T) {
	errs := fieldErrors(t, "agents:\n  - id: a\nmcp_server:\n  - name: fs\n    command: npx\n", nil)
	if len(errs) != 1 || errs[0].Key != "mcp_server" || errs[0].Line != 3 || !strings.Contains(errs[0].Msg, "did you mean `mcp_servers`?") {
		t.Fatalf("errors %v", errs)
	}
	errs = fieldErrors(t, "agents:\n  - id: a\nmcp_servers:\n  name: axo\n", nil)
	if len(errs) != 1 || errs[0].Key != "mcp_servers" || errs[0].Line != 3 || !strings.Contains(errs[0].Msg, "did you mean `mcp_server`?") {
		t.Fatalf("errors %v", errs)
	}
	// With no sibling of the value's shape, the decoder's error says what
	// the key takes in the config's words.
	errs = fieldErrors(t, "agents:\n  - id: a\na2a: [1, 2]\napproval: deny\n", nil)
	if len(errs) != 2 || errs[0].Msg != "expected a mapping, got a list" || errs[1].Msg != "expected a mapping, got a string `deny`" {
		t.Fatalf("errors %v", errs)
	}
}

// One run reports every error of the file, whatever its kind, each at its
// line: before, the first kind found (an unknown key) hid the type error
// and the validation errors.
func TestEveryErrorOfAFile(t *testing.T) {
	text := `server:
  api_token: ${UNSET_TOKEN}
agents:
  - id: a
    sytem_prompt: hi
    timeout: soon
    max_iterations: -1
approval:
  default: maybe
`
	errs := fieldErrors(t, text, nil)
	var got []string
	for _, fe := range errs {
		if fe.File != "m.yaml" {
			t.Errorf("file %q", fe.File)
		}
		got = append(got, fe.Key)
	}
	want := []string{"server.api_token", "agents[0].sytem_prompt", "agents[0].timeout", "agents[0].max_iterations", "approval.default"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("keys %q, want %q (in the file's order)\n%v", got, want, errs)
	}
	for i, at := range []string{"api_token", "sytem_prompt", "timeout: soon", "max_iterations", "default: maybe"} {
		if errs[i].Line != lineOf(t, text, at) {
			t.Errorf("%s at line %d, want the line of %q", errs[i].Key, errs[i].Line, at)
		}
	}
	// A value that did not decode is not checked again: no "agents:
	// at least one agent is required" beside the type error of agents.
	errs = fieldErrors(t, "agents: assistant\n", nil)
	if len(errs) != 1 || errs[0].Key != "agents" || !strings.Contains(errs[0].Msg, "expected a list") {
		t.Fatalf("errors %v", errs)
	}
	// Nor is the entry holding it ("id is required" beside a list for id).
	errs = fieldErrors(t, "agents:\n  - id: [x]\n", nil)
	if len(errs) != 1 || errs[0].Key != "agents[0].id" {
		t.Fatalf("errors %v", errs)
	}
	// A duplicate key does not stop the rest of the file being read.
	errs = fieldErrors(t, "agents:\n  - id: a\n    id: b\n    timeout: -1s\n", nil)
	if len(errs) != 2 || errs[0].Key != "agents[0].id" || errs[0].Msg != "duplicate key" || errs[1].Key != "agents[0].timeout" {
		t.Fatalf("errors %v", errs)
	}
}

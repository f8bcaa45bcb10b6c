package config_test

import (
	"context"
	"strings"
	"testing"

	"github.com/axocoatl/axocoatl-go/config"
)

// A value that came from a variable may be a secret: a module's Validate
// error about it names the key and the line but never quotes the value
// (the decoder's type errors already did not). Before, server.addr:
// ${API_TOKEN} by mistake printed the token in `"…" is not host:port`,
// as did an mcp_servers entry's url and an anchored value used there.
func TestValidateErrorsHideVariables(t *testing.T) {
	const token = "tok-hunter2-0123456789abcdef"
	vars := env(map[string]string{"API_TOKEN": token})
	for _, tc := range []struct{ yaml, want string }{
		{"agents:\n  - id: a\nserver:\n  addr: ${API_TOKEN}\n", "d.yaml:4: server.addr: (value hidden) is not host:port"},
		{"agents:\n  - id: a\nmcp_servers:\n  - name: s\n    url: x${API_TOKEN}\n", "d.yaml:5: mcp_servers[0].url: (value hidden) must be an absolute http or https URL"},
		{"x-url: &u ${API_TOKEN}\nagents:\n  - id: a\nmcp_servers:\n  - name: s\n    url: *u\n", "mcp_servers[0].url: (value hidden) must be"},
	} {
		_, err := config.ParseWith(context.Background(), "d.yaml", []byte(tc.yaml), vars)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: error %v, want %q and never the variable's value", tc.yaml, err, tc.want)
		}
	}
	// A value written in the file is quoted as before.
	_, err := config.ParseWith(context.Background(), "d.yaml", []byte("agents:\n  - id: a\nserver:\n  addr: nohost\n"), vars)
	if err == nil || !strings.Contains(err.Error(), `"nohost" is not host:port`) {
		t.Errorf("literal addr: error %v, want it quoted", err)
	}
}

// A list's own check (unique names) failing does not stop its entries
// being checked: one run reports every error of the file. Before, a name
// used twice hid every entry's error, and entries without a name were
// reported only as `duplicate name ""`.
func TestDuplicateNameHidesNoEntryError(t *testing.T) {
	for _, tc := range []struct {
		yaml    string
		want    []string
		notWant string
	}{
		{"agents:\n  - id: a\nwebhooks:\n  - name: a\n    url: http://127.0.0.1:9/\n  - name: a\n    url: nope\n",
			[]string{`webhooks: duplicate name "a" (entries 0 and 1)`, "d.yaml:7: webhooks[1].url"}, ""},
		{"agents:\n  - id: a\nwebhooks:\n  - url: http://127.0.0.1:9/\n  - url: http://127.0.0.1:9/\n",
			[]string{"d.yaml:4: webhooks[0]: name is required", "d.yaml:5: webhooks[1]: name is required"}, `duplicate name ""`},
		{"agents:\n  - id: a\nmcp_servers:\n  - name: s\n    command: x\n  - name: s\n    url: nope\n",
			[]string{`mcp_servers: duplicate name "s"`, "d.yaml:7: mcp_servers[1].url"}, ""},
	} {
		_, err := config.ParseWith(context.Background(), "d.yaml", []byte(tc.yaml), env(nil))
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%q: error %q, want %q in it", tc.yaml, msg, w)
			}
		}
		if tc.notWant != "" && strings.Contains(msg, tc.notWant) {
			t.Errorf("%q: error %q has %q", tc.yaml, msg, tc.notWant)
		}
	}
}

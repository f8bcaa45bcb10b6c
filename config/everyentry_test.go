package config_test

import (
	"context"
	"strings"
	"testing"

	"github.com/axocoatl/axocoatl-go/config"
)

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

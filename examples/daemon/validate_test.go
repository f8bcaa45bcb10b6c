package main

import (
	"strings"
	"testing"
)

// validate catches the mistakes people make, with exit 1 and one
// file:line line per error: a key dedented out of its section (before: a
// warning, exit 0, and serve listened on the default port), mcp_server:
// holding a list, and a file with errors of three kinds, all reported in
// one run, none naming a Go type.
func TestValidateCatchesMistakes(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []string // lines of stderr, after "<path>:"
	}{
		{"dedented key", "server:\n  allow_unauthenticated: false\naddr: 0.0.0.0:9000\nagents:\n  - id: a\n",
			[]string{"3: addr: not a section: did you mean `server.addr`? (a section's key is indented under it)"}},
		{"mcp_server as a list", "agents:\n  - id: a\nmcp_server:\n  - name: fs\n    command: npx\n",
			[]string{"3: mcp_server: a list here, but mcp_server takes a mapping: did you mean `mcp_servers`?"}},
		{"three kinds", "agents:\n  - id: a\n    sytem_prompt: x\n    timeout: soon\nwebhooks:\n  - name: w\n    url: ftp://h.example/x\n",
			[]string{
				"3: agents[0].sytem_prompt: unknown key: did you mean `system_prompt`?",
				"4: agents[0].timeout: expected a duration (like 30s or 5m), got a string `soon`",
				"7: webhooks[0].url: \"ftp://h.example/x\" must be an absolute http or https URL",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, tc.text)
			code, stdout, stderr := runCLI(t, nil, "validate", "--config", path)
			if code != exitFail || stdout != "" {
				t.Fatalf("exit %d, stdout %q, want 1 and nothing\n%s", code, stdout, stderr)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("stderr has %d lines, want %d:\n%s", len(lines), len(tc.want), stderr)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(lines[i], path+":"+w) {
					t.Errorf("line %d:\n%s\nwant it to start with:\n%s", i+1, lines[i], path+":"+w)
				}
				if strings.Contains(lines[i], "mcpserver.") || strings.Contains(lines[i], "agent.Spec") {
					t.Errorf("names a Go type: %s", lines[i])
				}
			}
		})
	}
}

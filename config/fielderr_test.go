package config_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/a2a"
	"github.com/axocoatl/axocoatl-go/a2aremote"
	"github.com/axocoatl/axocoatl-go/approval"
	"github.com/axocoatl/axocoatl-go/cluster"
	"github.com/axocoatl/axocoatl-go/config"
	"github.com/axocoatl/axocoatl-go/egress"
	"github.com/axocoatl/axocoatl-go/mcpclient"
	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// Each module's Validate names the field at fault as a typed key
// (axocoatl.ConfigError), and the loader puts the error at that field's
// line, not at its section's: before, every module error stood at the
// section's first line with the key only in its text.
func TestModuleErrorsAtTheirField(t *testing.T) {
	for _, tc := range []struct {
		name, text, key, at, msg string
	}{
		{"approval rule", "agents:\n  - id: a\napproval:\n  rules:\n    - tool: x\n      decision: allow\n    - tool: y\n      decision: maybe\n",
			"approval.rules[1].decision", "decision: maybe", `"maybe" is not a decision`},
		{"approval rule without tool", "agents:\n  - id: a\napproval:\n  default: allow\n  rules:\n    - decision: allow\n",
			"approval.rules[0]", "- decision: allow", "tool is required"},
		{"a2a", "agents:\n  - id: a\na2a:\n  max_tasks: 10\n  task_ttl: -1s\n", "a2a.task_ttl", "task_ttl:", "must not be negative"},
		{"mcp_server", "agents:\n  - id: a\nmcp_server:\n  name: x\n  max_message_bytes: -1\n", "mcp_server.max_message_bytes", "max_message_bytes:", "must not be negative"},
		{"webhook", "agents:\n  - id: a\nwebhooks:\n  - name: w\n    url: http://h.example\n    queue_size: -3\n", "webhooks[0].queue_size", "queue_size:", "must not be negative"},
		{"mcp server entry", "agents:\n  - id: a\nmcp_servers:\n  - name: s\n    command: x\n    max_list_bytes: -1\n", "mcp_servers[0].max_list_bytes", "max_list_bytes:", "must not be negative"},
		{"cluster", "agents:\n  - id: a\ncluster:\n  max_nodes: 3\n  accept_timeout: -1s\n", "cluster.accept_timeout", "accept_timeout:", "must not be negative"},
		{"agent tools", "agents:\n  - id: a\n    name: A\n    tools: [\"[\"]\n", "agents[0].tools", "tools:", "bad glob"},
		{"provider", "providers:\n  openai:\n    api_key: k\n    max_tokens: -1\nagents:\n  - id: a\n", "providers.openai.max_tokens", "max_tokens:", "must not be negative"},
		{"origins", "server:\n  allowed_origins:\n    - https://ok.example\n    - \"[bad\"\nagents:\n  - id: a\n", "server.allowed_origins[1]", "[bad", "must be an origin"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantFieldError(t, nil, tc.text, tc.key, tc.at, tc.msg) })
	}
}

// wantFieldError parses text (as a.yaml) and checks that its first error
// is a *config.FieldError at key, on the line holding at, saying msg; it
// returns the whole error.
func wantFieldError(t *testing.T, vars map[string]string, text, key, at, msg string) error {
	t.Helper()
	_, err := config.ParseWith(context.Background(), "a.yaml", []byte(text), env(vars))
	var fe *config.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("want a *config.FieldError, got %T %v", err, err)
	}
	if fe.File != "a.yaml" || fe.Key != key || fe.Line != lineOf(t, text, at) || !strings.Contains(fe.Msg, msg) {
		t.Fatalf("error %s:%d %s %q, want key %s at the line of %q saying %q", fe.File, fe.Line, fe.Key, fe.Msg, key, at, msg)
	}
	return err
}

// Every module's validation error matches the one sentinel, and each
// module's own ErrInvalidConfig (kept for its callers) is that sentinel.
func TestModuleErrorsMatchErrInvalidConfig(t *testing.T) {
	newErr := func(_ any, err error) error { return err }
	for name, err := range map[string]error{
		"mcpclient": newErr(mcpclient.New(mcpclient.Config{Servers: []mcpclient.ServerConfig{{Name: "s"}}})),
		"a2aremote": newErr(a2aremote.New(a2aremote.Config{Agents: []a2aremote.AgentConfig{{Name: "p"}}})),
		"egress":    newErr(egress.New(egress.Config{Webhooks: []egress.Webhook{{Name: "w"}}})),
		"mcpserver": newErr(mcpserver.New(mcpserver.Config{MaxMessageBytes: -1})),
		"approval":  newErr(approval.New(approval.Config{Default: "maybe"})),
		"a2a":       newErr(a2a.New(a2a.Config{MaxTasks: -1})),
		"cluster":   newErr(cluster.New(cluster.Config{MaxNodes: -1})),
	} {
		var ce *axocoatl.ConfigError
		if !errors.Is(err, axocoatl.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Msg == "" {
			t.Errorf("%s: %T %v", name, err, err)
		}
	}
	for _, sentinel := range []error{mcpclient.ErrInvalidConfig, a2aremote.ErrInvalidConfig, egress.ErrInvalidConfig, mcpserver.ErrInvalidConfig, approval.ErrInvalidConfig} {
		if sentinel != axocoatl.ErrInvalidConfig {
			t.Errorf("%v is not axocoatl.ErrInvalidConfig", sentinel)
		}
	}
}

package approval_test

import (
	"testing"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/axocoatl/axocoatl-go/approval"
)

// The config file's `approval:` section decodes straight into Config.
func TestConfigFromYAML(t *testing.T) {
	var doc struct {
		Approval approval.Config `yaml:"approval"`
	}
	src := `
approval:
  default: prompt
  timeout: 5m
  rules:
    - { tool: "mcp__fs__read_*", decision: allow }
    - { tool: "mcp__*", read_only: true, destructive: false, decision: allow }
    - tool: "mcp__shell__*"
      decision: deny
`
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	c := doc.Approval
	if c.Default != approval.Prompt || c.Timeout != 5*time.Minute || len(c.Rules) != 3 {
		t.Fatalf("%+v", c)
	}
	if r := c.Rules[1]; r.Tool != "mcp__*" || r.ReadOnly == nil || !*r.ReadOnly || r.Destructive == nil || *r.Destructive || r.Idempotent != nil || r.Decision != approval.Allow {
		t.Fatalf("rule 1: %+v", r)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

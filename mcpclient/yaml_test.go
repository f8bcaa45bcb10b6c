package mcpclient

import (
	"testing"
	"time"

	"go.yaml.in/yaml/v4"
)

// The contract's mcp_servers example decodes straight into Config.
func TestConfigYAML(t *testing.T) {
	src := `
mcp_servers:
  - name: fs
    command: npx
    args: ["-y", "@modelcontextprotocol/server-filesystem", "/srv"]
    env: { API_KEY: fs-key-value }
    inherit_env: false
  - name: search
    url: https://mcp.example.com/mcp
    headers: { Authorization: Bearer tok }
    timeout: 60s
    approval: prompt
`
	var c Config
	if err := yaml.Unmarshal([]byte(src), &c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	fs, search := c.Servers[0], c.Servers[1]
	if fs.inheritEnv() || fs.Env["API_KEY"].Reveal() != "fs-key-value" || fs.Transport() != "stdio" || len(fs.Args) != 3 {
		t.Fatalf("fs: %+v", fs)
	}
	if search.Timeout != 60*time.Second || search.Headers["Authorization"].Reveal() != "Bearer tok" || search.Transport() != "http" || search.Approval != "prompt" || !search.inheritEnv() {
		t.Fatalf("search: %+v", search)
	}
	if fs.timeout() != DefaultTimeout {
		t.Fatalf("default timeout %s", fs.timeout())
	}
}

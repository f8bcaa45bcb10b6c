package config_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/axocoatl/axocoatl-go/config"
)

// An mcp_servers entry's oauth is validated with its key and line, and a
// grant authorization_code needs server.oauth_token_key (its tokens are
// kept encrypted in data_dir), which the variable may give.
func TestMCPOAuthConfig(t *testing.T) {
	ctx := context.Background()
	const head = "agents:\n  - id: a\nmcp_servers:\n  - name: hosted\n    url: https://mcp.example/mcp\n    oauth:\n"
	for _, tc := range []struct{ yaml, want string }{
		{head + "      grant: password\n", `o.yaml:7: mcp_servers[0].oauth.grant: "password" must be authorization_code or client_credentials`},
		{head + "      grant: client_credentials\n      client_id: m\n", "mcp_servers[0].oauth.client_secret: is required for grant client_credentials"},
		{head + "      client_id: c\n", "mcp_servers[0].oauth: grant authorization_code keeps its tokens encrypted in data_dir: set server.oauth_token_key"},
		{"server:\n  oauth_token_key: short\n" + head + "      client_id: c\n", "o.yaml:2: server.oauth_token_key: is 5 characters long"},
	} {
		_, err := config.ParseWith(ctx, "o.yaml", []byte(tc.yaml), env(nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\nerr = %v\nwant %q", tc.yaml, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "short\n") {
			t.Errorf("the key is in the error: %v", err)
		}
	}
	cfg, err := config.ParseWith(ctx, "o.yaml", []byte(head+"      client_id: c\n"), env(map[string]string{"AXOCOATL_OAUTH_TOKEN_KEY": "a-token-key-from-the-env"}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.DataDir = t.TempDir()
	store, err := cfg.OAuthTokens()
	if err != nil || store == nil {
		t.Fatalf("store %v, %v", store, err)
	}
	if got := cfg.OAuthRedirectURL(); !strings.HasSuffix(got, config.OAuthCallbackPath) {
		t.Errorf("redirect %q", got)
	}
	if _, err := os.Stat(filepath.Join(cfg.Server.DataDir, "mcp-oauth")); !os.IsNotExist(err) {
		t.Errorf("the token dir exists before a token is stored: %v", err)
	}
}

package config_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/config"
	"github.com/axocoatl/axocoatl-go/mcpclient"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// An mcp_servers entry's oauth is validated with its key and line, and a
// grant authorization_code needs server.oauth_token_key (its tokens are
// kept encrypted in data_dir), which the variable may give.
func TestMCPOAuthConfig(t *testing.T) {
	ctx := context.Background()
	const head = "agents:\n  - id: a\nmcp_servers:\n  - name: hosted\n    url: https://mcp.example/mcp\n    oauth:\n"
	for _, tc := range []struct{ yaml, want string }{
		{head + "      grant: password\n", `o.yaml:7: mcp_servers[0].oauth.grant: "password" must be authorization_code or client_credentials`},
		{head + "      grant: client_credentials\n      client_id: m\n", "mcp_servers[0].oauth.client_secret: (or private_key) is required for grant client_credentials"},
		{head + "      client_id: c\n", "mcp_servers[0].oauth: grant authorization_code keeps its tokens encrypted in data_dir: set server.oauth_token_key"},
		{"server:\n  oauth_token_key: short\n" + head + "      client_id: c\n", "o.yaml:2: server.oauth_token_key: is 5 characters long"},
		{head + "      grant: client_credentials\n      client_id: m\n      private_key: |\n        -----BEGIN PRIVATE KEY-----\n        c2VjcmV0LWJ5dGVz\n        -----END PRIVATE KEY-----\n", "o.yaml:9: mcp_servers[0].oauth.private_key: is not a readable private key"},
		{head + "      client_id: c\n      allow_hosts: [\"https://idp.internal\"]\n", "o.yaml:8: mcp_servers[0].oauth.allow_hosts:"},
	} {
		_, err := config.ParseWith(ctx, "o.yaml", []byte(tc.yaml), env(nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\nerr = %v\nwant %q", tc.yaml, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), "short\n") || strings.Contains(err.Error(), "c2VjcmV0")) {
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

// doctor checks a server behind OAuth with the stored token: without one
// it says the server needs a login; with one it lists the tools, and it
// never refreshes (the file is left as it was).
func TestDoctorMCPOAuth(t *testing.T) {
	const good = "doctor-access-token-0123456789"
	var as, rs *httptest.Server
	as = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": as.URL, "authorization_endpoint": as.URL + "/authorize", "token_endpoint": as.URL + "/token",
			"response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"}})
	}))
	defer as.Close()
	srv := mcp.NewServer(&mcp.Implementation{Name: "s"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	verify := func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		if tok != good {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{Expiration: time.Now().Add(time.Hour)}, nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{Resource: rs.URL + "/mcp", AuthorizationServers: []string{as.URL}}).ServeHTTP(w, r)
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	mux.Handle("/mcp", auth.RequireBearerToken(verify, nil)(h))
	rs = httptest.NewServer(mux)
	defer rs.Close()

	dataDir := t.TempDir()
	yaml := "server:\n  oauth_token_key: a-token-key-of-some-length\n  data_dir: " + dataDir + "\nagents:\n  - id: a\nmcp_servers:\n  - name: hosted\n    url: " + rs.URL + "/mcp\n    timeout: 10s\n    oauth:\n      client_id: c\n"
	cfg, err := config.ParseWith(context.Background(), "o.yaml", []byte(yaml), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	report := func() string {
		var b strings.Builder
		cfg.Doctor(context.Background()).Print(&b)
		return b.String()
	}
	if out := report(); !strings.Contains(out, "FAIL mcp server hosted") || !strings.Contains(out, "needs login") {
		t.Fatalf("without a token:\n%s", out)
	}
	store, _ := cfg.OAuthTokens()
	if err := store.Save("hosted", mcpclient.StoredToken{Token: &oauth2.Token{AccessToken: good, TokenType: "Bearer", RefreshToken: "r", Expiry: time.Now().Add(time.Hour)},
		TokenURL: as.URL + "/token", ClientID: "c"}); err != nil {
		t.Fatal(err)
	}
	if out := report(); !strings.Contains(out, "ok   mcp server hosted") || !strings.Contains(out, "mcp__hosted__echo") {
		t.Fatalf("with a token:\n%s", out)
	}
}

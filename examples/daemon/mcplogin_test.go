package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// loginAS is an authorization server made for the test (approves at once,
// PKCE S256 checked) and a go-sdk MCP server behind auth.RequireBearerToken.
type loginAS struct {
	as, rs *httptest.Server
	mu     sync.Mutex
	codes  map[string]string // code -> code_challenge
	tokens map[string]bool
}

func newLoginAS(t *testing.T) *loginAS {
	a := &loginAS{codes: map[string]string{}, tokens: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": a.as.URL, "authorization_endpoint": a.as.URL + "/authorize",
			"token_endpoint": a.as.URL + "/token", "response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"}})
	})
	mux.HandleFunc("/authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		code := rand.Text()
		a.mu.Lock()
		a.codes[code] = q.Get("code_challenge")
		a.mu.Unlock()
		u, _ := url.Parse(q.Get("redirect_uri"))
		u.RawQuery = url.Values{"code": {code}, "state": {q.Get("state")}}.Encode()
		http.Redirect(w, r, u.String(), http.StatusFound)
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		a.mu.Lock()
		defer a.mu.Unlock()
		sum := sha256.Sum256([]byte(r.Form.Get("code_verifier")))
		ch, ok := a.codes[r.Form.Get("code")]
		if !ok || ch != base64.RawURLEncoding.EncodeToString(sum[:]) {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":"invalid_grant"}`)
			return
		}
		tok := "at-" + rand.Text()
		a.tokens[tok] = true
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600, "refresh_token": "rt-" + rand.Text()})
	})
	a.as = httptest.NewServer(mux)
	t.Cleanup(a.as.Close)

	srv := mcp.NewServer(&mcp.Implementation{Name: "secured"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
		Message string `json:"message"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
	})
	rmux := http.NewServeMux()
	rmux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{Resource: a.rs.URL + "/mcp", AuthorizationServers: []string{a.as.URL}}).ServeHTTP(w, r)
	})
	verify := func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		if !a.tokens[tok] {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{Expiration: time.Now().Add(time.Hour)}, nil
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	rmux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: a.rs.URL + "/.well-known/oauth-protected-resource/mcp"})(h).ServeHTTP(w, r)
	})
	a.rs = httptest.NewServer(rmux)
	t.Cleanup(func() {
		for ss := range srv.Sessions() {
			ss.Close()
		}
		a.rs.Close()
	})
	return a
}

// `axocoatl mcp login <server>` against a running daemon: the server shows
// needs login in /health/ready; the command prints the authorization URL
// and waits; a browser following it comes back to the daemon's
// /oauth/callback; the command then says logged in, the server connects,
// and its token file in data_dir is sealed.
func TestMCPLoginCommand(t *testing.T) {
	a := newLoginAS(t)
	dataDir := t.TempDir()
	yaml := `
server:
  api_token: login-cmd-token-0123456789abcdef
  oauth_token_key: a-token-key-of-some-length
  data_dir: ` + dataDir + `
agents:
  - id: a
mcp_servers:
  - name: secured
    url: ` + a.rs.URL + `/mcp
    timeout: 10s
    oauth:
      client_id: axo-client
`
	td := startDaemon(t, yaml, nil)
	ready := func() string {
		req, _ := http.NewRequest(http.MethodGet, td.url+"/health/ready", nil)
		resp, err := td.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	waitFor(t, "needs login", 15*time.Second, func() bool { return strings.Contains(ready(), `"needs_login":true`) })

	pr, pw := io.Pipe()
	var errb testutil.SyncBuffer
	done := make(chan int, 1)
	go func() {
		defer pw.Close()
		done <- run(context.Background(), []string{"mcp", "login", "secured", "--config", writeConfig(t, yaml), "--url", td.url},
			&cli{stdin: strings.NewReader(""), stdout: pw, stderr: &errb, lookup: mapEnv(nil)})
	}()
	sc := bufio.NewScanner(pr)
	var authURL string
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, a.as.URL+"/authorize?") {
			authURL = l
			break
		}
	}
	if authURL == "" {
		t.Fatalf("no authorization URL printed; stderr: %s", errb.String())
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	resp, err := http.Get(authURL) // the browser: to the authorization server and back to the daemon
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("callback: %d %s", resp.StatusCode, page)
	}
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("mcp login exited %d: %s", code, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("mcp login did not return")
	}
	waitFor(t, "connected", 15*time.Second, func() bool { return strings.Contains(ready(), `"connected":true`) })
	b, err := os.ReadFile(filepath.Join(dataDir, "mcp-oauth", "secured.token"))
	if err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	for tok := range a.tokens {
		if bytes.Contains(b, []byte(tok)) {
			t.Error("the token file holds the token in clear")
		}
	}
	a.mu.Unlock()
}

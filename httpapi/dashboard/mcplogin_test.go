package dashboard_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/axocoatl/axocoatl-go/internal/httpguard"
	"github.com/axocoatl/axocoatl-go/internal/httpguard/jwttest"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// jwtAS is an authorization server made for the test: RFC 8414 metadata;
// an authorization endpoint that shows a login page (a form a browser
// submits with a user name and password) and then redirects with code,
// state and iss; a token endpoint for authorization_code (client, redirect
// URI and PKCE S256 checked, each code used once) and refresh_token
// (rotating, each used once). Its access tokens are JWTs (ES256, kid k1,
// key set served by a jwttest server) for one audience, living ttl.
type jwtAS struct {
	srv      *httptest.Server
	keys     *jwttest.Server
	key      jwttest.Key
	clientID string
	redirect string
	audience string
	ttl      time.Duration
	t        testing.TB

	mu       sync.Mutex
	codes    map[string]string // code -> code_challenge
	refresh  map[string]bool   // live refresh tokens
	issued   []string          // every access and refresh token handed out
	logins   atomic.Int32      // login forms accepted
	refreshN atomic.Int32      // refresh grants answered
}

const (
	loginUser     = "ada"
	loginPassword = "correct horse battery"
)

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<title>Sign in to the test authorization server</title>
<form method="post" action="/authorize" id="login">
<label>User <input name="username" id="username"></label>
<label>Password <input name="password" id="password" type="password"></label>
{{range $k, $v := .}}<input type="hidden" name="{{$k}}" value="{{index $v 0}}">
{{end}}<button type="submit" id="signin">Sign in</button>
</form>`))

func newJWTAS(t testing.TB, clientID, redirect string, ttl time.Duration) *jwtAS {
	a := &jwtAS{t: t, clientID: clientID, redirect: redirect, ttl: ttl, key: jwttest.NewEC(t, "k1"),
		codes: map[string]string{}, refresh: map[string]bool{}}
	a.keys = jwttest.New(t, a.key)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": a.srv.URL, "authorization_endpoint": a.srv.URL + "/authorize", "token_endpoint": a.srv.URL + "/token",
			"jwks_uri": a.keys.URL + "/jwks", "response_types_supported": []string{"code"},
			"code_challenge_methods_supported":               []string{"S256"},
			"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
			"token_endpoint_auth_methods_supported":          []string{"none"},
			"authorization_response_iss_parameter_supported": true,
			"scopes_supported":                               []string{"tools", "offline_access"},
		})
	})
	checkAuthz := func(q url.Values) string {
		switch {
		case q.Get("response_type") != "code":
			return "response_type must be code"
		case q.Get("client_id") != a.clientID:
			return "unknown client"
		case q.Get("redirect_uri") != a.redirect:
			return "redirect_uri not registered"
		case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
			return "PKCE S256 required"
		case q.Get("state") == "":
			return "state required"
		}
		return ""
	}
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if msg := checkAuthz(q); msg != "" {
			http.Error(w, msg, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = loginPage.Execute(w, q)
	})
	mux.HandleFunc("POST /authorize", func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f := r.PostForm
		if msg := checkAuthz(f); msg != "" {
			http.Error(w, msg, http.StatusBadRequest)
			return
		}
		if f.Get("username") != loginUser || f.Get("password") != loginPassword {
			http.Error(w, "wrong user or password", http.StatusForbidden)
			return
		}
		a.logins.Add(1)
		code := rand.Text()
		a.mu.Lock()
		a.codes[code] = f.Get("code_challenge")
		a.mu.Unlock()
		u, _ := url.Parse(a.redirect)
		u.RawQuery = url.Values{"code": {code}, "state": {f.Get("state")}, "iss": {a.srv.URL}}.Encode()
		http.Redirect(w, r, u.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			tokenErr(w, "invalid_request")
			return
		}
		f := r.PostForm
		if f.Get("client_id") != a.clientID {
			tokenErr(w, "invalid_client")
			return
		}
		switch f.Get("grant_type") {
		case "authorization_code":
			a.mu.Lock()
			challenge, ok := a.codes[f.Get("code")]
			delete(a.codes, f.Get("code"))
			a.mu.Unlock()
			sum := sha256.Sum256([]byte(f.Get("code_verifier")))
			if !ok || f.Get("code_verifier") == "" || base64.RawURLEncoding.EncodeToString(sum[:]) != challenge || f.Get("redirect_uri") != a.redirect {
				tokenErr(w, "invalid_grant")
				return
			}
		case "refresh_token":
			a.mu.Lock()
			ok := a.refresh[f.Get("refresh_token")]
			delete(a.refresh, f.Get("refresh_token"))
			a.mu.Unlock()
			if !ok {
				tokenErr(w, "invalid_grant")
				return
			}
			a.refreshN.Add(1)
		default:
			tokenErr(w, "unsupported_grant_type")
			return
		}
		now := time.Now()
		at := jwttest.Sign(a.t, a.key, map[string]any{"iss": a.srv.URL, "aud": a.audience, "sub": loginUser,
			"scope": "tools", "iat": now.Unix(), "exp": now.Add(a.ttl).Unix(), "jti": rand.Text()}, "")
		rt := "rt-" + rand.Text()
		a.mu.Lock()
		a.refresh[rt] = true
		a.issued = append(a.issued, at, rt)
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": at, "token_type": "Bearer",
			"expires_in": int(a.ttl.Seconds()), "refresh_token": rt, "scope": "tools"})
	})
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

func tokenErr(w http.ResponseWriter, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
}

// jwtMCP is a go-sdk MCP server (tool echo) behind auth.RequireBearerToken
// whose verifier checks the bearer JWT against the authorization server's
// key set (signature, iss, aud, exp with a 1 ms skew), with its protected
// resource metadata (RFC 9728). It counts the calls refused.
func jwtMCP(t testing.TB, a *jwtAS) (srv *httptest.Server, refused *atomic.Int32) {
	refused = new(atomic.Int32)
	tools := mcp.NewServer(&mcp.Implementation{Name: "secured", Version: "1"}, nil)
	mcp.AddTool(tools, &mcp.Tool{Name: "echo", Description: "Echoes."}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Message string `json:"message"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo " + in.Message}}}, nil, nil
	})
	mux := http.NewServeMux()
	srv = httptest.NewUnstartedServer(mux)
	srv.Start()
	a.audience = srv.URL + "/mcp"
	v, err := httpguard.NewVerifier(httpguard.OAuth{Issuer: a.srv.URL, Audience: a.audience, JWKSURL: a.keys.URL + "/jwks",
		ScopeMap: map[string][]string{"tools": {httpguard.ScopeRead}}, ClockSkew: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	verify := func(ctx context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		p, err := v.Verify(ctx, tok)
		if err != nil {
			refused.Add(1)
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		var claims struct {
			Exp int64 `json:"exp"`
		}
		seg := strings.Split(tok, ".")[1]
		b, _ := base64.RawURLEncoding.DecodeString(seg)
		_ = json.Unmarshal(b, &claims)
		return &auth.TokenInfo{UserID: p.Subject, Scopes: []string{"tools"}, Expiration: time.Unix(claims.Exp, 0)}, nil
	}
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: a.audience, AuthorizationServers: []string{a.srv.URL}, ScopesSupported: []string{"tools"},
	}))
	mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: srv.URL + "/.well-known/oauth-protected-resource/mcp", Scopes: []string{"tools"},
	})(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return tools }, nil)))
	t.Cleanup(func() {
		for ss := range tools.Sessions() {
			ss.Close()
		}
		srv.Close()
	})
	return srv, refused
}

// The acceptance test for the MCP client's OAuth: the built daemon
// is configured with a go-sdk MCP server behind an authorization server
// issuing JWTs. Its MCP servers panel shows the server as needing a login
// (a read token sees that, not the Connect button); the Connect button opens the authorization server's login page in a new
// window, which Chromium fills in and submits; the authorization server
// sends it back to the daemon's /oauth/callback, the code is exchanged
// (PKCE S256) and the panel shows the server connected. The access tokens
// live a minute and four seconds, so the daemon refreshes one
// ([mcpclient.DefaultRefreshEarly] before its expiry) while 100 runs call
// the server's tool at once: none fails, and the server refused no token.
// The token file in data_dir holds none of the tokens in clear.
func TestMCPConnectFromDashboard(t *testing.T) {
	needChromium(t)
	bin := buildDaemon(t)
	addr := testutil.FreeAddr(t)
	const apiToken, viewerToken = "dashboard-oauth-token-5e1a9c", "dashboard-viewer-token-77b0"
	a := newJWTAS(t, "axo-dashboard", "http://"+addr+"/oauth/callback", 64*time.Second)
	rs, refused := jwtMCP(t, a)
	modelURL := testutil.ToolCallModel(t, "mcp__secured__echo", `{"message":"hi"}`)
	dataDir := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "axocoatl.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
server:
  api_token: %s
  tokens:
    - { name: viewer, token: %s, scopes: [read] }
  oauth_token_key: a-token-key-of-some-length-7d2f
  data_dir: %s
providers:
  openai: { base_url: %s/v1, api_key: sk-test, max_retries: -1 }
agents:
  - { id: assistant, provider: openai }
mcp_servers:
  - name: secured
    url: %s/mcp
    timeout: 20s
    oauth:
      client_id: axo-dashboard
approval:
  default: allow
`, apiToken, viewerToken, dataDir, modelURL, rs.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemonAt(t, bin, addr, "AXOCOATL_CONFIG="+cfg)

	b := newBrowser(t)
	signIn := func(token string) {
		t.Helper()
		b.do(t, "load the dashboard", chromedp.Navigate(d.URL+"/"))
		b.waitFor(t, "the token prompt", `!document.getElementById('auth').hidden`)
		b.do(t, "enter the token", chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.CSS("#auth button")))
	}
	// A token without scope admin sees the state, not the button.
	signIn(viewerToken)
	b.waitFor(t, "the server needing a login (viewer)", `document.querySelector('#servers li[data-server="secured"][data-state="needs-login"]')`)
	b.waitFor(t, "the viewer's scopes", `document.body.dataset.cannot.includes('admin')`)
	if got := b.eval(t, `getComputedStyle(document.querySelector('#servers li[data-server="secured"] button.server-connect')).display`); got != "none" {
		t.Errorf("a read token is shown the Connect button (display %q)", got)
	}
	b.eval(t, `(sessionStorage.clear(), '')`)
	signIn(apiToken)
	row := b.waitFor(t, "the server needing a login", `document.querySelector('#servers li[data-server="secured"][data-state="needs-login"]')?.innerText`)
	if !strings.Contains(row, "needs login") || !strings.Contains(row, "Connect") {
		t.Errorf("the server's row shows %q", row)
	}

	// Connect: the login page opens in a window of its own.
	popup := chromedp.WaitNewTarget(b.ctx, func(i *target.Info) bool { return strings.HasPrefix(i.URL, a.srv.URL+"/authorize?") })
	b.do(t, "click Connect", chromedp.Click(chromedp.CSS(`#servers li[data-server="secured"] button.server-connect`)))
	var id target.ID
	select {
	case id = <-popup:
	case <-time.After(30 * time.Second):
		t.Fatalf("no login window opened\npage:\n%s\n%s", b.eval(t, "document.body.innerText"), b.consoleText())
	}
	if id == "" {
		t.Fatal("no login window (the tab has no target)")
	}
	login, closeLogin := chromedp.NewContext(b.ctx, chromedp.WithTargetID(id))
	defer closeLogin()
	// Attach to the window on its own context (as newBrowser does for the
	// tab), so that the steps' deadlines do not end the attachment.
	if err := chromedp.Do(login); err != nil {
		t.Fatalf("attach to the login window: %v", err)
	}
	lb := &browser{ctx: login}
	lb.do(t, "the authorization server's page", chromedp.WaitVisible(chromedp.ID("username")))
	// No handle on the dashboard: the page's Cross-Origin-Opener-Policy
	// and the script's win.opener = null each see to it.
	if got := lb.eval(t, `String(window.opener)`); got != "null" {
		t.Errorf("the login window has a handle on the dashboard: window.opener = %s", got)
	}
	lb.do(t, "sign in on the authorization server's page",
		chromedp.SendKeys(chromedp.ID("username"), loginUser),
		chromedp.SendKeys(chromedp.ID("password"), loginPassword),
		chromedp.Click(chromedp.ID("signin")))
	// The window lands on the daemon's callback page (seen from the
	// browser's target list: the tab's page changes process as it goes).
	for wait := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		infos, err := chromedp.Targets(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		var at string
		for _, i := range infos {
			if i.TargetID == id {
				at = i.URL
			}
		}
		if strings.HasPrefix(at, d.URL+"/oauth/callback?") {
			break
		}
		if time.Now().After(wait) {
			t.Fatalf("the login window is at %q, not the daemon's callback", at)
		}
	}
	if back := lb.waitFor(t, "the callback page's text", `document.body && document.body.innerText`); !strings.Contains(back, "Logging in to secured") {
		t.Errorf("the callback page says %q", back)
	}
	if a.logins.Load() != 1 {
		t.Errorf("%d logins on the authorization server, want 1", a.logins.Load())
	}
	row = b.waitFor(t, "the server connected", `document.querySelector('#servers li[data-server="secured"][data-state="connected"]')?.innerText`)
	if !strings.Contains(row, "1 tool") || strings.Contains(row, "Connect") {
		t.Errorf("the connected server's row shows %q", row)
	}
	b.checkConsole(t)
	b.screenshot(t, "mcp-connected")

	// 100 runs at a time, each calling the server's tool, until the access
	// token has been refreshed while they ran, then 100 more.
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	run := func(i int) error {
		req, _ := http.NewRequest(http.MethodPost, d.URL+"/api/agents/assistant/execute", strings.NewReader(fmt.Sprintf(`{"input":"go %d"}`, i)))
		req.Header.Set("Authorization", "Bearer "+apiToken)
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		var out struct {
			Status, Output string
		}
		if res.StatusCode != http.StatusOK || json.Unmarshal(body, &out) != nil || out.Status != "completed" || !strings.Contains(out.Output, "echo hi") {
			return fmt.Errorf("run %d: %d %s", i, res.StatusCode, body)
		}
		return nil
	}
	deadline := time.Now().Add(3 * time.Minute)
	var failed atomic.Int32
	calls := 0
	for after := 0; after < 1; {
		if a.refreshN.Load() > 0 {
			after++
		}
		if time.Now().After(deadline) {
			t.Fatalf("no refresh within 3 minutes (%d calls)", calls)
		}
		var wg sync.WaitGroup
		for i := range 100 {
			wg.Go(func() {
				if err := run(calls + i); err != nil {
					if failed.Add(1) <= 5 {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		calls += 100
	}
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of %d runs failed across the refresh", n, calls)
	}
	if n := refused.Load(); n != 0 {
		t.Errorf("the MCP server refused %d tokens (an expired one was sent)", n)
	}
	if n := a.refreshN.Load(); n > 2 {
		t.Errorf("%d refreshes during %d calls: the refresh was not shared", n, calls)
	}
	t.Logf("%d runs, %d refresh(es)", calls, a.refreshN.Load())

	// The token file is sealed: no token, nor a part of one, in clear.
	file, err := os.ReadFile(filepath.Join(dataDir, "mcp-oauth", "secured.token"))
	if err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	issued := append([]string(nil), a.issued...)
	a.mu.Unlock()
	for _, tok := range issued {
		for _, part := range append([]string{tok}, strings.Split(tok, ".")...) {
			if len(part) >= 16 && bytes.Contains(file, []byte(part)) {
				t.Errorf("the token file holds %q… in clear", part[:8])
			}
		}
	}
	for _, clear := range []string{"axo-dashboard", "refresh_token", a.srv.URL} {
		if bytes.Contains(file, []byte(clear)) {
			t.Errorf("the token file holds %q in clear", clear)
		}
	}
}

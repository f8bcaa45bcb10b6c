package mcpclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"log/slog"
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

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/internal/httpguard"
	"github.com/axocoatl/axocoatl-go/internal/httpguard/jwttest"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/secret"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// testAS is an authorization server made for the tests: RFC 8414
// metadata, an authorization endpoint that approves at once (redirecting
// with code, state and iss), a token endpoint for authorization_code (PKCE
// S256 checked), refresh_token (rotating) and client_credentials. Tokens
// are opaque and live ttl.
type testAS struct {
	srv *httptest.Server
	ttl time.Duration

	mu       sync.Mutex
	codes    map[string]codeGrant // code -> what it was issued for
	access   map[string]time.Time // access token -> expiry
	refresh  map[string]bool      // live refresh tokens
	refreshN atomic.Int32         // refresh grants answered
	issued   atomic.Int32         // access tokens issued
	refuse   atomic.Bool          // refuse refresh grants (invalid_grant)
	resource atomic.Value         // the last resource indicator seen
	hits     atomic.Int32         // requests of any kind
	// assert checks private_key_jwt client assertions (iss the client,
	// aud this server); nil: none accepted.
	assert     *httpguard.Verifier
	assertions atomic.Int32 // assertions accepted
	jtis       map[string]bool
}

// checkAssertion is the token endpoint's RFC 7523 check: the assertion
// type, the signature with the client's key, iss, sub and aud, a jti never
// seen before.
func (a *testAS) checkAssertion(r *http.Request) bool {
	if a.assert == nil || r.Form.Get("client_assertion_type") != ClientAssertionType || r.Form.Has("client_secret") {
		return false
	}
	raw := r.Form.Get("client_assertion")
	p, err := a.assert.Verify(r.Context(), raw)
	if err != nil || p.Subject != r.Form.Get("client_id") {
		return false
	}
	var cl struct {
		Jti string `json:"jti"`
	}
	seg, _ := base64.RawURLEncoding.DecodeString(strings.Split(raw, ".")[1])
	if json.Unmarshal(seg, &cl) != nil || cl.Jti == "" {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.jtis == nil {
		a.jtis = map[string]bool{}
	}
	if a.jtis[cl.Jti] {
		return false
	}
	a.jtis[cl.Jti] = true
	a.assertions.Add(1)
	return true
}

type codeGrant struct{ challenge, redirect, resource string }

func newTestAS(t testing.TB, ttl time.Duration) *testAS {
	a := &testAS{ttl: ttl, codes: map[string]codeGrant{}, access: map[string]time.Time{}, refresh: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": a.srv.URL, "authorization_endpoint": a.srv.URL + "/authorize", "token_endpoint": a.srv.URL + "/token",
			"response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"},
			"grant_types_supported":                            []string{"authorization_code", "refresh_token", "client_credentials"},
			"token_endpoint_auth_methods_supported":            []string{"client_secret_post", "none", "private_key_jwt"},
			"token_endpoint_auth_signing_alg_values_supported": []string{"ES256", "RS256"},
			"authorization_response_iss_parameter_supported":   true,
			"scopes_supported":                                 []string{"tools", "offline_access"},
		})
	})
	mux.HandleFunc("/authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("client_id") != "axo-client" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
			http.Error(w, "bad authorization request", http.StatusBadRequest)
			return
		}
		code := rand.Text()
		a.mu.Lock()
		a.codes[code] = codeGrant{q.Get("code_challenge"), q.Get("redirect_uri"), q.Get("resource")}
		a.mu.Unlock()
		u, _ := url.Parse(q.Get("redirect_uri"))
		v := url.Values{"code": {code}, "state": {q.Get("state")}, "iss": {a.srv.URL}}
		u.RawQuery = v.Encode()
		http.Redirect(w, r, u.String(), http.StatusFound)
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		a.resource.Store(r.Form.Get("resource"))
		switch r.Form.Get("grant_type") {
		case "authorization_code":
			a.mu.Lock()
			g, ok := a.codes[r.Form.Get("code")]
			delete(a.codes, r.Form.Get("code"))
			a.mu.Unlock()
			sum := sha256.Sum256([]byte(r.Form.Get("code_verifier")))
			if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge || r.Form.Get("redirect_uri") != g.redirect {
				tokenError(w, "invalid_grant")
				return
			}
		case "refresh_token":
			a.mu.Lock()
			ok := a.refresh[r.Form.Get("refresh_token")] && !a.refuse.Load()
			delete(a.refresh, r.Form.Get("refresh_token"))
			a.mu.Unlock()
			if !ok {
				tokenError(w, "invalid_grant")
				return
			}
			a.refreshN.Add(1)
		case "client_credentials":
			if r.Form.Has("client_assertion") || r.Form.Has("client_assertion_type") {
				if !a.checkAssertion(r) {
					tokenError(w, "invalid_client")
					return
				}
				break
			}
			if r.Form.Get("client_id") != "axo-machine" || r.Form.Get("client_secret") != "machine-secret-123456" {
				tokenError(w, "invalid_client")
				return
			}
		default:
			tokenError(w, "unsupported_grant_type")
			return
		}
		at, rt := "at-"+rand.Text(), "rt-"+rand.Text()
		a.mu.Lock()
		a.access[at] = time.Now().Add(a.ttl)
		a.refresh[rt] = true
		a.mu.Unlock()
		a.issued.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": at, "token_type": "Bearer", "expires_in": int(a.ttl.Seconds()), "refresh_token": rt})
	})
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.hits.Add(1)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func tokenError(w http.ResponseWriter, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
}

func (a *testAS) verify(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
	a.mu.Lock()
	exp, ok := a.access[tok]
	a.mu.Unlock()
	if !ok || time.Now().After(exp) {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{Expiration: exp, Scopes: []string{"tools"}}, nil
}

// protectedMCP is a go-sdk MCP server (echo) behind the go-sdk's
// auth.RequireBearerToken, with its protected resource metadata.
func protectedMCP(t testing.TB, a *testAS) *httptest.Server {
	ts := newTestServer()
	mux := http.NewServeMux()
	var srv *httptest.Server
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource: srv.URL + "/mcp", AuthorizationServers: []string{a.srv.URL}, ScopesSupported: []string{"tools"},
		}).ServeHTTP(w, r)
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ts.srv }, nil)
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		auth.RequireBearerToken(a.verify, &auth.RequireBearerTokenOptions{
			ResourceMetadataURL: srv.URL + "/.well-known/oauth-protected-resource/mcp",
		})(h).ServeHTTP(w, r)
	})
	srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		for ss := range ts.srv.Sessions() {
			ss.Close()
		}
		srv.Close()
	})
	return srv
}

// autoApprove is a code fetcher for a user who approves at once: it
// follows the authorization URL to its redirect and reads the code there.
func autoApprove(ctx context.Context, _ string, authURL string) (*auth.AuthorizationResult, error) {
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Query().Get("code") == "" {
		return nil, errors.New("no code in the redirect")
	}
	q := loc.Query()
	return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
}

func oauthServer(mcpURL string) ServerConfig {
	return ServerConfig{Name: "secured", URL: mcpURL, Timeout: 10 * time.Second,
		OAuth: &OAuthConfig{ClientID: "axo-client", RedirectURL: "http://127.0.0.1:1/oauth/callback"}}
}

func echo(t *testing.T, e *axocoatl.Engine, msg string) error {
	t.Helper()
	res, err := e.CallTool(context.Background(), axocoatl.ToolCall{Tool: "mcp__secured__echo", Arguments: json.RawMessage(`{"message":"` + msg + `"}`)})
	if err == nil && res.Content != "Echo: "+msg {
		return errors.New("unexpected result: " + res.Content)
	}
	return err
}

// A server behind OAuth with no one logged in shows needs login; after a
// Login (the authorization code flow with PKCE, resource indicator and
// iss) it connects at once, its token is stored sealed (the file does not
// hold it in clear, mode 0600), and a module started later on the same
// store connects with the stored token, without a new login.
func TestOAuthLoginStoresSealedToken(t *testing.T) {
	a := newTestAS(t, time.Hour)
	rs := protectedMCP(t, a)
	dir := t.TempDir()
	store, err := NewFileTokenStore(dir, secret.Secret("a-token-key-of-some-length"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Servers: []ServerConfig{oauthServer(rs.URL + "/mcp")}, Tokens: store, MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
	e, m := startModule(t, cfg, nil)
	_ = m.Ready(context.Background())
	st := m.Status()[0]
	if st.Connected || !st.NeedsLogin || !strings.Contains(st.Error, "needs login") {
		t.Fatalf("before login: %+v", st)
	}
	if err := m.Login(context.Background(), "secured", autoApprove); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool { return m.Status()[0].Connected })
	if err := echo(t, e, "hi"); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.resource.Load().(string); got != rs.URL+"/mcp" {
		t.Errorf("resource indicator = %q, want %q", got, rs.URL+"/mcp")
	}
	if m.Status()[0].NeedsLogin {
		t.Error("still needs login")
	}

	path := filepath.Join(dir, "secured.token")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	a.mu.Lock()
	for at := range a.access {
		if bytes.Contains(b, []byte(at)) || bytes.Contains(b, []byte(strings.TrimPrefix(at, "at-"))) {
			t.Error("the token file holds the access token in clear")
		}
	}
	for rt := range a.refresh {
		if bytes.Contains(b, []byte(rt)) {
			t.Error("the token file holds the refresh token in clear")
		}
	}
	a.mu.Unlock()
	if bytes.Contains(b, []byte("axo-client")) || bytes.Contains(b, []byte("token_url")) {
		t.Error("the token file is not sealed")
	}
	// Another key does not open it.
	other, _ := NewFileTokenStore(dir, secret.Secret("another-key-of-some-length"))
	if _, err := other.Load("secured"); !errors.Is(err, ErrTokenKey) {
		t.Errorf("load with another key: %v, want ErrTokenKey", err)
	}

	// A second module on the same store: no login needed.
	issued := a.issued.Load()
	e2, m2 := startModule(t, cfg, nil)
	if err := m2.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := echo(t, e2, "again"); err != nil {
		t.Fatal(err)
	}
	if a.issued.Load() != issued {
		t.Errorf("the second module got a new token instead of the stored one")
	}
}

// A token refreshed while 100 tool calls run fails none of them: the
// token is refreshed DefaultRefreshEarly before it expires, so calls
// carry a valid token throughout.
func TestOAuthRefreshDuringConcurrentCalls(t *testing.T) {
	a := newTestAS(t, DefaultRefreshEarly+3*time.Second)
	rs := protectedMCP(t, a)
	store, _ := NewFileTokenStore(t.TempDir(), secret.Secret("a-token-key-of-some-length"))
	cfg := Config{Servers: []ServerConfig{oauthServer(rs.URL + "/mcp")}, Tokens: store, FetchCode: autoApprove}
	e, m := startModule(t, cfg, nil)
	if err := m.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Calls until at least one refresh happened and then some more, 100 at a time.
	deadline := time.Now().Add(30 * time.Second)
	var failed atomic.Int32
	for round := 0; a.refreshN.Load() < 1 || round < 2; round++ {
		if time.Now().After(deadline) {
			t.Fatalf("no refresh within 30s")
		}
		var wg sync.WaitGroup
		for i := range 100 {
			wg.Go(func() {
				if err := echo(t, e, "c"+string(rune('a'+i%26))); err != nil {
					failed.Add(1)
					t.Log(err)
				}
			})
		}
		wg.Wait()
		if a.refreshN.Load() >= 1 {
			continue
		}
		time.Sleep(500 * time.Millisecond) // waiting for the token's early-refresh window, not a signal we could wait on
	}
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d calls failed across the refresh", n)
	}
	if a.issued.Load() > 3 {
		t.Errorf("%d tokens issued: refreshes were not shared", a.issued.Load())
	}
}

// A refused refresh (invalid_grant) shows needs login, not a generic error.
func TestOAuthRefusedRefreshNeedsLogin(t *testing.T) {
	a := newTestAS(t, DefaultRefreshEarly+2*time.Second)
	rs := protectedMCP(t, a)
	cfg := Config{Servers: []ServerConfig{oauthServer(rs.URL + "/mcp")}, MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
	e, m := startModule(t, cfg, nil)
	_ = m.Ready(context.Background())
	if err := m.Login(context.Background(), "secured", autoApprove); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool { return m.Status()[0].Connected })
	a.refuse.Store(true)
	waitFor(t, 20*time.Second, func() bool {
		err := echo(t, e, "x")
		return err != nil && m.Status()[0].NeedsLogin || (err != nil && strings.Contains(err.Error(), "needs login"))
	})
}

// Machine to machine: the client credentials grant, no login.
func TestOAuthClientCredentials(t *testing.T) {
	a := newTestAS(t, time.Hour)
	rs := protectedMCP(t, a)
	sc := ServerConfig{Name: "secured", URL: rs.URL + "/mcp", Timeout: 10 * time.Second,
		OAuth: &OAuthConfig{Grant: GrantClientCredentials, ClientID: "axo-machine", ClientSecret: "machine-secret-123456"}}
	e, m := startModule(t, Config{Servers: []ServerConfig{sc}}, nil)
	if err := m.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := echo(t, e, "m2m"); err != nil {
		t.Fatal(err)
	}
	sc.OAuth.ClientSecret = "wrong-secret-1234567"
	_, err := Check(context.Background(), sc, nil, nil)
	if err == nil || strings.Contains(err.Error(), "wrong-secret-1234567") {
		t.Fatalf("check with a wrong secret: %v", err)
	}
}

// pemOf is k's private key as PKCS#8 PEM.
func pemOf(t *testing.T, k jwttest.Key) secret.Secret {
	t.Helper()
	var priv any = k.EC
	if k.RSA != nil {
		priv = k.RSA
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return secret.Secret(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// Machine to machine with private_key_jwt (RFC 7523): each token request
// authenticates with a client assertion signed with the configured key
// (ES256 for an EC key, RS256 for an RSA one), which the authorization
// server checks against the client's published keys; a key it does not
// know gets no token, and the error does not quote the key.
func TestOAuthClientCredentialsPrivateKeyJWT(t *testing.T) {
	const client = "https://axo.example/machine"
	ec, rsaKey, stranger := jwttest.NewEC(t, "ck-ec"), jwttest.NewRSA(t, "ck-rsa"), jwttest.NewEC(t, "ck-ec")
	keys := jwttest.New(t, ec, rsaKey)
	a := newTestAS(t, time.Hour)
	v, err := httpguard.NewVerifier(httpguard.OAuth{Issuer: client, Audience: a.srv.URL, JWKSURL: keys.URL + "/jwks", ClockSkew: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a.assert = v
	rs := protectedMCP(t, a)
	for _, k := range []jwttest.Key{ec, rsaKey} {
		t.Run(k.Kid, func(t *testing.T) {
			before := a.assertions.Load()
			sc := ServerConfig{Name: "secured", URL: rs.URL + "/mcp", Timeout: 10 * time.Second,
				OAuth: &OAuthConfig{Grant: GrantClientCredentials, ClientID: client, PrivateKey: pemOf(t, k), KeyID: k.Kid}}
			if err := sc.Validate(); err != nil {
				t.Fatal(err)
			}
			e, m := startModule(t, Config{Servers: []ServerConfig{sc}}, nil)
			if err := m.Ready(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := echo(t, e, "m2m"); err != nil {
				t.Fatal(err)
			}
			if got := a.assertions.Load() - before; got != 1 {
				t.Errorf("%d client assertions accepted, want 1 (the token is reused)", got)
			}
			if got, _ := a.resource.Load().(string); got != rs.URL+"/mcp" {
				t.Errorf("resource indicator = %q", got)
			}
		})
	}
	t.Run("unknown key", func(t *testing.T) {
		key := pemOf(t, stranger)
		sc := ServerConfig{Name: "secured", URL: rs.URL + "/mcp", Timeout: 10 * time.Second,
			OAuth: &OAuthConfig{Grant: GrantClientCredentials, ClientID: client, PrivateKey: key, KeyID: stranger.Kid}}
		_, err := Check(context.Background(), sc, nil, nil)
		if err == nil || !strings.Contains(err.Error(), "invalid_client") {
			t.Fatalf("check with a key the server does not know: %v", err)
		}
		body := strings.Split(strings.TrimSpace(key.Reveal()), "\n")[1]
		if strings.Contains(err.Error(), body) {
			t.Fatal("the error quotes the private key")
		}
	})
}

// A token endpoint that answers a private_key_jwt client with more than
// MaxTokenAnswerBytes gets no further read: the token request fails,
// saying so.
// Guards: bound "a token endpoint's answer (private_key_jwt)" (mcp client) (docs/bounds.md).
func TestOAuthTokenAnswerBound(t *testing.T) {
	k := jwttest.NewEC(t, "k")
	key, err := parseAssertionKey(pemOf(t, k).Reveal())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		size int
		ok   bool
	}{{MaxTokenAnswerBytes - 100, true}, {MaxTokenAnswerBytes + 1, false}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body := `{"access_token":"at-1","token_type":"Bearer","expires_in":60,"pad":"`
			body += strings.Repeat("x", tc.size-len(body)-2) + `"}`
			_, _ = w.Write([]byte(body))
		}))
		h := &jwtClientHandler{clientID: "c", key: key, http: &http.Client{Timeout: 5 * time.Second}}
		src := &assertionSource{h: h, ctx: context.Background(), tokenURL: srv.URL + "/token", issuer: srv.URL}
		tok, err := src.Token()
		srv.Close()
		if tc.ok && (err != nil || tok.AccessToken != "at-1") {
			t.Errorf("%d bytes: %v", tc.size, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "over 65536 bytes")) {
			t.Errorf("%d bytes: %v, want the bound's error", tc.size, err)
		}
	}
}

// Guards: bound "entries of oauth.allow_hosts" (mcp client) (docs/bounds.md).
func TestOAuthConfigValidate(t *testing.T) {
	base := func(o OAuthConfig) ServerConfig {
		return ServerConfig{Name: "s", URL: "https://mcp.example/mcp", OAuth: &o}
	}
	for _, tc := range []struct {
		sc   ServerConfig
		key  string
		want string
	}{
		{base(OAuthConfig{Grant: "password"}), "oauth.grant", "authorization_code or client_credentials"},
		{base(OAuthConfig{Grant: GrantClientCredentials, ClientSecret: "x"}), "oauth.client_id", "required"},
		{base(OAuthConfig{Grant: GrantClientCredentials, ClientID: "c"}), "oauth.client_secret", "required"},
		{base(OAuthConfig{Grant: GrantClientCredentials, ClientID: "c", ClientSecret: "x", PrivateKey: "k"}), "oauth.private_key", "set one"},
		{base(OAuthConfig{Grant: GrantClientCredentials, ClientID: "c", PrivateKey: "not a pem"}), "oauth.private_key", "not a PEM private key"},
		{base(OAuthConfig{Grant: GrantClientCredentials, ClientID: "c", PrivateKey: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}), "oauth.private_key", "not a readable private key"},
		{base(OAuthConfig{Grant: GrantClientCredentials, ClientID: "c", PrivateKey: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}), "oauth.private_key", "CERTIFICATE"},
		{base(OAuthConfig{ClientID: "c", PrivateKey: "k"}), "oauth.private_key", "client_credentials only"},
		{base(OAuthConfig{Grant: GrantClientCredentials, ClientID: "c", ClientSecret: "x", KeyID: "k1"}), "oauth.key_id", "needs private_key"},
		{base(OAuthConfig{AllowHosts: make([]string, MaxOAuthAllowHosts+1)}), "oauth.allow_hosts", "more than 100"},
		{base(OAuthConfig{AllowHosts: []string{"http://idp.internal"}}), "oauth.allow_hosts", "not a host name"},
		{base(OAuthConfig{AllowHosts: []string{"idp.internal:8443"}}), "oauth.allow_hosts", "no scheme, port or path"},
		{base(OAuthConfig{ClientSecret: "x"}), "oauth.client_secret", "needs client_id"},
		{base(OAuthConfig{Scopes: []string{"a b"}}), "oauth.scopes", "scope token"},
		{base(OAuthConfig{RedirectURL: "/cb"}), "oauth.redirect_url", "absolute"},
		{base(OAuthConfig{ClientMetadataURL: "http://c.example/meta"}), "oauth.client_metadata_url", "https"},
		{ServerConfig{Name: "s", Command: "x", OAuth: &OAuthConfig{}}, "oauth", "HTTP servers only"},
		{ServerConfig{Name: "s", URL: "https://x.example", OAuth: &OAuthConfig{}, Headers: map[string]secretT{"authorization": "Bearer x"}}, "headers", "Authorization"},
	} {
		err := tc.sc.Validate()
		var ce *axocoatl.ConfigError
		if !errors.As(err, &ce) || ce.Key != tc.key || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want key %s with %q", tc.sc.OAuth, err, tc.key, tc.want)
		}
	}
	if err := base(OAuthConfig{ClientID: "c", AllowHosts: append(make([]string, 0, MaxOAuthAllowHosts), "idp.internal", "10.0.0.5", "fd00::1", "[fd00::2]")}).Validate(); err != nil {
		t.Error(err)
	}
	if err := base(OAuthConfig{ClientID: "c", Scopes: []string{"read"}, ClientMetadataURL: "https://c.example/meta.json"}).Validate(); err != nil {
		t.Error(err)
	}
}

// BenchmarkOAuthCall compares a tool call to an OAuth-protected server
// with a cached token against the same call with a static Authorization
// header (the same server, a token of the same authorization server),
// paired in one loop; the bar is a ratio oauth/header <= 1.02.
func BenchmarkOAuthCall(b *testing.B) {
	a := newTestAS(b, time.Hour)
	rs := protectedMCP(b, a)
	oauthSC := oauthServer(rs.URL + "/mcp")
	eo, mo := startModule(b, Config{Servers: []ServerConfig{oauthSC}, FetchCode: autoApprove}, nil)
	if err := mo.Ready(context.Background()); err != nil {
		b.Fatal(err)
	}
	static := "at-static-" + rand.Text()
	a.mu.Lock()
	a.access[static] = time.Now().Add(time.Hour)
	a.mu.Unlock()
	headerSC := ServerConfig{Name: "secured", URL: rs.URL + "/mcp", Timeout: 10 * time.Second, Headers: map[string]secretT{"Authorization": secretT("Bearer " + static)}}
	eh, mh := startModule(b, Config{Servers: []ServerConfig{headerSC}}, nil)
	if err := mh.Ready(context.Background()); err != nil {
		b.Fatal(err)
	}
	call := axocoatl.ToolCall{Tool: "mcp__secured__echo", Arguments: json.RawMessage(`{"message":"hi"}`)}
	via := func(e *axocoatl.Engine) func() {
		return func() {
			if res, err := e.CallTool(context.Background(), call); err != nil || res.Content != "Echo: hi" {
				b.Fatal(res, err)
			}
		}
	}
	testutil.Paired(b, via(eo), via(eh))
}

// BenchmarkOAuthCallPrivateKeyJWT is BenchmarkOAuthCall for a
// client_credentials client authenticating with private_key_jwt (the
// module's own handler, not the go-sdk's): a call with its cached token
// against the same call with a static header, paired; the bar
// for a cached token is a ratio <= 1.02.
func BenchmarkOAuthCallPrivateKeyJWT(b *testing.B) {
	const client = "https://axo.example/machine"
	k := jwttest.NewEC(b, "ck")
	keys := jwttest.New(b, k)
	a := newTestAS(b, time.Hour)
	v, err := httpguard.NewVerifier(httpguard.OAuth{Issuer: client, Audience: a.srv.URL, JWKSURL: keys.URL + "/jwks"})
	if err != nil {
		b.Fatal(err)
	}
	a.assert = v
	rs := protectedMCP(b, a)
	der, err := x509.MarshalPKCS8PrivateKey(k.EC)
	if err != nil {
		b.Fatal(err)
	}
	jwtSC := ServerConfig{Name: "secured", URL: rs.URL + "/mcp", Timeout: 10 * time.Second,
		OAuth: &OAuthConfig{Grant: GrantClientCredentials, ClientID: client, PrivateKey: secret.Secret(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))}}
	ej, mj := startModule(b, Config{Servers: []ServerConfig{jwtSC}}, nil)
	if err := mj.Ready(context.Background()); err != nil {
		b.Fatal(err)
	}
	static := "at-static-" + rand.Text()
	a.mu.Lock()
	a.access[static] = time.Now().Add(time.Hour)
	a.mu.Unlock()
	headerSC := ServerConfig{Name: "secured", URL: rs.URL + "/mcp", Timeout: 10 * time.Second, Headers: map[string]secretT{"Authorization": secretT("Bearer " + static)}}
	eh, mh := startModule(b, Config{Servers: []ServerConfig{headerSC}}, nil)
	if err := mh.Ready(context.Background()); err != nil {
		b.Fatal(err)
	}
	call := axocoatl.ToolCall{Tool: "mcp__secured__echo", Arguments: json.RawMessage(`{"message":"hi"}`)}
	via := func(e *axocoatl.Engine) func() {
		return func() {
			if res, err := e.CallTool(context.Background(), call); err != nil || res.Content != "Echo: hi" {
				b.Fatal(res, err)
			}
		}
	}
	testutil.Paired(b, via(ej), via(eh))
	if n := a.assertions.Load(); n != 1 {
		b.Errorf("%d client assertions: the token was not cached", n)
	}
}

// A token file sealed under another key (the key changed) is not used: the
// server needs a login, and the start logs why.
func TestOAuthTokenFileOfAnotherKey(t *testing.T) {
	a := newTestAS(t, time.Hour)
	rs := protectedMCP(t, a)
	dir := t.TempDir()
	old, _ := NewFileTokenStore(dir, secret.Secret("the-old-key-of-some-length"))
	if err := old.Save("secured", StoredToken{Token: &oauth2.Token{AccessToken: "at-x", RefreshToken: "rt-x", Expiry: time.Now().Add(time.Hour)}, TokenURL: a.srv.URL + "/token", ClientID: "axo-client"}); err != nil {
		t.Fatal(err)
	}
	store, _ := NewFileTokenStore(dir, secret.Secret("the-new-key-of-some-length"))
	var logs testutil.SyncBuffer
	_, m := startModule(t, Config{Servers: []ServerConfig{oauthServer(rs.URL + "/mcp")}, Tokens: store}, slog.New(slog.NewTextHandler(&logs, nil)))
	_ = m.Ready(context.Background())
	if st := m.Status()[0]; st.Connected || !st.NeedsLogin {
		t.Fatalf("status %+v", st)
	}
	if !strings.Contains(logs.String(), "oauth token not read") || !strings.Contains(logs.String(), "does not open with the configured key") {
		t.Fatalf("logs:\n%s", logs.String())
	}
}

package mcpclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"

	"github.com/axocoatl/axocoatl-go/internal/netguard"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// loopbackName is a host name (not "localhost" nor *.localhost, which the
// guard refuses by name) that resolves to 127.0.0.1 only here, where the
// test servers listen: this machine's own name, or localhost.localdomain,
// as /etc/hosts usually has them. The test skips what needs it when there
// is none.
func loopbackName(t *testing.T) string {
	t.Helper()
	var names []string
	if h, err := os.Hostname(); err == nil {
		names = append(names, h)
	}
	for _, h := range append(names, "localhost.localdomain") {
		if netguard.CheckHost(h) != nil {
			continue
		}
		addrs, err := net.DefaultResolver.LookupHost(context.Background(), h)
		if err != nil || len(addrs) == 0 {
			continue
		}
		ok := true
		for _, a := range addrs {
			ok = ok && a == "127.0.0.1"
		}
		if ok {
			return h
		}
	}
	t.Skipf("no host name here resolves to 127.0.0.1 only (tried %v)", append(names, "localhost.localdomain"))
	return ""
}

func guardedClient(t *testing.T, serverURL string, allow ...string) *http.Client {
	t.Helper()
	c, err := newOAuthClient(ServerConfig{Name: "s", URL: serverURL, Timeout: 5 * time.Second,
		OAuth: &OAuthConfig{ClientID: "c", RedirectURL: "http://127.0.0.1:1/cb", AllowHosts: allow}}, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.http
}

func get(c *http.Client, u string) error {
	res, err := c.Get(u)
	if err == nil {
		res.Body.Close()
	}
	return err
}

// The OAuth client of a server at a public address reaches public
// addresses only: not loopback (by address, by the name localhost, or by
// a name that resolves there, checked on the address dialed), not the
// link-local cloud metadata address, not after a redirect; except its
// own host and the hosts of allow_hosts. A server on this machine or a
// private network is not held.
func TestOAuthGuard(t *testing.T) {
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		_, _ = w.Write([]byte("{}"))
	}))
	defer local.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(local.URL, "http://"))

	public := guardedClient(t, "https://mcp.example.com/mcp")
	for _, u := range []string{local.URL, "http://localhost:" + port + "/", "http://169.254.169.254/latest/meta-data/", "http://[::1]:" + port + "/", "http://10.0.0.1/"} {
		err := get(public, u)
		if !errors.Is(err, ErrOAuthHostRefused) || !errors.Is(err, netguard.ErrRefused) || !strings.Contains(err.Error(), "oauth.allow_hosts") {
			t.Errorf("GET %s from a public server's client: %v, want refused naming oauth.allow_hosts", u, err)
		}
	}
	// Allowed: the hosts of allow_hosts, and a redirect from one is
	// checked again.
	allowing := guardedClient(t, "https://mcp.example.com/mcp", "127.0.0.1")
	if err := get(allowing, local.URL); err != nil {
		t.Errorf("GET an allowed host: %v", err)
	}
	if err := get(allowing, local.URL+"/?to="+url.QueryEscape("http://localhost:"+port+"/")); !errors.Is(err, ErrOAuthHostRefused) {
		t.Errorf("a redirect from an allowed host to localhost: %v, want refused", err)
	}
	// A server on this machine or a private network is not held.
	for _, s := range []string{"http://127.0.0.1:9/mcp", "http://localhost:9/mcp", "http://10.1.2.3/mcp", "http://[::1]:9/mcp"} {
		if err := get(guardedClient(t, s), local.URL); err != nil {
			t.Errorf("GET a local host from the client of %s: %v", s, err)
		}
	}

	t.Run("resolved", func(t *testing.T) {
		name := loopbackName(t)
		// A name that resolves to a loopback address is refused on the
		// address dialed.
		err := get(public, "http://"+name+":"+port+"/")
		if !errors.Is(err, ErrOAuthHostRefused) || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("GET %s (resolving to loopback): %v, want refused at the dial", name, err)
		}
		// The server's own host is allowed, wherever it resolves.
		if err := get(guardedClient(t, "http://"+name+":9/mcp"), "http://"+name+":"+port+"/"); err != nil {
			t.Errorf("GET the server's own host: %v", err)
		}
	})
}

// A hostile server at a public address (a name, over https, whose
// certificate the client process trusts through SSL_CERT_FILE): its
// protected resource metadata names an authorization server at the cloud
// metadata address, then one on this machine. The login is refused before
// any request goes there, with an error that says what to set; with the
// authorization server's host in oauth.allow_hosts the same login
// succeeds and the tool call works. The client runs as a child process
// (this test binary, helper mode oauth-guard-client) so that it reads
// SSL_CERT_FILE afresh.
func TestOAuthGuardHostileMetadata(t *testing.T) {
	name := loopbackName(t)
	a := newTestAS(t, time.Hour)
	ts := newTestServer()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	var asURL atomic.Value
	mux := http.NewServeMux()
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "https://"))
	base := "https://" + name + ":" + port
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{Resource: base + "/mcp",
			AuthorizationServers: []string{asURL.Load().(string)}}).ServeHTTP(w, r)
	})
	// Reached by a name, as a public server is (the go-sdk otherwise
	// refuses a Host that is not localhost on a loopback listener).
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ts.srv }, &mcp.StreamableHTTPOptions{DisableLocalhostProtection: true})
	mux.Handle("/mcp", auth.RequireBearerToken(a.verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: base + "/.well-known/oauth-protected-resource/mcp"})(h))
	defer func() {
		for ss := range ts.srv.Sessions() {
			ss.Close()
		}
	}()

	client := func(allow string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$", helperFlag+"oauth-guard-client")
		cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+caFile, "GUARD_SERVER_URL="+base+"/mcp", "GUARD_ALLOW_HOSTS="+allow)
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	// The cloud metadata address: nothing listens here, so what is seen
	// is that no token came of it (the unit test above sees the refusal).
	asURL.Store("https://169.254.169.254")
	if out := client(""); strings.Contains(out, "connected and called") {
		t.Errorf("login with the authorization server at 169.254.169.254: %s", out)
	}
	// This machine: refused, and the authorization server never asked.
	asURL.Store(a.srv.URL)
	if out := client(""); !strings.Contains(out, "refused:") || !strings.Contains(out, "oauth.allow_hosts") {
		t.Errorf("login with the authorization server on this machine: %s, want refused naming oauth.allow_hosts", out)
	}
	if n := a.hits.Load(); n != 0 {
		t.Errorf("the authorization server on this machine got %d requests, want none", n)
	}
	if out := client("127.0.0.1"); !strings.Contains(out, "connected and called") {
		t.Errorf("login with the authorization server's host allowed: %s", out)
	}
}

// oauthGuardClient is the child of TestOAuthGuardHostileMetadata: it
// logs in to GUARD_SERVER_URL (allow_hosts GUARD_ALLOW_HOSTS) and calls
// its echo tool, and says how that went.
func oauthGuardClient() {
	var allow []string
	if h := os.Getenv("GUARD_ALLOW_HOSTS"); h != "" {
		allow = []string{h}
	}
	e := axocoatl.New(axocoatl.Options{})
	defer e.Close(context.Background())
	m, err := New(Config{Servers: []ServerConfig{{Name: "secured", URL: os.Getenv("GUARD_SERVER_URL"), Timeout: 10 * time.Second,
		OAuth: &OAuthConfig{ClientID: "axo-client", RedirectURL: "http://127.0.0.1:1/oauth/callback", AllowHosts: allow}}}, MinBackoff: 50 * time.Millisecond})
	if err != nil {
		fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Use(ctx, m); err != nil {
		fail(err)
	}
	// The user's browser would go wherever the authorization URL says (its
	// own network, not this process's); here it comes back with a code
	// from anywhere but the test's authorization server, so that the token
	// request is made, and refused.
	fetch := func(ctx context.Context, server, authURL string) (*auth.AuthorizationResult, error) {
		u, err := url.Parse(authURL)
		if err != nil {
			return nil, err
		}
		if u.Hostname() != "127.0.0.1" {
			return &auth.AuthorizationResult{Code: "code-from-elsewhere", State: u.Query().Get("state")}, nil
		}
		return autoApprove(ctx, server, authURL)
	}
	if err := m.Login(ctx, "secured", fetch); err != nil {
		if errors.Is(err, ErrOAuthHostRefused) {
			fmt.Println("refused:", err)
			return
		}
		fail(err)
	}
	for !m.Status()[0].Connected {
		select {
		case <-ctx.Done():
			fail(fmt.Errorf("not connected: %+v", m.Status()[0]))
		case <-time.After(20 * time.Millisecond):
		}
	}
	res, err := e.CallTool(ctx, axocoatl.ToolCall{Tool: "mcp__secured__echo", Arguments: json.RawMessage(`{"message":"guarded"}`)})
	if err != nil {
		fail(err)
	}
	fmt.Println("connected and called:", res.Content)
}

// Whatever private_key holds, parsing it neither panics nor quotes it in
// its error.
func FuzzParseAssertionKey(f *testing.F) {
	f.Add("-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWJ5dGVzLW9mLXRoZS1rZXk=\n-----END PRIVATE KEY-----\n")
	f.Add("-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n")
	f.Add("-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAK\n-----END RSA PRIVATE KEY-----\n")
	f.Add("not pem at all")
	f.Add("")
	f.Fuzz(func(t *testing.T, in string) {
		k, err := parseAssertionKey(in)
		if err == nil {
			if k.signer == nil || (k.alg != "ES256" && k.alg != "ES384" && k.alg != "RS256") {
				t.Fatalf("parsed %q into %+v", in, k)
			}
			return
		}
		if body := strings.TrimSpace(in); len(body) >= 8 && strings.Contains(err.Error(), body) {
			t.Fatalf("the error %q quotes the key", err)
		}
	})
}

package mcpclient

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/secret"
)

const loginAPIToken = "login-test-token-0123456789abcdef"

// The login over HTTP, as `axocoatl mcp login` and a browser do it: POST
// .../login (admin) answers the authorization URL; the browser follows it
// to the authorization server, which redirects to the module's
// /oauth/callback; the login then exchanges the code, the status says
// done and the server connects. A callback with a state no login waits
// for is refused, and the login routes need the token. A second login of
// the same server ends the first: its answer is refused.
//
// Guards: bound "OAuth logins waiting for their callback" (mcp client) (docs/bounds.md).
func TestOAuthLoginOverHTTP(t *testing.T) {
	a := newTestAS(t, time.Hour)
	rs := protectedMCP(t, a)
	var handler atomic.Pointer[http.Handler]
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*handler.Load()).ServeHTTP(w, r) }))
	t.Cleanup(front.Close)

	store, _ := NewFileTokenStore(t.TempDir(), secret.Secret("a-token-key-of-some-length"))
	sc := oauthServer(rs.URL + "/mcp")
	sc.OAuth.RedirectURL = ""
	cfg := Config{Servers: []ServerConfig{sc}, Tokens: store, RedirectURL: front.URL + CallbackPath, MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
	e := axocoatl.New(axocoatl.Options{Logger: slog.New(slog.DiscardHandler), HTTP: axocoatl.HTTPOptions{APIToken: loginAPIToken, PublicURL: front.URL}})
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = m
	handler.Store(&h)
	if err := e.Use(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	_ = m.Ready(context.Background())

	do := func(method, path, token string) (int, map[string]any) {
		req, _ := http.NewRequest(method, front.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	if code, _ := do(http.MethodPost, "/api/mcp/servers/secured/login", ""); code != http.StatusUnauthorized {
		t.Fatalf("login without a token: %d", code)
	}
	if code, _ := do(http.MethodPost, "/api/mcp/servers/nope/login", loginAPIToken); code != http.StatusNotFound {
		t.Fatalf("login of an unknown server: %d", code)
	}
	if code, body := do(http.MethodGet, "/api/mcp/servers/secured/login", loginAPIToken); code != 200 || body["state"] != LoginNone {
		t.Fatalf("status before: %d %v", code, body)
	}
	code, body := do(http.MethodPost, "/api/mcp/servers/secured/login", loginAPIToken)
	authURL, _ := body["url"].(string)
	if code != 200 || !strings.HasPrefix(authURL, a.srv.URL+"/authorize?") {
		t.Fatalf("login: %d %v", code, body)
	}
	// A forged callback: refused, the login still waits.
	resp, err := http.Get(front.URL + CallbackPath + "?code=forged&state=guess")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("forged callback: %d", resp.StatusCode)
	}
	// The browser: the authorization server redirects to the callback.
	resp, err = http.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "close this window") {
		t.Fatalf("callback page: %d %s", resp.StatusCode, page)
	}
	waitFor(t, 10*time.Second, func() bool {
		_, body := do(http.MethodGet, "/api/mcp/servers/secured/login", loginAPIToken)
		if body["state"] == LoginFailed {
			t.Fatalf("login failed: %v", body)
		}
		return body["state"] == LoginDone
	})
	waitFor(t, 10*time.Second, func() bool { return m.Status()[0].Connected })
	if err := echo(t, e, "after-login"); err != nil {
		t.Fatal(err)
	}
	// The same answer twice: the state was used.
	resp, err = http.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("replayed callback: %d", resp.StatusCode)
	}

	// Two logins: the second ends the first.
	_, first := do(http.MethodPost, "/api/mcp/servers/secured/login", loginAPIToken)
	_, second := do(http.MethodPost, "/api/mcp/servers/secured/login", loginAPIToken)
	m.logins.mu.Lock()
	waiting := len(m.logins.byState)
	m.logins.mu.Unlock()
	if waiting > 1 {
		t.Errorf("%d logins wait for a callback, want at most 1", waiting)
	}
	for i, u := range []any{first["url"], second["url"]} {
		resp, err := http.Get(u.(string))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := []int{http.StatusBadRequest, http.StatusOK}[i]; resp.StatusCode != want {
			t.Errorf("login %d's callback: %d, want %d", i+1, resp.StatusCode, want)
		}
	}
	waitFor(t, 10*time.Second, func() bool {
		_, body := do(http.MethodGet, "/api/mcp/servers/secured/login", loginAPIToken)
		return body["state"] == LoginDone
	})
}

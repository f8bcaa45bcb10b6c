package dashboard

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, target string, header http.Header) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func TestServesThePage(t *testing.T) {
	res := get(t, Handler(), http.MethodGet, "http://127.0.0.1:8080/", nil)
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	want := map[string]string{
		"Content-Type":           "text/html; charset=utf-8",
		"X-Content-Type-Options": "nosniff",
		"Cache-Control":          "no-cache",
		"X-Frame-Options":        "DENY",
		"Referrer-Policy":        "no-referrer",
	}
	for k, v := range want {
		if got := res.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	page := string(body)
	for _, s := range []string{`id="agents"`, `id="feed"`, `id="run"`, `id="approvals"`, "new WebSocket(",
		`id="conversations"`, `id="conv-list"`, `id="conv-messages"`, `id="conv-form"`, `id="conv-input"`, `id="conv-delete"`, `id="run-conv-new"`} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}
	if strings.Contains(page, "{{") {
		t.Error("page still has a template marker")
	}
	// Nothing may come from elsewhere: no external scripts, styles, fonts.
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//`).FindString(page); m != "" {
		t.Errorf("page references an external resource: %s", m)
	}
}

// The CSP must allow exactly the inlined script and style (by hash), and
// connections only to this host.
func TestContentSecurityPolicy(t *testing.T) {
	res := get(t, Handler(), http.MethodGet, "http://127.0.0.1:8080/", nil)
	body, _ := io.ReadAll(res.Body)
	csp := res.Header.Get("Content-Security-Policy")
	directives := map[string]string{}
	for _, d := range strings.Split(csp, ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
		directives[name] = value
	}
	inline := func(tag string) string {
		m := regexp.MustCompile(`(?s)<` + tag + `>(.*?)</` + tag + `>`).FindStringSubmatch(string(body))
		if m == nil {
			t.Fatalf("no inline <%s>", tag)
		}
		sum := sha256.Sum256([]byte(m[1]))
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	checks := map[string]string{
		"default-src":     "'none'",
		"script-src":      inline("script"),
		"style-src":       inline("style"),
		"connect-src":     "'self' ws://127.0.0.1:8080 wss://127.0.0.1:8080",
		"base-uri":        "'none'",
		"form-action":     "'none'",
		"frame-ancestors": "'none'",
	}
	for name, want := range checks {
		if got := directives[name]; got != want {
			t.Errorf("%s = %q, want %q (CSP %q)", name, got, want, csp)
		}
	}
}

// A Host header that is not a host cannot smuggle anything into the policy.
func TestCSPIgnoresOddHost(t *testing.T) {
	h := Handler().(*handler)
	for _, host := range []string{"evil.example; script-src *", "a b", "x'y", ""} {
		if got := h.csp(host); !strings.Contains(got, "connect-src 'self';") {
			t.Errorf("host %q gave %q", host, got)
		}
	}
	if got := h.csp("[::1]:8080"); !strings.Contains(got, "connect-src 'self' ws://[::1]:8080 wss://[::1]:8080;") {
		t.Errorf("IPv6 host: %q", got)
	}
}

func TestOnlyGetAndHeadOfRoot(t *testing.T) {
	h := Handler()
	cases := []struct {
		method, path string
		status       int
		code         string
	}{
		{http.MethodHead, "/", http.StatusOK, ""},
		{http.MethodGet, "/index.html", http.StatusNotFound, "not_found"},
		{http.MethodGet, "/api/agents", http.StatusNotFound, "not_found"},
		{http.MethodPost, "/", http.StatusMethodNotAllowed, "method_not_allowed"},
		{http.MethodDelete, "/", http.StatusMethodNotAllowed, "method_not_allowed"},
	}
	for _, c := range cases {
		res := get(t, h, c.method, c.path, nil)
		if res.StatusCode != c.status {
			t.Errorf("%s %s: status %d, want %d", c.method, c.path, res.StatusCode, c.status)
			continue
		}
		if c.code == "" {
			continue
		}
		var e struct {
			Error struct{ Code, Message string }
		}
		if err := json.NewDecoder(res.Body).Decode(&e); err != nil || e.Error.Code != c.code || e.Error.Message == "" {
			t.Errorf("%s %s: error body %+v (%v), want code %q", c.method, c.path, e, err, c.code)
		}
		if c.status == http.StatusMethodNotAllowed && res.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("Allow = %q", res.Header.Get("Allow"))
		}
	}
}

func TestRevalidatesWithETag(t *testing.T) {
	h := Handler()
	etag := get(t, h, http.MethodGet, "/", nil).Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	res := get(t, h, http.MethodGet, "/", http.Header{"If-None-Match": {etag}})
	if res.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match: status %d, want 304", res.StatusCode)
	}
}

// The script must never hand data to an HTML parser.
func TestScriptRendersTextOnly(t *testing.T) {
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
		if strings.Contains(appJS, sink) {
			t.Errorf("app.js uses %s", sink)
		}
	}
}

package httpguard

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/secret"
)

var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })

func serve(g *Guard, rt Route, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	g.Wrap(rt, ok).ServeHTTP(w, r)
	return w
}

// Every documented allowed_origins form, against matching and foreign
// origins. The daemon's doors all use this guard, so this table is their
// one meaning of allowed_origins.
func TestOriginForms(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		allow   []string
		refuse  []string
	}{
		{"https://app.example.com", []string{"https://app.example.com", "https://APP.example.com"},
			[]string{"http://app.example.com", "https://app.example.com:8443", "https://evil.app.example.com", "https://app.example.com.evil"}},
		{"https://*.example.com", []string{"https://a.example.com", "https://b.example.com:443"},
			[]string{"http://a.example.com", "https://example.com", "https://a.example.com.evil", "https://b.example.com:9000"}},
		{"*.example.com", []string{"https://a.example.com", "http://b.example.com:8080"},
			[]string{"https://example.com", "https://a.evil.com"}},
		{"app.example.com", []string{"http://app.example.com", "https://app.example.com:444"},
			[]string{"https://other.example.com"}},
		{"http://localhost:*", []string{"http://localhost:3000", "http://localhost"},
			[]string{"https://localhost:3000", "http://localhost.evil:3000"}},
		{"https://app.example.com:8443", []string{"https://app.example.com:8443"},
			[]string{"https://app.example.com", "https://app.example.com:9443"}},
	} {
		g, err := New(Options{AllowedOrigins: []string{tc.pattern}})
		if err != nil {
			t.Fatalf("%s: %v", tc.pattern, err)
		}
		check := func(origin string, want bool) {
			r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/x", strings.NewReader("{}"))
			r.Header.Set("Origin", origin)
			got := serve(g, Route{}, r).Code == http.StatusOK
			if got != want {
				t.Errorf("pattern %q, origin %q: allowed %v, want %v", tc.pattern, origin, got, want)
			}
		}
		for _, o := range tc.allow {
			check(o, true)
		}
		for _, o := range append(tc.refuse, "null", "file://x", "http://evil.example") {
			check(o, false)
		}
	}
	for _, bad := range []string{"", "ftp://x.example", "https://x.example/path", "https://", "[bad", "https://user@x.example", "a b"} {
		if err := ValidateOrigins([]string{bad}); err == nil {
			t.Errorf("pattern %q accepted", bad)
		}
	}
}

// Writes and WebSocket upgrades are checked; plain reads are left to CORS;
// non-browser clients (no Origin, no Sec-Fetch-Site) pass; a same-host page
// passes whatever the scheme (a TLS proxy may sit in between).
func TestOriginWhichRequests(t *testing.T) {
	g, _ := New(Options{})
	for _, tc := range []struct {
		method string
		header map[string]string
		want   int
	}{
		{http.MethodPost, nil, 200},
		{http.MethodPost, map[string]string{"Origin": "https://127.0.0.1:8080"}, 200},
		{http.MethodPost, map[string]string{"Origin": "http://evil.example"}, 403},
		{http.MethodDelete, map[string]string{"Origin": "http://evil.example"}, 403},
		{http.MethodPost, map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{http.MethodPost, map[string]string{"Sec-Fetch-Site": "same-origin"}, 200},
		{http.MethodGet, map[string]string{"Origin": "http://evil.example"}, 200},
		{http.MethodGet, map[string]string{"Origin": "http://evil.example", "Upgrade": "websocket"}, 403},
	} {
		r := httptest.NewRequest(tc.method, "http://127.0.0.1:8080/x", nil)
		for k, v := range tc.header {
			r.Header.Set(k, v)
		}
		if got := serve(g, Route{}, r).Code; got != tc.want {
			t.Errorf("%s %v: %d, want %d", tc.method, tc.header, got, tc.want)
		}
	}
}

// A token-less server answers only to its own names, whatever address it
// listens on; with a token the Host is not checked (the token protects).
func TestHostCheck(t *testing.T) {
	g, _ := New(Options{PublicURL: "https://agents.example.com:8443/base", AllowedOrigins: []string{"https://*.corp.example"}})
	for host, want := range map[string]bool{
		"127.0.0.1:8080": true, "[::1]:8080": true, "10.1.2.3": true, "localhost:8080": true, "LOCALHOST": true,
		"app.localhost:3000": true, "agents.example.com:8443": true, "agents.example.com": true,
		"ui.corp.example": true, "evil.example": false, "evil.example:8080": false,
		"agents.example.com.evil": false, "localhost.evil": false,
	} {
		r := httptest.NewRequest(http.MethodGet, "/x", nil)
		r.Host = host
		if got := serve(g, Route{}, r).Code == http.StatusOK; got != want {
			t.Errorf("Host %q: allowed %v, want %v", host, got, want)
		}
	}
	withToken, _ := New(Options{Token: secret.Secret("0123456789abcdef")})
	r := httptest.NewRequest(http.MethodGet, "/x", nil)
	r.Host = "evil.example"
	r.Header.Set("X-API-Key", "0123456789abcdef")
	if got := serve(withToken, Route{}, r).Code; got != http.StatusOK {
		t.Errorf("with a token, Host evil.example: %d", got)
	}
}

// 100 wrong tokens in a second from one client: slowed after the limit
// (429 with Retry-After, the right token included, so guessing gains
// nothing) and logged once; another client with the right token is
// answered at once; a client sending no token is not counted.
//
// Guards: bound server.max_auth_failures (docs/bounds.md).
func TestWrongTokensSlowed(t *testing.T) {
	var logs bytes.Buffer
	const token = "0123456789abcdef"
	g, _ := New(Options{Token: secret.Secret(token), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	req := func(client, tok string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/x", nil)
		r.RemoteAddr = client + ":40000"
		if tok != "" {
			r.Header.Set("Authorization", "Bearer "+tok)
		}
		return serve(g, Route{}, r)
	}
	for range 50 {
		if w := req("192.0.2.9", ""); w.Code != http.StatusUnauthorized {
			t.Fatalf("no token: %d", w.Code)
		}
	}
	var limited int
	for i := range 100 {
		w := req("192.0.2.1", "guess-"+string(rune('a'+i%26)))
		switch w.Code {
		case http.StatusUnauthorized:
		case http.StatusTooManyRequests:
			limited++
			if ra := w.Header().Get("Retry-After"); ra == "" || ra == "0" {
				t.Fatalf("429 without Retry-After: %q", ra)
			}
		default:
			t.Fatalf("guess %d: %d", i, w.Code)
		}
	}
	if limited != 100-DefaultFailureLimit.Max {
		t.Errorf("%d of 100 wrong tokens slowed, want %d", limited, 100-DefaultFailureLimit.Max)
	}
	if w := req("192.0.2.1", token); w.Code != http.StatusTooManyRequests {
		t.Errorf("the slowed client's right token: %d, want 429", w.Code)
	}
	start := time.Now()
	if w := req("192.0.2.2", token); w.Code != http.StatusOK || time.Since(start) > 100*time.Millisecond {
		t.Errorf("another client's right token: %d after %s", w.Code, time.Since(start))
	}
	if n := strings.Count(logs.String(), "wrong API tokens"); n != 1 {
		t.Errorf("%d log lines, want 1:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), token) || strings.Contains(logs.String(), "guess-") {
		t.Errorf("a token reached the log:\n%s", logs.String())
	}
}

// The window ends: the client is answered again.
//
// Guards: bound server.max_auth_failures (docs/bounds.md).
func TestWrongTokensWindowEnds(t *testing.T) {
	g, _ := New(Options{Token: secret.Secret("0123456789abcdef"), Failures: FailureLimit{Max: 2, Window: 100 * time.Millisecond}})
	do := func(tok string) int {
		r := httptest.NewRequest(http.MethodGet, "/x", nil)
		r.RemoteAddr = "192.0.2.1:1"
		r.Header.Set("X-API-Key", tok)
		return serve(g, Route{}, r).Code
	}
	do("a")
	do("b")
	if c := do("0123456789abcdef"); c != http.StatusTooManyRequests {
		t.Fatalf("within the window: %d", c)
	}
	time.Sleep(150 * time.Millisecond)
	if c := do("0123456789abcdef"); c != http.StatusOK {
		t.Fatalf("after the window: %d", c)
	}
}

// Guards: bound "a request body" (every door) (docs/bounds.md).
func TestBodyLimit(t *testing.T) {
	g, _ := New(Options{})
	read := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		io.WriteString(w, "read")
	})
	for _, tc := range []struct {
		size, declared int64
		want           int
	}{{100, 100, 200}, {101, 101, 413}, {101, -1, 413}, {100, -1, 200}} {
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/x", bytes.NewReader(make([]byte, tc.size)))
		r.ContentLength = tc.declared
		w := httptest.NewRecorder()
		g.Wrap(Route{MaxBodyBytes: 100}, read).ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("%d bytes (declared %d): %d, want %d", tc.size, tc.declared, w.Code, tc.want)
		}
	}
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/x", bytes.NewReader(make([]byte, 200)))
	w := httptest.NewRecorder()
	g.Wrap(Route{MaxBodyBytes: 100, TooLarge: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(299) }}, read).ServeHTTP(w, r)
	if w.Code != 299 {
		t.Errorf("TooLarge not used: %d", w.Code)
	}
}

// A client that stops reading a large answer is cut after WriteTimeout: the
// handler's write fails and it returns, instead of holding its memory for
// as long as the connection lives. A client that reads slowly but steadily
// gets its whole answer, however long that takes.
//
// Guards: bound server.write_timeout (docs/bounds.md).
func TestWriteDeadline(t *testing.T) {
	g, _ := New(Options{WriteTimeout: 300 * time.Millisecond})
	done := make(chan error, 1)
	big := bytes.Repeat([]byte("x"), 64<<10)
	srv := httptest.NewServer(g.Wrap(Route{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var err error
		for i := 0; i < 1024 && err == nil; i++ { // up to 64 MiB
			_, err = w.Write(big)
		}
		done <- err
	})))
	defer srv.Close()
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("64 MiB written to a client that reads nothing")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler still blocked 10s after its client stopped reading")
	}

	var n atomic.Int64
	slow := httptest.NewServer(g.Wrap(Route{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for range 8 {
			w.Write(big)
			w.(http.Flusher).Flush()
		}
	})))
	defer slow.Close()
	resp, err := http.Get(slow.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 32<<10)
	for {
		k, err := resp.Body.Read(buf)
		n.Add(int64(k))
		if err != nil {
			break
		}
		time.Sleep(20 * time.Millisecond) // 8 × 64 KiB at this pace takes longer than the timeout
	}
	if n.Load() != 8*64<<10 {
		t.Errorf("slow reader got %d bytes, want %d", n.Load(), 8*64<<10)
	}
}

package mcpserver_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// serveHTTP mounts the server at /mcp on a mux of its own, as a host would.
func serveHTTP(t *testing.T, f *fixture) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/mcp", f.srv)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "host page") })
	ts := httptest.NewServer(mux)
	t.Cleanup(func() {
		f.srv.Close() // ends the sessions' hanging GET streams
		ts.Close()
	})
	return ts
}

func connectHTTP(t *testing.T, url string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, err := testClient(opts).Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// The go-sdk client over streamable HTTP: it probes server/discover first
// (INTEROP), falls back, and gets everything stdio gives.
func TestHTTPGoSDKClient(t *testing.T) {
	f := newFixture(t, mcpserver.Config{})
	ts := serveHTTP(t, f)
	log := newProgressLog()
	cs := connectHTTP(t, ts.URL+"/mcp", &mcp.ClientOptions{ProgressNotificationHandler: log.handler})
	checkSession(t, cs)
	checkProgress(t, cs, log)
	checkCancel(t, f, cs)
}

func post(t *testing.T, url string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(initFrame))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		del, _ := http.NewRequest("DELETE", url, nil)
		del.Header.Set("Mcp-Session-Id", sid)
		if r, err := http.DefaultClient.Do(del); err == nil {
			r.Body.Close()
		}
	}
	return resp.StatusCode, string(body)
}

// Browsers' requests must come from our own host or an allowed origin;
// a loopback server refuses foreign Host names (DNS rebinding).
func TestHTTPOriginAndHost(t *testing.T) {
	f := newFixture(t, mcpserver.Config{AllowedOrigins: []string{"https://app.example.com", "*.trusted.example"}})
	ts := serveHTTP(t, f)
	url := ts.URL + "/mcp"
	host := strings.TrimPrefix(ts.URL, "http://")
	for _, c := range []struct {
		name   string
		header map[string]string
		status int
	}{
		{"no origin (not a browser)", nil, http.StatusOK},
		{"same host", map[string]string{"Origin": "http://" + host}, http.StatusOK},
		{"allowed origin", map[string]string{"Origin": "https://APP.example.com"}, http.StatusOK},
		{"wildcard host pattern", map[string]string{"Origin": "http://ui.trusted.example"}, http.StatusOK},
		{"foreign origin", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"allowed host, wrong scheme", map[string]string{"Origin": "http://app.example.com"}, http.StatusForbidden},
		{"null origin", map[string]string{"Origin": "null"}, http.StatusForbidden},
		{"rebound host name", map[string]string{"Host": "evil.example:80"}, http.StatusForbidden},
	} {
		status, body := post(t, url, c.header)
		if status != c.status {
			t.Errorf("%s: status %d (%s), want %d", c.name, status, body, c.status)
		}
		if c.status == http.StatusOK && !strings.Contains(body, `"protocolVersion":"2025-11-25"`) {
			t.Errorf("%s: body %s", c.name, body)
		}
	}
	f.srv.Close()
	if status, _ := post(t, url, nil); status != http.StatusServiceUnavailable {
		t.Errorf("after Close: status %d, want 503", status)
	}
}

// An oversized body is refused with 413 and the server keeps serving.
func TestHTTPBodyLimit(t *testing.T) {
	f := newFixture(t, mcpserver.Config{MaxMessageBytes: 1024})
	ts := serveHTTP(t, f)
	cs := connectHTTP(t, ts.URL+"/mcp", nil)
	_, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "agent_echo", Arguments: map[string]any{"input": strings.Repeat("x", 2048)}})
	if err == nil || !strings.Contains(err.Error(), "Too Large") {
		t.Errorf("oversized call: %v, want a 413", err)
	}
	cs2 := connectHTTP(t, ts.URL+"/mcp", nil)
	if res, err := cs2.CallTool(ctxT(t), &mcp.CallToolParams{Name: "agent_echo", Arguments: map[string]any{"input": "small"}}); err != nil || textOf(t, res) != "small" {
		t.Errorf("after 413: %v %v", res, err)
	}
}

package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// door is one way into the daemon, as a browser could knock on it.
type door struct {
	name, method, path, body string
	header                   []string
}

// doors are every door of the daemon that acts: the HTTP API, both A2A
// surfaces, MCP over HTTP and the WebSocket stream (an upgrade).
var doors = []door{
	{"execute", http.MethodPost, "/api/agents/assistant/execute", `{"input":"hi"}`, nil},
	{"a2a tasks", http.MethodPost, "/a2a/tasks", `{"receiver_id":"assistant","input":"hi"}`, nil},
	{"a2a json-rpc", http.MethodPost, "/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`, nil},
	{"mcp", http.MethodPost, "/mcp", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		[]string{"Accept", "application/json, text/event-stream"}},
	{"websocket", http.MethodGet, "/api/events", "", []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}},
}

// knock sends d with host and origin ("" for none) and returns the status.
func knock(t *testing.T, td *testDaemon, d door, host, origin string) int {
	t.Helper()
	req, err := http.NewRequest(d.method, td.url+d.path, strings.NewReader(d.body))
	if err != nil {
		t.Fatal(err)
	}
	if d.body == "" {
		req.Body = nil
	}
	req.Header.Set("Content-Type", "text/plain") // a form post's: no CORS preflight
	for i := 0; i+1 < len(d.header); i += 2 {
		req.Header.Set(d.header[i], d.header[i+1])
	}
	if d.path == "/mcp" {
		req.Header.Set("Content-Type", "application/json")
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if host != "" {
		req.Host = host
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", d.name, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Every documented allowed_origins form means the same on every door: an
// origin it covers gets through (whatever the door then answers), a foreign
// one gets 403, on execute, A2A, /mcp and the WebSocket alike.
func TestAllowedOriginsSameOnEveryDoor(t *testing.T) {
	for _, tc := range []struct {
		pattern, match, foreign string
	}{
		{"https://app.example.com", "https://app.example.com", "http://app.example.com"},
		{"https://*.example.com", "https://ui.example.com", "https://ui.example.org"},
		{"*.example.com", "http://ui.example.com:8080", "http://example.com"},
		{"app.example.com", "https://app.example.com", "https://evil.example.com"},
		{"http://localhost:*", "http://localhost:5173", "https://localhost:5173"},
	} {
		t.Run(tc.pattern, func(t *testing.T) {
			td := startDaemon(t, fmt.Sprintf("server:\n  allowed_origins: [%q]\nagents:\n  - id: assistant\n", tc.pattern), nil)
			for _, d := range doors {
				if got := knock(t, td, d, "", tc.match); got == http.StatusForbidden || got >= 500 {
					t.Errorf("%s from %s: %d, want it let through", d.name, tc.match, got)
				}
				if got := knock(t, td, d, "", tc.foreign); got != http.StatusForbidden {
					t.Errorf("%s from %s: %d, want 403", d.name, tc.foreign, got)
				}
			}
		})
	}
}

// The usual container setup: no token, on 0.0.0.0, allow_unauthenticated.
// A page whose DNS name was re-pointed at the daemon (DNS rebinding) sends
// its own name as Host: refused on every door; the public_url host and IP
// literals pass.
func TestHostCheckWhateverTheAddress(t *testing.T) {
	td := startDaemonAt(t, "0.0.0.0:0", "server:\n  allow_unauthenticated: true\n  public_url: https://agents.example.com\nagents:\n  - id: assistant\n", nil)
	port := td.url[strings.LastIndex(td.url, ":")+1:]
	for _, d := range doors {
		if got := knock(t, td, d, "evil.example:"+port, ""); got != http.StatusForbidden {
			t.Errorf("%s with Host evil.example: %d, want 403", d.name, got)
		}
		for _, host := range []string{"agents.example.com", "127.0.0.1:" + port, "[::1]:" + port} {
			if got := knock(t, td, d, host, ""); got == http.StatusForbidden {
				t.Errorf("%s with Host %s: 403", d.name, host)
			}
		}
	}
	// The WebSocket accepts a real client at an IP literal.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn := dialEvents(t, ctx, "http://127.0.0.1:"+port, nil, "")
	conn.Close(websocket.StatusNormalClosure, "")
}

// mcp_server.max_message_bytes is the /mcp body limit (the daemon's 1 MiB
// API limit does not cut it first): 2 MiB accepted, one byte over 8 MiB 413.
func TestMCPMessageLimitIsTheRouteLimit(t *testing.T) {
	td := startDaemon(t, "mcp_server:\n  max_message_bytes: 8MiB\nagents:\n  - id: assistant\n", nil)
	msg := func(size int) string {
		head := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"},"pad":"`
		tail := `"}}`
		return head + strings.Repeat("x", size-len(head)-len(tail)) + tail
	}
	accept := []string{"Accept", "application/json, text/event-stream", "Content-Type", "application/json"}
	if r := td.do(t, http.MethodPost, "/mcp", msg(2<<20), accept...); r.status != http.StatusOK {
		t.Errorf("2 MiB message: %d %.200s", r.status, r.body)
	}
	if r := td.do(t, http.MethodPost, "/mcp", msg(8<<20+1), accept...); r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("8 MiB + 1 message: %d %.200s", r.status, r.body)
	}
}

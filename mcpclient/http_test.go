package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A server that forgets its sessions (a restart behind the same URL) answers
// the old session with 404: the client reconnects with a new session.
func TestHTTPDroppedSessionReconnects(t *testing.T) {
	ts := newTestServer()
	newHandler := func() http.Handler {
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ts.srv }, nil)
	}
	var current atomic.Pointer[http.Handler]
	h := newHandler()
	current.Store(&h)
	var unauthorized atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "key-abcdef-123" {
			unauthorized.Add(1)
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		(*current.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close) // after the Engine closes (cleanups run last-in first-out)

	cfg := Config{
		Servers:    []ServerConfig{{Name: "web", URL: hs.URL, Headers: map[string]secretT{"X-Api-Key": "key-abcdef-123"}, Timeout: 5 * time.Second}},
		MinBackoff: 50 * time.Millisecond,
	}
	e, m := startModule(t, cfg, nil)
	if err := m.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	call := func() (axocoatl.ToolResult, error) {
		return e.CallTool(context.Background(), axocoatl.ToolCall{Tool: "mcp__web__echo", Arguments: json.RawMessage(`{"message":"x"}`)})
	}
	if res, err := call(); err != nil || res.Content != "Echo: x" {
		t.Fatalf("before: %+v %v", res, err)
	}
	// "Restart": a fresh handler that knows no session; end the old
	// sessions so their streams close.
	h2 := newHandler()
	current.Store(&h2)
	for ss := range ts.srv.Sessions() {
		ss.Close()
	}
	var failed []error
	waitFor(t, 5*time.Second, func() bool {
		res, err := call()
		if err != nil {
			failed = append(failed, err)
			return false
		}
		return res.Content == "Echo: x"
	})
	for _, err := range failed {
		if !errors.Is(err, ErrServerDown) || !strings.Contains(err.Error(), "web") {
			t.Errorf("outage error: %v", err)
		}
	}
	t.Logf("%d calls failed before the new session", len(failed))
	if unauthorized.Load() != 0 {
		t.Fatalf("%d requests without the header", unauthorized.Load())
	}
}

// A URL whose server refuses the headers yields a clear error naming the
// server and the status, without the header value.
func TestHTTPUnauthorized(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad token", http.StatusUnauthorized)
	}))
	defer hs.Close()
	_, err := Check(context.Background(), ServerConfig{Name: "locked", URL: hs.URL, Headers: map[string]secretT{"Authorization": "Bearer very-secret-token"}, Timeout: 5 * time.Second}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "locked") || strings.Contains(err.Error(), "very-secret-token") {
		t.Fatalf("err = %v", err)
	}
	t.Log(err)
}

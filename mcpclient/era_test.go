package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// The module calls a tool of a go-sdk server that speaks only MCP
// 2026-07-28 (no initialize at all), over stdio and over stateless
// streamable HTTP.
func TestOnly2026Server(t *testing.T) {
	t.Run("stdio", func(t *testing.T) {
		e, m := startModule(t, Config{Servers: []ServerConfig{helperServer("newera", "server-2026")}}, nil)
		check2026(t, e, m)
	})
	t.Run("http", func(t *testing.T) {
		srv := only2026Server()
		var mu sync.Mutex
		var methods, sessionIDs []string
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			methods = append(methods, r.Method+" "+r.Header.Get("Mcp-Method"))
			if v := r.Header.Get("Mcp-Session-Id"); v != "" {
				sessionIDs = append(sessionIDs, v)
			}
			mu.Unlock()
			h.ServeHTTP(w, r)
		}))
		t.Cleanup(hs.Close)
		e, m := startModule(t, Config{Servers: []ServerConfig{{Name: "newera", URL: hs.URL}}}, nil)
		check2026(t, e, m)

		// tools/list_changed reaches the module on its subscriptions/listen
		// stream (the era's replacement of the GET stream).
		srv.AddTool(&mcp.Tool{Name: "later", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "late"}}}, nil
		})
		waitFor(t, 5*time.Second, func() bool { return slices.Contains(toolNamesOf(e), "mcp__newera__later") })

		mu.Lock()
		defer mu.Unlock()
		if len(sessionIDs) > 0 || slices.Contains(methods, "POST initialize") || !slices.Contains(methods, "POST server/discover") || !slices.Contains(methods, "POST subscriptions/listen") {
			t.Errorf("requests %v, session ids %v: want server/discover and subscriptions/listen, no initialize, no session id", methods, sessionIDs)
		}
	})
}

func check2026(t *testing.T, e *axocoatl.Engine, m *Module) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if st := m.Status()[0]; !st.Connected || st.ProtocolVersion != "2026-07-28" {
		t.Fatalf("status %+v, want connected at 2026-07-28", st)
	}
	res, err := e.CallTool(ctx, axocoatl.ToolCall{Tool: "mcp__newera__echo", Arguments: json.RawMessage(`{"message":"stateless"}`)})
	if err != nil || res.IsError || res.Content != "Echo: stateless" {
		t.Fatalf("mcp__newera__echo: %+v %v", res, err)
	}
}

// A 2026-07-28 server that hangs (alive, reading, answering nothing) is
// replaced: that era has no ping, so the module's own check, a tools/list
// every keep_alive, finds it out after two unanswered listings.
//
// Guards: bound mcp_servers[].keep_alive (docs/bounds.md).
func TestKeepAliveReplacesHung2026Server(t *testing.T) {
	t.Run("no ttl", func(t *testing.T) { testKeepAliveReplacesHung2026Server(t, "hang-after-discover") })
	// The go-sdk serves a 2026-07-28 tools/list from its cache while the
	// server's ttlMs lasts: the check must still reach the server.
	t.Run("cacheable list", func(t *testing.T) { testKeepAliveReplacesHung2026Server(t, "hang-after-discover-ttl") })
}

func testKeepAliveReplacesHung2026Server(t *testing.T, mode string) {
	sc := helperServer("hung", mode)
	sc.KeepAlive = 200 * time.Millisecond
	e, m := startModule(t, Config{Servers: []ServerConfig{sc}, MinBackoff: 50 * time.Millisecond}, nil)
	sub, err := e.Bus().Subscribe(lattice.Filter{Types: []string{"McpServer*"}}, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	first := m.servers[0].dial.pid()
	if st := m.Status()[0]; !st.Connected || st.ProtocolVersion != "2026-07-28" {
		t.Fatalf("status %+v, want connected at 2026-07-28", st)
	}
	var seq []string
	var reason string
	deadline := time.After(10 * time.Second)
	for len(seq) < 2 || seq[len(seq)-1] != EventServerConnected || !slices.Contains(seq, EventServerDisconnected) {
		select {
		case ev := <-sub.Events():
			seq = append(seq, ev.Type)
			if ev.Type == EventServerDisconnected {
				var p serverEvent
				json.Unmarshal(ev.Payload, &p)
				reason = p.Error
			}
		case <-deadline:
			t.Fatalf("hung 2026-07-28 server not replaced within 10s; events %v, status %+v", seq, m.Status())
		}
	}
	if second := m.servers[0].dial.pid(); second == first || second == 0 {
		t.Fatalf("same child %d after reconnect", first)
	}
	if want := "2 tool listings in a row unanswered"; !strings.Contains(reason, want) {
		t.Errorf("disconnect reason %q, want %q", reason, want)
	}
	waitFor(t, 5*time.Second, func() bool { return !processGroupAlive(first) })
}

// A 2025-11-25 server that never answers server/discover (the go-sdk's
// probe then waits for the whole handshake timeout, and falls back to
// initialize only on an error) is still connected: after a handshake that
// timed out, the next attempt starts with initialize.
func TestLegacyServerIgnoringDiscover(t *testing.T) {
	sc := legacyServer("old", time.Second)
	e, m := startModule(t, Config{Servers: []ServerConfig{sc}, MinBackoff: 50 * time.Millisecond}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	waitFor(t, 10*time.Second, func() bool { return m.Status()[0].Connected })
	if st := m.Status()[0]; st.ProtocolVersion != "2025-11-25" {
		t.Fatalf("status %+v, want connected at 2025-11-25", st)
	}
	res, err := e.CallTool(ctx, axocoatl.ToolCall{Tool: "mcp__old__echo", Arguments: json.RawMessage(`{"message":"still here"}`)})
	if err != nil || res.IsError || res.Content != "Echo: still here" {
		t.Fatalf("mcp__old__echo: %+v %v", res, err)
	}
}

// After an initialize that failed (a 2026-07-28-only server refuses it, or
// was slow once), the next attempt probes server/discover again: a single
// slow start must not pin a new-era server to the old era for good.
func TestNextLegacy(t *testing.T) {
	timeout := fmt.Errorf("no MCP handshake within 1s: %w", context.DeadlineExceeded)
	refused := errors.New("unsupported protocol version")
	for _, c := range []struct {
		legacy bool
		err    error
		want   bool
	}{
		{false, timeout, true},  // the probe timed out: try initialize
		{false, refused, false}, // an answer: the go-sdk fell back already
		{true, timeout, false},  // initialize timed out too: probe again
		{true, refused, false},  // initialize refused: a 2026-07-28-only server
	} {
		if got := nextLegacy(c.legacy, c.err); got != c.want {
			t.Errorf("nextLegacy(%v, %v) = %v, want %v", c.legacy, c.err, got, c.want)
		}
	}
}

// doctor's Check reaches such a server too: when the probe times out, it
// tries initialize once.
func TestCheckLegacyServerIgnoringDiscover(t *testing.T) {
	sc := legacyServer("old", time.Second)
	names, err := Check(context.Background(), sc, nil, nil)
	if err != nil || !slices.Equal(names, []string{"mcp__old__echo"}) {
		t.Fatalf("Check = %v, %v; want [mcp__old__echo]", names, err)
	}
}

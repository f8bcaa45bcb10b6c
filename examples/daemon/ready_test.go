package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// /health/ready waits for every MCP server's first connect (a request
// before it would run without the tools); GET /api/tools shows each tool
// with its server's state and the agents allowed to call it.
func TestReadyWaitsForMCPServers(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "greet", Description: "Greets."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hi"}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	release := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // the server is slow to come up
		case <-release:
		case <-r.Context().Done():
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	td := startDaemon(t, fmt.Sprintf(`
agents:
  - id: a
  - id: b
    tools: []
mcp_servers:
  - name: slow
    url: %s/mcp
    timeout: 20s
`, hs.URL), nil)
	var body struct {
		Status     string
		MCPServers []struct {
			Name      string
			Connected bool
		} `json:"mcp_servers"`
	}
	r := td.do(t, http.MethodGet, "/health/ready", "")
	if err := json.Unmarshal(r.body, &body); err != nil || r.status != http.StatusServiceUnavailable || len(body.MCPServers) != 1 || body.MCPServers[0].Connected {
		t.Fatalf("while the server connects: %d %s", r.status, r.body)
	}
	// The log says ready when /health/ready does, not before.
	if strings.Contains(td.stderr.String(), `msg="axocoatl ready"`) {
		close(release) // the daemon's stop waits for the server's answer
		t.Fatalf("axocoatl ready logged while the server connects:\n%s", td.stderr.String())
	}
	close(release)
	deadline := time.Now().Add(15 * time.Second)
	for r = td.do(t, http.MethodGet, "/health/ready", ""); r.status != http.StatusOK; r = td.do(t, http.MethodGet, "/health/ready", "") {
		if time.Now().After(deadline) {
			t.Fatalf("not ready 15s after the server came up: %d %s", r.status, r.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := json.Unmarshal(r.body, &body); err != nil || !body.MCPServers[0].Connected {
		t.Fatalf("ready: %s", r.body)
	}
	for !strings.Contains(td.stderr.String(), `msg="axocoatl ready"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no axocoatl ready in the log 15s after the server came up:\n%s", td.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	r = td.do(t, http.MethodGet, "/api/tools", "")
	var tools struct {
		Tools []struct {
			Name, Server string
			ServerState  string `json:"server_state"`
			Agents       []string
		}
	}
	if err := json.Unmarshal(r.body, &tools); err != nil || r.status != http.StatusOK || len(tools.Tools) != 1 {
		t.Fatalf("tools: %d %s", r.status, r.body)
	}
	if tl := tools.Tools[0]; tl.Name != "mcp__slow__greet" || tl.Server != "slow" || tl.ServerState != "connected" || len(tl.Agents) != 1 || tl.Agents[0] != "a" {
		t.Fatalf("tool: %+v", tl)
	}
}

// GET /mcp (the standalone stream of a 2025-11-25 session, which carries
// tools/list_changed) is served, and an open one does not hold shutdown
// for the grace period: the calls in flight are answered, then the
// sessions end.
func TestMCPGetStreamDoesNotHoldShutdown(t *testing.T) {
	td := startDaemon(t, "server:\n  shutdown_grace: 20s\nagents:\n  - id: a\n", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: td.url + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: era2025})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, td.url+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The go-sdk client holds the session's one standalone stream: a
	// second one is refused by the SDK (409), not by a missing route (405).
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("second GET /mcp: %d, want 409 (the client's stream is open)", resp.StatusCode)
	}
	start := time.Now()
	if code := td.stop(); code != exitOK || time.Since(start) > 5*time.Second {
		t.Fatalf("exit %d after %s with a GET stream open (grace 20s)", code, time.Since(start))
	}
}

// A port in use names the way out; doctor reports it as a failure.
func TestPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := writeConfig(t, "agents:\n  - id: a\n")
	code, _, stderr := runCLI(t, nil, "serve", "--config", cfg, "--addr", ln.Addr().String())
	if code != exitFail || !strings.Contains(stderr, "is already in use by another process: choose another address with --addr or AXOCOATL_ADDR") {
		t.Fatalf("serve on a busy port: %d %s", code, stderr)
	}
	code, stdout, _ := runCLI(t, map[string]string{"AXOCOATL_ADDR": ln.Addr().String()}, "doctor", "--config", cfg)
	if code != exitFail || !strings.Contains(stdout, "FAIL listen: "+ln.Addr().String()+" cannot be bound") {
		t.Fatalf("doctor on a busy port: %d %s", code, stdout)
	}
}

// A client that connects after three runs gets them in its ready frame's
// history (oldest first), so a fresh dashboard tab shows what happened.
func TestReadyFrameCarriesHistory(t *testing.T) {
	td := startDaemon(t, "", nil)
	var ids []string
	for i := range 3 {
		r := td.do(t, http.MethodPost, "/api/agents/assistant/execute", fmt.Sprintf(`{"input":"run %d"}`, i))
		ids = append(ids, fmt.Sprint(r.json(t)["task_id"]))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ready struct {
		Kind    string
		History []struct {
			Type    string
			Payload struct {
				TaskID string `json:"task_id"`
			}
		}
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(td.url, "http")+"/api/events", nil)
		if err != nil {
			t.Fatal(err)
		}
		_, data, err := conn.Read(ctx)
		conn.CloseNow()
		if err != nil || json.Unmarshal(data, &ready) != nil || ready.Kind != "ready" {
			t.Fatalf("ready frame: %s %v", data, err)
		}
		var done []string
		for _, ev := range ready.History {
			if ev.Type == "TaskCompleted" {
				done = append(done, ev.Payload.TaskID)
			}
		}
		if strings.Join(done, " ") == strings.Join(ids, " ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("history's completed tasks %v, want %v in order", done, ids)
		}
	}
}

// A browser keeps the token out of the URL by offering it as a WebSocket
// subprotocol; the daemon checks it like a header and accepts the protocol
// back (browsers require that). A wrong one is refused.
func TestEventStreamTokenAsSubprotocol(t *testing.T) {
	const token = "ws-subprotocol-token-0123456789"
	td := startDaemon(t, tokenConfig, map[string]string{"TOKEN": token})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(td.url, "http") + "/api/events"
	conn, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{Subprotocols: []string{"axocoatl.bearer." + token}})
	if err != nil {
		t.Fatalf("dial with the token as subprotocol: %v", err)
	}
	defer conn.CloseNow()
	if conn.Subprotocol() != "axocoatl.bearer."+token {
		t.Errorf("subprotocol %q not accepted back", conn.Subprotocol())
	}
	if _, data, err := conn.Read(ctx); err != nil || !strings.Contains(string(data), `"kind":"ready"`) {
		t.Fatalf("first frame: %s %v", data, err)
	}
	_, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{Subprotocols: []string{"axocoatl.bearer.wrong"}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token as subprotocol: %v %v", resp, err)
	}
}

package mcpserver_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// Guards: bound mcp_server.session_timeout (docs/bounds.md, MCP server). A
// 2025-11-25 session of the go-sdk client that sends no request for
// SessionTimeout (here 1s) is closed by the server: its server session
// ends (the signal waited on, within a generous bound), not before the
// timeout has passed since its last request began, and the client's
// session id is no longer served (404; its next call fails). Its hanging
// GET stream does not keep it open: only requests do.
func TestHTTPIdleSessionClosed(t *testing.T) {
	const timeout = time.Second
	f := newFixture(t, mcpserver.Config{SessionTimeout: timeout})
	ts := serveHTTP(t, f)
	url := ts.URL + "/mcp"
	last := time.Now() // before the session's last request begins: its idle time counts from that request's end
	cs := connectHTTP(t, url, nil, legacy)

	var sessions []*mcp.ServerSession
	for ss := range f.srv.MCP().Sessions() {
		sessions = append(sessions, ss)
	}
	switch len(sessions) {
	case 0: // a loaded machine took the whole timeout to get here
	case 1:
		ended := make(chan struct{})
		go func() { sessions[0].Wait(); close(ended) }()
		select {
		case <-ended:
		case <-time.After(30 * time.Second): // a loaded machine, 30 times the timeout
			t.Fatalf("an idle session still open 30s after its last request (session_timeout %v)", timeout)
		}
	default:
		t.Fatalf("%d server sessions after one connect, want 1", len(sessions))
	}
	if idle := time.Since(last); idle < timeout {
		t.Fatalf("session closed after %v idle, before its timeout %v", idle, timeout)
	}

	req, _ := http.NewRequestWithContext(ctxT(t), "POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("request on the closed session: %d %s, want 404", resp.StatusCode, body)
	}
	if _, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "agent_echo", Arguments: map[string]any{"input": "y"}}); err == nil {
		t.Error("a call on the closed session succeeded")
	}
}

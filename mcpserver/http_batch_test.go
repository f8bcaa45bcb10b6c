package mcpserver_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// A batch in the 2026-07-28 era (which has none) gets a JSON-RPC error, as
// every other malformed message does, not a plain-text line a client
// cannot parse.
func TestHTTPStatelessBatchIsJSONRPCError(t *testing.T) {
	f := newFixture(t, mcpserver.Config{})
	ts := serveHTTP(t, f)
	req, _ := http.NewRequestWithContext(ctxT(t), "POST", ts.URL+"/mcp", strings.NewReader(`[{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":`+metaFrame+`}}]`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", mcpserver.ProtocolVersion2026)
	req.Header.Set("Mcp-Method", "tools/list")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var m struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(body, &m) != nil || m.Error.Code != -32600 || !strings.Contains(m.Error.Message, "batch") {
		t.Fatalf("batch in 2026-07-28: %d %q, want 400 with a JSON-RPC -32600 naming batches", resp.StatusCode, body)
	}
}

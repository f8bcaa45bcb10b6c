package mcpserver_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/axocoatl/axocoatl-go/mcpserver"
)

func TestProbeHTTP(t *testing.T) {
	f := newFixture(t, mcpserver.Config{})
	ts := serveHTTP(t, f)
	url := ts.URL + "/mcp"
	for _, c := range []struct{ hv, method, body string }{
		{"zzz", "tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":` + metaFrame + `}}`},
		{"2099-01-01", "tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":` + metaFrame + `}}`},
		{"2026-07-28", "initialize", initFrame},
		{"2026-07-28", "tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
		{"2026-07-28", "tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}`},
		{"2026-07-28", "tools/call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"agent_echo","arguments":{"input":"hi"},"_meta":` + metaFrame + `}}`},
		{"2026-07-28", "tools/call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"agent_nope","arguments":{"input":"hi"},"_meta":` + metaFrame + `}}`},
		{"2026-07-28", "tools/call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"agent_echo","arguments":{"input":5},"_meta":` + metaFrame + `}}`},
		{"2026-07-28", "", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`},
		{"2026-07-28", "ping", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":` + metaFrame + `}}`},
		{"2026-07-28", "server/discover", `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":` + metaFrame + `}}`},
		{"2026-07-28", "tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":` + metaFrame + `,"cursor":"garbage"}}`},
		{"2026-07-28", "tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":` + metaFrame + `,"_meta":null}}`},
		{"2026-07-28", "resources/subscribe", `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"x","_meta":` + metaFrame + `}}`},
		{"2026-07-28", "logging/setLevel", `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug","_meta":` + metaFrame + `}}`},
		{"2026-07-28", "tools/list", `[{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":` + metaFrame + `}}]`},
	} {
		req, _ := http.NewRequestWithContext(ctxT(t), "POST", url, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", c.hv)
		if c.method != "" {
			req.Header.Set("Mcp-Method", c.method)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if len(b) > 300 {
			b = b[:300]
		}
		t.Logf("%s %s\n   -> %d %s %q", c.hv, c.body, resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), b)
	}
}

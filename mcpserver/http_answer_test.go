package mcpserver_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// A stateless call's JSON answer leaves as soon as the go-sdk has it, not
// when the HTTP handler returns (issue 24: waiting for the handler's
// goroutine to be scheduled again put this door behind the bare go-sdk on
// a busy machine). The host's handler here holds on after the Server's
// returns: the client must have its whole answer meanwhile, small or
// larger than net/http's buffer.
func TestHTTPStatelessAnswerLeavesBeforeHandlerReturns(t *testing.T) {
	f := newFixture(t, mcpserver.Config{})
	release := make(chan struct{})
	returned := make(chan struct{}, 16)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.srv.ServeHTTP(w, r)
		if r.Method == http.MethodPost && strings.Contains(r.Header.Get("Mcp-Method"), "tools/call") {
			returned <- struct{}{}
			<-release
		}
	}))
	t.Cleanup(func() {
		f.srv.Close()
		ts.Close()
	})
	defer close(release)
	for _, input := range []string{"small", strings.Repeat("larger than net/http's 2 KiB buffer ", 2000)} {
		// A connection of its own: the held one takes no next request
		// until the host's handler returns.
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		cs, err := testClient(nil).Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: ts.URL, MaxRetries: -1, HTTPClient: &http.Client{Transport: tr}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		if v := cs.InitializeResult().ProtocolVersion; v != mcpserver.ProtocolVersion2026 {
			t.Fatalf("negotiated %s, want %s", v, mcpserver.ProtocolVersion2026)
		}
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_echo", Arguments: map[string]any{"input": input}})
			if err == nil && (res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != input) {
				err = io.ErrUnexpectedEOF
			}
			done <- err
		}()
		// The handler has returned into the host's, which holds the
		// response open: the answer must already be with the client.
		if _, err := recv(returned, 5*time.Second); err != nil {
			t.Fatalf("%d bytes: the Server's handler did not return: %v", len(input), err)
		}
		err, timeout := recv(done, 20*time.Second)
		if timeout != nil {
			t.Fatalf("%d bytes: no answer while the host's handler still runs: it waited for the handler to return", len(input))
		}
		if err != nil {
			t.Fatalf("%d bytes: %v", len(input), err)
		}
	}
}

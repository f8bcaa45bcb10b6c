package mcpserver_test

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// A 2026-07-28 client's subscriptions/listen on stdio is a request that is
// never answered while the client keeps it: at EOF, ServeStdio must not
// wait for it (the client that closed stdin wants no more notifications),
// or `axocoatl mcp serve` never exits when its client goes away without
// cancelling the listen first (killed, or a client that just closes).
func TestStdioEOFWithOpenListen(t *testing.T) {
	f := newFixture(t, mcpserver.Config{})
	r := startRaw(t, f)
	r.send(`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":` + metaFrame + `}}`)
	r.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":` + metaFrame + `}}`)
	r.wantResult("2", "agent_echo")
	r.in.Close()
	if _, err := recv(r.done, 3*time.Second); err != nil {
		t.Fatal("ServeStdio did not return within 3s of EOF with a subscriptions/listen open")
	}
	r.done <- nil // for startRaw's cleanup
}

// The go-sdk client with a ToolListChangedHandler keeps a
// subscriptions/listen open on stdio in the 2026-07-28 era: an agent added
// later is announced on it, and when the client closes, ServeStdio
// returns (the go-sdk cancels its listen before it closes).
//
// "Later" is after the server acknowledged the listen: Connect returns
// once the listen is sent, not handled, and a change made before the
// server has taken it is announced to nobody (11 of 200 runs under load
// added the agent first and waited in vain).
func TestStdioGoSDKListenThenClose(t *testing.T) {
	f := newFixture(t, mcpserver.Config{})
	tr, done := stdioPair(t, f, context.Background())
	changed := make(chan struct{}, 4)
	client := testClient(&mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}})
	acked := make(chan struct{}, 1)
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "notifications/subscriptions/acknowledged" {
				select {
				case acked <- struct{}{}:
				default:
				}
			}
			return next(ctx, method, req)
		}
	})
	cs, err := client.Connect(ctxT(t), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := cs.InitializeResult().ProtocolVersion; v != mcpserver.ProtocolVersion2026 {
		t.Fatalf("negotiated %s", v)
	}
	if _, err := recv(acked, 10*time.Second); err != nil {
		t.Fatal("the server did not acknowledge the client's subscriptions/listen")
	}
	if err := f.eng.AddAgent(agent.Spec{ID: "late", Provider: provider.Echo}, provider.EchoModel{}); err != nil {
		t.Fatal(err)
	}
	if _, err := recv(changed, 5*time.Second); err != nil {
		t.Fatal("no tools/list_changed on the stdio listen")
	}
	cs.Close() // closes the server's stdin
	if err, terr := recv(done, 5*time.Second); terr != nil || err != nil {
		t.Fatalf("ServeStdio after EOF = %v (%v), want nil within 5s", err, terr)
	}
}

// Each open subscriptions/listen holds a go-sdk goroutine until its client
// ends it: a stdio client gets at most mcpserver.MaxStdioListens open at
// once, the next one is refused with -32000, and ending one makes room.
//
// Guards: bound "`subscriptions/listen` requests open at once on one stdio
// session" (mcp server) (docs/bounds.md).
func TestStdioListensBounded(t *testing.T) {
	f := newFixture(t, mcpserver.Config{})
	r := startRaw(t, f)
	listen := func(id int) {
		r.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":%s}}`, id, metaFrame))
	}
	for id := 1; id <= mcpserver.MaxStdioListens; id++ {
		listen(id)
	}
	listen(100)
	r.wantError("100", -32000, "subscriptions/listen")
	r.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	listen(102)
	r.send(`{"jsonrpc":"2.0","id":103,"method":"tools/list","params":{"_meta":` + metaFrame + `}}`)
	for {
		m := r.reply()
		if string(m.ID) == "1" { // the go-sdk's answer to the ended listen
			continue
		}
		if string(m.ID) != "103" || m.Error != nil {
			t.Fatalf("got %s, want the answer to 103 (and no error for listen 102, made room for)", m.raw)
		}
		break
	}
}

package main

import (
	"fmt"
	"net"
	"net/http"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// Guards the bound server.write_timeout ("a client that stops reading is
// cut and its memory freed"): on every streaming door, 40 clients whose
// socket has a small receive buffer (SO_RCVBUF set before connecting, so the
// window is small from the handshake on) send their whole request and then
// read nothing. Within 2 × write_timeout of their answers being ready, the
// daemon's goroutines and heap in use (after a GC) are back to what they
// were before the clients came: nothing keeps an answer referenced (a
// buffered writer, a subscription's queue, a handler waiting on a write)
// once its client is cut.
//
// An answer that fits in the kernel's send buffer (these do) is written at
// once: its connection then waits idle with the answer unsent, which the
// write deadline alone never saw.
func TestNonReadersFreedWithinTwoWriteTimeouts(t *testing.T) {
	// 3 s: long enough that a loaded machine's handlers (under -race)
	// have written what they can before the cut is measured.
	const clients, writeTimeout = 40, 3 * time.Second
	if testing.Short() {
		t.Skip("moves 40 × 900 KB per door")
	}
	// 256 KiB: 40 answers held (10 MiB, more in copies) show above the
	// slack; the 900 KB made the test minutes long under -race.
	text := strings.Repeat("x", 256<<10)
	mcpMeta := `{"progressToken":"p","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	doors := []struct {
		name    string
		source  string // executions_total's door label; "" for the WebSocket
		request func(host string) string
	}{
		{"execute", "api", func(host string) string {
			return post(host, "/api/agents/echo/execute", nil, `{"input":"`+text+`"}`)
		}},
		{"a2a 0.3 stream", "a2a", func(host string) string {
			return post(host, "/a2a", nil, `{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"`+text+`"}],"metadata":{"receiver_id":"echo"}}}}`)
		}},
		{"a2a 1.0 stream", "a2a", func(host string) string {
			return post(host, "/a2a/message:stream", []string{"A2A-Version: 1.0"}, `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"`+text+`"}]}}`)
		}},
		{"mcp sse", "mcp", func(host string) string {
			return post(host, "/mcp", []string{"Accept: application/json, text/event-stream", "Mcp-Protocol-Version: 2026-07-28", "Mcp-Method: tools/call", "Mcp-Name: agent_echo"},
				`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"agent_echo","arguments":{"input":"`+text+`"},"_meta":`+mcpMeta+`}}`)
		}},
		{"websocket", "", func(host string) string {
			return "GET /api/events HTTP/1.1\r\nHost: " + host + "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
				"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
		}},
	}
	for _, door := range doors {
		t.Run(door.name, func(t *testing.T) {
			td := startDaemon(t, fmt.Sprintf(`
server:
  write_timeout: %s
agents:
  - { id: echo, provider: echo }
a2a:
  max_store_bytes: 2MiB
`, writeTimeout), nil)
			host := strings.TrimPrefix(td.url, "http://")
			// Runs are counted as their TaskCompleted events arrive (the
			// signal itself; scraping /metrics every few ms competed with
			// the runs for a loaded machine's CPU).
			completed, err := td.d.engine.Bus().Subscribe(lattice.Filter{Types: []string{axocoatl.EventTaskCompleted}}, 2*clients)
			if err != nil {
				t.Fatal(err)
			}
			defer completed.Close()
			// One answered request first: what the door sets up once
			// (pools, a session) is in the baseline.
			if door.source != "" {
				c := dialSmall(t, host)
				fmt.Fprint(c, door.request(host))
				waitCompleted(t, completed, 1)
				c.Close()
			}
			baseG, baseHeap := settled()

			conns := make([]net.Conn, 0, clients)
			t.Cleanup(func() {
				for _, c := range conns {
					c.Close()
				}
			})
			for range clients {
				c := dialSmall(t, host)
				if _, err := fmt.Fprint(c, door.request(host)); err != nil {
					t.Fatal(err)
				}
				conns = append(conns, c)
				if door.source == "" {
					// The WebSocket client reads the 101 and the first
					// bytes of the ready frame (written once it has
					// subscribed), then nothing more.
					readHandshake(t, c)
				}
			}
			if door.source != "" {
				waitCompleted(t, completed, clients)
			} else {
				// The WebSocket streams events: publish big ones that the
				// 40 subscribed clients never read.
				// 6 × 900 KB: more than the kernel's send buffer (4 MiB)
				// takes, so that a write blocks: a stream the buffer
				// absorbs looks, from here, like an idle reader's.
				big := strings.Repeat("y", 900<<10)
				for i := range 6 {
					r := td.do(t, http.MethodPost, "/api/events", fmt.Sprintf(`{"type":"big.%d","payload":{"text":"%s"}}`, i, big))
					if r.status/100 != 2 {
						t.Fatalf("publish: %d %s", r.status, r.body)
					}
				}
			}
			ready := time.Now()
			var g int
			var heap uint64
			for {
				g, heap = settled()
				// 4: the goroutines of a loaded runtime come and go (timers,
				// the GC's workers); 8 MiB: what 40 answers of 900 KB
				// (36 MiB, and more in copies) cannot hide in.
				if g <= baseG+4 && heap <= baseHeap+8<<20 {
					return
				}
				if time.Since(ready) > 2*writeTimeout {
					break
				}
				time.Sleep(100 * time.Millisecond) // polling a measure, not synchronising
			}
			var stacks strings.Builder
			pprof.Lookup("goroutine").WriteTo(&stacks, 1)
			t.Logf("goroutines:\n%s", stacks.String())
			t.Fatalf("%d clients that stopped reading still cost %d goroutines and %d MiB heap in use %s after their answers were ready (write_timeout %s)",
				clients, g-baseG, (int64(heap)-int64(baseHeap))>>20, time.Since(ready).Round(time.Millisecond), writeTimeout)
		})
	}
}

// post is a raw HTTP/1.1 POST of body with extra header lines.
func post(host, path string, headers []string, body string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", path, host, len(body))
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n" + body)
	return b.String()
}

// dialSmall connects with a 4 KiB receive buffer, set before the handshake
// so the advertised window is small from the start.
func dialSmall(t *testing.T, host string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// settled is the goroutine count and heap in use after a GC.
func settled() (goroutines int, heapInuse uint64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return runtime.NumGoroutine(), m.HeapInuse
}

// waitCompleted waits for n TaskCompleted events on sub.
func waitCompleted(t *testing.T, sub lattice.Subscription, n int) {
	t.Helper()
	for i := range n {
		select {
		case <-sub.Events():
		case <-time.After(3 * time.Minute): // a loaded machine is slow; the bound is measured after
			t.Fatalf("%d of %d runs completed within 3 minutes", i, n)
		}
	}
}

// readHandshake reads a WebSocket handshake's answer up to the first two
// bytes after its header (a frame's header).
func readHandshake(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(time.Minute))
	defer c.SetReadDeadline(time.Time{})
	var got []byte
	one := make([]byte, 1)
	for {
		if _, err := c.Read(one); err != nil {
			t.Fatalf("websocket handshake: %v after %q", err, got)
		}
		got = append(got, one[0])
		if i := strings.Index(string(got), "\r\n\r\n"); i >= 0 && len(got) >= i+6 {
			if !strings.HasPrefix(string(got), "HTTP/1.1 101") {
				t.Fatalf("websocket handshake: %q", got)
			}
			return
		}
	}
}

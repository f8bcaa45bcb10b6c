package mcpserver_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// rawPost writes one HTTP/1.1 POST of body to /mcp on conn (Connection:
// close: one request per connection), without waiting for the answer.
func rawPost(conn net.Conn, host string, header map[string]string, body string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\nConnection: close\r\n", host, len(body))
	for k, v := range header {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	_, err := conn.Write([]byte(b.String()))
	return err
}

// readStatus reads the status code of the answer on conn.
func readStatus(conn net.Conn) (int, error) {
	conn.SetReadDeadline(time.Now().Add(2 * time.Minute)) // a bound against a hang, not a timing
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// Guards max_sessions against concurrent 2026-07-28 subscriptions/listen
// (issue 24, item 2): 1,500 listens sent at once, each on its own
// connection, all written before any answer is read. Each accepted listen
// keeps its stream open (its connection is not closed until the end), so
// every 200 is a stream held at the same time as the others: exactly
// MaxSessions (the default, 1,000) are accepted, the rest get 503. Before
// the slot was taken ahead of the check, 1,487 were accepted.
func TestHTTPMaxSessionsConcurrentListens(t *testing.T) {
	const listens = 1500
	f := newFixture(t, mcpserver.Config{})
	ts := serveHTTP(t, f)
	host := strings.TrimPrefix(ts.URL, "http://")
	conns := make([]net.Conn, 0, listens)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range listens {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	header := map[string]string{"Mcp-Protocol-Version": mcpserver.ProtocolVersion2026, "Mcp-Method": "subscriptions/listen"}
	for i, c := range conns {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":%s}}`, i, metaFrame)
		if err := rawPost(c, host, header, body); err != nil {
			t.Fatal(err)
		}
	}
	statuses := map[int]int{}
	for _, c := range conns {
		status, err := readStatus(c)
		if err != nil {
			t.Fatal(err)
		}
		statuses[status]++
	}
	if statuses[http.StatusOK] != mcpserver.DefaultMaxSessions || statuses[http.StatusServiceUnavailable] != listens-mcpserver.DefaultMaxSessions {
		t.Errorf("answers to %d listens at once: %v, want %d accepted (max_sessions) and the rest 503", listens, statuses, mcpserver.DefaultMaxSessions)
	}
}

package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// bigModelServer answers every chat completion with a content of size
// bytes (one buffer, built once).
func bigModelServer(t *testing.T, size int) string {
	body := []byte(fmt.Sprintf(`{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"%s"}}]}`, strings.Repeat("x", size)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// 20 execute and 20 A2A message/stream clients ask for a 15 MB answer and
// never read it. Each is cut after server.write_timeout: the handlers end,
// their goroutines and buffers go, and the runs themselves still end and
// publish their events.
func TestClientsThatStopReadingAreCut(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 600 MB")
	}
	size := 15 << 20
	if testutil.RaceEnabled {
		size = 4 << 20 // still far over the socket buffers; -race makes each run ~10× slower
	}
	model := bigModelServer(t, size)
	td := startDaemon(t, fmt.Sprintf(`
server:
  write_timeout: 1s
providers:
  openai: { base_url: %s, api_key: none, max_retries: -1 }
agents:
  - { id: big, provider: openai, model: m }
a2a:
  max_store_bytes: 16MiB
`, model), nil)
	runtime.GC()
	baseGoroutines := runtime.NumGoroutine()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	host := strings.TrimPrefix(td.url, "http://")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	send := func(path, body string) {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		// A tiny receive window: the client reads nothing and its kernel
		// buffers fill at once.
		c.(*net.TCPConn).SetReadBuffer(4096)
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, host, len(body), body)
		conns = append(conns, c)
	}
	for range 20 {
		send("/api/agents/big/execute", `{"input":"big"}`)
		send("/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"big"}],"metadata":{"receiver_id":"big"}}}}`)
	}
	// Every run ends and is published, read or not.
	deadline := time.Now().Add(180 * time.Second)
	for {
		// A poll may be cut (EOF): with write_timeout 1s a daemon this
		// loaded can miss a write's deadline on an answer it was slow to
		// start. The next poll asks again; only the 180 s count.
		body, err := getBody(td.client, td.url+"/metrics")
		if err == nil && strings.Contains(body, `axocoatl_executions_total{agent="big",source="api",status="completed"} 20`) &&
			strings.Contains(body, `axocoatl_executions_total{agent="big",source="a2a",status="completed"} 20`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs not all completed within 180s (last poll: %v):\n%s", err, grepLines(body, "axocoatl_executions_total"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Within a few write timeouts every handler has been cut.
	var goroutines int
	var after runtime.MemStats
	for deadline = time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		runtime.GC()
		goroutines = runtime.NumGoroutine()
		runtime.ReadMemStats(&after)
		if goroutines <= baseGoroutines+45 && after.HeapInuse < before.HeapInuse+100<<20 {
			return
		}
	}
	// 45: the 40 idle server connections still open (each one reading
	// goroutine) and some slack; 100 MB: the A2A store (16 MiB) and slack,
	// where 40 stuck answers would hold 600 MB and more.
	t.Fatalf("clients that stopped reading still cost %d goroutines (base %d) and %d MB heap (base %d MB)",
		goroutines, baseGoroutines, after.HeapInuse>>20, before.HeapInuse>>20)
}

// getBody GETs url and returns its body, or why it could not be read.
func getBody(c *http.Client, url string) (string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

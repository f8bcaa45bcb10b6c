package mcpserver_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
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
	status, _, err := readAnswer(conn, false)
	return status, err
}

// readAnswer reads the answer on conn: its status, and its body when
// withBody (up to 64 KiB).
func readAnswer(conn net.Conn, withBody bool) (int, string, error) {
	conn.SetReadDeadline(time.Now().Add(2 * time.Minute)) // a bound against a hang, not a timing
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, "", err
	}
	var body []byte
	if withBody {
		body, err = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	}
	return resp.StatusCode, string(body), err
}

// heapAllocs is the bytes allocated on the heap since the process began.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// wideMetaCall is a 2026-07-28 tools/call whose _meta holds keys keys
// besides the era's own, each 43 bytes on the wire.
func wideMetaCall(id, keys int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"agent_echo","arguments":{"input":"x"},"_meta":{`, id)
	for k := range keys {
		fmt.Fprintf(&b, `"k%06d-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx":1,`, k)
	}
	b.WriteString(`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`)
	return b.Bytes()
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
	baseline := runtime.NumGoroutine()
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
	held := runtime.NumGoroutine() - baseline
	// Closing the clients' connections ends their streams: every
	// goroutine they held goes (the test's own, conns, hold none).
	for _, c := range conns {
		c.Close()
	}
	deadline := time.Now().Add(time.Minute)
	for runtime.NumGoroutine() > baseline+20 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%d listens held open: %d goroutines over the baseline; after their clients left, %d", statuses[http.StatusOK], held, runtime.NumGoroutine()-baseline)
	if n := runtime.NumGoroutine(); n > baseline+20 {
		t.Errorf("%d goroutines a minute after the listens' clients left, %d before they came", n, baseline)
	}
}

// Guards max_message_values (issue 24, item 3): 20 concurrent 2026-07-28
// tools/call whose _meta holds 88,000 keys (3.6 MiB each, within
// max_message_bytes) cost the go-sdk about nine times their bytes as it
// decoded them. Now each is refused with a -32600 error naming the bound
// before anything decodes it, and all twenty together allocate at most
// three times their bytes (the process's heap allocations while they are
// served, the bodies built beforehand: a count of bytes, not a timing).
func TestHTTPWideMetaCostsItsBytes(t *testing.T) {
	const calls, keys = 20, 88000
	f := newFixture(t, mcpserver.Config{})
	ts := serveHTTP(t, f)
	host := strings.TrimPrefix(ts.URL, "http://")
	bodies := make([][]byte, calls)
	conns := make([]net.Conn, calls)
	var total int
	for i := range calls {
		bodies[i] = wideMetaCall(i, keys)
		total += len(bodies[i])
		if len(bodies[i]) > mcpserver.DefaultMaxMessageBytes {
			t.Fatalf("body of %d bytes is over max_message_bytes", len(bodies[i]))
		}
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c
	}
	header := fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Protocol-Version: %s\r\nMcp-Method: tools/call\r\nMcp-Name: agent_echo\r\nConnection: close\r\n", host, mcpserver.ProtocolVersion2026)
	runtime.GC()
	before := heapAllocs()
	var wg sync.WaitGroup
	answers := make([]string, calls)
	statuses := make([]int, calls)
	errs := make([]error, calls)
	for i, c := range conns {
		wg.Go(func() {
			if _, err := fmt.Fprintf(c, "%sContent-Length: %d\r\n\r\n", header, len(bodies[i])); err != nil {
				errs[i] = err
				return
			}
			if _, err := c.Write(bodies[i]); err != nil {
				errs[i] = err
				return
			}
			statuses[i], answers[i], errs[i] = readAnswer(c, true)
		})
	}
	wg.Wait()
	allocated := heapAllocs() - before
	for i := range calls {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if want := fmt.Sprintf(`"id":%d,"error":{"code":-32600,"message":"Invalid Request: message holds more than 10000 JSON values (max_message_values)"}`, i); !strings.Contains(answers[i], want) {
			t.Errorf("call %d: %d %.300s, want %s", i, statuses[i], answers[i], want)
		}
	}
	ratio := float64(allocated) / float64(total)
	t.Logf("%d calls of %d bytes: %d bytes allocated while served, %.2f× their bytes", calls, total/calls, allocated, ratio)
	if ratio > 3 {
		t.Errorf("%d wide-_meta calls allocated %.1f× their %d bytes, want at most 3×", calls, ratio, total)
	}
}

// callWithMeta is a 2026-07-28 tools/call of agent_echo whose _meta also
// holds extra, and whose arguments hold pad ("" for none).
func callWithMeta(id int, extra, pad string) string {
	meta := strings.TrimSuffix(metaFrame, "}") + extra + "}"
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"agent_echo","arguments":{"input":"x","pad":%q},"_meta":%s}}`, id, pad, meta)
}

// wideMeta is n members for _meta, each led by a comma.
func wideMeta(n int) string {
	var b strings.Builder
	for k := range n {
		fmt.Fprintf(&b, `,"k%d":1`, k)
	}
	return b.String()
}

// deepMeta is a member for _meta nesting depth levels.
func deepMeta(depth int) string {
	return `,"deep":` + strings.Repeat("[", depth) + strings.Repeat("]", depth)
}

// Guards max_message_values and max_message_depth on both transports: a
// message at the bound is served, one value or level over it gets a
// -32600 error that names the bound and the call's id, and the session
// serves on. The call at the bound: 10 values of its own (the message,
// jsonrpc, id, method, params, name, arguments, input, pad, _meta), 5 of
// metaFrame, and the extra members.
func TestMessageValuesAndDepthBounds(t *testing.T) {
	const values, depth = 40, 6
	cfg := mcpserver.Config{MaxMessageValues: values, MaxMessageDepth: depth}
	atBound := callWithMeta(1, wideMeta(values-15), "")
	tooWide := callWithMeta(2, wideMeta(values-14), "")
	deepest := callWithMeta(3, deepMeta(depth-3), "") // message, params, _meta
	tooDeep := callWithMeta(4, deepMeta(depth-2), "")
	t.Run("stdio", func(t *testing.T) {
		r := startRaw(t, newFixture(t, cfg))
		r.send(atBound)
		r.wantResult("1", `"x"`)
		r.send(tooWide)
		r.wantError("2", -32600, fmt.Sprintf("more than %d JSON values (max_message_values)", values))
		r.send(deepest)
		r.wantResult("3", `"x"`)
		r.send(tooDeep)
		r.wantError("4", -32600, fmt.Sprintf("deeper than %d levels (max_message_depth)", depth))
	})
	t.Run("http", func(t *testing.T) {
		ts := serveHTTP(t, newFixture(t, cfg))
		for _, c := range []struct{ body, want string }{
			{atBound, `"id":1,"result"`},
			{tooWide, fmt.Sprintf(`"id":2,"error":{"code":-32600,"message":"Invalid Request: message holds more than %d JSON values (max_message_values)"}`, values)},
			{deepest, `"id":3,"result"`},
			{tooDeep, fmt.Sprintf(`"id":4,"error":{"code":-32600,"message":"Invalid Request: message nests deeper than %d levels (max_message_depth)"}`, depth)},
		} {
			status, body := postBody(t, ts.URL+"/mcp", c.body)
			if !strings.Contains(body, c.want) {
				t.Errorf("%.80s…: %d %s, want %s", c.body, status, body, c.want)
			}
		}
	})
}

// The bounds of one message hold for a 2025-03-26 batch as a whole (the
// go-sdk decodes a batch's messages itself).
func TestHTTPBatchValuesBound(t *testing.T) {
	ts := serveHTTP(t, newFixture(t, mcpserver.Config{MaxMessageValues: 40}))
	batch := "[" + callWithMeta(1, wideMeta(20), "") + "," + callWithMeta(2, wideMeta(20), "") + "]"
	status, body := postEra(t, ts.URL+"/mcp", "2025-03-26", batch)
	if status != http.StatusBadRequest || !strings.Contains(body, `"code":-32600,"message":"Invalid Request: message holds more than 40 JSON values (max_message_values)"`) {
		t.Errorf("batch over max_message_values: %d %s", status, body)
	}
}

// postBody posts a 2026-07-28 tools/call of agent_echo and returns the
// answer.
func postBody(t *testing.T, url, body string) (int, string) {
	t.Helper()
	return postEra(t, url, mcpserver.ProtocolVersion2026, body)
}

// postEra posts body as a tools/call of agent_echo in era.
func postEra(t *testing.T, url, era, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), "POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", era)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "agent_echo")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(b)
}

// Guards max_bytes_in_flight: while a call of 700 KiB runs (the slow agent
// holds it), another of 700 KiB waits for room and, past the body timeout,
// gets 503 naming the bound; a small call passes meanwhile (the bound is
// of bytes, not requests); once the first call ends its room is free.
func TestHTTPBytesInFlightBound(t *testing.T) {
	const limit = 1 << 20
	f := newFixture(t, mcpserver.Config{MaxMessageBytes: limit, MaxBytesInFlight: limit}, axocoatl.HTTPOptions{BodyTimeout: 5 * time.Second})
	ts := serveHTTP(t, f)
	host := strings.TrimPrefix(ts.URL, "http://")
	pad := strings.Repeat("p", 700<<10)
	header := map[string]string{"Mcp-Protocol-Version": mcpserver.ProtocolVersion2026, "Mcp-Method": "tools/call", "Mcp-Name": "agent_slow"}
	held, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	slow := strings.Replace(callWithMeta(1, "", pad), "agent_echo", "agent_slow", 1)
	if err := rawPost(held, host, header, slow); err != nil {
		t.Fatal(err)
	}
	if _, err := recv(f.slow.started, 20*time.Second); err != nil {
		t.Fatal("the slow call did not start")
	}
	status, body := postBody(t, ts.URL+"/mcp", callWithMeta(2, "", pad))
	if status != http.StatusServiceUnavailable || !strings.Contains(body, `"code":-32000,"message":"server busy: request bodies of 1048576 bytes in flight (max_bytes_in_flight)`) {
		t.Errorf("second large call while the first runs: %d %s, want 503 naming max_bytes_in_flight", status, body)
	}
	if status, body := postBody(t, ts.URL+"/mcp", callWithMeta(3, "", "")); !strings.Contains(body, `"id":3,"result"`) {
		t.Errorf("small call while the first runs: %d %s, want its result", status, body)
	}
	held.Close() // ends the slow call (the stateless era's cancellation)
	if _, err := recv(f.slow.ended, 20*time.Second); err != nil {
		t.Fatal("the slow call did not end")
	}
	// Its handler gives the room back as it returns, a moment after the
	// run ends: each try waits up to the body timeout for it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, body = postBody(t, ts.URL+"/mcp", callWithMeta(4, "", pad))
		if strings.Contains(body, `"id":4,"result"`) || time.Now().After(deadline) {
			break
		}
	}
	if !strings.Contains(body, `"id":4,"result"`) {
		t.Errorf("large call after the first ended: %d %.300s, want its result", status, body)
	}
}

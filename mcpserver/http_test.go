package mcpserver_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// serveHTTP mounts the server at /mcp on a mux of its own, as a host would.
func serveHTTP(t *testing.T, f *fixture) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/mcp", f.srv)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "host page") })
	ts := httptest.NewServer(mux)
	t.Cleanup(func() {
		f.srv.Close() // ends the sessions' hanging GET streams
		ts.Close()
	})
	return ts
}

// connectHTTP connects a go-sdk client; a session option (legacy) picks
// its era, none the go-sdk's default (2026-07-28).
func connectHTTP(t *testing.T, url string, opts *mcp.ClientOptions, so ...*mcp.ClientSessionOptions) *mcp.ClientSession {
	t.Helper()
	return connectHTTPWire(t, url, opts, nil, so...)
}

// connectHTTPWire is connectHTTP with the client's HTTP exchanges noted in
// wire (nil: not noted).
func connectHTTPWire(t *testing.T, url string, opts *mcp.ClientOptions, wire *wireLog, so ...*mcp.ClientSessionOptions) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}
	if wire != nil {
		tr.HTTPClient = &http.Client{Transport: wire}
	}
	cs, err := testClient(opts).Connect(ctxT(t), tr, sessionOpts(so))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// wireLog is an http.RoundTripper that notes every exchange's method, its
// MCP-Protocol-Version and the Mcp-Session-Id headers both ways.
type wireLog struct {
	mu        sync.Mutex
	methods   []string
	versions  map[string]bool
	sessionID []string // every Mcp-Session-Id seen, request or response
}

func (w *wireLog) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.versions == nil {
		w.versions = map[string]bool{}
	}
	w.methods = append(w.methods, r.Method)
	w.versions[r.Header.Get("Mcp-Protocol-Version")] = true
	if v := r.Header.Get("Mcp-Session-Id"); v != "" {
		w.sessionID = append(w.sessionID, "request: "+v)
	}
	if resp != nil {
		if v := resp.Header.Get("Mcp-Session-Id"); v != "" {
			w.sessionID = append(w.sessionID, "response: "+v)
		}
	}
	return resp, err
}

func (w *wireLog) snapshot() (methods []string, versions map[string]bool, sessionIDs []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.methods), maps.Clone(w.versions), slices.Clone(w.sessionID)
}

// The go-sdk client over streamable HTTP, in both eras. By default it
// probes server/discover (INTEROP) and speaks 2026-07-28: every request a
// POST of its own, with that MCP-Protocol-Version, and no Mcp-Session-Id
// either way. Asked for 2025-11-25 it gets a session. Both get everything
// stdio gives: the tools, progress, cancellation.
func TestHTTPGoSDKClient(t *testing.T) {
	for _, c := range []struct {
		era  string
		opts *mcp.ClientSessionOptions
	}{{mcpserver.ProtocolVersion2026, nil}, {"2025-11-25", legacy}} {
		t.Run(c.era, func(t *testing.T) {
			f := newFixture(t, mcpserver.Config{})
			ts := serveHTTP(t, f)
			log := newProgressLog()
			wire := &wireLog{}
			cs := connectHTTPWire(t, ts.URL+"/mcp", &mcp.ClientOptions{ProgressNotificationHandler: log.handler}, wire, c.opts)
			checkSession(t, cs, c.era)
			checkProgress(t, cs, log)
			checkCancel(t, f, cs)
			if err := cs.Ping(ctxT(t), nil); (err == nil) == (c.era == mcpserver.ProtocolVersion2026) {
				t.Errorf("ping in %s over HTTP: %v (want an error only in the stateless era, which has no ping)", c.era, err)
			}
			methods, versions, sids := wire.snapshot()
			if c.era == mcpserver.ProtocolVersion2026 {
				if len(sids) > 0 || slices.Contains(methods, http.MethodGet) || len(versions) != 1 || !versions[c.era] {
					t.Errorf("stateless era on the wire: methods %v, versions %v, session ids %v: want POSTs only, all %s, no session id", methods, versions, sids, c.era)
				}
			} else if len(sids) == 0 || !versions[c.era] {
				t.Errorf("handshake era on the wire: versions %v, session ids %v: want a session id and %s", versions, sids, c.era)
			}
		})
	}
}

func post(t *testing.T, url string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(initFrame))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		del, _ := http.NewRequest("DELETE", url, nil)
		del.Header.Set("Mcp-Session-Id", sid)
		if r, err := http.DefaultClient.Do(del); err == nil {
			r.Body.Close()
		}
	}
	return resp.StatusCode, string(body)
}

// Browsers' requests must come from our own host or an allowed origin;
// a loopback server refuses foreign Host names (DNS rebinding).
func TestHTTPOriginAndHost(t *testing.T) {
	f := newFixture(t, mcpserver.Config{}, axocoatl.HTTPOptions{AllowedOrigins: []string{"https://app.example.com", "*.trusted.example"}})
	ts := serveHTTP(t, f)
	url := ts.URL + "/mcp"
	host := strings.TrimPrefix(ts.URL, "http://")
	for _, c := range []struct {
		name   string
		header map[string]string
		status int
	}{
		{"no origin (not a browser)", nil, http.StatusOK},
		{"same host", map[string]string{"Origin": "http://" + host}, http.StatusOK},
		{"allowed origin", map[string]string{"Origin": "https://APP.example.com"}, http.StatusOK},
		{"wildcard host pattern", map[string]string{"Origin": "http://ui.trusted.example"}, http.StatusOK},
		{"foreign origin", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"allowed host, wrong scheme", map[string]string{"Origin": "http://app.example.com"}, http.StatusForbidden},
		{"null origin", map[string]string{"Origin": "null"}, http.StatusForbidden},
		{"rebound host name", map[string]string{"Host": "evil.example:80"}, http.StatusForbidden},
	} {
		status, body := post(t, url, c.header)
		if status != c.status {
			t.Errorf("%s: status %d (%s), want %d", c.name, status, body, c.status)
		}
		if c.status == http.StatusOK && !strings.Contains(body, `"protocolVersion":"2025-11-25"`) {
			t.Errorf("%s: body %s", c.name, body)
		}
	}
	f.srv.Close()
	if status, _ := post(t, url, nil); status != http.StatusServiceUnavailable {
		t.Errorf("after Close: status %d, want 503", status)
	}
}

// An oversized body is refused with 413 and the server keeps serving.
//
// Guards: bound mcp_server.max_message_bytes (docs/bounds.md).
func TestHTTPBodyLimit(t *testing.T) {
	f := newFixture(t, mcpserver.Config{MaxMessageBytes: 1024})
	ts := serveHTTP(t, f)
	cs := connectHTTP(t, ts.URL+"/mcp", nil)
	_, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "agent_echo", Arguments: map[string]any{"input": strings.Repeat("x", 2048)}})
	if err == nil || !strings.Contains(err.Error(), "Too Large") {
		t.Errorf("oversized call: %v, want a 413", err)
	}
	cs2 := connectHTTP(t, ts.URL+"/mcp", nil)
	if res, err := cs2.CallTool(ctxT(t), &mcp.CallToolParams{Name: "agent_echo", Arguments: map[string]any{"input": "small"}}); err != nil || textOf(t, res) != "small" {
		t.Errorf("after 413: %v %v", res, err)
	}
}

// Malformed bodies and unknown methods over HTTP: refused, the session
// serves on.
func TestHTTPBadRequests(t *testing.T) {
	f := newFixture(t, mcpserver.Config{})
	ts := serveHTTP(t, f)
	url := ts.URL + "/mcp"
	do := func(body, sid string) (int, string, string) {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
	}
	status, sid, body := do(initFrame, "")
	if status != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %q %s", status, sid, body)
	}
	defer func() {
		req, _ := http.NewRequest("DELETE", url, nil)
		req.Header.Set("Mcp-Session-Id", sid)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	do(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, sid)
	for _, c := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":`, 400, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,`},
		{`{"id":1,"method":"ping"}`, 400, `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,`},
		{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, 400, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`},
		{`{"jsonrpc":"2.0","id":0,"method":"no/such/method"}`, 200, `{"jsonrpc":"2.0","id":0,"error":{"code":-32601,`},
		{`{"jsonrpc":"2.0","id":"s","method":"no/such/method"}`, 200, `"id":"s","error":{"code":-32601,`},
		{`{"jsonrpc":"2.0","method":"notifications/no_such_thing"}`, 202, ``},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"agent_nobody","arguments":{"input":"x"}}}`, 200, "-32602"},
		{`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"agent_echo","arguments":{}}}`, 200, `"isError":true`},
		{`{"jsonrpc":"2.0","id":5,"method":"ping"}`, 200, `"id":5,"result":{}`},
	} {
		status, _, body := do(c.body, sid)
		if status != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want %d with %s", c.body, status, body, c.status, c.want)
		}
	}
	status, _, body = do(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"agent_echo","arguments":{"input":"alive"}}}`, sid)
	if status != http.StatusOK || !strings.Contains(body, `"text":"alive"`) {
		t.Errorf("after bad requests: %d %s", status, body)
	}
}

// Past MaxSessions an initialize gets 503, and so does a 2026-07-28
// subscriptions/listen (a stream that holds a session while the client
// keeps it); a stateless call holds none past its answer. Closing a
// session makes room.
//
// Guards: bound mcp_server.max_sessions (docs/bounds.md).
func TestHTTPMaxSessions(t *testing.T) {
	f := newFixture(t, mcpserver.Config{MaxSessions: 2})
	ts := serveHTTP(t, f)
	url := ts.URL + "/mcp"
	listChanged := &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {}}
	waitSessions := func(want int, what string) {
		t.Helper()
		// 30 s: the listen stream opens on the client's own time, which a
		// loaded machine stretches (5 s was missed beside two busy loops).
		deadline := time.Now().Add(30 * time.Second)
		for n := -1; n != want; {
			n = 0
			for range f.srv.MCP().Sessions() { // listen streams and sessions, and calls in flight
				n++
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d sessions open, want %d: %s", n, want, what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for range 3 {
		cs := connectHTTP(t, url, nil)
		if _, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "agent_echo", Arguments: map[string]any{"input": "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	waitSessions(0, "stateless calls leave none behind")
	a := connectHTTP(t, url, nil, legacy)
	connectHTTP(t, url, listChanged) // opens subscriptions/listen, on its own time
	waitSessions(2, "the legacy session and the listen stream")
	status, body := post(t, url, nil)
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "too many open sessions") {
		t.Errorf("third session: %d %s, want 503", status, body)
	}
	req, _ := http.NewRequestWithContext(ctxT(t), "POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":`+metaFrame+`}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", mcpserver.ProtocolVersion2026)
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	lb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(lb), `"id":7,"error":{"code":-32000,"message":"too many open sessions`) {
		t.Errorf("third listen: %d %s, want 503", resp.StatusCode, lb)
	}
	a.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		status, body = post(t, url, nil)
		if status == http.StatusOK || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if status != http.StatusOK {
		t.Errorf("after closing one: %d %s", status, body)
	}
}

// A client sending its body too slowly gets its answer when BodyTimeout
// ends: read and refused as malformed, or refused unread for its Origin or
// because the server is closed (net/http drains an unread body before it
// writes any answer, so that drain must be bounded too).
//
// Guards: bound server.body_timeout (docs/bounds.md).
func TestHTTPSlowBodyTimesOut(t *testing.T) {
	f := newFixture(t, mcpserver.Config{}, axocoatl.HTTPOptions{BodyTimeout: 200 * time.Millisecond})
	ts := serveHTTP(t, f)
	slowPost := func(t *testing.T, header string, status int) {
		t.Helper()
		conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n%sContent-Length: 100\r\n\r\n{\"jsonrpc\":", conn.RemoteAddr(), header)
		conn.SetReadDeadline(time.Now().Add(3 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer within 3s (body timeout 200ms): %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != status || time.Since(start) > 2*time.Second {
			t.Fatalf("status %d after %s: %s", resp.StatusCode, time.Since(start), body)
		}
	}
	t.Run("read", func(t *testing.T) { slowPost(t, "", http.StatusBadRequest) })
	t.Run("foreign origin", func(t *testing.T) { slowPost(t, "Origin: https://evil.example\r\n", http.StatusForbidden) })
	f.srv.Close()
	t.Run("closed", func(t *testing.T) { slowPost(t, "", http.StatusServiceUnavailable) })
}

// initialize must not be part of a batch (MCP 2025-03-26, the last version
// with batches): refused, and no session opened by it, so a batch cannot
// get around MaxSessions either. The go-sdk matches member names exactly,
// so a "METHOD" member (which encoding/json's case-insensitive match took
// for the method) must not hide the initialize: it opened a session past
// MaxSessions.
func TestHTTPBatchedInitialize(t *testing.T) {
	f := newFixture(t, mcpserver.Config{MaxSessions: 1})
	ts := serveHTTP(t, f)
	connectHTTP(t, ts.URL+"/mcp", nil, legacy)
	for _, batch := range []string{"[" + initFrame + "]", "[" + strings.TrimSuffix(initFrame, "}") + `,"METHOD":"ping"}]`} {
		status, body := postEra(t, ts.URL+"/mcp", "2025-03-26", batch)
		sessions := 0
		for range f.srv.MCP().Sessions() {
			sessions++
		}
		if status != http.StatusBadRequest || !strings.Contains(body, `"code":-32600`) || sessions != 1 {
			t.Fatalf("batched initialize %s: %d, %d sessions open (max 1): %s", batch, status, sessions, body)
		}
	}
}

// The stateless era by hand on /mcp: every request carries the version in
// its MCP-Protocol-Version header and its _meta, none gets a session id; a
// request that asked for no progress is answered as plain JSON, one with a
// progressToken as an SSE stream with the progress before the result; the
// era has no GET stream and no DELETE (405); malformed input still gets
// its JSON-RPC error.
func TestHTTPStatelessRaw(t *testing.T) {
	f := newFixture(t, mcpserver.Config{})
	ts := serveHTTP(t, f)
	url := ts.URL + "/mcp"
	version := mcpserver.ProtocolVersion2026
	do := func(method, name, body string) (*http.Response, string) {
		t.Helper()
		httpMethod := http.MethodPost
		if method == http.MethodGet || method == http.MethodDelete {
			httpMethod, method = method, ""
		}
		req, _ := http.NewRequestWithContext(ctxT(t), httpMethod, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", version)
		if method != "" {
			req.Header.Set("Mcp-Method", method)
		}
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
			t.Errorf("%s %s: Mcp-Session-Id %q in the stateless era", httpMethod, method, sid)
		}
		return resp, string(b)
	}
	call := func(id int, meta string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"agent_worker","arguments":{"input":"time?"},"_meta":%s}}`, id, meta)
	}

	resp, body := do("server/discover", "", `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":`+metaFrame+`}}`)
	if resp.StatusCode != 200 || !strings.Contains(body, `"supportedVersions":["2026-07-28","2025-11-25","2025-06-18","2025-03-26","2024-11-05"]`) {
		t.Errorf("server/discover: %d %s", resp.StatusCode, body)
	}
	resp, body = do("tools/call", "agent_worker", call(2, metaFrame))
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/json" || !strings.Contains(body, `"text":"the clock says noon"`) || !strings.Contains(body, `"resultType":"complete"`) {
		t.Errorf("call without progress: %d %s %s, want a JSON answer", resp.StatusCode, ct, body)
	}
	withToken := strings.Replace(metaFrame, "{", `{"progressToken":"tok",`, 1)
	resp, body = do("tools/call", "agent_worker", call(3, withToken))
	progress, result := strings.Index(body, `"method":"notifications/progress"`), strings.Index(body, `"text":"the clock says noon"`)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" || progress < 0 || result < progress {
		t.Errorf("call with a progressToken: %d %s %s, want an SSE stream, progress then the result", resp.StatusCode, ct, body)
	}
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		if resp, body := do(m, "", ""); resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s in the stateless era: %d %s, want 405", m, resp.StatusCode, body)
		}
	}
	resp, body = do("tools/call", "agent_worker", `{"jsonrpc":"2.0","id":4,"method":`)
	if resp.StatusCode != 400 || !strings.Contains(body, `"code":-32700`) {
		t.Errorf("malformed: %d %s", resp.StatusCode, body)
	}
	list2099 := `{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":` + strings.Replace(metaFrame, "2026-07-28", "2099-01-01", 1) + `}}`
	resp, body = do("tools/list", "", list2099)
	if !strings.Contains(body, `"code":-32020`) {
		t.Errorf("tools/list at 2099-01-01 with a 2026-07-28 header: %d %s, want -32020 (header mismatch)", resp.StatusCode, body)
	}
	version = "2099-01-01"
	resp, body = do("tools/list", "", list2099)
	if !strings.Contains(body, `"code":-32022`) || !strings.Contains(body, `"supported":["2026-07-28","2025-11-25"`) {
		t.Errorf("tools/list at 2099-01-01: %d %s, want -32022 listing our versions", resp.StatusCode, body)
	}
}

// Shutdown waits for the call in flight (it gets its answer) and refuses a
// POST that arrives once it began (503: it would not be waited for).
func TestHTTPShutdownWaitsAndRefusesNewCalls(t *testing.T) {
	f := newFixture(t, mcpserver.Config{})
	ts := serveHTTP(t, f)
	post := func(body string) (int, string) {
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, ts.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", mcpserver.ProtocolVersion2026)
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "agent_sleepy")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"agent_sleepy","arguments":{"input":"x"},"_meta":` + metaFrame + `}}`
	inFlight := make(chan string, 1)
	go func() { _, body := post(call); inFlight <- body }()
	time.Sleep(100 * time.Millisecond) // the 300 ms call is under way
	shut := make(chan error, 1)
	go func() { shut <- f.srv.Shutdown(ctxT(t)) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, body := post(call)
		if code == http.StatusServiceUnavailable && strings.Contains(body, "shutting down") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a call after Shutdown began: %d %s, want 503 shutting down", code, body)
		}
	}
	if body := <-inFlight; strings.Contains(body, `"isError":true`) || !strings.Contains(body, `"result"`) {
		t.Fatalf("the call in flight during Shutdown: %s, want its answer", body)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
}

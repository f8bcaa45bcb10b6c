package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// sseEvent is one server-sent event: its fields by name ("event", "id",
// "retry", "data"; a data field of several lines joined by "\n").
type sseEvent map[string]string

// readEvent reads the next event of an SSE body, comments skipped.
func readEvent(r *bufio.Reader) (sseEvent, error) {
	ev := sseEvent{}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if len(ev) == 0 {
				continue
			}
			return ev, nil
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		if old, ok := ev[name]; ok && name == "data" {
			value = old + "\n" + value
		}
		ev[name] = value
	}
}

// mcpRequest sends one request to /mcp with the given headers (Accept and
// Content-Type set for a POST) and returns the response, whose body the
// test closes.
func mcpRequest(t *testing.T, method, url string, header map[string]string, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	} else {
		req.Header.Set("Accept", "text/event-stream")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// openLegacySession initializes a 2025-11-25 session over raw HTTP and
// returns its headers for later requests.
func openLegacySession(t *testing.T, url string) map[string]string {
	t.Helper()
	resp := mcpRequest(t, http.MethodPost, url, nil, initFrame)
	io.Copy(io.Discard, resp.Body)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d, session id %q", resp.StatusCode, sid)
	}
	h := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	resp = mcpRequest(t, http.MethodPost, url, h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	io.Copy(io.Discard, resp.Body)
	return h
}

// echoCall is a tools/call of agent_echo with id n.
func echoCall(n int, input string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"agent_echo","arguments":{"input":%q}}}`, n, input)
}

// SEP-1699: in the 2025-11-25 era a POST answered over SSE begins with a
// priming event carrying an id (backed by the resume buffer) and retry:
// 1000; the 2026-07-28 era (no resumption, SEP-2575) and a server with
// resume_buffer_bytes negative send none.
func TestHTTPPrimingEvent(t *testing.T) {
	first := func(t *testing.T, cfg mcpserver.Config, era2026 bool) sseEvent {
		f := newFixture(t, cfg)
		url := serveHTTP(t, f).URL + "/mcp"
		var resp *http.Response
		if era2026 {
			// A progressToken: the stateless era answers such a call over SSE.
			resp = mcpRequest(t, http.MethodPost, url, map[string]string{"Mcp-Protocol-Version": mcpserver.ProtocolVersion2026, "Mcp-Method": "tools/call", "Mcp-Name": "agent_echo"},
				`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"agent_echo","arguments":{"input":"hi"},"_meta":`+strings.Replace(metaFrame, "{", `{"progressToken":"p",`, 1)+`}}`)
		} else {
			resp = mcpRequest(t, http.MethodPost, url, openLegacySession(t, url), echoCall(1, "hi"))
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("Content-Type %q (%d %s), want an SSE answer", ct, resp.StatusCode, b)
		}
		ev, err := readEvent(bufio.NewReader(resp.Body))
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	t.Run("2025-11-25", func(t *testing.T) {
		ev := first(t, mcpserver.Config{}, false)
		if ev["event"] != "prime" || !strings.HasSuffix(ev["id"], "_0") || ev["retry"] != "1000" || ev["data"] != "" {
			t.Errorf("first event %q, want event: prime, an id ending _0, retry: 1000, empty data", ev)
		}
	})
	t.Run("2026-07-28", func(t *testing.T) {
		ev := first(t, mcpserver.Config{}, true)
		if ev["event"] == "prime" || ev["id"] != "" || ev["retry"] != "" {
			t.Errorf("first event %q, want no priming, id or retry in the stateless era", ev)
		}
	})
	t.Run("resume_buffer_bytes negative", func(t *testing.T) {
		ev := first(t, mcpserver.Config{ResumeBufferBytes: -1}, false)
		if ev["event"] == "prime" || ev["id"] != "" || ev["retry"] != "" {
			t.Errorf("first event %q, want no priming without resumption", ev)
		}
	})
}

// cutAfterPrime is an http.RoundTripper that breaks the SSE answer of the
// first tools/call POST just after its priming event (at once when there
// is none), as a dropped connection would, and notes the Last-Event-ID of every GET.
type cutAfterPrime struct {
	mu       sync.Mutex
	cut      bool
	resumeAt []string
}

func (c *cutAfterPrime) RoundTrip(r *http.Request) (*http.Response, error) {
	var call bool
	if r.Method == http.MethodPost && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		call = bytes.Contains(body, []byte(`"tools/call"`))
	}
	c.mu.Lock()
	if id := r.Header.Get("Last-Event-ID"); r.Method == http.MethodGet && id != "" {
		c.resumeAt = append(c.resumeAt, id)
	}
	cut := call && !c.cut
	c.cut = c.cut || cut
	c.mu.Unlock()
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && cut {
		resp.Body = &cutBody{r: bufio.NewReader(resp.Body), c: resp.Body}
	}
	return resp, err
}

func (c *cutAfterPrime) resumes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.resumeAt...)
}

// cutBody passes its body's first event on when it is the priming event,
// then fails as a broken connection does (at once, when the first event is
// another).
type cutBody struct {
	r     *bufio.Reader
	c     io.Closer
	first []byte
	read  bool
}

func (b *cutBody) Read(p []byte) (int, error) {
	if !b.read {
		b.read = true
		for {
			line, err := b.r.ReadBytes('\n')
			if err != nil {
				return 0, err
			}
			b.first = append(b.first, line...)
			if len(bytes.TrimSpace(line)) == 0 && len(bytes.TrimSpace(b.first)) > 0 {
				break // the blank line ends the event
			}
		}
		if !bytes.HasPrefix(bytes.TrimSpace(b.first), []byte("event: prime\n")) {
			b.first = nil
		}
	}
	if len(b.first) == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	n := copy(p, b.first)
	b.first = b.first[n:]
	return n, nil
}

func (b *cutBody) Close() error { return b.c.Close() }

// A go-sdk client (2025-11-25) whose POST stream breaks just after the
// priming event resumes it with a GET carrying that event's id and gets
// the call's answer from the resume buffer (before, there was no id to
// resume from and the call failed: "request terminated without response").
func TestHTTPResumeAfterDroppedStream(t *testing.T) {
	f := newFixture(t, mcpserver.Config{})
	ts := serveHTTP(t, f)
	tr := &cutAfterPrime{}
	cs, err := testClient(nil).Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", HTTPClient: &http.Client{Transport: tr}}, legacy)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "agent_sleepy", Arguments: map[string]any{"input": "x"}})
	if err != nil {
		t.Fatalf("call over a broken stream: %v", err)
	}
	if got := textOf(t, res); got != "slept" {
		t.Errorf("answer %q, want slept", got)
	}
	if at := tr.resumes(); len(at) == 0 || !strings.HasSuffix(at[0], "_0") {
		t.Errorf("GETs with Last-Event-ID: %q, want one resuming after the priming event (_0)", at)
	}
}

// The resume buffer's bound holds over HTTP: with room for a few answers,
// the stream of a call made many calls ago is dropped (resuming it gets
// 400), while the last call's stream replays its answer, and the
// session's GET stream still opens.
//
// Guards: bound mcp_server.resume_buffer_bytes (docs/bounds.md).
func TestHTTPResumeBufferBound(t *testing.T) {
	f := newFixture(t, mcpserver.Config{ResumeBufferBytes: 16 << 10})
	url := serveHTTP(t, f).URL + "/mcp"
	h := openLegacySession(t, url)
	input := strings.Repeat("a", 1000)
	var ids []string
	for i := range 100 {
		resp := mcpRequest(t, http.MethodPost, url, h, echoCall(i+1, input))
		ev, err := readEvent(bufio.NewReader(resp.Body))
		if err != nil || ev["id"] == "" {
			t.Fatalf("call %d: first event %q, %v", i+1, ev, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		ids = append(ids, ev["id"])
	}
	resume := func(id string) (int, string) {
		hh := map[string]string{}
		if id != "" {
			hh["Last-Event-ID"] = id
		}
		for k, v := range h {
			hh[k] = v
		}
		resp := mcpRequest(t, http.MethodGet, url, hh, "")
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		if id == "" {
			return resp.StatusCode, "" // the GET stream: nothing to replay, it stays open
		}
		ev, err := readEvent(bufio.NewReader(resp.Body))
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, ev["data"]
	}
	// The session's GET stream, opened first and so dropped first, still
	// opens without Last-Event-ID (a dropped stream would fail it).
	if status, body := resume(""); status != http.StatusOK {
		t.Errorf("the GET stream after 100 calls past a 16 KiB buffer: %d %q, want 200", status, body)
	}
	if status, body := resume(ids[0]); status != http.StatusBadRequest {
		t.Errorf("resuming the first of 100 calls past a 16 KiB buffer: %d %q, want 400", status, body)
	}
	if status, body := resume(ids[len(ids)-1]); status != http.StatusOK || !strings.Contains(body, input) || !strings.Contains(body, `"id":100`) {
		t.Errorf("resuming the last call: %d %.200q, want its answer replayed", status, body)
	}
}

// A 2025-11-25 client that stops reading a large SSE answer (its priming
// event written, then 12 MiB) is still cut by the guard's write deadline:
// the POST's handler returns, so Shutdown, which waits for every POST,
// returns too, with the resume buffer and the priming writer in the path.
func TestHTTPStalledClientCutWithResume(t *testing.T) {
	f := newFixture(t, mcpserver.Config{MaxMessageBytes: 16 << 20}, axocoatl.HTTPOptions{WriteTimeout: 300 * time.Millisecond})
	ts := serveHTTP(t, f)
	h := openLegacySession(t, ts.URL+"/mcp")
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := rawPost(conn, ts.Listener.Addr().String(), h, echoCall(1, strings.Repeat("a", 12<<20))); err != nil {
		t.Fatal(err)
	}
	// The answer's first bytes (headers, the priming event) arrive, then
	// the client reads no more.
	head := make([]byte, 512)
	conn.SetReadDeadline(time.Now().Add(time.Minute)) // a bound against a hang, not a timing
	n, err := io.ReadAtLeast(conn, head, 1)
	if err != nil || !bytes.Contains(head[:n], []byte("text/event-stream")) {
		t.Fatalf("answer begins %q, %v: want an SSE answer", head[:n], err)
	}
	// Shutdown waits for the POST up to ctx, then closes the sessions
	// anyway: that it returns before ctx ends says the POST was cut.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound against a hang
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- f.srv.Shutdown(ctx) }()
	select {
	case err := <-shut:
		if err != nil || ctx.Err() != nil {
			t.Fatalf("Shutdown: %v, context %v: want the stalled POST cut before two minutes", err, ctx.Err())
		}
	case <-ctx.Done():
		conn.Close() // lets the stuck write fail, so that Shutdown returns
		<-shut
		t.Fatal("a client that stopped reading a 12 MiB answer still held its POST after two minutes: not cut")
	}
}

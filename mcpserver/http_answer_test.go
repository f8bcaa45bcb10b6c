package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
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

// flushLog notes, at each flush that reaches the connection, what the
// handler had written by then.
type flushLog struct {
	http.ResponseWriter
	mu      sync.Mutex
	written bytes.Buffer
	flushed []string
}

func (l *flushLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	l.written.Write(b)
	l.mu.Unlock()
	return l.ResponseWriter.Write(b)
}

func (l *flushLog) Flush() {
	l.mu.Lock()
	l.flushed = append(l.flushed, l.written.String())
	l.mu.Unlock()
	l.ResponseWriter.(http.Flusher).Flush()
}

func (l *flushLog) Unwrap() http.ResponseWriter { return l.ResponseWriter }

func (l *flushLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.flushed)
}

// In the 2025-11-25 era the priming event of a quick call's SSE answer
// leaves with the answer, in one flush (it was flushed on its own first:
// two writes where the bare go-sdk needs one), while a call that takes
// longer than the hold gets its priming event on its own, before its
// answer, so that its stream is resumable meanwhile.
func TestHTTPPrimingEventLeavesWithTheAnswer(t *testing.T) {
	f := newFixture(t, mcpserver.Config{})
	logs := make(chan *flushLog, 16)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l := &flushLog{ResponseWriter: w}
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") != "" {
			logs <- l
		}
		f.srv.ServeHTTP(l, r)
	}))
	t.Cleanup(func() {
		f.srv.Close()
		ts.Close()
	})
	h := openLegacySession(t, ts.URL)
	<-logs // notifications/initialized

	resp := mcpRequest(t, http.MethodPost, ts.URL, h, echoCall(1, "quick"))
	body, err := io.ReadAll(resp.Body)
	if err != nil || !strings.HasPrefix(string(body), "event: prime\n") || !strings.Contains(string(body), `"text":"quick"`) {
		t.Fatalf("quick call: %v %q, want the priming event, then the answer", err, body)
	}
	l, err := recv(logs, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	flushed := l.snapshot()
	if len(flushed) == 0 || !strings.HasPrefix(flushed[0], "event: prime\n") || !strings.Contains(flushed[0], `"text":"quick"`) {
		t.Errorf("quick call: the first flush sent %q, want the priming event and the answer together (flushes: %d)", flushed, len(flushed))
	}

	// The slow agent answers only when its run is cancelled, which comes
	// after the priming event here: that event must come on its own (its
	// headers with it) once the hold has passed.
	got := make(chan sseEvent, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, ts.URL, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"agent_slow","arguments":{"input":"x"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- sseEvent{}
			return
		}
		defer resp.Body.Close()
		ev, _ := readEvent(bufio.NewReader(resp.Body))
		got <- ev
		io.Copy(io.Discard, resp.Body) // until the cancelled run's answer
	}()
	ev, err := recv(got, 10*time.Second)
	// Cancelled, the run ends and the POST's answer comes.
	cancel := mcpRequest(t, http.MethodPost, ts.URL, h, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
	io.Copy(io.Discard, cancel.Body)
	if err != nil || ev["event"] != "prime" || ev["id"] == "" {
		t.Errorf("slow call: first event %q (%v), want the priming event while the run goes on", ev, err)
	}
	if _, err := recv(f.slow.ended, 10*time.Second); err != nil {
		t.Fatalf("slow call: the run did not end on notifications/cancelled: %v", err)
	}
}

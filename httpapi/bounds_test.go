package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/axocoatl/axocoatl-go/lattice"
)

// dialSmallStream opens GET /api/events of srv over a socket whose receive
// buffer is 4 KiB (set before connecting, so the window is small from the
// start and the kernel does not grow it): a client that stops reading
// stops the server's writes after a few KiB, not after the megabytes that
// loopback autotuning would otherwise absorb.
func dialSmallStream(t *testing.T, ctx context.Context, srv string) *websocket.Conn {
	t.Helper()
	d := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); err != nil {
			return err
		}
		return serr
	}}
	tr := &http.Transport{DisableKeepAlives: true, DialContext: d.DialContext}
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv, "http")+"/api/events", &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.CloseNow() })
	// The ready frame holds the recent events, a 100 kB run output among
	// them once another socket's run has ended: over the default 32 KiB.
	conn.SetReadLimit(4 << 20)
	return conn
}

// Guards: bound "events buffered per client" (256, docs/bounds.md, event
// stream). A client that stops reading holds at most 256 events in the
// server: the rest are dropped for it and reported in one lagged frame with
// the exact count. The server's writer is first made to block on a 16 MiB
// event (more than any socket buffer takes from a client with a 4 KiB
// window), so every later event waits in the client's buffer or is
// dropped. When the client reads again it gets the big event, one lagged
// frame, then exactly what the buffer held: 256 events, or 255 when the
// big one still sat in the buffer as the small ones arrived. With a larger
// buffer more than 256 follow; with none bounded, no lagged frame comes.
func TestEventStreamBufferBound(t *testing.T) {
	srv, _, e := serveAPI(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := dialSmallStream(t, ctx, srv.URL)
	conn.SetReadLimit(64 << 20)
	if f := readFrame(t, ctx, conn); f.Kind != "ready" { // subscribed from here on
		t.Fatalf("first frame %+v, want ready", f)
	}
	publish := func(typ string, payload map[string]any) {
		t.Helper()
		ev, err := lattice.New(typ, "test", payload)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Bus().Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	publish("Big", map[string]any{"pad": strings.Repeat("p", 16<<20)})
	const n = 2000
	for i := range n {
		publish("Small", map[string]any{"i": i})
	}

	if f := readFrame(t, ctx, conn); f.Kind != "event" || f.Event.Type != "Big" {
		t.Fatalf("frame %s %s, want the big event", f.Kind, f.Event.Type)
	}
	f := readFrame(t, ctx, conn)
	if f.Kind != "lagged" {
		t.Fatalf("frame after the big event: %s %s, want lagged (the buffer of a stalled client is unbounded?)", f.Kind, f.Event.Type)
	}
	missed := f.Missed
	// The writer has caught up with the drops; what follows is what the
	// buffer held, then the marker published now.
	publish("Marker", map[string]any{})
	var held uint64
	for {
		f := readFrame(t, ctx, conn)
		if f.Kind != "event" {
			t.Fatalf("frame %+v after %d buffered events, want events then the marker", f, held)
		}
		if f.Event.Type == "Marker" {
			break
		}
		held++
	}
	if held != 256 && held != 255 {
		t.Errorf("%d events were buffered for the stalled client, want 256 (255 with the big one still in the buffer)", held)
	}
	if held+missed != n {
		t.Errorf("%d buffered + %d reported missed != %d published", held, missed, n)
	}
	t.Logf("stalled client: %d events buffered, %d reported missed", held, missed)
}

// Guards: bound "streams open at once" (1024, docs/bounds.md, event
// stream). 1,024 streams are served at once (each has had its ready frame,
// so each is counted); the next gets 503 with Retry-After and the API's
// error shape, and once one stream closes a new one is served.
func TestEventStreamMaxStreams(t *testing.T) {
	srv, _, _ := serveAPI(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const limit = 1024
	conns := make([]*websocket.Conn, limit)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	sem := make(chan struct{}, 32) // dial a few at a time: a loaded machine
	for i := range conns {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/api/events",
				&websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}})
			if err == nil {
				conns[i] = c
				_, _, err = c.Read(ctx) // the ready frame: the stream is counted
			}
			if err != nil {
				mu.Lock()
				firstErr = errors.Join(firstErr, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range conns {
			if c != nil {
				c.CloseNow()
			}
		}
	})
	if firstErr != nil {
		t.Fatalf("opening %d streams: %v", limit, firstErr)
	}
	t.Logf("%d streams open: %d goroutines in the process (both ends)", limit, runtime.NumGoroutine())

	over := func() (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/events", nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		return (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	}
	resp, err := over()
	if err != nil {
		t.Fatal(err)
	}
	var body [256]byte
	nb, _ := resp.Body.Read(body[:])
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body[:nb]), "too many event streams open") {
		t.Fatalf("stream %d: %d Retry-After %q %s, want 503 with Retry-After", limit+1, resp.StatusCode, resp.Header.Get("Retry-After"), body[:nb])
	}

	// One stream ends; its slot is free once its handler has returned,
	// which the client cannot see: retry within a bound.
	conns[0].Close(websocket.StatusNormalClosure, "")
	conns[0] = nil
	for {
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/api/events",
			&websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}})
		if err == nil {
			conns[0] = c
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no stream served after one of %d closed: %v", limit, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if f := readFrame(t, ctx, conns[0]); f.Kind != "ready" {
		t.Fatalf("stream after one closed: %+v", f)
	}
}

// Guards: bound "history in the ready frame" (the last 500 events,
// payloads over 16 KiB as {"truncated":true,"bytes":N}; docs/bounds.md,
// event stream). After 600 events, the last with a 20 KiB payload and one
// of exactly 16 KiB before it, a new stream's ready frame holds events 101
// to 600 in order, the 16 KiB one whole and the 20 KiB one as a stub
// naming its size.
func TestReadyFrameHistoryBounded(t *testing.T) {
	srv, m, e := serveAPI(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n, kept = 600, 500
	exact := `{"pad":"` + strings.Repeat("p", 16<<10-len(`{"pad":""}`)) + `"}` // 16 KiB
	big := `{"pad":"` + strings.Repeat("p", 20<<10) + `"}`
	publish := func(i int) {
		t.Helper()
		payload := []byte(`{"i":` + strconv.Itoa(i) + `}`)
		switch i {
		case n - 2:
			payload = []byte(exact)
		case n - 1:
			payload = []byte(big)
		}
		ev := lattice.Event{ID: lattice.NewID(time.Now()), Type: "E" + strconv.Itoa(i), ProducedBy: "test", Timestamp: time.Now().Unix(), Payload: payload}
		if err := e.Bus().Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	// The history takes events on its own subscription, buffered for 500:
	// publish 100, wait until it has them all, then 500 more.
	waitLast := func(i int) {
		t.Helper()
		for {
			if h := m.hist.Snapshot(); len(h) > 0 && h[len(h)-1].Type == "E"+strconv.Itoa(i) {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("the history did not take event %d", i)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for i := range n - kept {
		publish(i)
	}
	waitLast(n - kept - 1)
	for i := n - kept; i < n; i++ {
		publish(i)
	}
	waitLast(n - 1)
	conn := dialStream(t, ctx, srv)
	conn.SetReadLimit(16 << 20)
	_, data, err := conn.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ready struct {
		Kind    string          `json:"kind"`
		History []lattice.Event `json:"history"`
	}
	if err := json.Unmarshal(data, &ready); err != nil || ready.Kind != "ready" {
		t.Fatalf("ready frame: %v %.200s", err, data)
	}
	if len(ready.History) != kept {
		t.Fatalf("%d events in the ready frame's history, want %d", len(ready.History), kept)
	}
	for i, ev := range ready.History {
		if want := "E" + strconv.Itoa(n-kept+i); ev.Type != want {
			t.Fatalf("history[%d] is %s, want %s (the latest %d, oldest first)", i, ev.Type, want, kept)
		}
	}
	if got := string(ready.History[kept-2].Payload); got != exact {
		t.Errorf("a 16 KiB payload in the history: %d bytes, want it whole (%d)", len(got), len(exact))
	}
	var stub struct {
		Truncated bool `json:"truncated"`
		Bytes     int  `json:"bytes"`
		Pad       *string
	}
	if err := json.Unmarshal(ready.History[kept-1].Payload, &stub); err != nil || !stub.Truncated || stub.Bytes != len(big) || stub.Pad != nil {
		t.Errorf("a 20 KiB payload in the history: %.100s, want {\"truncated\":true,\"bytes\":%d}", ready.History[kept-1].Payload, len(big))
	}
}

// Guards: bound "one client frame" (64 KiB, docs/bounds.md, event stream).
// A client's frame of 64 KiB is read (a bad command gets an error frame and
// the stream goes on); one of a byte more closes the connection with 1009
// (message too big) before the server holds it.
func TestEventStreamClientFrameBound(t *testing.T) {
	srv, _, _ := serveAPI(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := dialStream(t, ctx, srv)
	if f := readFrame(t, ctx, conn); f.Kind != "ready" {
		t.Fatalf("first frame %+v", f)
	}
	frame := func(size int) []byte {
		return []byte(`{"cmd":"` + strings.Repeat("x", size-len(`{"cmd":""}`)) + `"}`)
	}
	if err := conn.Write(ctx, websocket.MessageText, frame(64<<10)); err != nil {
		t.Fatal(err)
	}
	if f := readFrame(t, ctx, conn); f.Kind != "error" || f.Error == nil || f.Error.Code != "bad_request" {
		t.Fatalf("a 64 KiB frame: %+v, want an error frame", f)
	}
	if err := conn.Write(ctx, websocket.MessageText, frame(64<<10+1)); err != nil {
		t.Fatal(err)
	}
	_, _, err := conn.Read(ctx)
	if websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Fatalf("after a frame of 64 KiB + 1: %v, want the connection closed with 1009", err)
	}
}

package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// rawStdio drives ServeStdio with hand-written frames.
type rawStdio struct {
	t     *testing.T
	in    *io.PipeWriter
	lines chan string
	done  chan error
}

func startRaw(t *testing.T, f *fixture) *rawStdio {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	r := &rawStdio{t: t, in: inW, lines: make(chan string, 64), done: make(chan error, 1)}
	go func() {
		r.done <- f.srv.ServeStdio(context.Background(), inR, outW)
		outW.Close()
	}()
	go func() {
		defer close(r.lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 8<<20)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		inW.Close()
		if _, err := recv(r.done, 5*time.Second); err != nil {
			t.Error("ServeStdio did not return after EOF")
		}
		for range r.lines {
		}
	})
	return r
}

func (r *rawStdio) send(frame string) {
	r.t.Helper()
	if _, err := io.WriteString(r.in, frame+"\n"); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

type rpcReply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
	raw string
}

// next reads the next frame; every frame on stdout must be JSON-RPC 2.0.
func (r *rawStdio) next() rpcReply {
	r.t.Helper()
	line, err := recv(r.lines, 5*time.Second)
	if err != nil {
		r.t.Fatal("no reply")
	}
	var m rpcReply
	if err := json.Unmarshal([]byte(line), &m); err != nil || m.JSONRPC != "2.0" {
		r.t.Fatalf("stdout carried a non-JSON-RPC line: %q", line)
	}
	m.raw = line
	return m
}

// reply skips notifications and returns the next response.
func (r *rawStdio) reply() rpcReply {
	r.t.Helper()
	for {
		if m := r.next(); m.Method == "" {
			return m
		}
	}
}

func (r *rawStdio) wantError(id string, code int, substr string) {
	r.t.Helper()
	m := r.reply()
	if m.Error == nil || string(m.ID) != id || m.Error.Code != code || !strings.Contains(m.Error.Message, substr) {
		r.t.Errorf("got %s, want error %d (%q) for id %s", m.raw, code, substr, id)
	}
}

func (r *rawStdio) wantResult(id string, substr string) rpcReply {
	r.t.Helper()
	m := r.reply()
	if m.Error != nil || string(m.ID) != id || !strings.Contains(string(m.Result), substr) {
		r.t.Errorf("got %s, want a result for id %s containing %q", m.raw, id, substr)
	}
	return m
}

// metaFrame is the _meta of a 2026-07-28 request.
const metaFrame = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

const initFrame = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// Hand-written frames: id 0, ping, the discover probe, and every kind of bad
// input, each answered as the spec says, the session serving on.
func TestStdioRawFrames(t *testing.T) {
	f := newFixture(t, mcpserver.Config{MaxMessageBytes: 2048})
	r := startRaw(t, f)

	// The probe of a client preferring the stateless era: answered with
	// every version we speak, and the era's calls carry their version in
	// _meta.
	r.send(`{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{"_meta":` + metaFrame + `}}`)
	m := r.wantResult("0", `"supportedVersions":["2026-07-28","2025-11-25","2025-06-18","2025-03-26","2024-11-05"]`)
	if !strings.Contains(string(m.Result), `"tools":{"listChanged":true}`) {
		t.Errorf("server/discover: %s, want the tools capability", m.raw)
	}
	r.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"agent_echo","arguments":{"input":"stateless"},"_meta":` + metaFrame + `}}`)
	r.wantResult("1", `"text":"stateless"`)
	// A version we do not speak is refused with those we do.
	r.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":` + strings.Replace(metaFrame, "2026-07-28", "2099-01-01", 1) + `}}`)
	m = r.reply()
	var data mcp.UnsupportedProtocolVersionData
	if m.Error != nil {
		json.Unmarshal(m.Error.Data, &data)
	}
	if m.Error == nil || string(m.ID) != "2" || m.Error.Code != mcp.CodeUnsupportedProtocolVersion || !slices.Equal(data.Supported, mcpserver.ProtocolVersions()) {
		t.Errorf("tools/list at 2099-01-01: %s, want -32022 listing our versions", m.raw)
	}

	// A session is of one era: an initialize now is refused, and the
	// session goes on.
	r.send(strings.Replace(initFrame, `"id":0`, `"id":3`, 1))
	m = r.reply()
	if m.Error == nil || string(m.ID) != "3" || m.Error.Code != -32600 || !strings.Contains(m.Error.Message, "this session speaks 2026-07-28") {
		t.Errorf("initialize after 2026-07-28 requests: %s, want -32600 saying why", m.raw)
	}
	r.send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"agent_echo","arguments":{"input":"on"},"_meta":` + metaFrame + `}}`)
	r.wantResult("4", `"text":"on"`)

	// The handshake era, on a session of its own.
	r = startRaw(t, f)
	r.send(initFrame)
	r.wantResult("0", `"protocolVersion":"2025-11-25"`)
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	r.send(`{"jsonrpc":"2.0","id":"p1","method":"ping"}`)
	r.wantResult(`"p1"`, `{}`)

	r.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	m = r.wantResult("1", `"name":"agent_echo"`)
	if !strings.Contains(m.raw, `"inputSchema":`+wantSchema) {
		t.Errorf("tools/list does not carry the schema byte for byte: %s", m.raw)
	}

	r.send(`{"jsonrpc":"2.0","id":2,"method":`)
	r.wantError("null", -32700, "Parse error")
	r.send(`{"jsonrpc":"2.0","id":3,"method":"ping"} trailing`)
	r.wantError("null", -32700, "Parse error")
	r.send(`{"id":4,"method":"ping"}`)
	r.wantError("4", -32600, "Invalid Request")
	r.send(`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`)
	r.wantError("null", -32600, "Invalid Request")
	r.send(`{"jsonrpc":"2.0","id":null,"method":"ping"}`)
	r.wantError("null", -32600, "Invalid Request")
	r.send(`"just a string"`)
	r.wantError("null", -32600, "Invalid Request")
	r.send(`[{"jsonrpc":"2.0","id":5,"method":"ping"}]`)
	r.wantError("null", -32600, "batches")
	r.send(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"agent_echo","arguments":{"input":"` + strings.Repeat("x", 4096) + `"}}}`)
	r.wantError("null", -32600, "exceeds 2048 bytes")

	r.send(`{"jsonrpc":"2.0","id":7,"method":"no/such/method"}`)
	r.wantError("7", -32601, "")
	r.send(`{"jsonrpc":"2.0","method":"notifications/no_such_thing"}`) // ignored, no reply
	r.send(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"agent_nobody","arguments":{"input":"x"}}}`)
	r.wantError("8", -32602, "agent_nobody")
	r.send(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":"not an object"}`)
	r.wantError("9", -32602, "")
	r.send(`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"agent_echo"}}`)
	r.wantResult("10", `"isError":true`)
	r.send(`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"agent_echo","arguments":{"input":7}}}`)
	r.wantResult("11", `"isError":true`)
	r.send(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"agent_broken","arguments":{"input":"x"}}}`)
	r.wantResult("12", `upstream exploded`)

	r.send("")
	r.send("   \r")
	r.send(`{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"agent_echo","arguments":{"input":"still serving"}}}`)
	m = r.wantResult("13", `"text":"still serving"`)
	if strings.Contains(m.raw, `"isError":true`) {
		t.Errorf("echo call failed: %s", m.raw)
	}
}

// Each request id type, and 0 among them, is echoed as sent.
func TestStdioRequestIDs(t *testing.T) {
	f := newFixture(t, mcpserver.Config{})
	r := startRaw(t, f)
	r.send(initFrame)
	r.wantResult("0", "protocolVersion")
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, id := range []string{`0`, `"0"`, `-1`, `9007199254740991`, `"x-y"`} {
		r.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"agent_echo","arguments":{"input":"id"}}}`)
		r.wantResult(id, `"text":"id"`)
	}
}

// An older client negotiates its own version.
func TestStdioOlderVersions(t *testing.T) {
	for _, v := range []string{"2025-06-18", "2025-03-26", "2024-11-05"} {
		f := newFixture(t, mcpserver.Config{})
		r := startRaw(t, f)
		r.send(strings.Replace(initFrame, "2025-11-25", v, 1))
		r.wantResult("0", `"protocolVersion":"`+v+`"`)
		r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		r.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"agent_echo","arguments":{"input":"old"}}}`)
		r.wantResult("1", `"text":"old"`)
	}
}

// stdioPair runs ServeStdio on pipes and returns a go-sdk client transport
// for the other ends, and ServeStdio's result.
func stdioPair(t *testing.T, f *fixture, ctx context.Context) (*mcp.IOTransport, <-chan error) {
	t.Helper()
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- f.srv.ServeStdio(ctx, c2sR, s2cW)
		s2cW.Close()
	}()
	return &mcp.IOTransport{Reader: s2cR, Writer: c2sW}, done
}

func TestStdioGoSDKClient(t *testing.T) {
	t.Run(mcpserver.ProtocolVersion2026, func(t *testing.T) { testStdioGoSDKClient(t, mcpserver.ProtocolVersion2026, nil) })
	t.Run("2025-11-25", func(t *testing.T) { testStdioGoSDKClient(t, "2025-11-25", legacy) })
}

func testStdioGoSDKClient(t *testing.T, era string, so *mcp.ClientSessionOptions) {
	f := newFixture(t, mcpserver.Config{})
	tr, done := stdioPair(t, f, context.Background())
	log := newProgressLog()
	cs, err := testClient(&mcp.ClientOptions{ProgressNotificationHandler: log.handler}).Connect(ctxT(t), tr, so)
	if err != nil {
		t.Fatal(err)
	}
	checkSession(t, cs, era)
	checkProgress(t, cs, log)
	checkCancel(t, f, cs)
	cs.Close() // closes the server's stdin
	if err, terr := recv(done, 5*time.Second); terr != nil || err != nil {
		t.Errorf("ServeStdio after EOF = %v (%v), want nil", err, terr)
	}
}

// Cancelling ServeStdio's context ends the session; Close does too.
func TestStdioShutdown(t *testing.T) {
	f := newFixture(t, mcpserver.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	tr, done := stdioPair(t, f, ctx)
	cs, err := testClient(nil).Connect(ctxT(t), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	cancel()
	if err, terr := recv(done, 5*time.Second); terr != nil || err != context.Canceled {
		t.Errorf("ServeStdio after cancel = %v (%v), want context.Canceled", err, terr)
	}

	tr, done = stdioPair(t, f, context.Background())
	cs2, err := testClient(nil).Connect(ctxT(t), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs2.Close()
	f.srv.Close()
	if err, terr := recv(done, 5*time.Second); terr != nil || err != mcpserver.ErrClosed {
		t.Errorf("ServeStdio after Close = %v (%v), want ErrClosed", err, terr)
	}
}

// EOF right after a request: the request is answered before the session
// ends, as `printf ... | axocoatl mcp serve` needs. A request the client
// cancelled is not waited for.
func TestStdioEOFDrains(t *testing.T) {
	f := newFixture(t, mcpserver.Config{})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- f.srv.ServeStdio(context.Background(), inR, outW)
		outW.Close()
	}()
	lines := make(chan []string, 1)
	go func() {
		b, _ := io.ReadAll(outR)
		lines <- strings.Split(strings.TrimSpace(string(b)), "\n")
	}()
	io.WriteString(inW, initFrame+"\n"+
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"agent_sleepy","arguments":{"input":"x"}}}`+"\n"+
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"agent_slow","arguments":{"input":"x"}}}`+"\n")
	if _, err := recv(f.slow.started, 5*time.Second); err != nil {
		t.Fatal("slow run did not start")
	}
	io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`+"\n")
	inW.Close()
	start := time.Now()
	if err, terr := recv(done, 10*time.Second); terr != nil || err != nil {
		t.Fatalf("ServeStdio = %v (%v), want nil after draining", err, terr)
	}
	got, _ := recv(lines, 5*time.Second)
	// The go-sdk also answers the cancelled call (with its cancellation as
	// a failed run); clients drop answers to calls they cancelled.
	slept := slices.ContainsFunc(got, func(l string) bool { return strings.Contains(l, `"id":1,`) && strings.Contains(l, `"text":"slept"`) })
	if !slept || len(got) < 2 || len(got) > 3 {
		t.Errorf("stdout after EOF: %q, want the initialize result and the sleepy answer", got)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("drain took %s", d)
	}
}

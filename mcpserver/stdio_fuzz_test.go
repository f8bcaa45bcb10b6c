package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// fuzzMaxMessage is small so that the fuzzer reaches the size limit.
const fuzzMaxMessage = 1024

// sentinelFrame is a valid request sent after the hostile input: its answer
// shows the session survived it.
const sentinelFrame = `{"jsonrpc":"2.0","id":"fuzz-sentinel","method":"tools/call","params":{"name":"agent_echo","arguments":{"input":"still here"}}}`

// FuzzStdioLine feeds one hostile input to a real stdio session (ServeStdio
// over in-memory pipes, after a real initialize) between a handshake and a
// valid request, then closes stdin. Whatever the input:
//   - nothing panics, and ServeStdio returns nil soon after EOF (it drains
//     what was asked, so a request it would never answer hangs it);
//   - stdout carries nothing but JSON-RPC 2.0 objects, each error with an
//     integer code and a message;
//   - the valid request that follows is answered with its result;
//   - a line that is not JSON gets exactly one -32700 with id null, a line
//     over max_message_bytes exactly one -32600, any other rejected line a
//     -32600 whose id is null or the line's own id;
//   - a call (an object with "jsonrpc":"2.0", a string or number id and a
//     method) gets exactly one answer, with its id; no line gets more.
//
// Run: go test -run '^$' -fuzz FuzzStdioLine -parallel 1 ./mcpserver/
func FuzzStdioLine(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"a","method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"agent_echo","arguments":{"input":"x"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"agent_broken","arguments":{"input":"x"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"agent_echo","arguments":{"input":7}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"initialize","params":{}}`,
		`{"jsonrpc":"2.0","id":5,"method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"fuzz-sentinel"}}`,
		`{"jsonrpc":"2.0","id":6,"result":{}}`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1e400,"method":"ping"}`,
		`{"jsonrpc":"1.0","id":7,"method":"ping"}`,
		`{"id":8,"method":"ping"}`,
		`[{"jsonrpc":"2.0","id":9,"method":"ping"}]`,
		`[]`, `null`, `"x"`, `42`, `{}`, `{"jsonrpc":"2.0"}`,
		`{"jsonrpc":"2.0","id":10,"method":`,
		`{"jsonrpc":"2.0","id":11,"method":"ping"} trailing`,
		`{"jsonrpc":"2.0","id":12,"method":"ping"}{"jsonrpc":"2.0","id":13,"method":"ping"}`,
		"{\"jsonrpc\":\"2.0\",\"id\":14,\"method\":\"ping\"}\n{\"jsonrpc\":\"2.0\",\"id\":15,\"method\":\"ping\"}",
		"\xa0{\"jsonrpc\":\"2.0\",\"id\":16,\"method\":\"ping\"}",
		"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}",
		`{"jsonrpc":"2.0","id":17,"method":"ping","params":` + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + `}`,
		`{"jsonrpc":"2.0","id":18,"method":"tools/call","params":{"name":"agent_echo","arguments":{"input":"` + strings.Repeat("x", 2*fuzzMaxMessage) + `"}}}`,
		"", "   \r", "\x00", "\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	eng, closeUpstream := newEngine(slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := startServer(f, eng, mcpserver.Config{MaxMessageBytes: fuzzMaxMessage})
	f.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		eng.Close(ctx)
		closeUpstream()
	})
	f.Fuzz(func(t *testing.T, input []byte) {
		out := runStdioSession(t, srv, input)
		checkStdioOutput(t, input, out)
	})
}

type fuzzReply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    *int64  `json:"code"`
		Message *string `json:"message"`
	} `json:"error"`
	raw string
}

// runStdioSession serves initialize, input and the sentinel, then EOF, and
// returns every line written to stdout.
func runStdioSession(t *testing.T, srv *mcpserver.Server, input []byte) []fuzzReply {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- srv.ServeStdio(context.Background(), inR, outW)
		outW.Close()
	}()
	wrote := make(chan error, 1)
	go func() {
		var b bytes.Buffer
		b.WriteString(strings.Replace(initFrame, `"id":0`, `"id":"fuzz-init"`, 1) + "\n" + `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
		b.Write(input)
		b.WriteString("\n" + sentinelFrame + "\n")
		_, err := inW.Write(b.Bytes())
		inW.Close()
		wrote <- err
	}()
	lines := make(chan []string, 1)
	go func() {
		var got []string
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			got = append(got, sc.Text())
		}
		io.Copy(io.Discard, outR) // a line over 1 MiB: keep the writer going
		lines <- got
	}()
	var got []string
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeStdio = %v, want nil after EOF", err)
		}
		got = <-lines
	case <-time.After(10 * time.Second):
		inR.Close()
		outR.Close()
		t.Fatalf("ServeStdio did not return within 10s of EOF for input %q", input)
	}
	if err := <-wrote; err != nil {
		t.Fatalf("writing stdin: %v", err)
	}
	var replies []fuzzReply
	for _, l := range got {
		var m fuzzReply
		var members map[string]json.RawMessage
		if json.Unmarshal([]byte(l), &members) != nil || json.Unmarshal([]byte(l), &m) != nil || m.JSONRPC != "2.0" {
			t.Fatalf("stdout carried a non-JSON-RPC line %q for input %q", l, input)
		}
		m.raw = l
		m.ID = members["id"] // json.RawMessage keeps null as "null" only this way
		if m.Method != nil {
			continue // a notification or a request to the client
		}
		if m.ID == nil {
			t.Fatalf("a response without id: %s", l)
		}
		if _, hasResult := members["result"]; (m.Error == nil) == !hasResult {
			t.Fatalf("a response needs exactly one of result and error: %s", l)
		}
		if m.Error != nil && (m.Error.Code == nil || m.Error.Message == nil || *m.Error.Message == "") {
			t.Fatalf("an error without code or message: %s", l)
		}
		replies = append(replies, m)
	}
	return replies
}

func checkStdioOutput(t *testing.T, input []byte, replies []fuzzReply) {
	// The handshake and the sentinel, answered as they should be (the
	// input may reuse their ids: its answers are the others).
	var rest []fuzzReply
	initOK, sentinelOK := false, false
	for _, r := range replies {
		switch id := string(r.ID); {
		case id == `"fuzz-init"` && !initOK && r.Error == nil && strings.Contains(string(r.Result), `"protocolVersion"`):
			initOK = true
		case id == `"fuzz-sentinel"` && !sentinelOK && r.Error == nil && strings.Contains(string(r.Result), `"text":"still here"`):
			sentinelOK = true
		default:
			rest = append(rest, r)
		}
	}
	// The input may reuse their ids; then they may be refused.
	reused := bytes.Contains(input, []byte("fuzz-init")) || bytes.Contains(input, []byte("fuzz-sentinel"))
	if (!initOK || !sentinelOK) && !reused {
		t.Fatalf("input %q: initialize answered %v, the request after it answered %v; replies: %v", input, initOK, sentinelOK, raws(replies))
	}
	lines := bytes.Split(input, []byte("\n"))
	if len(rest) > len(lines) {
		t.Fatalf("input %q (%d lines) got %d answers: %v", input, len(lines), len(rest), raws(rest))
	}
	// Each well-formed call gets exactly one answer, with its id.
	// (A cancelled call needs no answer.)
	if !reused && !bytes.Contains(input, []byte("cancelled")) {
		calls := map[string]int{}
		for _, l := range lines {
			if len(bytes.TrimSuffix(l, []byte("\r"))) > fuzzMaxMessage {
				continue
			}
			if id, ok := callID(bytes.TrimSpace(l)); ok {
				calls[canonicalID(id)]++
			}
		}
		answers := map[string]int{}
		for _, r := range rest {
			answers[canonicalID(r.ID)]++
		}
		for id, n := range calls {
			if answers[id] != n {
				t.Fatalf("input %q: %d calls with id %s got %d answers: %v", input, n, id, answers[id], raws(rest))
			}
		}
	}
	if len(lines) != 1 {
		return
	}
	// One line: what it deserves exactly.
	frame := bytes.TrimSpace(input)
	one := func(code int64, wantNullID bool) {
		t.Helper()
		if len(rest) != 1 || rest[0].Error == nil || *rest[0].Error.Code != code || (wantNullID && string(rest[0].ID) != "null") {
			t.Fatalf("input %q: answers %v, want one error %d", input, raws(rest), code)
		}
	}
	switch {
	case len(bytes.TrimSuffix(input, []byte("\r"))) > fuzzMaxMessage:
		one(-32600, true)
		return
	case len(frame) == 0:
		if len(rest) != 0 {
			t.Fatalf("blank input %q answered %v", input, raws(rest))
		}
		return
	case !json.Valid(frame):
		one(-32700, true)
		return
	}
	for _, r := range rest {
		if r.Error != nil && (*r.Error.Code == -32700 || *r.Error.Code == -32600) && string(r.ID) != "null" {
			if id := frameID(frame); id == nil || !sameID(id, r.ID) {
				t.Fatalf("input %q: rejected with id %s, not null nor its own", input, r.ID)
			}
		}
	}
	if id, ok := callID(frame); ok {
		if len(rest) != 1 || !sameID(id, rest[0].ID) {
			t.Fatalf("call %q: answers %v, want one with id %s", input, raws(rest), id)
		}
	}
}

// callID returns the id of a well-formed call: an object with
// "jsonrpc":"2.0", a string method and a string or number id.
func callID(frame []byte) (json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(frame, &m) != nil {
		return nil, false
	}
	var version, method string
	if json.Unmarshal(m["jsonrpc"], &version) != nil || version != "2.0" || json.Unmarshal(m["method"], &method) != nil {
		return nil, false
	}
	id := frameID(frame)
	return id, id != nil
}

// frameID returns a frame's "id" when it is a string or a number that
// fits a float64, else nil.
func frameID(frame []byte) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(frame, &m) != nil {
		return nil
	}
	var v any
	if json.Unmarshal(m["id"], &v) != nil {
		return nil
	}
	switch v.(type) {
	case string, float64:
		return m["id"]
	}
	return nil
}

// canonicalID is an id as its JSON value: 1e0 and 1 are the same number.
func canonicalID(id json.RawMessage) string {
	var v any
	if json.Unmarshal(id, &v) != nil {
		return string(id)
	}
	if v == 0.0 {
		v = 0.0 // -0 is answered as 0
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// sameID compares ids as JSON values: 1e0 and 1 are the same number.
func sameID(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return x == y
}

func raws(rs []fuzzReply) []string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.raw
	}
	return s
}

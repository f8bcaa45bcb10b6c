// Package streamtest serves recorded provider streams over httptest and
// checks what a streaming model made of them. Only tests import it.
package streamtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider/internal/wire"
)

// Request is what a server received.
type Request struct {
	Header http.Header
	Body   []byte
}

// Server serves one recorded answer to every request and keeps the
// requests.
type Server struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []Request
}

// Requests are the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

func (s *Server) record(r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.reqs = append(s.reqs, Request{Header: r.Header.Clone(), Body: body})
	s.mu.Unlock()
}

// Read returns the content of a testdata file.
func Read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Events cuts an SSE body into its events, each with its blank line.
func Events(body []byte) [][]byte {
	var out [][]byte
	for len(body) > 0 {
		i := bytes.Index(body, []byte("\n\n"))
		if i < 0 {
			return append(out, body)
		}
		out = append(out, body[:i+2])
		body = body[i+2:]
	}
	return out
}

// Serve serves testdata/name: a .sse file as text/event-stream, written
// and flushed one event at a time, as providers send them; any other as
// application/json.
func Serve(t testing.TB, name string) *Server {
	t.Helper()
	body := Read(t, name)
	s := &Server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.record(r)
		if !strings.HasSuffix(name, ".sse") {
			w.Header().Set("Content-Type", "application/json")
			w.Write(body)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		for _, ev := range Events(body) {
			if _, err := w.Write(ev); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// Gated serves testdata/name (an .sse file) as Serve does, but after its
// first `first` events it waits until release is closed before writing the
// rest. released reports whether it was release that let it go (not its
// own 20s limit, or the client leaving).
func Gated(t testing.TB, name string, first int, release <-chan struct{}) (srv *httptest.Server, released <-chan bool) {
	t.Helper()
	events := Events(Read(t, name))
	out := make(chan bool, 1)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for i, ev := range events {
			if i == first {
				w.(http.Flusher).Flush()
				select {
				case <-release:
					out <- true
				case <-time.After(20 * time.Second):
					out <- false
				case <-r.Context().Done():
					out <- false
					return
				}
			}
			w.Write(ev)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, out
}

// Recorder keeps the deltas of one call.
type Recorder struct {
	mu     sync.Mutex
	Deltas []agent.Delta
}

// Emit is the emit function to pass to GenerateStream.
func (r *Recorder) Emit(d agent.Delta) {
	r.mu.Lock()
	r.Deltas = append(r.Deltas, d)
	r.mu.Unlock()
}

// Check verifies that deltas add up to res as [agent.Streamer] promises:
// the text deltas are the content, every call starts (once, in index
// order, with its id and name) before its argument pieces, and each call's
// pieces are its arguments.
func Check(t testing.TB, deltas []agent.Delta, res *agent.Response) {
	t.Helper()
	var text strings.Builder
	var args []strings.Builder
	for n, d := range deltas {
		switch d.Kind {
		case agent.DeltaText:
			if d.Text == "" {
				t.Errorf("delta %d: empty text", n)
			}
			text.WriteString(d.Text)
		case agent.DeltaToolCall:
			if d.ToolCallIndex != len(args) {
				t.Fatalf("delta %d starts call %d, want %d", n, d.ToolCallIndex, len(args))
			}
			if d.ToolCallIndex >= len(res.ToolCalls) {
				t.Fatalf("delta %d starts call %d; the response has %d", n, d.ToolCallIndex, len(res.ToolCalls))
			}
			if c := res.ToolCalls[d.ToolCallIndex]; c.ID != d.ToolCallID || c.Name != d.ToolName {
				t.Errorf("delta %d starts %s %s, the response has %s %s", n, d.ToolCallID, d.ToolName, c.ID, c.Name)
			}
			args = append(args, strings.Builder{})
		case agent.DeltaToolArguments:
			if d.ToolCallIndex >= len(args) {
				t.Fatalf("delta %d: arguments of call %d, which did not start", n, d.ToolCallIndex)
			}
			args[d.ToolCallIndex].WriteString(d.Arguments)
		default:
			t.Fatalf("delta %d of kind %d", n, d.Kind)
		}
	}
	if text.String() != res.Content {
		t.Errorf("text deltas make %q, the content is %q", text.String(), res.Content)
	}
	if len(args) != len(res.ToolCalls) {
		t.Fatalf("%d calls started, the response has %d", len(args), len(res.ToolCalls))
	}
	for i := range args {
		if got, want := string(wire.ArgumentsJSON(args[i].String())), string(res.ToolCalls[i].Arguments); got != want {
			t.Errorf("call %d: argument deltas make %s, the response has %s", i, got, want)
		}
	}
}

// JSON is v as indented JSON, for failure messages.
func JSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

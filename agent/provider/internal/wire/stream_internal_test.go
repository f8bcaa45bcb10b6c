package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
)

type sseEvent struct{ name, data string }

func readAll(t *testing.T, body string) ([]sseEvent, error) {
	t.Helper()
	s := NewSSE(strings.NewReader(body))
	var out []sseEvent
	for {
		name, data, err := s.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		out = append(out, sseEvent{string(name), string(data)})
	}
}

// The event-stream format as the WHATWG defines it, the parts providers
// and their proxies use.
func TestSSEFormat(t *testing.T) {
	long := strings.Repeat("x", 3*sseBuffer+17) // longer than the read buffer
	cases := []struct {
		name, body string
		want       []sseEvent
	}{
		{"LF", "event: a\ndata: 1\n\ndata: 2\n\n", []sseEvent{{"a", "1"}, {"", "2"}}},
		{"CRLF", "event: a\r\ndata: 1\r\n\r\n", []sseEvent{{"a", "1"}}},
		{"no space after the colon", "event:a\ndata:1\n\n", []sseEvent{{"a", "1"}}},
		{"only one space is cut", "data:  1\n\n", []sseEvent{{"", " 1"}}},
		{"data lines joined", "data: {\"a\":\ndata: 1}\n\n", []sseEvent{{"", "{\"a\":\n1}"}}},
		{"comments and other fields", ": keep-alive\nid: 7\nretry: 100\ndata: 1\n\n", []sseEvent{{"", "1"}}},
		{"an event without data is not dispatched", "event: ping\n\ndata: 1\n\n", []sseEvent{{"", "1"}}},
		{"blank lines between events", "\n\n\ndata: 1\n\n\n\n", []sseEvent{{"", "1"}}},
		{"an event cut short is dropped", "data: 1\n\ndata: 2\n", []sseEvent{{"", "1"}}},
		{"a line cut short is dropped", "data: 1\n\ndata: 2", []sseEvent{{"", "1"}}},
		{"a long line", "data: " + long + "\n\n", []sseEvent{{"", long}}},
		{"a byte order mark", "\xEF\xBB\xBFdata: 1\n\ndata: \xEF\xBB\xBF2\n\n", []sseEvent{{"", "1"}, {"", "\xEF\xBB\xBF2"}}},
	}
	for _, tc := range cases {
		got, err := readAll(t, tc.body)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %.200q, want %.200q", tc.name, got, tc.want)
		}
	}
}

// One event is bounded (a line that never ends fails at the bound, not at
// the body limit), and so is the number of events of one answer.
// Guards: the 4 MiB event and the 262,144 events of a stream.
func TestSSEBounds(t *testing.T) {
	for name, body := range map[string]string{
		"one line":   "data: " + strings.Repeat("x", MaxEventBytes+1) + "\n\n",
		"many lines": strings.Repeat("data: "+strings.Repeat("x", 1<<10)+"\n", MaxEventBytes>>10+1) + "\n",
	} {
		_, err := readAll(t, body)
		if err == nil || !strings.Contains(err.Error(), "an event over 4 MiB") {
			t.Errorf("%s: %v, want the event bound", name, err)
		}
	}
	ok := strings.Repeat("data: "+strings.Repeat("x", MaxEventBytes-16)+"\n\n", 2)
	if got, err := readAll(t, ok); err != nil || len(got) != 2 {
		t.Fatalf("two events just under the bound: %d, %v", len(got), err)
	}

	got, err := readAll(t, strings.Repeat("data:1\n\n", MaxEvents))
	if err != nil || len(got) != MaxEvents {
		t.Fatalf("%d events: %d read, %v", MaxEvents, len(got), err)
	}
	got, err = readAll(t, strings.Repeat("data:1\n\n", MaxEvents+1))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d events", MaxEvents)) || len(got) != MaxEvents {
		t.Fatalf("%d events: %d read, %v; want the events bound", MaxEvents+1, len(got), err)
	}
}

// Frames decode one value per event with one decoder; whatever follows a
// value, a value cut short or no value at all is an error.
func TestFrames(t *testing.T) {
	type v struct {
		A int    `json:"a"`
		S string `json:"s"`
	}
	f := NewFrames()
	big := strings.Repeat("é", 3000) // more than one read of the decoder
	for i, data := range []string{`{"a":1}`, ` {"a":2,"s":"` + big + `"} `, "\n{\"a\":3}\n", `{"s":"\u00e9\n"}`} {
		var got v
		if err := f.Decode([]byte(data), &got); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		want := []v{{A: 1}, {A: 2, S: big}, {A: 3}, {S: "é\n"}}[i]
		if got != want {
			t.Fatalf("frame %d: %+v, want %+v", i, got, want)
		}
	}
	for data, want := range map[string]string{
		`{"a":1}{"a":2}`: "data after the value",
		`{"a":1} x`:      "data after the value",
		`{"a":`:          "the data ends inside a value",
		``:               "no value",
		`{"a":"x"}`:      "unexpected JSON",
		`{a}`:            "invalid JSON",
	} {
		var got v
		if err := NewFrames().Decode([]byte(data), &got); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", data, err, want)
		}
	}
}

func TestIndex(t *testing.T) {
	for in, want := range map[string]Index{`0`: {0, true}, `17`: {17, true}, `null`: {}, `1048575`: {MaxIndex - 1, true}} {
		var x Index
		if err := x.UnmarshalJSON([]byte(in)); err != nil || x != want {
			t.Errorf("%s: %+v, %v", in, x, err)
		}
	}
	for _, in := range []string{`-1`, `1.5`, `"1"`, `1048576`, `99999999999999999999999`, ``} {
		var x Index
		if err := x.UnmarshalJSON([]byte(in)); err == nil {
			t.Errorf("%s accepted as %+v", in, x)
		}
	}
}

// The Assembler bounds the tool calls of an answer and the arguments of
// each.
// Guards: the 1,024 tool calls and 4 MiB of arguments of one streamed answer.
func TestAssemblerBounds(t *testing.T) {
	var n int
	a := NewAssembler(func(agent.Delta) { n++ })
	for i := range MaxToolCalls {
		if _, err := a.StartCall(fmt.Sprint(i), "f"); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if _, err := a.StartCall("x", "f"); err == nil || !strings.Contains(err.Error(), "more than 1024 tool calls") {
		t.Fatalf("call %d: %v", MaxToolCalls, err)
	}
	piece := strings.Repeat("x", 64<<10)
	for i := 0; i < MaxArgumentBytes/len(piece); i++ {
		if err := a.Arguments(0, piece); err != nil {
			t.Fatalf("piece %d: %v", i, err)
		}
	}
	if err := a.Arguments(0, "x"); err == nil || !strings.Contains(err.Error(), "the arguments of tool call 0 (f) are over 4 MiB") {
		t.Fatalf("past the bound: %v", err)
	}
	if n != MaxToolCalls+MaxArgumentBytes/len(piece) {
		t.Fatalf("%d deltas emitted", n)
	}
}

// A stream is retried only until it starts: a 503 is retried, a stream
// that breaks after its first event is not (its deltas were emitted).
func TestStreamRetriesOnlyBeforeTheAnswer(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "text/event-stream" {
			t.Errorf("Accept %q", r.Header.Get("Accept"))
		}
		if hits.Add(1) == 1 {
			w.Header().Set("Retry-After-Ms", "1")
			http.Error(w, `{"error":{"message":"busy"}}`, http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: 1\n\n")
	}))
	defer srv.Close()
	c, err := New(Options{Kind: "k", BaseURL: srv.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	err = c.Stream(context.Background(), "/x", map[string]bool{"stream": true}, func(s *SSE) error {
		for {
			_, data, err := s.Next()
			if err != nil {
				return MalformedStream("cut short: %v", err)
			}
			got = append(got, string(data))
		}
	}, nil)
	var perr *provider.Error
	if !errors.As(err, &perr) || err.Error() != "k: HTTP 200: malformed stream: cut short: EOF" {
		t.Fatalf("error %v", err)
	}
	if n := hits.Load(); n != 2 || len(got) != 1 {
		t.Fatalf("%d requests, events %q: want the 503 retried once and the broken stream not at all", n, got)
	}
}

// A stream that stops moving ends at the call's Timeout, which bounds the
// whole stream, with an error saying so; a caller that gives up gets its
// own reason.
// Guards: providers.<kind>.timeout over a whole streamed answer.
func TestStreamTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c, err := New(Options{Kind: "k", BaseURL: srv.URL, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	read := func(s *SSE) error {
		for {
			if _, _, err := s.Next(); err != nil {
				return err
			}
		}
	}
	start := time.Now()
	err = c.Stream(context.Background(), "/x", struct{}{}, read, nil)
	if err == nil || err.Error() != "k: the answer did not end within 300ms (timeout)" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v", d)
	}

	ctx, cancel := context.WithCancel(context.Background())
	c, _ = New(Options{Kind: "k", BaseURL: srv.URL, Timeout: time.Minute})
	err = c.Stream(ctx, "/x", struct{}{}, func(s *SSE) error {
		if _, _, err := s.Next(); err != nil {
			return err
		}
		cancel()
		return read(s)
	}, nil)
	if err == nil || err.Error() != "k: call abandoned: context canceled" || !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v", err)
	}
}

// An answer that is neither a stream nor JSON is refused by its type.
func TestStreamContentType(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html>")
	}))
	defer srv.Close()
	c, _ := New(Options{Kind: "k", BaseURL: srv.URL})
	err := c.Stream(context.Background(), "/x", struct{}{}, func(*SSE) error { return nil }, func([]byte) error { return nil })
	if err == nil || err.Error() != `k: HTTP 200: malformed response: content-type "text/html", want text/event-stream` {
		t.Fatalf("error %v", err)
	}
}

// The deltas of one answer are bounded, whatever their kind.
// Guards: the 262,144 deltas of one streamed answer.
func TestAssemblerDeltaBound(t *testing.T) {
	var n int
	a := NewAssembler(func(agent.Delta) { n++ })
	for i := range MaxDeltas {
		if err := a.Text("x"); err != nil {
			t.Fatalf("delta %d: %v", i, err)
		}
	}
	if err := a.Text("x"); err == nil || !strings.Contains(err.Error(), "more than 262144 deltas in one answer") {
		t.Fatalf("past the bound: %v", err)
	}
	if _, err := a.StartCall("c", "f"); err == nil {
		t.Fatal("a call started past the bound")
	}
	if n != MaxDeltas {
		t.Fatalf("%d deltas emitted, want %d", n, MaxDeltas)
	}
}

// A whole answer leaves its connection for the next call: closing a body
// unread would cost every streamed call a new connection (and TLS
// handshake).
func TestStreamReusesTheConnection(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: 1\n\ndata: [DONE]\n\n")
		w.(http.Flusher).Flush() // chunked: the body's end comes after [DONE]
		io.WriteString(w, ": bye\n\n")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c, _ := New(Options{Kind: "k", BaseURL: srv.URL, HTTPClient: srv.Client()})
	for range 3 {
		err := c.Stream(context.Background(), "/x", struct{}{}, func(s *SSE) error {
			for {
				_, data, err := s.Next()
				if err != nil {
					return err
				}
				if string(data) == "[DONE]" {
					return nil
				}
			}
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 3 calls, want 1", n)
	}
}

// A server that keeps the body open after the answer's end does not hold
// the call: the answer is returned at once, not at the Timeout.
func TestStreamEndsAtTheAnswersEnd(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: [DONE]\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c, _ := New(Options{Kind: "k", BaseURL: srv.URL, Timeout: time.Minute})
	start := time.Now()
	err := c.Stream(context.Background(), "/x", struct{}{}, func(s *SSE) error {
		_, _, err := s.Next()
		return err
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("the call returned after %v, held by the open body", d)
	}
}

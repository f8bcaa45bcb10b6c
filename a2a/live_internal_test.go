package a2a

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"

	"github.com/axocoatl/axocoatl-go/agent"
)

// stuckWriter is a ResponseWriter whose writes block until release is
// closed: a client that stopped reading.
type stuckWriter struct {
	hd      http.Header
	release chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
}

func (w *stuckWriter) Header() http.Header { return w.hd }
func (w *stuckWriter) WriteHeader(int)     {}
func (w *stuckWriter) Flush()              {}
func (w *stuckWriter) Write(b []byte) (int, error) {
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(b)
}

// A stream whose client reads nothing queues at most maxLiveText of text
// however much the model writes, never blocks the run's events, and once
// the client reads again it still gets the exact output, its last chunk
// marked.
// Guards: the 64 updates and 64 KiB of text queued for one streaming client.
func TestLiveBoundedForStuckClient(t *testing.T) {
	w := &stuckWriter{hd: http.Header{}, release: make(chan struct{})}
	o := &out{s: newSSE(w), g: gen03, id: json.RawMessage("1")}
	tk := &task{id: "t1", contextID: "c1", done: make(chan struct{})}
	l := startLive(o, tk)
	var want strings.Builder
	pushed := make(chan struct{})
	go func() {
		defer close(pushed)
		// 1 MB: more than the writer's batch, the queue and the batch
		// held back can take, however much the writer took before it
		// blocked (a loaded machine lets it take more).
		for i := range 100_000 {
			word := fmt.Sprintf("%-9d|", i)
			want.WriteString(word)
			l.onEvent(agent.RunEvent{Kind: agent.RunDelta, Delta: agent.Delta{Kind: agent.DeltaText, Text: word}})
		}
	}()
	select {
	case <-pushed:
	case <-time.After(time.Minute):
		t.Fatal("onEvent blocked on a client that reads nothing")
	}
	l.mu.Lock()
	peak, lost := l.peak, l.lost
	l.mu.Unlock()
	if peak > maxLiveText || !lost {
		t.Fatalf("queued up to %d bytes of text (bound %d), lost %v, for a 1 MB answer", peak, maxLiveText, lost)
	}
	close(w.release)
	if !l.finish(want.String(), true) {
		t.Fatal("the output's rest was not sent")
	}
	o.s.flush()

	// What the client reads assembles to the output; only the last chunk is marked.
	var text strings.Builder
	sc := bufio.NewScanner(&w.buf)
	sc.Buffer(nil, 1<<20)
	n, lastAt := 0, -1
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var resp struct{ Result a2a03.TaskArtifactUpdateEvent }
		if err := json.Unmarshal([]byte(line), &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Result.Append != (n > 0) {
			t.Fatalf("chunk %d: append %v", n, resp.Result.Append)
		}
		if resp.Result.LastChunk {
			lastAt = n
		}
		text.WriteString(resp.Result.Artifact.Parts[0].(a2a03.TextPart).Text)
		n++
	}
	if text.String() != want.String() || lastAt != n-1 {
		t.Fatalf("assembled %d of %d bytes in %d chunks, lastChunk on %d", text.Len(), want.Len(), n, lastAt)
	}
}

// bufWriter is a ResponseWriter that keeps what is written.
type bufWriter struct {
	hd  http.Header
	buf bytes.Buffer
}

func (w *bufWriter) Header() http.Header         { return w.hd }
func (w *bufWriter) WriteHeader(int)             {}
func (w *bufWriter) Flush()                      {}
func (w *bufWriter) Write(b []byte) (int, error) { return w.buf.Write(b) }

// A text artifact update written around the stream's template is byte for
// byte the event encoded whole, in each generation and binding, for text
// encoding/json escapes (quotes, control characters, HTML, invalid UTF-8,
// U+2028) and for a task whose context id is the placeholder (then each
// update is encoded whole).
func TestArtifactTemplateEncodesAsWhole(t *testing.T) {
	texts := []string{"plain", `say "hi" \ there`, "tab\tnl\ncr\r\x01\x1f", "<b>&amp;</b>", "bad \xff\xfe utf8", "ls\u2028ps\u2029", "ünïcødé 🦎", strings.Repeat("x", maxChunk+10)}
	for _, tc := range []struct {
		name string
		o    func(*bufWriter) *out
	}{
		{"0.3", func(w *bufWriter) *out { return &out{s: newSSE(w), g: gen03, id: json.RawMessage(`"r1"`)} }},
		{"1.0", func(w *bufWriter) *out { return &out{s: newSSE(w), g: gen10, id: json.RawMessage(`7`)} }},
		{"1.0-rest", func(w *bufWriter) *out { return &out{s: newSSE(w), g: gen10, rest: true} }},
	} {
		for _, ctxID := range []string{"c1", "evil\x00ctx", "\x00"} {
			t.Run(tc.name+"/"+fmt.Sprintf("%q", ctxID), func(t *testing.T) {
				tk := &task{id: "t1", contextID: ctxID, done: make(chan struct{})}
				fast, whole := &bufWriter{hd: http.Header{}}, &bufWriter{hd: http.Header{}}
				l := &live{o: tc.o(fast), t: tk}
				ow := tc.o(whole)
				for _, text := range texts {
					for _, appendTo := range []bool{false, true} {
						for _, last := range []bool{false, true} {
							fast.buf.Reset()
							whole.buf.Reset()
							l.artifact([]byte(text), appendTo, last)
							ow.hold(ow.artifactEvent(tk, appendTo, last, text))
							if fast.buf.String() != whole.buf.String() {
								t.Fatalf("text %q append %v last %v:\ntemplate %s\nwhole    %s", text, appendTo, last, fast.buf.String(), whole.buf.String())
							}
						}
					}
				}
				if tp := l.tmpl[0]; (tp.pre == nil) != (ctxID == placeholder) {
					t.Fatalf("template %+v for context id %q", tp, ctxID)
				}
			})
		}
	}
}

package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/builtin"
)

// sseWire writes the frames of one provider's stream.
type sseWire struct {
	kind  string
	start string                // what comes before the first block
	text  func(s string) string // a text delta (its block started in start)
	tool  func(i int) string    // the start of tool call i (block i+1)
	args  func(i int, s string) string
	ping  string
}

func sseFrame(event string, v any) string {
	b, _ := json.Marshal(v)
	if event == "" {
		return "data: " + string(b) + "\n\n"
	}
	return "event: " + event + "\ndata: " + string(b) + "\n\n"
}

var sseWires = []sseWire{
	{
		kind:  provider.OpenAI,
		start: sseFrame("", map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""}}}}),
		text: func(s string) string {
			return sseFrame("", map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": s}}}})
		},
		tool: func(i int) string {
			return sseFrame("", map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{
				map[string]any{"index": i, "id": fmt.Sprintf("call_%d", i), "type": "function", "function": map[string]any{"name": "write", "arguments": ""}}}}}}})
		},
		args: func(i int, s string) string {
			return sseFrame("", map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{
				map[string]any{"index": i, "function": map[string]any{"arguments": s}}}}}}})
		},
		ping: ": keep-alive\n\n",
	},
	{
		kind: provider.Anthropic,
		start: sseFrame("message_start", map[string]any{"type": "message_start", "message": map[string]any{"usage": map[string]any{"input_tokens": 5, "output_tokens": 1}}}) +
			sseFrame("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}),
		text: func(s string) string {
			return sseFrame("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": s}})
		},
		tool: func(i int) string {
			return sseFrame("content_block_start", map[string]any{"type": "content_block_start", "index": i + 1,
				"content_block": map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", i), "name": "write", "input": map[string]any{}}})
		},
		args: func(i int, s string) string {
			return sseFrame("content_block_delta", map[string]any{"type": "content_block_delta", "index": i + 1, "delta": map[string]any{"type": "input_json_delta", "partial_json": s}})
		},
		ping: sseFrame("ping", map[string]any{"type": "ping"}),
	},
}

// Hostile streams end with a clear error within their bounds: the client
// lets go at the bound, not at the end of a stream that has none, and the
// deltas emitted before stay within it.
// Guards: the bounds of one streamed answer (time, bytes, events, tool calls).
func TestHostileStreams(t *testing.T) {
	const bodyLimit = 16 << 20
	chunk := strings.Repeat("x", 1<<10)
	cases := []struct {
		name    string
		timeout time.Duration
		// frames returns the n-th frame after start, forever; with
		// repeat, every frame after the first is the second one.
		frames func(w sseWire, n int) string
		repeat bool
		want   string
		// maxWritten bounds what the server may write before the client
		// lets go (the loopback's socket buffers take some MiB more than
		// the client read).
		maxWritten int64
	}{
		{"endless text", 2 * time.Minute,
			func(w sseWire, n int) string { return w.text(chunk) }, true,
			"response body over 16 MiB", 2 * bodyLimit},
		{"huge delta", 2 * time.Minute,
			func(w sseWire, n int) string {
				if n == 0 {
					// A data line that never ends.
					return "data: {\"choices\":[{\"delta\":{\"content\":\"" + chunk
				}
				return chunk
			}, true,
			"malformed stream: an event over 4 MiB", bodyLimit},
		{"never-ending tool arguments", 2 * time.Minute,
			func(w sseWire, n int) string {
				if n == 0 {
					return w.tool(0) + w.args(0, `{"content":"`)
				}
				return w.args(0, chunk)
			}, true,
			"the arguments of tool call 0 (write) are over 4 MiB", bodyLimit},
		{"thousands of tool calls", 2 * time.Minute,
			func(w sseWire, n int) string { return w.tool(n) }, false,
			"more than 1024 tool calls in one answer", bodyLimit},
		{"endless pings", time.Second,
			func(w sseWire, n int) string {
				time.Sleep(10 * time.Millisecond) // a slow server, not a sync
				return w.ping
			}, false,
			"the answer did not end within 1s (timeout)", bodyLimit},
	}
	for _, wi := range sseWires {
		for _, tc := range cases {
			t.Run(wi.kind+"/"+tc.name, func(t *testing.T) {
				written := make(chan int64, 1)
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "text/event-stream")
					var n int64
					defer func() { written <- n }()
					m, err := w.Write([]byte(wi.start))
					n += int64(m)
					var same []byte
					for i := 0; err == nil && r.Context().Err() == nil && n < 4*bodyLimit; i++ {
						frame := same
						if frame == nil {
							frame = []byte(tc.frames(wi, i))
							if tc.repeat && i == 1 {
								same = frame
							}
						}
						m, err = w.Write(frame)
						n += int64(m)
						if i%64 == 0 {
							w.(http.Flusher).Flush()
						}
					}
				}))
				defer srv.Close()
				base := srv.URL
				if wi.kind == provider.OpenAI {
					base += "/v1"
				}
				m, err := builtin.New(wi.kind, provider.Config{BaseURL: base, MaxRetries: -1, Timeout: tc.timeout, APIKey: "k"})
				if err != nil {
					t.Fatal(err)
				}
				var deltas, bytes int
				start := time.Now()
				_, err = m.(agent.Streamer).GenerateStream(context.Background(), hi(), func(d agent.Delta) {
					deltas++
					bytes += len(d.Text) + len(d.Arguments)
				})
				if err == nil || !errors.Is(err, provider.ErrProvider) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v: want ErrProvider saying %q", err, tc.want)
				}
				t.Logf("%v after %v, %d deltas, %d bytes", err, time.Since(start), deltas, bytes)
				if bytes > bodyLimit {
					t.Fatalf("%d bytes of deltas emitted, over the body limit", bytes)
				}
				if n := <-written; n >= tc.maxWritten {
					t.Fatalf("the server wrote %d MiB before the client let go", n>>20)
				}
			})
		}
	}
}

func hi() *agent.Request {
	return &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}}
}

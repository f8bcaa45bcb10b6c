package builtin_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/builtin"
)

// streamEnd ends a stream of sseWires' frames.
var streamEnd = map[string]string{
	provider.OpenAI: sseFrame("", map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}}) +
		sseFrame("", map[string]any{"choices": []any{}, "usage": map[string]any{"prompt_tokens": 9, "completion_tokens": 1000}}) + "data: [DONE]\n\n",
	provider.Anthropic: sseFrame("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}) +
		sseFrame("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn"}, "usage": map[string]any{"output_tokens": 1000}}) +
		sseFrame("message_stop", map[string]any{"type": "message_stop"}),
}

// A streamed answer of 1,000 text deltas over loopback HTTP, from the
// request to the last delta: time and allocations per delta, the HTTP
// client's included (and the in-process test server's, which writes one
// prepared body):
// go test -run '^$' -bench GenerateStream -benchmem ./agent/provider/builtin/
func BenchmarkGenerateStream(b *testing.B) {
	const deltas = 1000
	for _, wi := range sseWires {
		b.Run(wi.kind, func(b *testing.B) {
			var body strings.Builder
			body.WriteString(wi.start)
			for i := range deltas {
				body.WriteString(wi.text(fmt.Sprintf(" word%d", i%10)))
			}
			body.WriteString(streamEnd[wi.kind])
			payload := []byte(body.String())
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Write(payload)
			}))
			b.Cleanup(srv.Close)
			base := srv.URL
			if wi.kind == provider.OpenAI {
				base += "/v1"
			}
			m, err := builtin.New(wi.kind, provider.Config{BaseURL: base, APIKey: "k", HTTPClient: srv.Client()})
			if err != nil {
				b.Fatal(err)
			}
			s := m.(agent.Streamer)
			ctx := context.Background()
			n := 0
			emit := func(agent.Delta) { n++ }
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for b.Loop() {
				if res, err := s.GenerateStream(ctx, hi(), emit); err != nil || len(res.Content) != deltas*6 {
					b.Fatalf("%v, %v", res, err)
				}
			}
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(n), "allocs/delta")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/delta")
		})
	}
}

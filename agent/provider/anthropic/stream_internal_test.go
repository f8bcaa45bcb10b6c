package anthropic

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/internal/wire"
)

// benchDeltas is the number of deltas of a benchmark's answer.
const benchDeltas = 1000

// streamBody is a Messages stream of n deltas as the API writes them (with
// a ping every 100): text pieces, or the input pieces of one tool_use.
func streamBody(n int, tool bool) []byte {
	var b bytes.Buffer
	b.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01XFDUDYJgAACzvnptvVoYEL\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5-20250929\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"output_tokens\":1}}}\n\n")
	if tool {
		b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01\",\"name\":\"write_file\",\"input\":{}}}\n\n")
	} else {
		b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	}
	for i := range n {
		if i%100 == 0 {
			b.WriteString("event: ping\ndata: {\"type\": \"ping\"}\n\n")
		}
		if tool {
			fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"w%d \"}}\n\n", i%10)
		} else {
			fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" word%d\"}}\n\n", i%10)
		}
	}
	b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	b.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":1000}}\n\n")
	b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	return b.Bytes()
}

// The allocations the parser makes per delta, from the bytes of the stream
// to the Delta handed to emit (the HTTP client's own reads excluded):
// go test -run '^$' -bench StreamParse -benchmem ./agent/provider/anthropic/
func BenchmarkStreamParse(b *testing.B) {
	m, err := New(provider.Config{APIKey: "k"})
	if err != nil {
		b.Fatal(err)
	}
	for _, tool := range []bool{false, true} {
		name := "text"
		if tool {
			name = "tool_arguments"
		}
		b.Run(name, func(b *testing.B) {
			body := streamBody(benchDeltas, tool)
			var deltas int
			emit := func(agent.Delta) { deltas++ }
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for b.Loop() {
				res, err := m.readStream(wire.NewSSE(bytes.NewReader(body)), emit)
				if err != nil || (res.Content == "" && len(res.ToolCalls) == 0) {
					b.Fatalf("%+v, %v", res, err)
				}
			}
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(deltas), "allocs/delta")
		})
	}
}

// The bar of the issue: at most 4 allocations per delta on the path from
// the model to a door; the parser must leave room for the rest.
func TestStreamParseAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("measures allocations")
	}
	m, err := New(provider.Config{APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []bool{false, true} {
		body := streamBody(benchDeltas, tool)
		allocs := testing.AllocsPerRun(5, func() {
			if _, err := m.readStream(wire.NewSSE(bytes.NewReader(body)), func(agent.Delta) {}); err != nil {
				t.Fatal(err)
			}
		})
		perDelta := allocs / benchDeltas
		t.Logf("tool=%v: %.2f allocations per delta", tool, perDelta)
		if perDelta > 3 {
			t.Errorf("tool=%v: %.2f allocations per delta, want at most 3", tool, perDelta)
		}
	}
}

// Whatever a server sends, reading it never panics, and an answer read
// whole is what its deltas make.
func FuzzReadStream(f *testing.F) {
	for _, name := range []string{"text", "cached", "tool_split", "parallel", "error", "truncated"} {
		b, err := os.ReadFile("testdata/" + name + ".sse")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	m, err := New(provider.Config{APIKey: "k"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var text strings.Builder
		res, err := m.readStream(wire.NewSSE(bytes.NewReader(body)), func(d agent.Delta) {
			if d.Kind == agent.DeltaText {
				text.WriteString(d.Text)
			}
		})
		if err == nil && text.String() != res.Content {
			t.Fatalf("deltas %q, content %q", text.String(), res.Content)
		}
	})
}

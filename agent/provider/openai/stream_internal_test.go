package openai

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

// streamBody is a Chat Completions stream of n deltas as OpenAI writes
// them (every chunk with its id, model, fingerprint): text pieces, or the
// argument pieces of one tool call.
func streamBody(n int, tool bool) []byte {
	var b bytes.Buffer
	head := `data: {"id":"chatcmpl-CXa1","object":"chat.completion.chunk","created":1764460000,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_560af6e559","choices":[{"index":0,"delta":`
	tail := `,"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n"
	if tool {
		b.WriteString(head + `{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"write_file","arguments":""}}]}` + tail)
	}
	for i := range n {
		if tool {
			fmt.Fprintf(&b, `%s{"tool_calls":[{"index":0,"function":{"arguments":"word%d "}}]}%s`, head, i%10, tail)
		} else {
			fmt.Fprintf(&b, `%s{"content":" word%d"}%s`, head, i%10, tail)
		}
	}
	finish := "stop"
	if tool {
		finish = "tool_calls"
	}
	b.WriteString(head + `{}` + `,"logprobs":null,"finish_reason":"` + finish + `"}],"usage":null}` + "\n\n")
	b.WriteString(`data: {"id":"chatcmpl-CXa1","object":"chat.completion.chunk","created":1764460000,"model":"gpt-4o-mini-2024-07-18","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":1000,"total_tokens":1020,"prompt_tokens_details":{"cached_tokens":0}}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// The allocations the parser makes per delta, from the bytes of the stream
// to the Delta handed to emit (the HTTP client's own reads excluded):
// go test -run '^$' -bench StreamParse -benchmem ./agent/provider/openai/
func BenchmarkStreamParse(b *testing.B) {
	m, err := newModel(provider.OpenAI, provider.Config{})
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
	m, err := newModel(provider.OpenAI, provider.Config{})
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
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":{\"x\":1}}},{\"id\":\"b\"}]}}]} \n\ndata: [DONE]\n\n"))
	m, err := newModel(provider.OpenAI, provider.Config{})
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

package mcpserver_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// progressEras are the two MCP eras a go-sdk client speaks to /mcp.
var progressEras = []struct {
	name string
	so   *mcp.ClientSessionOptions
}{
	{mcpserver.ProtocolVersion2026, nil},
	{"2025-11-25", legacy},
}

// connectBench serves f at /mcp and connects a go-sdk client of era so.
func connectBench(b *testing.B, f *fixture, opts *mcp.ClientOptions, so *mcp.ClientSessionOptions) *mcp.ClientSession {
	mux := http.NewServeMux()
	mux.Handle("/mcp", f.srv)
	ts := httptest.NewServer(mux)
	b.Cleanup(func() { f.srv.Close(); ts.Close() })
	cs, err := testClient(opts).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", MaxRetries: -1}, so)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

// firstText hands the time of each call's first text progress
// notification to the benchmark.
type firstText struct {
	got   chan time.Time
	seen  bool
	anyAt time.Time // the call's first notification of any kind
}

func (f *firstText) handler(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	if f.anyAt.IsZero() {
		f.anyAt = time.Now()
	}
	if f.seen || !isText(req.Params.Message) {
		return
	}
	f.seen = true
	f.got <- time.Now()
}

// BenchmarkProgressFirstDelta compares the time to the first delta
// through MCP progress (a go-sdk client's tools/call with a progressToken
// on /mcp, in both eras, to its first notification carrying text: the
// Engine, the openai provider streaming from an httptest OpenAI-wire
// server, the run's fan-out, the progress reporter) with the model's own
// (the same streamed chat request straight to the model server, to its
// first content chunk), alternating the two over loopback; it fails when
// the door's median is more than 2 ms above the model's (issue #26's bar).
func BenchmarkProgressFirstDelta(b *testing.B) {
	for _, era := range progressEras {
		b.Run("era="+era.name, func(b *testing.B) {
			chat := testutil.NewStreamingChat(b, 20, 0)
			f := streamFixture(b, chat)
			ft := &firstText{got: make(chan time.Time, 1)}
			cs := connectBench(b, f, &mcp.ClientOptions{ProgressNotificationHandler: ft.handler}, era.so)
			hc := &http.Client{}
			ctx := context.Background()
			var startedTimes []time.Duration // to the "agent … started" notification
			door := func() time.Duration {
				// The handler runs on the client's goroutine, one call at a time.
				ft.seen, ft.anyAt = false, time.Time{}
				params := &mcp.CallToolParams{Name: "agent_writer", Arguments: map[string]any{"input": "write"}}
				params.SetProgressToken("tok")
				start := time.Now()
				res, err := cs.CallTool(ctx, params)
				if err != nil || res.IsError {
					b.Fatalf("call: %v %+v", err, res)
				}
				if got := res.Content[0].(*mcp.TextContent).Text; got != chat.Text() {
					b.Fatalf("answer %q, want %q", got, chat.Text())
				}
				select {
				case at := <-ft.got:
					startedTimes = append(startedTimes, ft.anyAt.Sub(start))
					return at.Sub(start)
				case <-time.After(20 * time.Second):
					b.Fatal("no text progress notification")
				}
				return 0
			}
			model := func() time.Duration {
				req, _ := http.NewRequest(http.MethodPost, chat.URL+"/chat/completions", strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"go"}]}`))
				req.Header.Set("Content-Type", "application/json")
				start := time.Now()
				resp, err := hc.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				defer resp.Body.Close()
				sc := bufio.NewScanner(resp.Body)
				var d time.Duration
				for sc.Scan() {
					if d == 0 && strings.Contains(sc.Text(), `"delta":{"content":`) {
						d = time.Since(start)
					}
				}
				return d
			}
			testutil.FirstDelta(b, "the first text progress", door, model, 2*time.Millisecond)
			b.ReportMetric(float64(testutil.Median(startedTimes).Microseconds()), "first-progress-µs")
		})
	}
}

// floodModel streams n deltas "tok " as fast as it can.
type floodModel struct {
	n    int
	text string
}

func (m *floodModel) Generate(context.Context, *agent.Request) (*agent.Response, error) {
	return &agent.Response{Content: m.text}, nil
}

func (m *floodModel) GenerateStream(_ context.Context, _ *agent.Request, emit func(agent.Delta)) (*agent.Response, error) {
	for range m.n {
		emit(agent.Delta{Kind: agent.DeltaText, Text: "tok "})
	}
	return &agent.Response{Content: m.text}, nil
}

// BenchmarkProgressAllocsPerDelta counts the allocations per delta of a
// 10,000-delta answer (the model in process) from the model's emit
// through the Engine's fan-out and the progress reporter to a go-sdk
// client on /mcp, end to end, in both eras (the client's own decoding of
// the few notifications counted too); it fails past 4 allocations per
// delta (issue #26's bar).
func BenchmarkProgressAllocsPerDelta(b *testing.B) {
	const perRun = 10_000
	for _, era := range progressEras {
		b.Run("era="+era.name, func(b *testing.B) {
			eng := axocoatl.New(axocoatl.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			m := &floodModel{n: perRun, text: strings.Repeat("tok ", perRun)}
			if err := eng.AddAgent(agent.Spec{ID: "writer", Tools: []string{}}, m); err != nil {
				b.Fatal(err)
			}
			f := &fixture{eng: eng, srv: startServer(b, eng, mcpserver.Config{})}
			b.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = eng.Close(ctx)
			})
			notes := 0
			cs := connectBench(b, f, &mcp.ClientOptions{ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { notes++ }}, era.so)
			ctx := context.Background()
			call := func() {
				params := &mcp.CallToolParams{Name: "agent_writer", Arguments: map[string]any{"input": "write"}}
				params.SetProgressToken("tok")
				res, err := cs.CallTool(ctx, params)
				if err != nil || res.IsError {
					b.Fatalf("call: %v %+v", err, res)
				}
				if got := res.Content[0].(*mcp.TextContent).Text; len(got) != len(m.text) {
					b.Fatalf("answer of %d bytes, want %d", len(got), len(m.text))
				}
			}
			call()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for b.Loop() {
				call()
			}
			b.StopTimer()
			runtime.ReadMemStats(&after)
			deltas := float64(b.N) * perRun
			allocs := float64(after.Mallocs-before.Mallocs) / deltas
			b.ReportMetric(allocs, "allocs/delta")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/deltas, "B/delta")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/deltas, "ns/delta")
			if allocs > 4 {
				b.Fatalf("%.2f allocations per delta, the bar is 4", allocs)
			}
		})
	}
}

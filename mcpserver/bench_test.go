package mcpserver_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// The peer: a bare go-sdk server exposing one echo tool, the way the SDK's
// docs write one (typed AddTool, input validated against its schema).
func bareEchoServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	type in struct {
		Input string `json:"input"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echoes"}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Input}}}, nil, nil
	})
	return s
}

type benchTarget struct {
	name string
	tool string
	cs   *mcp.ClientSession
}

// benchEras are the two eras the HTTP benchmarks compare in: the
// handshake era (a client pinned to 2025-11-25, the bare server's
// default stateful handler) and the stateless era (the go-sdk client's
// default, 2026-07-28, and the bare server's handler with Stateless set,
// the only one that serves that era).
var benchEras = []string{"2025-11-25", mcpserver.ProtocolVersion2026}

// benchTargets serves both over streamable HTTP with the SDK's default
// handler options (plus Stateless for the bare server in the stateless
// era), each on its own httptest server, and connects a go-sdk client of
// era to each.
func benchTargets(b *testing.B, era string) []benchTarget {
	b.Helper()
	eng := axocoatl.New(axocoatl.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := eng.AddAgent(agent.Spec{ID: "echo", Provider: provider.Echo}, provider.EchoModel{}); err != nil {
		b.Fatal(err)
	}
	srv := startServer(b, eng, mcpserver.Config{})
	bare := bareEchoServer()
	stateless := era >= mcpserver.ProtocolVersion2026
	bareHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return bare }, &mcp.StreamableHTTPOptions{Stateless: stateless})
	ours := httptest.NewServer(srv)
	theirs := httptest.NewServer(bareHandler)
	b.Cleanup(func() {
		srv.Close()
		for ss := range bare.Sessions() {
			ss.Close()
		}
		ours.Close()
		theirs.Close()
		eng.Close(context.Background())
	})
	connect := func(url string) *mcp.ClientSession {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}).
			Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: era})
		if err != nil {
			b.Fatal(err)
		}
		if v := cs.InitializeResult().ProtocolVersion; v != era {
			b.Fatalf("%s negotiated %s, want %s", url, v, era)
		}
		b.Cleanup(func() { cs.Close() })
		return cs
	}
	return []benchTarget{
		{"axocoatl", "agent_echo", connect(ours.URL)},
		{"bare-go-sdk", "echo", connect(theirs.URL)},
	}
}

func benchCall(b *testing.B, t benchTarget, ctx context.Context) {
	res, err := t.cs.CallTool(ctx, &mcp.CallToolParams{Name: t.tool, Arguments: map[string]any{"input": "ping"}})
	if err != nil || res.IsError {
		b.Fatalf("%s: %v %v", t.name, res, err)
	}
}

// BenchmarkHTTPCallsPaired calls agent_echo and the bare server's echo in
// alternation, one client each, so that both see the same machine at the
// same moment; it reports each side's calls/s and their ratio, in each era.
func BenchmarkHTTPCallsPaired(b *testing.B) {
	for _, era := range benchEras {
		b.Run(era, func(b *testing.B) { benchHTTPCallsPaired(b, era) })
	}
}

func benchHTTPCallsPaired(b *testing.B, era string) {
	targets := benchTargets(b, era)
	ctx := context.Background()
	for _, t := range targets { // warm up connections and sessions
		benchCall(b, t, ctx)
	}
	var spent [2]time.Duration
	b.ResetTimer()
	for i := range b.N {
		for j := range 2 {
			k := (i + j) % 2 // alternate who goes first
			start := time.Now()
			benchCall(b, targets[k], ctx)
			spent[k] += time.Since(start)
		}
	}
	b.StopTimer()
	ours := float64(b.N) / spent[0].Seconds()
	theirs := float64(b.N) / spent[1].Seconds()
	b.ReportMetric(ours, "axocoatl-calls/s")
	b.ReportMetric(theirs, "bare-calls/s")
	b.ReportMetric(ours/theirs, "ratio")
	b.ReportMetric(0, "ns/op") // the pair's time is not a figure of interest
}

// BenchmarkHTTPCallsParallelPaired is the same pairing under concurrency:
// 8 goroutines (4 per core) share one session per server, each goroutine
// alternating between the two. A side's calls/s is its calls over its
// share of the wall time (its summed latency divided by the goroutines);
// the ratio is therefore the inverse ratio of mean latencies.
func BenchmarkHTTPCallsParallelPaired(b *testing.B) {
	for _, era := range benchEras {
		b.Run(era, func(b *testing.B) { benchHTTPCallsParallelPaired(b, era) })
	}
}

func benchHTTPCallsParallelPaired(b *testing.B, era string) {
	targets := benchTargets(b, era)
	ctx := context.Background()
	for _, t := range targets {
		benchCall(b, t, ctx)
	}
	const parallelism = 4
	var spent [2]atomic.Int64
	var order atomic.Int64
	b.SetParallelism(parallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		first := int(order.Add(1) % 2)
		for pb.Next() {
			for j := range 2 {
				k := (first + j) % 2
				start := time.Now()
				benchCall(b, targets[k], ctx)
				spent[k].Add(int64(time.Since(start)))
			}
			first = 1 - first
		}
	})
	b.StopTimer()
	goroutines := float64(parallelism * runtime.GOMAXPROCS(0))
	ours := float64(b.N) / (time.Duration(spent[0].Load()).Seconds() / goroutines)
	theirs := float64(b.N) / (time.Duration(spent[1].Load()).Seconds() / goroutines)
	b.ReportMetric(ours, "axocoatl-calls/s")
	b.ReportMetric(theirs, "bare-calls/s")
	b.ReportMetric(ours/theirs, "ratio")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkInMemoryCall measures one call with no network, client side
// included, to show what the bridge to the Engine costs per call (run with
// -benchmem).
func BenchmarkInMemoryCall(b *testing.B) {
	eng := axocoatl.New(axocoatl.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer eng.Close(context.Background())
	if err := eng.AddAgent(agent.Spec{ID: "echo", Provider: provider.Echo}, provider.EchoModel{}); err != nil {
		b.Fatal(err)
	}
	srv := startServer(b, eng, mcpserver.Config{})
	defer srv.Close()
	for _, t := range []struct {
		name, tool string
		server     *mcp.Server
	}{{"axocoatl", "agent_echo", srv.MCP()}, {"bare-go-sdk", "echo", bareEchoServer()}} {
		b.Run(t.name, func(b *testing.B) {
			ctx := context.Background()
			st, ct := mcp.NewInMemoryTransports()
			ss, err := t.server.Connect(ctx, st, nil)
			if err != nil {
				b.Fatal(err)
			}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}).Connect(ctx, ct, nil)
			if err != nil {
				b.Fatal(err)
			}
			target := benchTarget{t.name, t.tool, cs}
			b.ResetTimer()
			for range b.N {
				benchCall(b, target, ctx)
			}
			b.StopTimer()
			cs.Close()
			ss.Wait()
		})
	}
}

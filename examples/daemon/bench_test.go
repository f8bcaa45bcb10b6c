package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axocoatl/axocoatl-go/httpapi"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/lattice"
	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// benchClients is the number of concurrent HTTP clients (issue 3: 64).
const benchClients = 64

// loadHTTP posts body to url from benchClients goroutines for b.N requests
// in all and reports requests per second.
func loadHTTP(b *testing.B, url string) {
	b.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: benchClients, MaxConnsPerHost: benchClients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	body := []byte(`{"input":"hello, benchmark"}`)
	var failed atomic.Int64
	b.SetParallelism(benchClientsPerProc())
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(url, "application/json", bytes.NewReader(body))
			if err != nil {
				failed.Add(1)
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				failed.Add(1)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d requests failed", n)
	}
}

// benchClientsPerProc makes RunParallel use benchClients goroutines:
// it starts SetParallelism(p) × GOMAXPROCS of them.
func benchClientsPerProc() int {
	procs := runtime.GOMAXPROCS(0)
	return max(1, (benchClients+procs-1)/procs)
}

// BenchmarkExecuteHTTP compares, in one run, POST
// /api/agents/assistant/execute on the daemon with the built-in default
// config (echo agent; router, auth middleware, body limit, Engine.Execute
// with its two events, the metrics subscriber), served as `serve` serves
// it, against the peer: a bare net/http handler that decodes the same JSON
// and echoes it in the same response shape. 64 concurrent clients each.
func BenchmarkExecuteHTTP(b *testing.B) {
	b.Run("daemon", func(b *testing.B) {
		loadHTTP(b, startDaemonB(b)+"/api/agents/assistant/execute")
	})
	b.Run("bare_net_http", func(b *testing.B) {
		loadHTTP(b, startBareB(b)+"/api/agents/assistant/execute")
	})
}

// BenchmarkExecuteHandler measures the same two handlers without the
// network (httptest.NewRecorder, one goroutine): what the daemon's own
// code costs per request, apart from loopback HTTP.
func BenchmarkExecuteHandler(b *testing.B) {
	run := func(b *testing.B, h http.Handler) {
		body := []byte(`{"input":"hello, benchmark"}`)
		b.ReportAllocs()
		for b.Loop() {
			req := httptest.NewRequest(http.MethodPost, "/api/agents/assistant/execute", bytes.NewReader(body))
			req.Host = "127.0.0.1:8080" // the default config's own address (example.com is refused)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				b.Fatalf("status %d: %s", w.Code, w.Body)
			}
		}
	}
	b.Run("daemon", func(b *testing.B) {
		run(b, defaultHandler(b))
	})
	b.Run("bare_net_http", func(b *testing.B) { run(b, bareHandler()) })
}

// bareHandler is the peer: decode the same JSON, echo it in the same shape.
func bareHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/agents/{id}/execute", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Input string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(httpapi.ExecuteResponse{TaskID: lattice.NewID(time.Now()), AgentID: r.PathValue("id"), Status: "completed", Output: in.Input})
	})
	return mux
}

func startBareB(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: bareHandler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// startDaemonB serves the default config in-process and stops it when the
// benchmark ends.
func startDaemonB(b *testing.B) string {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan int, 1)
	c := &cli{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, lookup: mapEnv(nil),
		hooks: serveHooks{listening: func(a net.Addr) { addr <- a.String() }}}
	go func() { done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0"}, c) }()
	b.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case a := <-addr:
		return "http://" + a
	case code := <-done:
		b.Fatalf("daemon exited with %d", code)
	}
	return ""
}

// BenchmarkStartupToReady runs the built binary with the default config
// and measures from process start to the "axocoatl ready" log line (the
// listener is bound and serving).
func BenchmarkStartupToReady(b *testing.B) {
	bin := buildBinary(b)
	dir := b.TempDir()
	b.ResetTimer()
	var total time.Duration
	for range b.N {
		cmd := exec.Command(bin, "--addr", "127.0.0.1:0")
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		pipe, err := cmd.StderrPipe()
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(pipe)
		ready := false
		for sc.Scan() {
			if strings.Contains(sc.Text(), `msg="axocoatl ready"`) {
				ready = true
				break
			}
		}
		total += time.Since(start)
		b.StopTimer()
		if !ready {
			cmd.Wait()
			b.Fatal("daemon exited before ready")
		}
		cmd.Process.Signal(syscall.SIGTERM)
		io.Copy(io.Discard, pipe)
		cmd.Wait()
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms-to-ready")
}

// bareMCPEcho is the /mcp benchmarks' peer: a bare go-sdk server with one
// echo tool, written the way the SDK's docs write one (typed AddTool),
// behind the SDK's streamable handler (Stateless in the 2026-07-28 era,
// the only handler that serves it), on a plain net/http server.
func bareMCPEcho(b *testing.B, era string) string {
	s, h := bareMCPHandler(era)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	b.Cleanup(func() {
		srv.Close()
		for ss := range s.Sessions() {
			ss.Close()
		}
	})
	return "http://" + ln.Addr().String() + "/mcp"
}

// bareMCPHandler is bareMCPEcho's server and handler.
func bareMCPHandler(era string) (*mcp.Server, http.Handler) {
	s := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	type in struct {
		Input string `json:"input"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echoes"}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Input}}}, nil, nil
	})
	return s, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: era >= mcpserver.ProtocolVersion2026})
}

// BenchmarkMCPHandler measures what one 2026-07-28 tools/call costs the
// server alone, without the network or a client (httptest.NewRecorder,
// one goroutine, the same POST each time: the era is stateless, so no
// session is needed): the daemon's whole handler (router, guard, frame
// checks, the go-sdk's handler, the Engine run with its events) against
// the bare go-sdk handler with its typed echo tool. Load moves ns/op;
// allocations do not.
func BenchmarkMCPHandler(b *testing.B) {
	const meta = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	run := func(b *testing.B, h http.Handler, tool string) {
		body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"input":"ping"},"_meta":` + meta + `}}`)
		b.ReportAllocs()
		for b.Loop() {
			req := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
			req.Host = "127.0.0.1:8080" // the default config's own address
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", mcpserver.ProtocolVersion2026)
			req.Header.Set("Mcp-Method", "tools/call")
			req.Header.Set("Mcp-Name", tool)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusOK || !bytes.Contains(w.Body.Bytes(), []byte(`"text":"ping"`)) {
				b.Fatalf("status %d: %s", w.Code, w.Body)
			}
		}
	}
	b.Run("daemon", func(b *testing.B) { run(b, defaultHandler(b), "agent_assistant") })
	b.Run("bare_go_sdk", func(b *testing.B) {
		_, h := bareMCPHandler(mcpserver.ProtocolVersion2026)
		run(b, h, "echo")
	})
}

// mcpPair is one client's two sessions: to the daemon's /mcp
// (agent_assistant) and to the bare go-sdk server (echo).
type mcpPair [2]struct {
	cs   *mcp.ClientSession
	tool string
}

func connectMCPPair(b *testing.B, era, daemon, bare string) mcpPair {
	var p mcpPair
	for i, t := range []struct{ url, tool string }{{daemon, "agent_assistant"}, {bare, "echo"}} {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}).
			Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: t.url, MaxRetries: -1, DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: era})
		if err != nil {
			b.Fatal(err)
		}
		if v := cs.InitializeResult().ProtocolVersion; v != era {
			b.Fatalf("%s negotiated %s, want %s", t.url, v, era)
		}
		b.Cleanup(func() { cs.Close() })
		p[i].cs, p[i].tool = cs, t.tool
	}
	return p
}

// call makes one tools/call on side k (0: daemon, 1: bare) and returns
// its latency.
func (p mcpPair) call(b *testing.B, k int) time.Duration {
	start := time.Now()
	res, err := p[k].cs.CallTool(context.Background(), &mcp.CallToolParams{Name: p[k].tool, Arguments: map[string]any{"input": "ping"}})
	d := time.Since(start)
	if err != nil || res.IsError {
		b.Errorf("%s: %v %v", p[k].tool, res, err)
	}
	return d
}

// BenchmarkMCPCallsPaired compares, in one run and per era, tools/call
// through the daemon's /mcp (the built-in default config served as
// `serve` serves it: router, guard, mcpserver, Engine run with its events
// and metrics) with the bare go-sdk streamable handler. Each of sessions
// clients (goroutines) holds a session to both and alternates between
// them, which goes first alternating too, so both sides see the same
// moment of a loaded machine. A side's calls/s is its calls over its
// share of the wall time (summed latency / clients); ratio is
// daemon/bare calls/s, and median-ratio the inverse ratio of the
// per-call median latencies. sessions=1 is one call at a time.
func BenchmarkMCPCallsPaired(b *testing.B) {
	for _, era := range []string{"2025-11-25", mcpserver.ProtocolVersion2026} {
		for _, sessions := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/sessions=%d", era, sessions), func(b *testing.B) {
				daemon, bare := startDaemonB(b)+"/mcp", bareMCPEcho(b, era)
				pairs := make([]mcpPair, sessions)
				for i := range pairs {
					pairs[i] = connectMCPPair(b, era, daemon, bare)
					pairs[i].call(b, 0) // warm up connections
					pairs[i].call(b, 1)
				}
				var next atomic.Int64
				lat := make([][2][]time.Duration, sessions)
				b.ResetTimer()
				var wg sync.WaitGroup
				for g := range sessions {
					wg.Go(func() {
						for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
							first := int(i % 2)
							for j := range 2 {
								k := (first + j) % 2
								lat[g][k] = append(lat[g][k], pairs[g].call(b, k))
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				var total [2]time.Duration
				var all [2][]time.Duration
				for g := range lat {
					for k := range 2 {
						for _, d := range lat[g][k] {
							total[k] += d
						}
						all[k] = append(all[k], lat[g][k]...)
					}
				}
				rate := func(k int) float64 { return float64(b.N) / (total[k].Seconds() / float64(sessions)) }
				b.ReportMetric(rate(0), "daemon-calls/s")
				b.ReportMetric(rate(1), "bare-calls/s")
				b.ReportMetric(rate(0)/rate(1), "ratio")
				b.ReportMetric(float64(testutil.Median(all[1]))/float64(testutil.Median(all[0])), "median-ratio")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

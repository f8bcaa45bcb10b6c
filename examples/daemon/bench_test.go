package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/httpapi"
	"github.com/axocoatl/axocoatl-go/lattice"
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

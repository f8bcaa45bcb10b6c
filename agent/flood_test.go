package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/openai"
)

type nopBox struct{ calls atomic.Int64 }

func (b *nopBox) Tools() []agent.ToolDef {
	return []agent.ToolDef{{Name: "t", InputSchema: json.RawMessage(`{"type":"object"}`)}}
}
func (b *nopBox) Call(context.Context, agent.ToolCall) agent.ToolResult {
	b.calls.Add(1)
	return agent.ToolResult{Content: "ok"}
}

// A model (an OpenAI-wire server) answering 100,000 tool calls in one turn
// fails the run with ErrTooManyToolCalls: no call runs, the heap grows by
// what decoding the answer costs and no more, and the goroutines are back
// to their baseline at once. (Before the bound: 85,763 goroutines, 1 GB.)
func TestHundredThousandCallsInOneTurn(t *testing.T) {
	var answer strings.Builder
	answer.WriteString(`{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[`)
	for i := range 100_000 {
		if i > 0 {
			answer.WriteByte(',')
		}
		fmt.Fprintf(&answer, `{"id":"c%d","type":"function","function":{"name":"t","arguments":"{}"}}`, i)
	}
	answer.WriteString(`]}}]}`)
	body := answer.String()
	var requests atomic.Int64
	llm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	defer llm.Close()
	model, err := openai.New(provider.Config{BaseURL: llm.URL + "/v1", APIKey: "k", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}

	base := runtime.NumGoroutine()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	runtime.GC()
	heap0 := read()
	var peak, maxG atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			if g := uint64(runtime.NumGoroutine()); g > maxG.Load() {
				maxG.Store(g)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	box := &nopBox{}
	_, err = agent.Run(context.Background(), agent.Spec{ID: "a", Model: "m"}, model, box, "go")
	close(done)
	wg.Wait()
	grew := float64(peak.Load()-min(peak.Load(), heap0)) / (1 << 20)
	t.Logf("answer %.1f MiB; heap peak growth %.1f MiB; goroutines: %d before, %d at most; %v",
		float64(len(body))/(1<<20), grew, base, maxG.Load(), err)
	if !errors.Is(err, agent.ErrTooManyToolCalls) || !strings.Contains(err.Error(), "100000 tool calls") {
		t.Fatalf("err = %v", err)
	}
	if box.calls.Load() != 0 || requests.Load() != 1 {
		t.Fatalf("%d calls ran, %d model requests", box.calls.Load(), requests.Load())
	}
	// The peak is the provider decoding a 7.5 MiB answer (our wire client:
	// ~45 MiB; the openai-go SDK it replaced: ~160 MiB); the loop adds
	// nothing per call. Before the bound the run peaked at 1 GB.
	if grew > 96 {
		t.Errorf("heap grew by %.0f MiB", grew)
	}
	if g := maxG.Load(); g > uint64(base)+50 {
		t.Errorf("%d goroutines at most (baseline %d)", g, base)
	}
	// What is left are the HTTP client's and server's idle connections.
	llm.CloseClientConnections()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base+2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > base+2 {
		t.Errorf("%d goroutines after the run (baseline %d)", g, base)
	}
}

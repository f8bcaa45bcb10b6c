package approval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/approval"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// benchRules are 100 rules; the last allows the benchmark's tool, so each
// call passes the gate without a human after the full policy.
func benchRules() []approval.Rule {
	var rules []approval.Rule
	for i := range 99 {
		rules = append(rules, approval.Rule{Tool: fmt.Sprintf("mcp__srv%d__*", i), Decision: approval.Deny})
	}
	return append(rules, approval.Rule{Tool: "mcp__files__*", Decision: approval.Allow})
}

// gatedEngine is an Engine with the files server attached through
// mcpclient, an agent allowed its tools, and either the approval gate
// (100 rules, the last allowing the call) or a pass-through interceptor in
// its place (what mcpclient's BenchmarkToolCall measures).
func gatedEngine(b *testing.B, fs *filesServer, gate bool) *axocoatl.Engine {
	e := benchEngine(b, gate)
	fs.attach(b, e, "")
	if err := e.AddAgent(agent.Spec{ID: "bench", Tools: []string{"mcp__files__*"}}, provider.EchoModel{}); err != nil {
		b.Fatal(err)
	}
	return e
}

// benchEngine is an Engine with either the approval gate (100 rules, the
// last allowing the benchmark's calls) or a pass-through interceptor in
// its place; no other subscriber.
func benchEngine(b *testing.B, gate bool) *axocoatl.Engine {
	e := axocoatl.New(axocoatl.Options{})
	b.Cleanup(func() { e.Close(context.Background()) })
	if !gate {
		e.Intercept(func(ctx context.Context, call axocoatl.ToolCall, next axocoatl.ToolFunc) (axocoatl.ToolResult, error) {
			return next(ctx, call)
		})
		return e
	}
	m, err := approval.New(approval.Config{Rules: benchRules()})
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Use(context.Background(), m); err != nil {
		b.Fatal(err)
	}
	return e
}

// BenchmarkGateToolCallPaired makes the same in-memory MCP tool call
// (go-sdk server through mcpclient, as mcpclient's BenchmarkToolCallPaired
// does) through an Engine with the approval gate and through one without,
// alternately in one loop, and reports the ratio gate/none of total times
// and of per-call medians.
func BenchmarkGateToolCallPaired(b *testing.B) {
	fs := newFilesServer()
	gated, plain := gatedEngine(b, fs, true), gatedEngine(b, fs, false)
	call := axocoatl.ToolCall{AgentID: "bench", Tool: "mcp__files__echo", Arguments: json.RawMessage(`{"message":"hi"}`)}
	ctx := context.Background()
	var gateTime, plainTime, gateCPU, plainCPU time.Duration
	var gateCalls, plainCalls []time.Duration
	// The caller's thread CPU time: the gate runs on it, the server's side
	// of the call does not, so the ratio overstates the gate's share.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	one := func(e *axocoatl.Engine, total, cpu *time.Duration, calls *[]time.Duration) {
		c0 := threadTime()
		start := time.Now()
		if res, err := e.CallTool(ctx, call); err != nil || res.Content != "Echo: hi" {
			b.Fatal(res, err)
		}
		d := time.Since(start)
		*cpu += threadTime() - c0
		*total += d
		*calls = append(*calls, d)
	}
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		if n%2 == 0 {
			one(gated, &gateTime, &gateCPU, &gateCalls)
			one(plain, &plainTime, &plainCPU, &plainCalls)
		} else {
			one(plain, &plainTime, &plainCPU, &plainCalls)
			one(gated, &gateTime, &gateCPU, &gateCalls)
		}
		n++
	}
	b.ReportMetric(float64(gateTime.Nanoseconds())/float64(n), "gate-ns/call")
	b.ReportMetric(float64(plainTime.Nanoseconds())/float64(n), "none-ns/call")
	b.ReportMetric(float64(gateTime)/float64(plainTime), "gate/none")
	b.ReportMetric(float64(testutil.Median(gateCalls))/float64(testutil.Median(plainCalls)), "median-gate/none")
	b.ReportMetric(float64(gateCPU)/float64(plainCPU), "caller-cpu-gate/none")
}

// BenchmarkGateOverhead is the Engine's own cost per call (as mcpclient's
// BenchmarkEngineOverhead: a tool that returns at once) with the gate
// (100 rules, the last allowing the call) and with a pass-through
// interceptor in its place.
func BenchmarkGateOverhead(b *testing.B) {
	for _, gate := range []bool{false, true} {
		name := "none"
		if gate {
			name = "gate"
		}
		b.Run(name, func(b *testing.B) {
			e := benchEngine(b, gate)
			if err := e.AddAgent(agent.Spec{ID: "bench", Tools: []string{"mcp__files__*"}}, provider.EchoModel{}); err != nil {
				b.Fatal(err)
			}
			e.RegisterTool(axocoatl.Tool{Name: "mcp__files__echo", Server: "files", Call: func(context.Context, axocoatl.ToolCall) (axocoatl.ToolResult, error) {
				return axocoatl.ToolResult{Content: "ok"}, nil
			}})
			call := axocoatl.ToolCall{AgentID: "bench", Tool: "mcp__files__echo", Arguments: json.RawMessage(`{}`)}
			b.ReportAllocs()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			start := threadTime()
			for b.Loop() {
				if _, err := e.CallTool(context.Background(), call); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(threadTime()-start)/float64(b.N), "cpu-ns/op")
		})
	}
}

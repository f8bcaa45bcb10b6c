package approval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/approval"
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
	var e *axocoatl.Engine
	if gate {
		e = newEnv(b, approval.Config{Rules: benchRules()}, axocoatl.Options{}).e
	} else {
		e = axocoatl.New(axocoatl.Options{})
		b.Cleanup(func() { e.Close(context.Background()) })
		e.Intercept(func(ctx context.Context, call axocoatl.ToolCall, next axocoatl.ToolFunc) (axocoatl.ToolResult, error) {
			return next(ctx, call)
		})
	}
	fs.attach(b, e, "")
	if err := e.AddAgent(agent.Spec{ID: "bench", Tools: []string{"mcp__files__*"}}, provider.EchoModel{}); err != nil {
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
	var gateTime, plainTime time.Duration
	var gateCalls, plainCalls []time.Duration
	one := func(e *axocoatl.Engine, total *time.Duration, calls *[]time.Duration) {
		start := time.Now()
		if res, err := e.CallTool(ctx, call); err != nil || res.Content != "Echo: hi" {
			b.Fatal(res, err)
		}
		d := time.Since(start)
		*total += d
		*calls = append(*calls, d)
	}
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		if n%2 == 0 {
			one(gated, &gateTime, &gateCalls)
			one(plain, &plainTime, &plainCalls)
		} else {
			one(plain, &plainTime, &plainCalls)
			one(gated, &gateTime, &gateCalls)
		}
		n++
	}
	b.ReportMetric(float64(gateTime.Nanoseconds())/float64(n), "gate-ns/call")
	b.ReportMetric(float64(plainTime.Nanoseconds())/float64(n), "none-ns/call")
	b.ReportMetric(float64(gateTime)/float64(plainTime), "gate/none")
	b.ReportMetric(float64(median(gateCalls))/float64(median(plainCalls)), "median-gate/none")
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
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
			var e *axocoatl.Engine
			if gate {
				e = newEnv(b, approval.Config{Rules: benchRules()}, axocoatl.Options{}).e
			} else {
				e = axocoatl.New(axocoatl.Options{})
				defer e.Close(context.Background())
				e.Intercept(func(ctx context.Context, call axocoatl.ToolCall, next axocoatl.ToolFunc) (axocoatl.ToolResult, error) {
					return next(ctx, call)
				})
			}
			if err := e.AddAgent(agent.Spec{ID: "bench", Tools: []string{"mcp__files__*"}}, provider.EchoModel{}); err != nil {
				b.Fatal(err)
			}
			e.RegisterTool(axocoatl.Tool{Name: "mcp__files__echo", Server: "files", Call: func(context.Context, axocoatl.ToolCall) (axocoatl.ToolResult, error) {
				return axocoatl.ToolResult{Content: "ok"}, nil
			}})
			call := axocoatl.ToolCall{AgentID: "bench", Tool: "mcp__files__echo", Arguments: json.RawMessage(`{}`)}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.CallTool(context.Background(), call); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

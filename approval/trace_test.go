package approval_test

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/approval"
)

// An approval wait is a span under the call's execute_tool span: who
// resolved it, the verdict, and its duration is the wait.
func TestApprovalWaitSpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	v := newEnv(t, approval.Config{}, axocoatl.Options{TracerProvider: tp})
	var rec recorder
	if err := v.e.RegisterTool(rec.tool("deploy", "ops", "")); err != nil {
		t.Fatal(err)
	}
	if err := v.e.AddAgent(agent.Spec{ID: "a"}, &oneCall{tool: "deploy"}); err != nil {
		t.Fatal(err)
	}
	done := execute(v.e, "a", "x")
	req := v.next(t, approval.EventRequested)
	held := time.Now()
	time.Sleep(20 * time.Millisecond) // a wait that lasts, for the span's duration to show
	waited := time.Since(held)
	if err := v.m.Resolve(context.Background(), req["approval_id"].(string), approval.Allow, "", "websocket"); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, done); r.err != nil {
		t.Fatal(r.err)
	}
	var wait, tool *tracetest.SpanStub
	spans := exp.GetSpans()
	for i := range spans {
		switch spans[i].Name {
		case "approval deploy":
			wait = &spans[i]
		case "execute_tool deploy":
			tool = &spans[i]
		}
	}
	if wait == nil || tool == nil {
		t.Fatalf("spans %v", spans)
	}
	if wait.Parent.SpanID() != tool.SpanContext.SpanID() {
		t.Error("the wait is not a child of the tool call's span")
	}
	got := map[string]string{}
	for _, kv := range wait.Attributes {
		got[string(kv.Key)] = kv.Value.String()
	}
	want := map[string]string{"axocoatl.approval.id": req["approval_id"].(string), "axocoatl.approval.status": approval.StatusApproved,
		"axocoatl.approval.decision": approval.Allow, "axocoatl.approval.resolved_by": "websocket", "gen_ai.tool.name": "deploy", "axocoatl.tool.server": "ops"}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %q, want %q", k, got[k], w)
		}
	}
	if d := wait.EndTime.Sub(wait.StartTime); d < waited {
		t.Errorf("the wait's span lasted %v, the wait at least %v", d, waited)
	}
}

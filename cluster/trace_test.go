package cluster_test

import (
	"context"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
)

// spanModel answers "ok" and sends the span context of its run.
type spanModel struct{ seen chan trace.SpanContext }

func (m spanModel) Generate(ctx context.Context, _ *agent.Request) (*agent.Response, error) {
	m.seen <- trace.SpanContextFromContext(ctx)
	return &agent.Response{Content: "ok"}, nil
}

// tracedNode is newNode with an Engine that records its spans, or, when
// processors are given (a benchmark's exporter), hands them to those
// instead, so no recorder grows beside them.
func tracedNode(t testing.TB, url, name string, agents map[string]agent.Model, processors ...sdktrace.SpanProcessor) (*node, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	opts := []sdktrace.TracerProviderOption{sdktrace.WithSpanProcessor(rec)}
	if len(processors) > 0 {
		opts = opts[:0]
		for _, p := range processors {
			opts = append(opts, sdktrace.WithSpanProcessor(p))
		}
	}
	n := newNodeEngine(t, url, latticenats.Options{Prefix: "ct", Node: name}, fast, agents,
		axocoatl.Options{TracerProvider: sdktrace.NewTracerProvider(opts...)})
	return n, rec
}

func spanNamed(rec *tracetest.SpanRecorder, name string) sdktrace.ReadOnlySpan {
	for _, sp := range rec.Ended() {
		if sp.Name() == name {
			return sp
		}
	}
	return nil
}

// A run that crosses to another daemon keeps its trace id there: the
// caller's hop is a client span, the executing daemon's a server span
// whose child the run (invoke_agent) is, and the run's events there carry
// the trace (over NATS, in their headers). A task outside any trace
// crosses with no trace headers and no hop span on either side; the run
// on the executing daemon starts a trace of its own.
func TestTraceCrossesDaemons(t *testing.T) {
	ns := startNATS(t, -1)
	seen := make(chan trace.SpanContext, 2)
	a, recA := tracedNode(t, ns.ClientURL(), "node-a", map[string]agent.Model{"tracer": spanModel{seen}})
	b, recB := tracedNode(t, ns.ClientURL(), "node-b", nil)
	eventually(t, "B lists tracer", 5*time.Second, func() bool { return lists(b.e, "tracer", "node-a") })

	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: [16]byte{0x42, 1}, SpanID: [8]byte{0x17}, TraceFlags: trace.FlagsSampled, Remote: true})
	ctx, cancel := context.WithTimeout(trace.ContextWithRemoteSpanContext(context.Background(), parent), 10*time.Second)
	defer cancel()
	res, err := b.e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "tracer", Input: "x"})
	if err != nil || res.Output != "ok" {
		t.Fatalf("%+v %v", res, err)
	}
	sc := <-seen
	if sc.TraceID() != parent.TraceID() {
		t.Fatalf("the run on A has trace %s, want %s", sc.TraceID(), parent.TraceID())
	}
	call := spanNamed(recB, "cluster.exec tracer")
	if call == nil || call.SpanKind() != trace.SpanKindClient || call.Parent().SpanID() != parent.SpanID() {
		t.Fatalf("B's hop span %v", call)
	}
	ev, _ := a.nextRun(t)
	serve := spanNamed(recA, "cluster.exec tracer")
	if serve == nil || serve.SpanKind() != trace.SpanKindServer || serve.Parent().SpanID() != call.SpanContext().SpanID() || serve.SpanContext().TraceID() != parent.TraceID() {
		t.Fatalf("A's hop span %v", serve)
	}
	run, chat := spanNamed(recA, "invoke_agent tracer"), spanNamed(recA, "chat")
	if run == nil || run.Parent().SpanID() != serve.SpanContext().SpanID() {
		t.Fatalf("the run's span %v is not a child of A's hop %s", run, serve.SpanContext().SpanID())
	}
	if chat == nil || chat.Parent().SpanID() != run.SpanContext().SpanID() || sc.SpanID() != chat.SpanContext().SpanID() {
		t.Errorf("the model ran in span %s, not in its chat span %v under the run", sc.SpanID(), chat)
	}
	if want := "00-" + parent.TraceID().String() + "-" + run.SpanContext().SpanID().String() + "-01"; ev.TraceParent != want {
		t.Errorf("A's TaskCompleted carries traceparent %q, want %q", ev.TraceParent, want)
	}

	// Outside a trace: no headers, no spans.
	hdrs := make(chan natsgo.Header, 1)
	sub, err := b.bus.Conn().Subscribe("ct-cluster.exec.tracer", func(m *natsgo.Msg) {
		select {
		case hdrs <- m.Header:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := b.bus.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	nA, nB := len(recA.Ended()), len(recB.Ended())
	if _, err := b.e.Execute(context.Background(), "tracer", "y"); err != nil {
		t.Fatal(err)
	}
	if sc := <-seen; sc.TraceID() == parent.TraceID() {
		t.Errorf("a task outside a trace ran in the earlier task's trace %s", sc.TraceID())
	}
	if h := recvHeader(t, hdrs); len(h) != 0 {
		t.Errorf("a task outside a trace had headers %v", h)
	}
	if len(recB.Ended()) != nB {
		t.Errorf("a task outside a trace made %d spans on the caller", len(recB.Ended())-nB)
	}
	for _, sp := range recA.Ended()[nA:] {
		if sp.Name() == "cluster.exec tracer" || sp.Parent().IsValid() && sp.Parent().IsRemote() {
			t.Errorf("a task outside a trace: span %q on A continues a trace from elsewhere", sp.Name())
		}
	}
}

func recvHeader(t *testing.T, ch <-chan natsgo.Header) natsgo.Header {
	t.Helper()
	select {
	case h := <-ch:
		return h
	case <-time.After(10 * time.Second):
		t.Fatal("the task was not seen on NATS")
		return nil
	}
}

// BenchmarkRoundTripTracing compares, paired in one loop on the same two
// daemons (each with an always-sampling SDK provider that batches to a
// local OTLP/HTTP receiver), a remote Execute outside any trace ("off":
// no span, no header) with one inside a caller's trace ("on": a client
// span on the caller, the traceparent header, a server span on the
// executing daemon). It reports on/off of the medians.
func BenchmarkRoundTripTracing(b *testing.B) {
	ns := startNATS(b, -1)
	url := ns.ClientURL()
	recv := testutil.NewOTLPReceiver(b)
	exporter := func() sdktrace.SpanProcessor {
		exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(recv.URL+"/v1/traces"))
		if err != nil {
			b.Fatal(err)
		}
		bsp := sdktrace.NewBatchSpanProcessor(exp)
		b.Cleanup(func() { _ = bsp.Shutdown(context.Background()) })
		return bsp
	}
	a, _ := tracedNode(b, url, "node-a", map[string]agent.Model{"echo": provider.EchoModel{}}, exporter())
	c, _ := tracedNode(b, url, "node-b", nil, exporter())
	_ = a.local.Close()
	_ = c.local.Close()
	deadline := time.Now().Add(5 * time.Second)
	for !lists(c.e, "echo", "node-a") {
		if time.Now().After(deadline) {
			b.Fatal("node-b does not list echo")
		}
		time.Sleep(10 * time.Millisecond)
	}
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: [16]byte{1}, SpanID: [8]byte{2}, TraceFlags: trace.FlagsSampled, Remote: true})
	on := trace.ContextWithRemoteSpanContext(context.Background(), parent)
	off := context.Background()
	call := func(ctx context.Context) func() {
		return func() {
			if res, err := c.e.Execute(ctx, "echo", "ping"); err != nil || res.Output != "ping" {
				b.Fatal(res, err)
			}
		}
	}
	b.ReportAllocs()
	testutil.Paired(b, call(on), call(off))
}

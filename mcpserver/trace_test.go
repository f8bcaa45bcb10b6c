package mcpserver_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// traceModel answers "ok" and sends the span context its run had.
type traceModel struct{ seen chan trace.SpanContext }

func (m traceModel) Generate(ctx context.Context, _ *agent.Request) (*agent.Response, error) {
	m.seen <- trace.SpanContextFromContext(ctx)
	return &agent.Response{Content: "ok"}, nil
}

// headerTransport adds a traceparent header to every request.
type headerTransport struct{ value string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("traceparent", h.value)
	return http.DefaultTransport.RoundTrip(r)
}

// A tools/call's _meta traceparent (else its HTTP header) is the parent
// of the server span of the call, whose child the run is: both eras, in
// memory, over stdio and over HTTP. An oversize tracestate is dropped, an
// oversize traceparent starts a trace of our own.
//
// Guards: bound "a caller's traceparent or tracestate value" (512 bytes,
// docs/bounds.md): the oversize subtest.
func TestTraceContextIn(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	eng := axocoatl.New(axocoatl.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), TracerProvider: tp})
	seen := make(chan trace.SpanContext, 4)
	if err := eng.AddAgent(agent.Spec{ID: "tracer"}, traceModel{seen}); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, eng, mcpserver.Config{})
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = eng.Close(ctx)
	})
	f := &fixture{eng: eng, srv: srv}
	hs := serveHTTP(t, f)

	const (
		metaTrace   = "0af7651916cd43dd8448eb211c80319c"
		headerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	)
	meta := mcp.Meta{"traceparent": "00-" + metaTrace + "-b7ad6b7169203331-01", "tracestate": "axo=1"}
	header := "00-" + headerTrace + "-00f067aa0ba902b7-01"

	// call makes one call of agent_tracer and checks the run's trace.
	call := func(t *testing.T, cs *mcp.ClientSession, m mcp.Meta, wantTrace, wantParent string) trace.SpanContext {
		t.Helper()
		before := len(rec.Ended())
		res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "agent_tracer", Arguments: map[string]any{"input": "x"}, Meta: m})
		if err != nil || res.IsError {
			t.Fatalf("call: %+v %v", res, err)
		}
		sc := <-seen
		if sc.TraceID().String() != wantTrace {
			t.Fatalf("the run's trace %s, want %s", sc.TraceID(), wantTrace)
		}
		var span sdktrace.ReadOnlySpan
		waitUntil(t, func() bool {
			for _, sp := range rec.Ended()[before:] {
				if sp.Name() == "tools/call agent_tracer" {
					span = sp
					return true
				}
			}
			return false
		})
		if span.SpanKind() != trace.SpanKindServer || span.SpanContext().TraceID().String() != wantTrace {
			t.Errorf("span kind %v trace %s", span.SpanKind(), span.SpanContext().TraceID())
		}
		// The caller's span is the call's parent, or its grandparent
		// where the HTTP door's own span stands between them (the door's
		// span ends once the answer is written, maybe after the client
		// has it: wait for it, 10 s at most).
		var ended []sdktrace.ReadOnlySpan
		descends := func() bool {
			ended = rec.Ended()
			byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
			for _, sp := range ended {
				byID[sp.SpanContext().SpanID()] = sp
			}
			for p := span.Parent(); p.IsValid(); {
				if p.SpanID().String() == wantParent {
					return true
				}
				sp, ok := byID[p.SpanID()]
				if !ok {
					return false
				}
				p = sp.Parent()
			}
			return false
		}
		if wantParent != "" {
			for deadline := time.Now().Add(10 * time.Second); !descends(); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Errorf("span parent %s, want %s among its ancestors", span.Parent().SpanID(), wantParent)
					break
				}
			}
		} else {
			ended = rec.Ended()
		}
		// The run is the call's child and the model runs in its chat span.
		var run, chat sdktrace.ReadOnlySpan
		for _, sp := range ended[before:] {
			switch {
			case sp.Name() == "invoke_agent tracer" && sp.Parent().SpanID() == span.SpanContext().SpanID():
				run = sp
			case sp.SpanContext().SpanID() == sc.SpanID():
				chat = sp
			}
		}
		if run == nil {
			t.Fatalf("no run span invoke_agent tracer under the call's %s", span.SpanContext().SpanID())
		}
		if chat == nil || chat.Parent().SpanID() != run.SpanContext().SpanID() {
			t.Errorf("the model ran in span %s, not in a chat span under the run %s", sc.SpanID(), run.SpanContext().SpanID())
		}
		return sc
	}

	for _, era := range []struct {
		name string
		so   *mcp.ClientSessionOptions
	}{{mcpserver.ProtocolVersion2026, nil}, {"2025-11-25", legacy}} {
		t.Run(era.name, func(t *testing.T) {
			t.Run("memory", func(t *testing.T) {
				sc := call(t, connectInMemory(t, f, nil, era.so), meta, metaTrace, "b7ad6b7169203331")
				if got := sc.TraceState().String(); got != "axo=1" {
					t.Errorf("tracestate %q, want axo=1", got)
				}
			})
			t.Run("stdio", func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				tr, done := stdioPair(t, f, ctx)
				t.Cleanup(func() { cancel(); <-done })
				cs, err := testClient(nil).Connect(ctxT(t), tr, era.so)
				if err != nil {
					t.Fatal(err)
				}
				defer cs.Close()
				call(t, cs, meta, metaTrace, "b7ad6b7169203331")
			})
			t.Run("http meta", func(t *testing.T) {
				call(t, connectHTTP(t, hs.URL+"/mcp", nil, era.so), meta, metaTrace, "b7ad6b7169203331")
			})
			t.Run("http header, and _meta wins over it", func(t *testing.T) {
				tr := &mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp", MaxRetries: -1, HTTPClient: &http.Client{Transport: headerTransport{header}}}
				cs, err := testClient(nil).Connect(ctxT(t), tr, era.so)
				if err != nil {
					t.Fatal(err)
				}
				defer cs.Close()
				call(t, cs, nil, headerTrace, "00f067aa0ba902b7")
				call(t, cs, meta, metaTrace, "b7ad6b7169203331")
			})
		})
	}

	t.Run("oversize", func(t *testing.T) {
		cs := connectInMemory(t, f, nil)
		// A tracestate over 512 bytes, valid otherwise (32 members of
		// 20 bytes), is dropped; the traceparent holds.
		var state string
		for i := range 32 {
			if i > 0 {
				state += ","
			}
			state += fmt.Sprintf("k%02d=%016d", i, i)
		}
		m := mcp.Meta{"traceparent": meta["traceparent"], "tracestate": state}
		if sc := call(t, cs, m, metaTrace, "b7ad6b7169203331"); sc.TraceState().Len() != 0 {
			t.Errorf("an oversize tracestate was kept: %.40s", sc.TraceState())
		}
		// A traceparent over the bound (of a later version, which may
		// have more fields) is not read: the run has a trace of its own.
		m = mcp.Meta{"traceparent": "01-" + metaTrace + "-b7ad6b7169203331-01-" + strings.Repeat("a", 600)}
		before := len(rec.Ended())
		if _, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "agent_tracer", Arguments: map[string]any{"input": "x"}, Meta: m}); err != nil {
			t.Fatal(err)
		}
		if sc := <-seen; !sc.IsValid() || sc.TraceID().String() == metaTrace {
			t.Errorf("an oversize traceparent gave the run trace %s", sc.TraceID())
		}
		waitUntil(t, func() bool { return len(rec.Ended()) > before })
		for _, sp := range rec.Ended()[before:] {
			if sp.Name() == "tools/call agent_tracer" && sp.Parent().IsValid() {
				t.Errorf("the call's span has a parent %v", sp.Parent())
			}
		}
	})
}

// waitUntil polls cond (a span is ended just after the answer is sent).
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

package a2a_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	"go.opentelemetry.io/otel/trace"

	"github.com/axocoatl/axocoatl-go/a2a"
	"github.com/axocoatl/axocoatl-go/agent"
)

// spanModel answers "ok" and sends the span context of its run.
type spanModel struct{ seen chan trace.SpanContext }

func (m spanModel) Generate(ctx context.Context, _ *agent.Request) (*agent.Response, error) {
	m.seen <- trace.SpanContextFromContext(ctx)
	return &agent.Response{Content: "ok"}, nil
}

// traceHeader adds a traceparent header to every request.
type traceHeader struct {
	value string
	next  http.RoundTripper
}

func (h traceHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("traceparent", h.value)
	return h.next.RoundTrip(r)
}

// An A2A client's traceparent header continues in the run it starts: a
// blocking send, one that returns at once (the run outlives the request),
// and a stream; A2A 1.0 (JSON-RPC and HTTP+JSON) and 0.3.
func TestTraceContextIn(t *testing.T) {
	f := newFixture(t, a2a.Config{})
	seen := make(chan trace.SpanContext, 4)
	must(t, f.eng.AddAgent(agent.Spec{ID: "tracer", Name: "Tracer"}, spanModel{seen}))
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	f.client.Transport = traceHeader{value: "00-" + traceID + "-00f067aa0ba902b7-01", next: f.client.Transport}

	check := func(t *testing.T) {
		t.Helper()
		select {
		case sc := <-seen:
			if sc.TraceID().String() != traceID {
				t.Errorf("the run's span context %v, want trace %s", sc, traceID)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no run")
		}
	}
	for _, binding := range []a2a1.TransportProtocol{a2a1.TransportProtocolJSONRPC, a2a1.TransportProtocolHTTPJSON} {
		t.Run(string(binding), func(t *testing.T) {
			c, _, _ := f.v1Client(t, f.srv.URL+"/a2a/agents/tracer", binding)
			t.Run("blocking", func(t *testing.T) {
				v1Send(t, c, v1Message("x", nil))
				check(t)
			})
			t.Run("return immediately", func(t *testing.T) {
				req := v1Message("x", nil)
				req.Config = &a2a1.SendMessageConfig{ReturnImmediately: true}
				v1Send(t, c, req)
				check(t)
			})
			t.Run("stream", func(t *testing.T) {
				for _, err := range c.SendStreamingMessage(context.Background(), v1Message("x", nil)) {
					must(t, err)
				}
				check(t)
			})
		})
	}
	t.Run("0.3", func(t *testing.T) {
		c, _ := f.a2aClient(t, f.srv.URL+"/a2a/agents/tracer", nil)
		sendTask(t, c, userMessage("x", nil))
		check(t)
	})
}

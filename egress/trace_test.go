package egress

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	axocoatl "github.com/axocoatl/axocoatl-go"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
)

// Each delivery attempt is a client span, child of the trace of the run
// that published the event, and its POST carries that span's traceparent:
// through every backend (in memory, the bbolt store, JetStream, where the
// trace context is queued with the delivery). A first attempt answered
// 500 and a second 200 make two spans, attempts 1 and 2.
func TestDeliveryTrace(t *testing.T) {
	for _, backend := range []string{"memory", "bbolt", "jetstream"} {
		t.Run(backend, func(t *testing.T) {
			rc := newReceiver(t, "", func(_ received, n int) int {
				if n == 1 {
					return http.StatusInternalServerError
				}
				return http.StatusOK
			})
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			opts := axocoatl.Options{Logger: slog.New(slog.DiscardHandler), TracerProvider: tp}
			cfg := Config{Webhooks: []Webhook{fast(Webhook{Name: "hook", URL: rc.url(), Events: []string{"Traced"}})}}
			switch backend {
			case "bbolt":
				cfg.DataDir = t.TempDir()
			case "jetstream":
				ns := jsServer(t)
				bus, err := latticenats.Connect("", latticenats.Options{Node: "n1"}, natsgo.InProcessServer(ns), natsgo.Name("n1"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = bus.Close() })
				opts.Bus = bus
				cfg.JetStream = &JetStream{Conn: bus.Conn(), Prefix: bus.Prefix(), AckWait: 2 * time.Second}
			}
			eng := axocoatl.New(opts)
			startOn(t, eng, cfg)

			parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: [16]byte{0xab, 1}, SpanID: [8]byte{0xcd}, TraceFlags: trace.FlagsSampled, Remote: true})
			if err := eng.Publish(trace.ContextWithRemoteSpanContext(context.Background(), parent), "Traced", "test", map[string]int{"n": 1}); err != nil {
				t.Fatal(err)
			}
			// An event outside any trace: its delivery's span is a root,
			// and the receiver gets that span's traceparent.
			if err := eng.Publish(context.Background(), "Traced", "test", map[string]int{"n": 2}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, "four attempts", func() bool { return rc.count() == 4 && len(rec.Ended()) == 4 })

			spans := map[string]sdktrace.ReadOnlySpan{} // by span id
			for _, sp := range rec.Ended() {
				spans[sp.SpanContext().SpanID().String()] = sp
			}
			seenAttempt := map[string]bool{}
			for _, r := range rc.requests() {
				tp := r.header.Get("traceparent")
				var n struct{ N int }
				_ = json.Unmarshal(r.msg.Payload, &n)
				if len(tp) != 55 {
					t.Fatalf("event %d: traceparent %q", n.N, tp)
				}
				sp := spans[tp[36:52]]
				if sp == nil {
					t.Fatalf("event %d: traceparent %s names no span of ours", n.N, tp)
				}
				if sp.Name() != "POST hook" || sp.SpanKind() != trace.SpanKindClient {
					t.Errorf("span %q kind %v", sp.Name(), sp.SpanKind())
				}
				attrs := map[string]string{}
				for _, kv := range sp.Attributes() {
					attrs[string(kv.Key)] = kv.Value.String()
				}
				switch n.N {
				case 1:
					if sp.SpanContext().TraceID() != parent.TraceID() || sp.Parent().SpanID() != parent.SpanID() {
						t.Errorf("event 1's attempt: trace %s parent %s, want %s %s", sp.SpanContext().TraceID(), sp.Parent().SpanID(), parent.TraceID(), parent.SpanID())
					}
				case 2:
					if sp.Parent().IsValid() || sp.SpanContext().TraceID() == parent.TraceID() {
						t.Errorf("event 2's attempt has parent %v", sp.Parent())
					}
				}
				want := map[int]string{http.StatusInternalServerError: "1", http.StatusOK: "2"}[r.code]
				if attrs["axocoatl.webhook.attempt"] != want || attrs["axocoatl.webhook.name"] != "hook" || attrs["http.response.status_code"] != strconv.Itoa(r.code) {
					t.Errorf("event %d, answer %d: attributes %v", n.N, r.code, attrs)
				}
				seenAttempt[attrs["axocoatl.webhook.attempt"]+"/"+string(rune('0'+n.N))] = true
			}
			if len(seenAttempt) != 4 {
				t.Errorf("attempts seen %v", seenAttempt)
			}
		})
	}
}

// A stored delivery keeps its trace context (a bbolt record written by a
// version that kept none has none).
func TestRecordKeepsTrace(t *testing.T) {
	d := &delivery{id: "d1", traceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", traceState: "a=1"}
	raw, err := json.Marshal(d.record())
	if err != nil {
		t.Fatal(err)
	}
	var r record
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	if got := r.delivery(1); got.traceParent != d.traceParent || got.traceState != "a=1" {
		t.Fatalf("after a store round trip: %q %q", got.traceParent, got.traceState)
	}
	var old record
	if err := json.Unmarshal([]byte(`{"id":"old","body":"e30="}`), &old); err != nil || old.delivery(1).traceParent != "" {
		t.Fatalf("an old record: %v %+v", err, old)
	}
}

// A delivery queued in the store keeps its trace across a restart: the
// attempts after it are in the trace of the run whose event it was.
func TestRestartKeepsTrace(t *testing.T) {
	dir := t.TempDir()
	var down atomic.Bool
	down.Store(true)
	rc := newReceiver(t, "", func(_ received, _ int) int {
		if down.Load() {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	cfg := Config{DataDir: dir, Webhooks: []Webhook{{Name: "w", URL: rc.url(), MaxAttempts: 1000,
		BackoffBase: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond}}}
	h := start(t, cfg)
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: [16]byte{0x77}, SpanID: [8]byte{0x66}, TraceFlags: trace.FlagsSampled, Remote: true})
	if err := h.eng.Publish(trace.ContextWithRemoteSpanContext(context.Background(), parent), "Deployed", "test", nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "an attempt recorded", func() bool {
		var ds struct{ Deliveries []Delivery }
		h.api(t, "GET", "/api/webhooks/w/deliveries?limit=10", &ds)
		return len(ds.Deliveries) == 1 && len(ds.Deliveries[0].Attempts) > 0
	})
	h.close(t)
	n := rc.count()

	down.Store(false)
	h2 := start(t, cfg)
	waitFor(t, 10*time.Second, "delivered after the restart", func() bool { return h2.status(t, "w").Delivered == 1 })
	reqs := rc.requests()
	if len(reqs) <= n {
		t.Fatal("nothing sent after the restart")
	}
	for _, r := range reqs[n:] {
		if tp := r.header.Get("traceparent"); len(tp) != 55 || tp[3:35] != parent.TraceID().String() {
			t.Errorf("after the restart: traceparent %q, want trace %s", tp, parent.TraceID())
		}
	}
}

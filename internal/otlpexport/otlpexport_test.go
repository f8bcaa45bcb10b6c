package otlpexport_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/axocoatl/axocoatl-go/internal/otlpexport"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// record makes the same spans through exp: a remote parent, kinds,
// every attribute type, an event, a link, an error status.
func record(t *testing.T, exp sdktrace.SpanExporter) {
	t.Helper()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "svc"))))
	tr := tp.Tracer("scope", trace.WithInstrumentationVersion("1.2"))
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	ctx, door := tr.Start(trace.ContextWithRemoteSpanContext(context.Background(), remote), "POST /x", trace.WithSpanKind(trace.SpanKindServer))
	_, run := tr.Start(ctx, "invoke_agent a", trace.WithLinks(trace.Link{SpanContext: remote, Attributes: []attribute.KeyValue{attribute.String("l", "v")}}))
	run.SetAttributes(attribute.String("s", "v"), attribute.Int("i", 7), attribute.Float64("f", 1.5), attribute.Bool("b", true),
		attribute.StringSlice("ss", []string{"stop"}), attribute.Int64Slice("is", []int64{1, 2}),
		attribute.Int("zero", 0), attribute.String("empty", ""), attribute.Bool("no", false),
		attribute.BoolSlice("bs", []bool{true, false}), attribute.Float64Slice("fs", []float64{0.5}), attribute.ByteSlice("by", []byte{0, 1}),
		attribute.Slice("sl", attribute.IntValue(1), attribute.StringValue("x")), attribute.Map("m", attribute.String("a", "b"), attribute.Int("n", 3)))
	run.AddEvent("e", trace.WithAttributes(attribute.String("k", "v")))
	run.SetStatus(codes.Error, "it failed")
	run.End()
	door.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// What this exporter sends decodes, field by field, to what
// otlptracehttp sends for the same spans (ids and times aside).
func TestSameAsOTLPTraceHTTP(t *testing.T) {
	ours, theirs := testutil.NewOTLPReceiver(t), testutil.NewOTLPReceiver(t)
	record(t, otlpexport.New(otlpexport.Options{URL: ours.URL + "/v1/traces", Compression: "gzip"}))
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(theirs.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	record(t, exp)
	a, b := ours.Spans(), theirs.Spans()
	if len(a) != 2 || len(b) != 2 {
		t.Fatalf("spans: %d and %d", len(a), len(b))
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.ParentID == "" || x.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("span %q: trace %s parent %q", x.Name, x.TraceID, x.ParentID)
		}
		x.SpanID, y.SpanID, x.Start, y.Start, x.End, y.End = "", "", time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if i == 0 { // the run: its parent is the door, whose id differs
			x.ParentID, y.ParentID = "", ""
		}
		if !reflect.DeepEqual(x, y) {
			t.Errorf("span %d\nours   %+v\ntheirs %+v", i, x, y)
		}
	}
	// And the whole messages, every field (events, links, flags, dropped
	// counts, scope, resource), ids of our own spans and times aside.
	ma, mb := ours.Messages(), theirs.Messages()
	if len(ma) != 1 || len(mb) != 1 {
		t.Fatalf("requests: %d and %d", len(ma), len(mb))
	}
	for _, m := range []*collectortrace.ExportTraceServiceRequest{ma[0], mb[0]} {
		for _, rs := range m.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					sp.SpanId, sp.StartTimeUnixNano, sp.EndTimeUnixNano = nil, 0, 0
					if sp.Name == "invoke_agent a" {
						sp.ParentSpanId = nil
					}
					for _, ev := range sp.Events {
						ev.TimeUnixNano = 0
					}
				}
			}
		}
	}
	if !proto.Equal(ma[0], mb[0]) {
		t.Errorf("the requests differ\nours   %v\ntheirs %v", prototext.Format(ma[0]), prototext.Format(mb[0]))
	}
}

// A collector that is overloaded (503) is retried; one that refuses the
// request (400) is not; headers go with every request. Guards: the
// retries of one failed export (30 s, RetryElapsed): a collector that
// stays down is given up on within the bound.
func TestRetriesAndHeaders(t *testing.T) {
	var calls atomic.Int32
	recv := testutil.NewOTLPReceiver(t)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if r.Header.Get("Api-Key") != "k" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "headers", http.StatusUnauthorized)
			return
		}
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, recv.URL+r.URL.Path, r.Body)
		req.Header = r.Header.Clone()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		res.Body.Close()
		w.WriteHeader(res.StatusCode)
	}))
	defer front.Close()
	record(t, otlpexport.New(otlpexport.Options{URL: front.URL + "/v1/traces", Headers: map[string]string{"Api-Key": "k"}}))
	if calls.Load() != 2 || len(recv.Spans()) != 2 {
		t.Fatalf("%d requests, %d spans received", calls.Load(), len(recv.Spans()))
	}

	calls.Store(0)
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "bad\nline", http.StatusBadRequest)
	}))
	defer refuse.Close()
	exp := otlpexport.New(otlpexport.Options{URL: refuse.URL})
	err := exp.ExportSpans(context.Background(), spansOf(t))
	if err == nil || calls.Load() != 1 || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "400") {
		t.Fatalf("a refused export: %v after %d requests", err, calls.Load())
	}
	// A collector that stays down is given up on within RetryElapsed.
	calls.Store(0)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "down", http.StatusBadGateway)
	}))
	defer down.Close()
	start := time.Now()
	err = otlpexport.New(otlpexport.Options{URL: down.URL, RetryElapsed: 1500 * time.Millisecond}).ExportSpans(context.Background(), spansOf(t))
	if err == nil || time.Since(start) > 10*time.Second || calls.Load() < 1 {
		t.Fatalf("a collector down: %v after %v and %d requests", err, time.Since(start), calls.Load())
	}
	if err := exp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := exp.ExportSpans(context.Background(), spansOf(t)); !errors.Is(err, otlpexport.ErrShutdown) {
		t.Fatalf("after Shutdown: %v", err)
	}
}

func spansOf(t *testing.T) []sdktrace.ReadOnlySpan {
	t.Helper()
	var got []sdktrace.ReadOnlySpan
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(collect{&got}))
	_, s := tp.Tracer("t").Start(context.Background(), "s")
	s.End()
	return got
}

type collect struct{ spans *[]sdktrace.ReadOnlySpan }

func (c collect) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c collect) OnEnd(s sdktrace.ReadOnlySpan)                   { *c.spans = append(*c.spans, s) }
func (c collect) Shutdown(context.Context) error                  { return nil }
func (c collect) ForceFlush(context.Context) error                { return nil }

// Guards: telemetry.timeout (one export request): a collector that never
// answers fails the request at the timeout, and with retries off the
// export ends there.
func TestRequestTimeout(t *testing.T) {
	stop := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-stop }))
	defer hang.Close()
	defer close(stop)
	start := time.Now()
	err := otlpexport.New(otlpexport.Options{URL: hang.URL, Timeout: 200 * time.Millisecond, RetryElapsed: -1}).ExportSpans(context.Background(), spansOf(t))
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("a collector that never answers: %v after %v", err, time.Since(start))
	}
}

// A span with bytes that are not UTF-8 (a peer's text in an attribute, a
// name, a status) is exported with them replaced: proto3 would refuse the
// whole batch.
func TestInvalidUTF8Exported(t *testing.T) {
	recv := testutil.NewOTLPReceiver(t)
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(otlpexport.New(otlpexport.Options{URL: recv.URL + "/v1/traces"})))
	_, s := tp.Tracer("t").Start(context.Background(), "bad \xff name")
	s.SetAttributes(attribute.String("k", "v\xc3"), attribute.StringSlice("ss", []string{"\xfe"}))
	s.SetStatus(codes.Error, "oops \xff")
	s.End()
	_, ok := tp.Tracer("t").Start(context.Background(), "fine")
	ok.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := recv.Spans()
	if len(spans) != 2 || spans[0].Name != "bad \uFFFD name" || spans[0].Attrs["k"] != "v\uFFFD" {
		t.Fatalf("spans %+v", spans)
	}
}

// The compressor and the encoding buffer are kept from one export to the
// next: a large batch, then a small one, then a large one again each
// arrive whole and alone (nothing of an earlier body left in a later one),
// compressed or not.
func TestExportsReuseTheirBuffers(t *testing.T) {
	var spans []sdktrace.ReadOnlySpan
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(collect{&spans}))
	for i := range 300 {
		_, s := tp.Tracer("t").Start(context.Background(), "s", trace.WithAttributes(attribute.Int("i", i), attribute.String("k", strings.Repeat("v", i))))
		s.End()
	}
	for _, compression := range []string{"gzip", "none"} {
		recv := testutil.NewOTLPReceiver(t)
		exp := otlpexport.New(otlpexport.Options{URL: recv.URL + "/v1/traces", Compression: compression})
		for _, batch := range [][]sdktrace.ReadOnlySpan{spans, spans[:1], spans} {
			if err := exp.ExportSpans(context.Background(), batch); err != nil {
				t.Fatal(err)
			}
		}
		if n, want := recv.GzippedRequests(), map[string]int{"gzip": 3, "none": 0}[compression]; n != want {
			t.Fatalf("%s: %d of 3 requests gzipped, want %d", compression, n, want)
		}
		got := recv.Spans()
		if len(got) != 601 {
			t.Fatalf("%s: %d spans received, want 601", compression, len(got))
		}
		for i, sp := range got {
			n := int64(i % 300) // the first batch, and the second: span 0
			if i > 300 {
				n = int64(i - 301)
			}
			if sp.Attrs["i"] != n || sp.Attrs["k"] != strings.Repeat("v", int(n)) {
				t.Fatalf("%s: span %d: attributes %v, want i=%d", compression, i, sp.Attrs, n)
			}
		}
	}
}

// Bodies are gzipped unless the collector is on this host or the options
// say otherwise.
func TestCompressionDefault(t *testing.T) {
	for url, want := range map[string]bool{
		"http://otel-collector:4318/v1/traces": true,
		"https://10.1.2.3/v1/traces":           true,
		"http://127.0.0.1:4318/v1/traces":      false,
		"http://[::1]:4318/v1/traces":          false,
		"http://localhost:4318/v1/traces":      false,
		"http://localhost.example/v1/traces":   true,
	} {
		if got := otlpexport.Gzipped(otlpexport.Options{URL: url}); got != want {
			t.Errorf("%s: gzip %v, want %v", url, got, want)
		}
	}
	if !otlpexport.Gzipped(otlpexport.Options{URL: "http://127.0.0.1/", Compression: "gzip"}) ||
		otlpexport.Gzipped(otlpexport.Options{URL: "http://collector/", Compression: "none"}) {
		t.Error("Compression is not what decides")
	}
	recv := testutil.NewOTLPReceiver(t) // on 127.0.0.1
	if err := otlpexport.New(otlpexport.Options{URL: recv.URL + "/v1/traces"}).ExportSpans(context.Background(), spansOf(t)); err != nil {
		t.Fatal(err)
	}
	if recv.Requests() != 1 || recv.GzippedRequests() != 0 || len(recv.Spans()) != 1 {
		t.Fatalf("to a loopback collector: %d requests, %d gzipped, %d spans", recv.Requests(), recv.GzippedRequests(), len(recv.Spans()))
	}
}

// BenchmarkExportBatch exports a batch of 512 spans shaped like a tool
// call's (8 attributes) to a local OTLP receiver, gzipped and not: the
// exporter's and the receiver's work per batch; "none-discard" posts to
// a server that reads and drops the body (the exporter's work alone).
func BenchmarkExportBatch(b *testing.B) {
	var spans []sdktrace.ReadOnlySpan
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(collect{&spans}))
	pctx, _ := tp.Tracer("t").Start(context.Background(), "p")
	for i := range 512 {
		_, s := tp.Tracer("github.com/axocoatl/axocoatl-go").Start(pctx, "execute_tool mcp__mem__echo", trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", "mcp__mem__echo"),
			attribute.String("gen_ai.tool.type", "function"), attribute.String("gen_ai.agent.id", "bench"),
			attribute.String("axocoatl.tool.server", "mem"), attribute.String("mcp.method.name", "tools/call"),
			attribute.Int("i", i), attribute.String("network.transport", "pipe")))
		s.End()
	}
	b.Run("none-discard", func(b *testing.B) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
		defer srv.Close()
		exp := otlpexport.New(otlpexport.Options{URL: srv.URL + "/v1/traces", Compression: "none"})
		b.ReportAllocs()
		for b.Loop() {
			if err := exp.ExportSpans(context.Background(), spans); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, c := range []string{"gzip", "none"} {
		b.Run(c, func(b *testing.B) {
			recv := testutil.NewOTLPReceiver(b)
			exp := otlpexport.New(otlpexport.Options{URL: recv.URL + "/v1/traces", Compression: c})
			b.ReportAllocs()
			for b.Loop() {
				if err := exp.ExportSpans(context.Background(), spans); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The encoding buffer kept from one batch to the next is bounded: a batch
// that needs more (long content attributes) gets a buffer of its own,
// which is not kept; a batch within the bound has its buffer kept.
//
// Guards: bound "the encoding buffer the exporter keeps between batches"
// (4 MiB, docs/bounds.md).
func TestKeptBufferBounded(t *testing.T) {
	recv := testutil.NewOTLPReceiver(t)
	exp := otlpexport.New(otlpexport.Options{URL: recv.URL + "/v1/traces"})
	var spans []sdktrace.ReadOnlySpan
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(collect{&spans}))
	long := strings.Repeat("x", 16<<10)
	for range 300 { // 300 × 16 KiB: over 4 MiB
		_, s := tp.Tracer("t").Start(context.Background(), "s", trace.WithAttributes(attribute.String("gen_ai.tool.call.result", long)))
		s.End()
	}
	if err := exp.ExportSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	if n := otlpexport.KeptBuffer(exp); n > otlpexport.MaxKeptBuffer {
		t.Fatalf("kept a buffer of %d bytes, the bound is %d", n, otlpexport.MaxKeptBuffer)
	}
	if err := exp.ExportSpans(context.Background(), spans[:1]); err != nil {
		t.Fatal(err)
	}
	if n := otlpexport.KeptBuffer(exp); n == 0 || n > otlpexport.MaxKeptBuffer {
		t.Fatalf("after a small batch the kept buffer is %d bytes, want some, at most %d", n, otlpexport.MaxKeptBuffer)
	}
	if got := len(recv.Spans()); got != 301 {
		t.Fatalf("%d spans received, want 301", got)
	}
}

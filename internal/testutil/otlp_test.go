package testutil

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The receiver decodes what the real OTLP/HTTP exporter sends, gzip included.
func TestOTLPReceiverDecodesTheExporter(t *testing.T) {
	r := NewOTLPReceiver(t)
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(r.URL+"/v1/traces"),
		otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	ctx, parent := tp.Tracer("t").Start(context.Background(), "parent")
	_, child := tp.Tracer("t").Start(ctx, "child")
	child.End()
	parent.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := r.WaitFor(t, 10*time.Second, func(s []OTLPSpan) bool { return len(s) == 2 })
	if spans[0].Name != "child" || spans[1].Name != "parent" || spans[0].ParentID != spans[1].SpanID ||
		spans[0].TraceID != spans[1].TraceID || spans[1].ParentID != "" {
		t.Fatalf("spans: %+v", spans)
	}
}

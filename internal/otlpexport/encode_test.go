package otlpexport_test

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/axocoatl/axocoatl-go/internal/otlpexport"
)

// Marshal's bytes are the generated code's for the same spans, and decode
// with it, field by field (proto.Equal), to the message the generated types
// are filled with: every field Marshal writes, each attribute type, the
// zero values proto3 leaves out and the oneof values it keeps, text that is
// not UTF-8, several resources and scopes interleaved.
func TestMarshalAsGenerated(t *testing.T) {
	spans := stubSpans()
	for name, batch := range map[string][]sdktrace.ReadOnlySpan{"all": spans, "one": spans[:1], "none": nil} {
		want := &tracepb.TracesData{ResourceSpans: generated(batch)}
		wantBytes, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got := otlpexport.Marshal(batch)
		var decoded tracepb.TracesData
		if err := proto.Unmarshal(got, &decoded); err != nil {
			t.Fatalf("%s: the generated code cannot decode Marshal's bytes: %v", name, err)
		}
		if !proto.Equal(&decoded, want) {
			t.Errorf("%s: decoded\n%s\nwant\n%s", name, prototext.Format(&decoded), prototext.Format(want))
		}
		if !bytes.Equal(got, wantBytes) {
			t.Errorf("%s: %d bytes differ from the generated code's %d", name, len(got), len(wantBytes))
		}
	}
	if n := len(generated(spans)); n != 3 {
		t.Fatalf("the stubs make %d resource groups, want 3", n)
	}
}

// stubSpans are spans with every field set somewhere, from three resources
// (one nil) and several scopes, interleaved.
func stubSpans() []sdktrace.ReadOnlySpan {
	bad := "bad\xffbyte"
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	ts, _ := trace.ParseTraceState("vendor=v1,other=x")
	sc := func(span byte, remote bool, state trace.TraceState) trace.SpanContext {
		return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{7, span}, TraceFlags: trace.FlagsSampled, TraceState: state, Remote: remote})
	}
	resA := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.40.0", attribute.String("service.name", "svc"), attribute.Int("n", 1))
	resB := resource.NewSchemaless(attribute.String("service.name", bad))
	scope1 := instrumentation.Scope{Name: "axocoatl", Version: "1.2", SchemaURL: "https://s/1", Attributes: attribute.NewSet(attribute.Bool("x", true))}
	scope2 := instrumentation.Scope{Name: bad}
	start := time.Unix(1_700_000_000, 123)
	every := []attribute.KeyValue{
		attribute.String("s", "v"), attribute.String("empty", ""), attribute.String(bad, bad),
		attribute.Bool("t", true), attribute.Bool("f", false),
		attribute.Int64("i", -7), attribute.Int64("zero", 0), attribute.Int64("max", math.MaxInt64),
		attribute.Float64("fl", 1.5), attribute.Float64("fzero", 0), attribute.Float64("nan", math.Inf(-1)),
		attribute.ByteSlice("by", []byte{0, 1, 2}), attribute.ByteSlice("noby", nil),
		attribute.BoolSlice("bs", []bool{true, false}), attribute.Int64Slice("is", []int64{0, -1, 1 << 40}),
		attribute.Float64Slice("fs", []float64{0, .25}), attribute.StringSlice("ss", []string{"", "a", bad}),
		attribute.StringSlice("noss", nil),
		attribute.Slice("sl", attribute.StringValue("x"), attribute.IntValue(3), attribute.MapValue(attribute.Bool("in", false))),
		attribute.Map("m", attribute.String("k", "v"), attribute.Slice("deep", attribute.Float64Value(2))), attribute.Map("nom"),
		{Key: "unset"}, // attribute.EMPTY
	}
	stubs := tracetest.SpanStubs{
		{
			Name: "invoke_agent a", SpanContext: sc(1, false, ts), Parent: sc(9, true, trace.TraceState{}), SpanKind: trace.SpanKindServer,
			StartTime: start, EndTime: start.Add(time.Second), Attributes: every, Resource: resA, InstrumentationScope: scope1,
			Events: []sdktrace.Event{
				{Name: "e", Time: start.Add(time.Millisecond), Attributes: []attribute.KeyValue{attribute.String("k", "v")}, DroppedAttributeCount: 2},
				{Name: bad}, // no time, no attributes
			},
			Links: []sdktrace.Link{
				{SpanContext: sc(3, true, ts), Attributes: []attribute.KeyValue{attribute.String("l", "v")}, DroppedAttributeCount: 1},
				{SpanContext: sc(4, false, trace.TraceState{})},
			},
			Status: sdktrace.Status{Code: codes.Error, Description: "it failed " + bad}, DroppedAttributes: 3, DroppedEvents: 4, DroppedLinks: 5,
		},
		{Name: "chat m", SpanContext: sc(2, false, trace.TraceState{}), Parent: sc(1, false, ts), SpanKind: trace.SpanKindClient,
			StartTime: start, EndTime: start, Resource: resB, InstrumentationScope: scope1, Status: sdktrace.Status{Code: codes.Ok}},
		{Name: "", SpanContext: sc(5, false, trace.TraceState{}), SpanKind: trace.SpanKind(42), Resource: resA, InstrumentationScope: scope2,
			Status: sdktrace.Status{Code: codes.Unset, Description: "ignored"}},
		{Name: "root", SpanContext: sc(6, false, trace.TraceState{}), SpanKind: trace.SpanKindConsumer, StartTime: time.Unix(0, 0).Add(-time.Hour),
			Resource: resA, InstrumentationScope: scope1},
		{Name: "no resource", SpanContext: sc(8, false, trace.TraceState{}), SpanKind: trace.SpanKindProducer, InstrumentationScope: scope2},
		{Name: "internal", SpanContext: sc(10, false, trace.TraceState{}), SpanKind: trace.SpanKindInternal, Resource: resB, InstrumentationScope: scope2},
	}
	return stubs.Snapshots()
}

// generated is what the exporter built before it encoded by hand: the
// generated message types of go.opentelemetry.io/proto/otlp, filled from
// the spans. It is the reference Marshal is checked against.
func generated(spans []sdktrace.ReadOnlySpan) []*tracepb.ResourceSpans {
	type scopeKey struct {
		res   attribute.Distinct
		name  string
		ver   string
		url   string
		attrs attribute.Distinct
	}
	var out []*tracepb.ResourceSpans
	byRes := map[attribute.Distinct]*tracepb.ResourceSpans{}
	byScope := map[scopeKey]*tracepb.ScopeSpans{}
	for _, s := range spans {
		res := s.Resource()
		rkey := res.Equivalent()
		rs, ok := byRes[rkey]
		if !ok {
			rs = &tracepb.ResourceSpans{Resource: &resourcepb.Resource{Attributes: keyValues(res.Attributes())}, SchemaUrl: valid(res.SchemaURL())}
			byRes[rkey] = rs
			out = append(out, rs)
		}
		sc := s.InstrumentationScope()
		skey := scopeKey{rkey, sc.Name, sc.Version, sc.SchemaURL, sc.Attributes.Equivalent()}
		ss, ok := byScope[skey]
		if !ok {
			ss = &tracepb.ScopeSpans{Scope: &commonpb.InstrumentationScope{Name: valid(sc.Name), Version: valid(sc.Version), Attributes: keyValues(sc.Attributes.ToSlice())}, SchemaUrl: valid(sc.SchemaURL)}
			byScope[skey] = ss
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		ss.Spans = append(ss.Spans, span(s))
	}
	return out
}

func flags(sc trace.SpanContext, remote bool) uint32 {
	f := uint32(sc.TraceFlags()) | 0x100
	if remote {
		f |= 0x200
	}
	return f
}

func span(s sdktrace.ReadOnlySpan) *tracepb.Span {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	p := &tracepb.Span{
		TraceId:                tid[:],
		SpanId:                 sid[:],
		TraceState:             valid(sc.TraceState().String()),
		Name:                   valid(s.Name()),
		Kind:                   tracepb.Span_SpanKind(s.SpanKind()),
		StartTimeUnixNano:      uint64(max(s.StartTime().UnixNano(), 0)),
		EndTimeUnixNano:        uint64(max(s.EndTime().UnixNano(), 0)),
		Attributes:             keyValues(s.Attributes()),
		DroppedAttributesCount: uint32(max(s.DroppedAttributes(), 0)),
		DroppedEventsCount:     uint32(max(s.DroppedEvents(), 0)),
		DroppedLinksCount:      uint32(max(s.DroppedLinks(), 0)),
		Status:                 &tracepb.Status{},
	}
	if s.SpanKind() > trace.SpanKindConsumer || s.SpanKind() < 0 {
		p.Kind = tracepb.Span_SPAN_KIND_UNSPECIFIED
	}
	switch st := s.Status(); st.Code {
	case codes.Error:
		p.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: valid(st.Description)}
	case codes.Ok:
		p.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK}
	}
	parent := s.Parent()
	p.Flags = flags(sc, parent.IsRemote())
	if parent.SpanID().IsValid() {
		psid := parent.SpanID()
		p.ParentSpanId = psid[:]
	}
	for _, ev := range s.Events() {
		p.Events = append(p.Events, &tracepb.Span_Event{
			TimeUnixNano: uint64(max(ev.Time.UnixNano(), 0)), Name: valid(ev.Name),
			Attributes: keyValues(ev.Attributes), DroppedAttributesCount: uint32(max(ev.DroppedAttributeCount, 0)),
		})
	}
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		p.Links = append(p.Links, &tracepb.Span_Link{
			TraceId: ltid[:], SpanId: lsid[:], TraceState: valid(l.SpanContext.TraceState().String()),
			Attributes: keyValues(l.Attributes), DroppedAttributesCount: uint32(max(l.DroppedAttributeCount, 0)),
			Flags: flags(l.SpanContext, l.SpanContext.IsRemote()),
		})
	}
	return p
}

func valid(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func keyValues(kvs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, &commonpb.KeyValue{Key: valid(string(kv.Key)), Value: anyValue(kv.Value)})
	}
	return out
}

func anyValue(v attribute.Value) *commonpb.AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}}
	case attribute.INT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}}
	case attribute.FLOAT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}}
	case attribute.STRING:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: valid(v.AsString())}}
	case attribute.BYTESLICE:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: v.AsByteSlice()}}
	case attribute.BOOLSLICE:
		return array(v.AsBoolSlice(), func(b bool) *commonpb.AnyValue { return anyValue(attribute.BoolValue(b)) })
	case attribute.INT64SLICE:
		return array(v.AsInt64Slice(), func(i int64) *commonpb.AnyValue { return anyValue(attribute.Int64Value(i)) })
	case attribute.FLOAT64SLICE:
		return array(v.AsFloat64Slice(), func(f float64) *commonpb.AnyValue { return anyValue(attribute.Float64Value(f)) })
	case attribute.STRINGSLICE:
		return array(v.AsStringSlice(), func(s string) *commonpb.AnyValue { return anyValue(attribute.StringValue(s)) })
	case attribute.SLICE:
		return array(v.AsSlice(), anyValue)
	case attribute.MAP:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: keyValues(v.AsMap())}}}
	case attribute.EMPTY:
		return &commonpb.AnyValue{}
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: valid(v.String())}}
}

func array[T any](xs []T, conv func(T) *commonpb.AnyValue) *commonpb.AnyValue {
	vals := make([]*commonpb.AnyValue, len(xs))
	for i, x := range xs {
		vals[i] = conv(x)
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vals}}}
}

// What encoding a batch costs, by hand and through the generated types
// (what the exporter did before).
func BenchmarkMarshal(b *testing.B) {
	var spans []sdktrace.ReadOnlySpan
	for range 100 {
		spans = append(spans, stubSpans()...)
	}
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			otlpexport.Marshal(spans)
		}
	})
	b.Run("generated", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := proto.Marshal(&tracepb.TracesData{ResourceSpans: generated(spans)}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

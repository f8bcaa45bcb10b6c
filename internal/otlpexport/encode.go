package otlpexport

import (
	"encoding/binary"
	"math"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Marshal is spans as an OTLP TracesData (the body of an
// ExportTraceServiceRequest) in protobuf: grouped by resource and
// instrumentation scope as OTLP carries them, each message's fields in
// field-number order and proto3's defaults left out, as the generated code
// of go.opentelemetry.io/proto/otlp writes them. TestMarshalAsGenerated
// checks the bytes against that code's for every field written here.
//
// The field numbers are those of opentelemetry/proto/trace/v1/trace.proto,
// common/v1/common.proto and resource/v1/resource.proto.
func Marshal(spans []sdktrace.ReadOnlySpan) []byte {
	type scopeKey struct {
		res   attribute.Distinct
		name  string
		ver   string
		url   string
		attrs attribute.Distinct
	}
	type scopeGroup struct {
		scope instrumentation.Scope
		spans []sdktrace.ReadOnlySpan
	}
	type resGroup struct {
		res    *resource.Resource
		scopes []*scopeGroup
	}
	var groups []*resGroup
	byRes := map[attribute.Distinct]*resGroup{}
	byScope := map[scopeKey]*scopeGroup{}
	for _, s := range spans {
		res := s.Resource()
		rkey := res.Equivalent()
		rg, ok := byRes[rkey]
		if !ok {
			rg = &resGroup{res: res}
			byRes[rkey] = rg
			groups = append(groups, rg)
		}
		sc := s.InstrumentationScope()
		skey := scopeKey{rkey, sc.Name, sc.Version, sc.SchemaURL, sc.Attributes.Equivalent()}
		sg, ok := byScope[skey]
		if !ok {
			sg = &scopeGroup{scope: sc}
			byScope[skey] = sg
			rg.scopes = append(rg.scopes, sg)
		}
		sg.spans = append(sg.spans, s)
	}

	var e encoder
	for _, rg := range groups {
		rs := e.begin(1) // TracesData.resource_spans
		r := e.begin(1)  // ResourceSpans.resource
		e.keyValues(1, rg.res.Attributes())
		e.end(r)
		for _, sg := range rg.scopes {
			ss := e.begin(2) // ResourceSpans.scope_spans
			sc := e.begin(1) // ScopeSpans.scope
			e.text(1, sg.scope.Name)
			e.text(2, sg.scope.Version)
			e.keyValues(3, sg.scope.Attributes.ToSlice())
			e.end(sc)
			for _, s := range sg.spans {
				e.span(s)
			}
			e.text(3, sg.scope.SchemaURL)
			e.end(ss)
		}
		e.text(3, rg.res.SchemaURL())
		e.end(rs)
	}
	return e.b
}

// The flags bits of OTLP: the W3C trace flags, and whether the parent
// (or a link's span) is remote.
const (
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

func flags(sc trace.SpanContext, remote bool) uint32 {
	f := uint32(sc.TraceFlags()) | flagHasIsRemote
	if remote {
		f |= flagIsRemote
	}
	return f
}

// OTLP's Status.code.
const (
	statusOK    = 1
	statusError = 2
)

// span writes ScopeSpans.spans (2): a Span.
func (e *encoder) span(s sdktrace.ReadOnlySpan) {
	at := e.begin(2)
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	e.bytes(1, tid[:])
	e.bytes(2, sid[:])
	e.text(3, sc.TraceState().String())
	parent := s.Parent()
	if psid := parent.SpanID(); psid.IsValid() {
		e.bytes(4, psid[:])
	}
	e.text(5, s.Name())
	// OTLP's SpanKind numbers otel's kinds alike; one it does not know
	// is unspecified (0, left out).
	if k := s.SpanKind(); k > 0 && k <= trace.SpanKindConsumer {
		e.uint(6, uint64(k))
	}
	e.fixed64(7, uint64(max(s.StartTime().UnixNano(), 0)))
	e.fixed64(8, uint64(max(s.EndTime().UnixNano(), 0)))
	e.keyValues(9, s.Attributes())
	e.uint(10, uint64(max(s.DroppedAttributes(), 0)))
	for _, ev := range s.Events() {
		x := e.begin(11)
		e.fixed64(1, uint64(max(ev.Time.UnixNano(), 0)))
		e.text(2, ev.Name)
		e.keyValues(3, ev.Attributes)
		e.uint(4, uint64(max(ev.DroppedAttributeCount, 0)))
		e.end(x)
	}
	e.uint(12, uint64(max(s.DroppedEvents(), 0)))
	for _, l := range s.Links() {
		x := e.begin(13)
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		e.bytes(1, ltid[:])
		e.bytes(2, lsid[:])
		e.text(3, l.SpanContext.TraceState().String())
		e.keyValues(4, l.Attributes)
		e.uint(5, uint64(max(l.DroppedAttributeCount, 0)))
		e.fixed32(6, flags(l.SpanContext, l.SpanContext.IsRemote()))
		e.end(x)
	}
	e.uint(14, uint64(max(s.DroppedLinks(), 0)))
	st := e.begin(15) // always present, empty when unset
	switch status := s.Status(); status.Code {
	case codes.Error:
		e.text(2, status.Description)
		e.uint(3, statusError)
	case codes.Ok:
		e.uint(3, statusOK)
	}
	e.end(st)
	e.fixed32(16, flags(sc, parent.IsRemote()))
	e.end(at)
}

// keyValues writes each of kvs as a KeyValue in field f.
func (e *encoder) keyValues(f int, kvs []attribute.KeyValue) {
	for _, kv := range kvs {
		at := e.begin(f)
		e.text(1, string(kv.Key))
		v := e.begin(2)
		e.anyValue(kv.Value)
		e.end(v)
		e.end(at)
	}
}

// anyValue writes the fields of an AnyValue: its one value, written even
// when it is the type's zero (a oneof's member is present or not).
func (e *encoder) anyValue(v attribute.Value) {
	switch v.Type() {
	case attribute.BOOL:
		b := uint64(0)
		if v.AsBool() {
			b = 1
		}
		e.tag(2, wireVarint)
		e.varint(b)
	case attribute.INT64:
		e.tag(3, wireVarint)
		e.varint(uint64(v.AsInt64()))
	case attribute.FLOAT64:
		e.tag(4, wireFixed64)
		e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		e.str(1, text(v.AsString()))
	case attribute.BYTESLICE:
		e.str(7, string(v.AsByteSlice()))
	case attribute.BOOLSLICE:
		array(e, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		array(e, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		array(e, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		array(e, v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		array(e, v.AsSlice(), func(v attribute.Value) attribute.Value { return v })
	case attribute.MAP:
		m := e.begin(6) // kvlist_value: a KeyValueList
		e.keyValues(1, v.AsMap())
		e.end(m)
	case attribute.EMPTY:
		// An AnyValue with no value.
	default:
		e.str(1, text(v.String()))
	}
}

// array writes an AnyValue's array_value (5): an ArrayValue of xs.
func array[T any](e *encoder, xs []T, conv func(T) attribute.Value) {
	a := e.begin(5)
	for _, x := range xs {
		v := e.begin(1)
		e.anyValue(conv(x))
		e.end(v)
	}
	e.end(a)
}

// text is s as valid UTF-8: proto3 refuses a string that is not, and one
// bad byte in a peer's text (a tool's result, a route) would lose the
// whole batch of spans.
func text(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// The protobuf wire types written here.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireLen     = 2
	wireFixed32 = 5
)

// encoder appends protobuf to b. A nested message is written in place and
// its length put in front of it when it ends (begin, end): no buffer per
// message.
type encoder struct{ b []byte }

func (e *encoder) varint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }

func (e *encoder) tag(f, wire int) { e.varint(uint64(f)<<3 | uint64(wire)) }

// str writes field f as a length-delimited string, even when empty.
func (e *encoder) str(f int, s string) {
	e.tag(f, wireLen)
	e.varint(uint64(len(s)))
	e.b = append(e.b, s...)
}

// text writes a proto3 string field: left out when empty, else valid UTF-8.
func (e *encoder) text(f int, s string) {
	if s != "" {
		e.str(f, text(s))
	}
}

// bytes writes a proto3 bytes field, left out when empty.
func (e *encoder) bytes(f int, b []byte) {
	if len(b) > 0 {
		e.str(f, string(b))
	}
}

// uint writes a proto3 varint field (uint32, uint64, enum), left out when 0.
func (e *encoder) uint(f int, v uint64) {
	if v != 0 {
		e.tag(f, wireVarint)
		e.varint(v)
	}
}

func (e *encoder) fixed64(f int, v uint64) {
	if v != 0 {
		e.tag(f, wireFixed64)
		e.b = binary.LittleEndian.AppendUint64(e.b, v)
	}
}

func (e *encoder) fixed32(f int, v uint32) {
	if v != 0 {
		e.tag(f, wireFixed32)
		e.b = binary.LittleEndian.AppendUint32(e.b, v)
	}
}

// begin starts the message in field f; end(begin(f)) finishes it.
func (e *encoder) begin(f int) int {
	e.tag(f, wireLen)
	return len(e.b)
}

// end puts the length of the message begun at start in front of it.
func (e *encoder) end(start int) {
	n := len(e.b) - start
	var l [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(l[:], uint64(n))
	e.b = append(e.b, l[:k]...)
	copy(e.b[start+k:], e.b[start:start+n])
	copy(e.b[start:], l[:k])
}

// Package otlpexport is an OTLP/HTTP (protobuf) span exporter for the
// OpenTelemetry SDK: what otlptracehttp does, on the generated message
// types of go.opentelemetry.io/proto/otlp/trace/v1 only. otlptracehttp
// imports the collector's service package, whose generated gRPC and
// gateway code brings gRPC (69 packages) into any binary that exports
// spans; this package brings none.
//
// The body of a POST to /v1/traces is an ExportTraceServiceRequest,
// whose one field (resource_spans = 1) is TracesData's, so TracesData is
// sent: the same bytes.
package otlpexport

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Options configure an [Exporter].
type Options struct {
	// URL is where spans are posted (a collector's .../v1/traces).
	URL string
	// Headers go with every request (secrets: never logged here).
	Headers map[string]string
	// Timeout bounds one request. Zero: 10s.
	Timeout time.Duration
	// RetryElapsed bounds the retries of one export (429, 502, 503, 504
	// and transport errors; Retry-After honoured). Zero: 30s; negative:
	// no retry.
	RetryElapsed time.Duration
	// TLS of an https URL. Zero: the system's roots.
	TLS *tls.Config
	// Compression of the bodies: "gzip" or "none". Zero: gzip, unless
	// the collector is on this host (a loopback address or localhost),
	// where compressing would spend the CPU of the process it serves to
	// save no network.
	Compression string
}

// gzipped reports whether o's bodies are compressed.
func (o Options) gzipped() bool {
	switch o.Compression {
	case "gzip":
		return true
	case "none":
		return false
	}
	u, err := url.Parse(o.URL)
	if err != nil {
		return true
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		return !ip.IsLoopback()
	}
	return host != "localhost"
}

// maxResponseBytes bounds what is read of a collector's answer.
const maxResponseBytes = 64 << 10

// Exporter is an sdktrace.SpanExporter posting OTLP/HTTP protobuf.
type Exporter struct {
	opts   Options
	client *http.Client

	// enc is held while a batch is encoded and compressed. The batch span
	// processor exports one batch at a time, so it is not contended; it
	// keeps the compressor (its state is over 1 MB: in a sync.Pool it was
	// dropped at every GC, which a busy process runs every few
	// milliseconds, and each batch allocated a new one) and the encoding
	// buffer from one batch to the next.
	enc  sync.Mutex
	gzip bool
	zw   *gzip.Writer
	raw  []byte

	mu     sync.Mutex
	closed bool
}

// New returns an exporter; it dials nothing until the first export.
func New(o Options) *Exporter {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.RetryElapsed == 0 {
		o.RetryElapsed = 30 * time.Second
	}
	tr := &http.Transport{
		Proxy:               nil, // egress goes where the config says, not through a proxy of the environment
		TLSClientConfig:     o.TLS,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	return &Exporter{opts: o, gzip: o.gzipped(), client: &http.Client{Transport: tr, Timeout: o.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// ErrShutdown: the exporter was shut down.
var ErrShutdown = errors.New("otlpexport: exporter shut down")

// ExportSpans implements sdktrace.SpanExporter.
func (e *Exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return ErrShutdown
	}
	if len(spans) == 0 {
		return nil
	}
	body, err := e.encode(spans)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(max(e.opts.RetryElapsed, 0))
	wait := time.Second
	for attempt := 1; ; attempt++ {
		retryAfter, err := e.post(ctx, body)
		if err == nil {
			return nil
		}
		var perm *permanentError
		if errors.As(err, &perm) || e.opts.RetryElapsed < 0 {
			return err
		}
		if retryAfter > 0 {
			wait = retryAfter
		}
		jittered := wait/2 + rand.N(wait/2+1)
		if time.Now().Add(jittered).After(deadline) {
			return fmt.Errorf("otlpexport: %d attempts within %s: %w", attempt, e.opts.RetryElapsed, err)
		}
		t := time.NewTimer(jittered)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(ctx.Err(), err)
		case <-t.C:
		}
		wait = min(2*wait, 5*time.Second)
	}
}

type permanentError struct{ error }

// encode is the gzipped TracesData of spans. The body is a new slice:
// the HTTP transport may still read a request's body after Do returns
// (a response that came before the whole body was sent).
func (e *Exporter) encode(spans []sdktrace.ReadOnlySpan) ([]byte, error) {
	e.enc.Lock()
	defer e.enc.Unlock()
	var a arena
	a.init(len(spans))
	raw, err := proto.MarshalOptions{}.MarshalAppend(e.raw[:0], &tracepb.TracesData{ResourceSpans: resourceSpans(spans, &a)})
	if err != nil {
		return nil, fmt.Errorf("otlpexport: encoding %d spans: %w", len(spans), err)
	}
	e.raw = raw
	if !e.gzip {
		return bytes.Clone(raw), nil
	}
	// Protobuf of spans compresses to about a fifth.
	zb := bytes.NewBuffer(make([]byte, 0, len(raw)/4+64))
	if e.zw == nil {
		// BestSpeed: the body is protobuf of a few hundred spans, where
		// more effort buys little and costs the process CPU it serves with.
		e.zw, _ = gzip.NewWriterLevel(zb, gzip.BestSpeed)
	} else {
		e.zw.Reset(zb)
	}
	_, _ = e.zw.Write(raw)
	if err := e.zw.Close(); err != nil {
		return nil, err
	}
	return zb.Bytes(), nil
}

// post sends body once: nil on 2xx; for a retryable failure the error and
// the collector's Retry-After (0 when none).
func (e *Exporter) post(ctx context.Context, body []byte) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.opts.URL, bytes.NewReader(body))
	if err != nil {
		return 0, &permanentError{fmt.Errorf("otlpexport: %w", err)}
	}
	for k, v := range e.opts.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if e.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	res, err := e.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, &permanentError{err}
		}
		return 0, err
	}
	msg, _ := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes))
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxResponseBytes))
	res.Body.Close()
	if res.StatusCode/100 == 2 {
		return 0, nil
	}
	// The collector's words, bounded, without bytes that could forge a
	// log line.
	said := bytes.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, msg[:min(len(msg), 256)])
	err = fmt.Errorf("otlpexport: the collector answered %s: %s", text(res.Status), text(string(said)))
	switch res.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		var after time.Duration
		if s, perr := strconv.Atoi(res.Header.Get("Retry-After")); perr == nil && s > 0 {
			after = min(time.Duration(s)*time.Second, 30*time.Second)
		}
		return after, err
	}
	return 0, &permanentError{err}
}

// Shutdown implements sdktrace.SpanExporter: later exports fail, idle
// connections close.
func (e *Exporter) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.client.CloseIdleConnections()
	return ctx.Err()
}

// ResourceSpans groups spans by resource and instrumentation scope, as
// OTLP carries them.
func ResourceSpans(spans []sdktrace.ReadOnlySpan) []*tracepb.ResourceSpans {
	var a arena
	a.init(len(spans))
	return resourceSpans(spans, &a)
}

// arena allocates the messages of one export in blocks: a batch of 512
// spans with ten attributes each is some 16,000 small messages (a
// KeyValue, its AnyValue and the AnyValue's oneof, per attribute), each
// its own allocation otherwise. The messages are taken from the blocks,
// never copied.
type arena struct {
	block int // elements per block of the per-attribute kinds
	kvs   []commonpb.KeyValue
	kvps  []*commonpb.KeyValue
	vals  []commonpb.AnyValue
	strs  []commonpb.AnyValue_StringValue
	ints  []commonpb.AnyValue_IntValue
	bools []commonpb.AnyValue_BoolValue
	spans []tracepb.Span
	stats []tracepb.Status
	ids   []byte // trace and span ids
}

func (a *arena) init(spans int) {
	a.block = min(max(spans*8, 16), 4096)
	a.spans = make([]tracepb.Span, spans)
	a.stats = make([]tracepb.Status, spans)
	a.ids = make([]byte, 0, spans*(16+8+8))
}

// one is the next element of *blk, a new block of n when it is used up.
func one[T any](blk *[]T, n int) *T {
	if len(*blk) == 0 {
		*blk = make([]T, n)
	}
	p := &(*blk)[0]
	*blk = (*blk)[1:]
	return p
}

// bytes is a copy of b in the arena's id block.
func (a *arena) bytes(b []byte) []byte {
	if cap(a.ids)-len(a.ids) < len(b) {
		a.ids = make([]byte, 0, max(len(b), 1024))
	}
	n := len(a.ids)
	a.ids = append(a.ids, b...)
	return a.ids[n:len(a.ids):len(a.ids)]
}

func resourceSpans(spans []sdktrace.ReadOnlySpan, a *arena) []*tracepb.ResourceSpans {
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
			rs = &tracepb.ResourceSpans{Resource: &resourcepb.Resource{Attributes: keyValues(res.Attributes(), a)}, SchemaUrl: text(res.SchemaURL())}
			byRes[rkey] = rs
			out = append(out, rs)
		}
		sc := s.InstrumentationScope()
		skey := scopeKey{rkey, sc.Name, sc.Version, sc.SchemaURL, sc.Attributes.Equivalent()}
		ss, ok := byScope[skey]
		if !ok {
			ss = &tracepb.ScopeSpans{Scope: &commonpb.InstrumentationScope{Name: text(sc.Name), Version: text(sc.Version), Attributes: keyValues(sc.Attributes.ToSlice(), a)}, SchemaUrl: text(sc.SchemaURL)}
			byScope[skey] = ss
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		ss.Spans = append(ss.Spans, span(s, a))
	}
	return out
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

func span(s sdktrace.ReadOnlySpan, a *arena) *tracepb.Span {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	p := one(&a.spans, 1)
	p.TraceId = a.bytes(tid[:])
	p.SpanId = a.bytes(sid[:])
	p.TraceState = text(sc.TraceState().String())
	p.Name = text(s.Name())
	p.Kind = tracepb.Span_SpanKind(s.SpanKind())
	p.StartTimeUnixNano = uint64(max(s.StartTime().UnixNano(), 0))
	p.EndTimeUnixNano = uint64(max(s.EndTime().UnixNano(), 0))
	p.Attributes = keyValues(s.Attributes(), a)
	p.DroppedAttributesCount = uint32(max(s.DroppedAttributes(), 0))
	p.DroppedEventsCount = uint32(max(s.DroppedEvents(), 0))
	p.DroppedLinksCount = uint32(max(s.DroppedLinks(), 0))
	p.Status = status(s.Status(), one(&a.stats, 1))
	if s.SpanKind() > trace.SpanKindConsumer || s.SpanKind() < 0 {
		p.Kind = tracepb.Span_SPAN_KIND_UNSPECIFIED
	}
	parent := s.Parent()
	p.Flags = flags(sc, parent.IsRemote())
	if parent.SpanID().IsValid() {
		psid := parent.SpanID()
		p.ParentSpanId = a.bytes(psid[:])
	}
	for _, ev := range s.Events() {
		p.Events = append(p.Events, &tracepb.Span_Event{
			TimeUnixNano: uint64(max(ev.Time.UnixNano(), 0)), Name: text(ev.Name),
			Attributes: keyValues(ev.Attributes, a), DroppedAttributesCount: uint32(max(ev.DroppedAttributeCount, 0)),
		})
	}
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		p.Links = append(p.Links, &tracepb.Span_Link{
			TraceId: a.bytes(ltid[:]), SpanId: a.bytes(lsid[:]), TraceState: text(l.SpanContext.TraceState().String()),
			Attributes: keyValues(l.Attributes, a), DroppedAttributesCount: uint32(max(l.DroppedAttributeCount, 0)),
			Flags: flags(l.SpanContext, l.SpanContext.IsRemote()),
		})
	}
	return p
}

// status fills st with s.
func status(s sdktrace.Status, st *tracepb.Status) *tracepb.Status {
	switch s.Code {
	case codes.Error:
		st.Code = tracepb.Status_STATUS_CODE_ERROR
		st.Message = text(s.Description)
	case codes.Ok:
		st.Code = tracepb.Status_STATUS_CODE_OK
	}
	return st
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

func keyValues(kvs []attribute.KeyValue, a *arena) []*commonpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	if len(a.kvps) < len(kvs) {
		a.kvps = make([]*commonpb.KeyValue, max(len(kvs), a.block))
	}
	out := a.kvps[:len(kvs):len(kvs)]
	a.kvps = a.kvps[len(kvs):]
	for i, kv := range kvs {
		p := one(&a.kvs, a.block)
		p.Key = text(string(kv.Key))
		p.Value = a.anyValue(kv.Value)
		out[i] = p
	}
	return out
}

// anyValue is v, from the arena for the scalar kinds spans carry most.
func (a *arena) anyValue(v attribute.Value) *commonpb.AnyValue {
	switch v.Type() {
	case attribute.STRING:
		sv := one(&a.strs, a.block)
		sv.StringValue = text(v.AsString())
		av := one(&a.vals, a.block)
		av.Value = sv
		return av
	case attribute.INT64:
		iv := one(&a.ints, a.block)
		iv.IntValue = v.AsInt64()
		av := one(&a.vals, a.block)
		av.Value = iv
		return av
	case attribute.BOOL:
		bv := one(&a.bools, a.block)
		bv.BoolValue = v.AsBool()
		av := one(&a.vals, a.block)
		av.Value = bv
		return av
	case attribute.MAP:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: keyValues(v.AsMap(), a)}}}
	}
	return anyValue(v)
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
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: text(v.AsString())}}
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
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: keyValues(v.AsMap(), &arena{block: 16})}}}
	case attribute.EMPTY:
		return &commonpb.AnyValue{}
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: text(v.String())}}
}

func array[T any](xs []T, conv func(T) *commonpb.AnyValue) *commonpb.AnyValue {
	vals := make([]*commonpb.AnyValue, len(xs))
	for i, x := range xs {
		vals[i] = conv(x)
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vals}}}
}

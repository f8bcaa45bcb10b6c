// Package otlpexport is an OTLP/HTTP (protobuf) span exporter for the
// OpenTelemetry SDK: what otlptracehttp does, writing the OTLP messages
// of go.opentelemetry.io/proto/otlp/trace/v1 field by field with
// protowire, not through the generated message types, whose descriptors,
// registration and reflection-driven marshalling the daemon's binary
// would carry (tests compare the bytes with them).
// otlptracehttp imports the collector's service package, whose generated
// gRPC and gateway code brings gRPC (69 packages) into any binary that
// exports spans; this package brings none.
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
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
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

// maxKeptBuffer bounds the encoding buffer kept for the next batch: a
// batch of long content attributes may need more, once.
const maxKeptBuffer = 4 << 20

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

// encode is the request body of spans: their TracesData, gzipped when
// the exporter compresses. The body is a new slice:
// the HTTP transport may still read a request's body after Do returns
// (a response that came before the whole body was sent).
func (e *Exporter) encode(spans []sdktrace.ReadOnlySpan) ([]byte, error) {
	e.enc.Lock()
	defer e.enc.Unlock()
	raw := appendTracesData(e.raw[:0], spans)
	if cap(raw) <= maxKeptBuffer {
		e.raw = raw
	}
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

// The encoding: TracesData written field by field with protowire, from
// the SDK's spans straight to bytes. Building the generated messages
// first (a KeyValue, an AnyValue and its oneof per attribute: some 16,000
// allocations for a batch of 512 spans) and marshalling them by
// reflection cost more than the spans' own recording.

// Field numbers of the OTLP messages written (opentelemetry/proto
// trace/v1, common/v1, resource/v1).
const (
	fTracesResourceSpans = 1

	fResourceSpansResource  = 1
	fResourceSpansScope     = 2
	fResourceSpansSchemaURL = 3
	fResourceAttributes     = 1

	fScopeSpansScope     = 1
	fScopeSpansSpans     = 2
	fScopeSpansSchemaURL = 3
	fScopeName           = 1
	fScopeVersion        = 2
	fScopeAttributes     = 3

	fSpanTraceID           = 1
	fSpanSpanID            = 2
	fSpanTraceState        = 3
	fSpanParentSpanID      = 4
	fSpanName              = 5
	fSpanKind              = 6
	fSpanStart             = 7
	fSpanEnd               = 8
	fSpanAttributes        = 9
	fSpanDroppedAttributes = 10
	fSpanEvents            = 11
	fSpanDroppedEvents     = 12
	fSpanLinks             = 13
	fSpanDroppedLinks      = 14
	fSpanStatus            = 15
	fSpanFlags             = 16

	fEventTime              = 1
	fEventName              = 2
	fEventAttributes        = 3
	fEventDroppedAttributes = 4

	fLinkTraceID           = 1
	fLinkSpanID            = 2
	fLinkTraceState        = 3
	fLinkAttributes        = 4
	fLinkDroppedAttributes = 5
	fLinkFlags             = 6

	fStatusMessage = 2
	fStatusCode    = 3

	// Status.StatusCode's values (STATUS_CODE_UNSET = 0 is left out, as
	// proto3 leaves a zero).
	statusCodeOK    = 1
	statusCodeError = 2

	fKeyValueKey   = 1
	fKeyValueValue = 2

	fAnyString = 1
	fAnyBool   = 2
	fAnyInt    = 3
	fAnyDouble = 4
	fAnyArray  = 5
	fAnyKvlist = 6
	fAnyBytes  = 7

	fArrayValues  = 1
	fKvlistValues = 1
)

// wire appends protobuf to b. A nested message is written in place after
// its tag and its length is put in front of it once known (open, close).
type wire struct{ b []byte }

func (w *wire) open(f protowire.Number) int {
	w.b = protowire.AppendTag(w.b, f, protowire.BytesType)
	return len(w.b)
}

// close puts the length of the message begun at start in front of it.
func (w *wire) close(start int) {
	n := len(w.b) - start
	k := protowire.SizeVarint(uint64(n))
	var room [binary.MaxVarintLen64]byte
	w.b = append(w.b, room[:k]...)
	copy(w.b[start+k:], w.b[start:start+n])
	protowire.AppendVarint(w.b[:start], uint64(n))
}

// str writes a string field; proto3 leaves an empty one out.
func (w *wire) str(f protowire.Number, s string) {
	if s == "" {
		return
	}
	w.b = protowire.AppendTag(w.b, f, protowire.BytesType)
	w.b = protowire.AppendString(w.b, text(s))
}

func (w *wire) bytes(f protowire.Number, b []byte) {
	if len(b) == 0 {
		return
	}
	w.b = protowire.AppendTag(w.b, f, protowire.BytesType)
	w.b = protowire.AppendBytes(w.b, b)
}

func (w *wire) uvarint(f protowire.Number, v uint64) {
	if v == 0 {
		return
	}
	w.b = protowire.AppendTag(w.b, f, protowire.VarintType)
	w.b = protowire.AppendVarint(w.b, v)
}

func (w *wire) fixed64(f protowire.Number, v uint64) {
	if v == 0 {
		return
	}
	w.b = protowire.AppendTag(w.b, f, protowire.Fixed64Type)
	w.b = protowire.AppendFixed64(w.b, v)
}

func (w *wire) fixed32(f protowire.Number, v uint32) {
	if v == 0 {
		return
	}
	w.b = protowire.AppendTag(w.b, f, protowire.Fixed32Type)
	w.b = protowire.AppendFixed32(w.b, v)
}

// count is a non-negative count of the SDK's (an int) as uint32.
func count(n int) uint64 { return uint64(uint32(max(n, 0))) }

// appendTracesData appends spans as a TracesData, grouped by resource and
// instrumentation scope as OTLP carries them, in the order first seen.
func appendTracesData(b []byte, spans []sdktrace.ReadOnlySpan) []byte {
	type scopeGroup struct {
		name, version, url string
		attrs              attribute.Distinct
		scope              int // index of the first span of the scope
		spans              []int
	}
	type resGroup struct {
		key    attribute.Distinct
		first  int
		scopes []scopeGroup
	}
	var groups []resGroup
	for i, s := range spans {
		rkey := s.Resource().Equivalent()
		r := slices.IndexFunc(groups, func(g resGroup) bool { return g.key == rkey })
		if r < 0 {
			groups = append(groups, resGroup{key: rkey, first: i})
			r = len(groups) - 1
		}
		sc := s.InstrumentationScope()
		skey := sc.Attributes.Equivalent()
		g := &groups[r]
		k := slices.IndexFunc(g.scopes, func(x scopeGroup) bool {
			return x.name == sc.Name && x.version == sc.Version && x.url == sc.SchemaURL && x.attrs == skey
		})
		if k < 0 {
			g.scopes = append(g.scopes, scopeGroup{name: sc.Name, version: sc.Version, url: sc.SchemaURL, attrs: skey, scope: i, spans: make([]int, 0, len(spans))})
			k = len(g.scopes) - 1
		}
		g.scopes[k].spans = append(g.scopes[k].spans, i)
	}
	w := wire{b: b}
	for _, g := range groups {
		rs := w.open(fTracesResourceSpans)
		res := spans[g.first].Resource()
		r := w.open(fResourceSpansResource)
		w.attributes(fResourceAttributes, res.Attributes())
		w.close(r)
		for _, sg := range g.scopes {
			ss := w.open(fResourceSpansScope)
			sc := spans[sg.scope].InstrumentationScope()
			scope := w.open(fScopeSpansScope)
			w.str(fScopeName, sc.Name)
			w.str(fScopeVersion, sc.Version)
			w.attributes(fScopeAttributes, sc.Attributes.ToSlice())
			w.close(scope)
			for _, i := range sg.spans {
				w.span(spans[i])
			}
			w.str(fScopeSpansSchemaURL, sc.SchemaURL)
			w.close(ss)
		}
		w.str(fResourceSpansSchemaURL, res.SchemaURL())
		w.close(rs)
	}
	return w.b
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

func (w *wire) span(s sdktrace.ReadOnlySpan) {
	p := w.open(fScopeSpansSpans)
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	w.bytes(fSpanTraceID, tid[:])
	w.bytes(fSpanSpanID, sid[:])
	w.str(fSpanTraceState, sc.TraceState().String())
	parent := s.Parent()
	if parent.SpanID().IsValid() {
		psid := parent.SpanID()
		w.bytes(fSpanParentSpanID, psid[:])
	}
	w.str(fSpanName, s.Name())
	kind := s.SpanKind()
	if kind > trace.SpanKindConsumer || kind < 0 {
		kind = trace.SpanKindUnspecified
	}
	w.uvarint(fSpanKind, uint64(kind))
	w.fixed64(fSpanStart, uint64(max(s.StartTime().UnixNano(), 0)))
	w.fixed64(fSpanEnd, uint64(max(s.EndTime().UnixNano(), 0)))
	w.attributes(fSpanAttributes, s.Attributes())
	w.uvarint(fSpanDroppedAttributes, count(s.DroppedAttributes()))
	for _, ev := range s.Events() {
		e := w.open(fSpanEvents)
		w.fixed64(fEventTime, uint64(max(ev.Time.UnixNano(), 0)))
		w.str(fEventName, ev.Name)
		w.attributes(fEventAttributes, ev.Attributes)
		w.uvarint(fEventDroppedAttributes, count(ev.DroppedAttributeCount))
		w.close(e)
	}
	w.uvarint(fSpanDroppedEvents, count(s.DroppedEvents()))
	for _, l := range s.Links() {
		e := w.open(fSpanLinks)
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		w.bytes(fLinkTraceID, ltid[:])
		w.bytes(fLinkSpanID, lsid[:])
		w.str(fLinkTraceState, l.SpanContext.TraceState().String())
		w.attributes(fLinkAttributes, l.Attributes)
		w.uvarint(fLinkDroppedAttributes, count(l.DroppedAttributeCount))
		w.fixed32(fLinkFlags, flags(l.SpanContext, l.SpanContext.IsRemote()))
		w.close(e)
	}
	w.uvarint(fSpanDroppedLinks, count(s.DroppedLinks()))
	st := w.open(fSpanStatus) // always present, as otlptracehttp sends it
	switch status := s.Status(); status.Code {
	case codes.Error:
		w.str(fStatusMessage, status.Description)
		w.uvarint(fStatusCode, statusCodeError)
	case codes.Ok:
		w.uvarint(fStatusCode, statusCodeOK)
	}
	w.close(st)
	w.fixed32(fSpanFlags, flags(sc, parent.IsRemote()))
	w.close(p)
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

// attributes writes each of kvs as a KeyValue field f.
func (w *wire) attributes(f protowire.Number, kvs []attribute.KeyValue) {
	for _, kv := range kvs {
		m := w.open(f)
		w.str(fKeyValueKey, string(kv.Key))
		v := w.open(fKeyValueValue)
		w.anyValue(kv.Value)
		w.close(v)
		w.close(m)
	}
}

// anyValue writes the fields of an AnyValue: one member of its oneof,
// present even when zero (a oneof's member is written when set).
func (w *wire) anyValue(v attribute.Value) {
	switch v.Type() {
	case attribute.BOOL:
		w.b = protowire.AppendTag(w.b, fAnyBool, protowire.VarintType)
		w.b = protowire.AppendVarint(w.b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		w.b = protowire.AppendTag(w.b, fAnyInt, protowire.VarintType)
		w.b = protowire.AppendVarint(w.b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		w.b = protowire.AppendTag(w.b, fAnyDouble, protowire.Fixed64Type)
		w.b = protowire.AppendFixed64(w.b, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		w.b = protowire.AppendTag(w.b, fAnyString, protowire.BytesType)
		w.b = protowire.AppendString(w.b, text(v.AsString()))
	case attribute.BYTESLICE:
		w.b = protowire.AppendTag(w.b, fAnyBytes, protowire.BytesType)
		w.b = protowire.AppendBytes(w.b, v.AsByteSlice())
	case attribute.BOOLSLICE:
		array(w, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		array(w, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		array(w, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		array(w, v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		array(w, v.AsSlice(), func(v attribute.Value) attribute.Value { return v })
	case attribute.MAP:
		m := w.open(fAnyKvlist)
		w.attributes(fKvlistValues, v.AsMap())
		w.close(m)
	case attribute.EMPTY:
		// An AnyValue with no member set.
	default:
		w.b = protowire.AppendTag(w.b, fAnyString, protowire.BytesType)
		w.b = protowire.AppendString(w.b, text(v.String()))
	}
}

// array writes xs as an ArrayValue member of an AnyValue.
func array[T any](w *wire, xs []T, conv func(T) attribute.Value) {
	a := w.open(fAnyArray)
	for _, x := range xs {
		e := w.open(fArrayValues)
		w.anyValue(conv(x))
		w.close(e)
	}
	w.close(a)
}

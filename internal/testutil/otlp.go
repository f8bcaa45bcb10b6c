package testutil

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// OTLPSpan is one span an [OTLPReceiver] was sent, flattened for assertions.
type OTLPSpan struct {
	Service  string // resource attribute service.name
	Name     string
	TraceID  string // hex
	SpanID   string // hex
	ParentID string // hex; "" for a root span
	Kind     tracepb.Span_SpanKind
	Start    time.Time
	End      time.Time
	Attrs    map[string]any // string, int64, float64, bool or []any
	Status   tracepb.Status_StatusCode
}

// OTLPReceiver is an OTLP/HTTP trace collector (protobuf, POST /v1/traces,
// gzip or not), decoding with go.opentelemetry.io/proto/otlp: what a real
// collector receives, kept in memory for a test. A request is decoded when
// it comes (a body that does not decode is refused, as a collector
// would) and flattened into [OTLPSpan]s only when they are asked for: a
// benchmark's receiver shares the machine with what it measures.
type OTLPReceiver struct {
	URL string // base URL; the exporter posts to URL + "/v1/traces"

	// dec is held while a body is read and decoded: one gzip reader and
	// one buffer for every request.
	dec sync.Mutex
	zr  *gzip.Reader
	buf bytes.Buffer

	mu       sync.Mutex
	msgs     []*collectortrace.ExportTraceServiceRequest
	spans    []OTLPSpan // of msgs[:flat]
	flat     int
	requests int
	gzipped  int           // requests with Content-Encoding gzip
	changed  chan struct{} // closed and replaced on every request
}

// NewOTLPReceiver starts a receiver closed at the test's end.
func NewOTLPReceiver(t testing.TB) *OTLPReceiver {
	r := &OTLPReceiver{changed: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *OTLPReceiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "POST /v1/traces only", http.StatusNotFound)
		return
	}
	msg, err := r.decode(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	gz := req.Header.Get("Content-Encoding") == "gzip"
	// The answer is an empty ExportTraceServiceResponse: zero bytes.
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)

	r.mu.Lock()
	r.msgs = append(r.msgs, msg)
	r.requests++
	if gz {
		r.gzipped++
	}
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

func (r *OTLPReceiver) decode(req *http.Request) (*collectortrace.ExportTraceServiceRequest, error) {
	r.dec.Lock()
	defer r.dec.Unlock()
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		var err error
		if r.zr == nil {
			r.zr, err = gzip.NewReader(req.Body)
		} else {
			err = r.zr.Reset(req.Body)
		}
		if err != nil {
			return nil, err
		}
		body = r.zr
	}
	r.buf.Reset()
	if _, err := r.buf.ReadFrom(io.LimitReader(body, 64<<20)); err != nil {
		return nil, err
	}
	// proto.Unmarshal copies the strings and bytes it decodes: the buffer
	// is free again when it returns.
	msg := &collectortrace.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(r.buf.Bytes(), msg); err != nil {
		return nil, err
	}
	return msg, nil
}

// flatten appends the spans of the requests not yet flattened; r.mu is
// held.
func (r *OTLPReceiver) flatten() {
	for ; r.flat < len(r.msgs); r.flat++ {
		for _, rs := range r.msgs[r.flat].ResourceSpans {
			service, _ := attrs(rs.GetResource().GetAttributes())["service.name"].(string)
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					sp := OTLPSpan{
						Service: service, Name: s.Name, Kind: s.Kind,
						TraceID: hex.EncodeToString(s.TraceId), SpanID: hex.EncodeToString(s.SpanId),
						Start: time.Unix(0, int64(s.StartTimeUnixNano)), End: time.Unix(0, int64(s.EndTimeUnixNano)),
						Attrs: attrs(s.Attributes), Status: s.GetStatus().GetCode(),
					}
					if len(s.ParentSpanId) > 0 {
						sp.ParentID = hex.EncodeToString(s.ParentSpanId)
					}
					r.spans = append(r.spans, sp)
				}
			}
		}
	}
}

// Messages returns the export requests received so far, as decoded.
func (r *OTLPReceiver) Messages() []*collectortrace.ExportTraceServiceRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*collectortrace.ExportTraceServiceRequest(nil), r.msgs...)
}

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = value(kv.Value)
	}
	return m
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.Values {
			out = append(out, value(e))
		}
		return out
	}
	return nil
}

// Spans returns a copy of every span received so far.
func (r *OTLPReceiver) Spans() []OTLPSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flatten()
	return append([]OTLPSpan(nil), r.spans...)
}

// Requests is the number of export requests received.
func (r *OTLPReceiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// GzippedRequests is the number of export requests received gzipped.
func (r *OTLPReceiver) GzippedRequests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gzipped
}

// WaitFor waits until done holds for the spans received, at most timeout
// (a failure bound, not a pause), and returns them; it fails the test when
// the time runs out.
func (r *OTLPReceiver) WaitFor(t testing.TB, timeout time.Duration, done func([]OTLPSpan) bool) []OTLPSpan {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		r.flatten()
		spans, changed := append([]OTLPSpan(nil), r.spans...), r.changed
		r.mu.Unlock()
		if done(spans) {
			return spans
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("OTLP receiver: condition not met after %v; %d spans received: %v", timeout, len(spans), SpanNames(spans))
			return nil
		}
	}
}

// SpanNames lists the spans' names, in order, for failure messages.
func SpanNames(spans []OTLPSpan) []string {
	names := make([]string, len(spans))
	for i, s := range spans {
		names[i] = s.Name
	}
	return names
}

// Package otlpexport is an OTLP/HTTP (protobuf) span exporter for the
// OpenTelemetry SDK: what otlptracehttp does, without its imports.
// otlptracehttp imports the collector's service package, whose generated
// gRPC and gateway code brings gRPC (69 packages) into any binary that
// exports spans; this package brings none, and encodes the request itself
// (encode.go) rather than through the generated message types of
// go.opentelemetry.io/proto/otlp, whose descriptors, registration and
// reflection code cost the daemon's binary 140 KB (bench/README.md).
//
// The body of a POST to /v1/traces is an ExportTraceServiceRequest,
// whose one field (resource_spans = 1) is TracesData's.
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
	"strconv"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
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
}

// maxResponseBytes bounds what is read of a collector's answer.
const maxResponseBytes = 64 << 10

// Exporter is an sdktrace.SpanExporter posting OTLP/HTTP protobuf.
type Exporter struct {
	opts   Options
	client *http.Client
	// gzip holds compressors for reuse: one's state is hundreds of KiB.
	gzip sync.Pool

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
	return &Exporter{opts: o, gzip: sync.Pool{New: newGzip}, client: &http.Client{Transport: tr, Timeout: o.Timeout,
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
	raw := Marshal(spans)
	var zb bytes.Buffer
	zw := e.gzip.Get().(*gzip.Writer)
	zw.Reset(&zb)
	_, _ = zw.Write(raw)
	err := zw.Close()
	e.gzip.Put(zw)
	if err != nil {
		return err
	}
	body := zb.Bytes()
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

// newGzip is a compressor at BestSpeed: the body is protobuf of a few
// hundred spans, where more effort buys little and costs the process CPU
// it serves with.
func newGzip() any {
	zw, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	return zw
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
	req.Header.Set("Content-Encoding", "gzip")
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

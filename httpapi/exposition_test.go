package httpapi

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The /metrics handler answers as promhttp.HandlerFor with default options
// does, for every format and encoding a client may ask for: status,
// Content-Type, Content-Encoding, Vary and the (decompressed) body.
func TestExpositionAsPromhttp(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "Counted \"things\"\nover lines."}, []string{"agent"})
	c.WithLabelValues("a").Add(3)
	c.WithLabelValues(`b"\`).Inc()
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x_seconds", Help: "Durations.", Buckets: []float64{.1, 1, 10}})
	h.Observe(0.5)
	h.Observe(20)
	reg.MustRegister(c, h, prometheus.NewGauge(prometheus.GaugeOpts{Name: "x_gauge", Help: "A gauge."}))

	ours, theirs := exposition(reg), promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	accepts := []string{
		"",
		"text/plain",
		"text/plain;version=0.0.4",
		"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited",
		"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text",
		"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=compact-text",
		// What Prometheus sends (scrape_protocols' default order).
		"application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1",
		"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;escaping=underscores;q=0.6,text/plain;q=0.5",
		"application/json",
	}
	encodings := []string{"", "gzip", "identity", "gzip;q=0", "gzip;q=0.5, identity;q=0.6", "identity;q=0, gzip;q=0",
		"*", "*;q=0", "deflate, br", "br, gzip;q=0.8", "GZIP"}
	paths := []string{"/metrics", "/metrics?name[]=x_gauge&name[]=x_seconds", "/metrics?name[]=none"}
	n := 0
	for _, accept := range accepts {
		for _, enc := range encodings {
			for _, path := range paths {
				a, b := answer(t, ours, path, accept, enc), answer(t, theirs, path, accept, enc)
				if a != b {
					t.Errorf("Accept %q, Accept-Encoding %q, %s:\nours:     %+v\npromhttp: %+v", accept, enc, path, a, b)
				}
				n++
			}
		}
	}
	t.Logf("%d requests answered alike", n)

	// A collector failing: both answer 500 naming the error.
	reg.MustRegister(failing{})
	if a, b := answer(t, ours, "/metrics", "", "gzip"), answer(t, theirs, "/metrics", "", "gzip"); a != b || a.status != http.StatusInternalServerError {
		t.Errorf("on a gathering error\nours:     %+v\npromhttp: %+v", a, b)
	}
}

type served struct {
	status                int
	contentType, encoding string
	vary                  string
	body                  string
}

func answer(t *testing.T, h http.Handler, path, accept, encoding string) served {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if encoding != "" {
		req.Header.Set("Accept-Encoding", encoding)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body := rec.Body.Bytes()
	if rec.Header().Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("Content-Encoding gzip, body not gzip: %v", err)
		}
		if body, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	return served{rec.Code, rec.Header().Get("Content-Type"), rec.Header().Get("Content-Encoding"),
		strings.Join(rec.Header().Values("Vary"), ", "), string(body)}
}

// failing is a collector whose every collection fails.
type failing struct{}

var failingDesc = prometheus.NewDesc("x_failing", "Fails.", nil, nil)

func (failing) Describe(ch chan<- *prometheus.Desc) { ch <- failingDesc }
func (failing) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.NewInvalidMetric(failingDesc, errors.New("the collector broke"))
}

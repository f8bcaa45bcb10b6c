package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/axocoatl/axocoatl-go/internal/cfgerr"
	"github.com/axocoatl/axocoatl-go/internal/otlpexport"
	"github.com/axocoatl/axocoatl-go/secret"
)

// Exporters telemetry.exporter may name.
const (
	// ExporterOTLP is OTLP over HTTP (protobuf), to a collector's
	// /v1/traces.
	ExporterOTLP = "otlp"
	// ExporterNone exports nothing (and starts nothing).
	ExporterNone = "none"
)

// Defaults and bounds of the `telemetry:` section (docs/telemetry.md).
const (
	// DefaultOTLPEndpoint is where spans go when neither
	// telemetry.endpoint nor an OTEL_EXPORTER_OTLP_*ENDPOINT variable says.
	DefaultOTLPEndpoint = "http://localhost:4318"
	// DefaultServiceName is the service.name of the spans when neither
	// telemetry.service_name nor OTEL_SERVICE_NAME says.
	DefaultServiceName = "axocoatl"
	// DefaultTelemetryTimeout bounds one export request.
	DefaultTelemetryTimeout = 10 * time.Second
	// TelemetryShutdownTimeout bounds the flush of the spans still queued
	// when the daemon closes.
	TelemetryShutdownTimeout = 5 * time.Second
	// TelemetryQueueSpans bounds the spans waiting for export: past it new
	// spans are dropped (the SDK counts them) rather than held.
	TelemetryQueueSpans = 2048
	// TelemetryBatchSpans is the most spans one export request carries.
	TelemetryBatchSpans = 512
	// TelemetryBatchDelay is the longest an ended span waits for its
	// batch to fill before it is exported anyway.
	TelemetryBatchDelay = 5 * time.Second
	// TelemetryRetryElapsed bounds the retries of one failed export.
	TelemetryRetryElapsed = 30 * time.Second
	// MaxTelemetryHeaders bounds telemetry.headers (and the variables').
	MaxTelemetryHeaders = 32
)

// TelemetryConfig is the `telemetry:` section: OpenTelemetry spans of the
// doors, runs, model and tool calls, exported over OTLP/HTTP. Off unless
// Enabled (or OTEL_TRACES_EXPORTER=otlp with the section silent on
// enabled): a default install starts no exporter and dials nothing.
type TelemetryConfig struct {
	// Enabled turns export on. Zero: off, unless the file does not set
	// it and OTEL_TRACES_EXPORTER is otlp. OTEL_SDK_DISABLED=true keeps it
	// off whatever the file says.
	Enabled bool `yaml:"enabled"`
	// Exporter is otlp (OTLP over HTTP, protobuf) or none. Zero: otlp.
	// OTLP/gRPC is not offered: it would bring gRPC into the daemon's
	// build.
	Exporter string `yaml:"exporter"`
	// Endpoint is the collector's base URL, http(s)://host[:port][/path];
	// spans are posted to it + /v1/traces. Zero:
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the full URL, used as is), else
	// OTEL_EXPORTER_OTLP_ENDPOINT (a base), else http://localhost:4318.
	// http:// sends in the clear; https:// verifies the collector.
	Endpoint string `yaml:"endpoint"`
	// Headers are sent with every export (a collector's API key): secrets,
	// never logged. Those of OTEL_EXPORTER_OTLP_HEADERS and
	// OTEL_EXPORTER_OTLP_TRACES_HEADERS are added where the file has no
	// value for the name. At most 32. Zero: none.
	Headers map[string]secret.Secret `yaml:"headers"`
	// TLS of an https endpoint. Zero: the system's roots, no client
	// certificate.
	TLS TelemetryTLS `yaml:"tls"`
	// ServiceName is the spans' service.name. Zero: OTEL_SERVICE_NAME,
	// else axocoatl.
	ServiceName string `yaml:"service_name"`
	// SampleRatio is the share of new traces recorded, in (0, 1]; a trace
	// a caller's traceparent started follows the caller's sampled flag.
	// Zero: 1 (every trace).
	SampleRatio float64 `yaml:"sample_ratio"`
	// CaptureContent records prompts, answers and tool arguments and
	// results in spans (bounded; docs/telemetry.md). Zero: never.
	CaptureContent bool `yaml:"capture_content"`
	// Timeout bounds one export request. Zero: 10s.
	Timeout time.Duration `yaml:"timeout"`

	// tracesURL is OTEL_EXPORTER_OTLP_TRACES_ENDPOINT when it set the
	// endpoint: a full URL, used as it is.
	tracesURL string
}

// TelemetryTLS is the TLS of an https collector.
type TelemetryTLS struct {
	// CAFile is a PEM file of the certificates that sign the collector's
	// (a private CA). Zero: the system's roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are this client's certificate and key (PEM),
	// for a collector that verifies clients. Both or neither. Zero: none.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// Validate checks the section on its own: the exporter, the endpoint's
// form, the header names and values, the ratio and the timeout.
func (t TelemetryConfig) Validate() error {
	var errs []error
	switch t.Exporter {
	case "", ExporterOTLP, ExporterNone:
	case "grpc", "otlp_grpc", "otlp/grpc":
		errs = append(errs, cfgerr.Errorf("exporter", "%q: OTLP over gRPC is not offered (it would bring gRPC into the daemon); use otlp, which is OTLP over HTTP", t.Exporter))
	default:
		errs = append(errs, cfgerr.Errorf("exporter", "%q is not one of otlp, none", t.Exporter))
	}
	if t.Endpoint != "" {
		if err := checkEndpoint(t.Endpoint); err != nil {
			errs = append(errs, cfgerr.Errorf("endpoint", "%v", err))
		}
	}
	if len(t.Headers) > MaxTelemetryHeaders {
		errs = append(errs, cfgerr.Errorf("headers", "%d headers: at most %d", len(t.Headers), MaxTelemetryHeaders))
	}
	for _, name := range slices.Sorted(mapsKeys(t.Headers)) {
		if err := checkHeader(name, t.Headers[name].Reveal()); err != nil {
			errs = append(errs, cfgerr.Errorf("headers."+name, "%v", err))
		}
	}
	if t.SampleRatio < 0 || t.SampleRatio > 1 {
		errs = append(errs, cfgerr.Errorf("sample_ratio", "%v is not in (0, 1] (0 means 1)", t.SampleRatio))
	}
	if t.Timeout < 0 {
		errs = append(errs, cfgerr.Errorf("timeout", "must not be negative"))
	}
	if (t.TLS.CertFile == "") != (t.TLS.KeyFile == "") {
		errs = append(errs, cfgerr.Errorf("tls", "cert_file and key_file go together"))
	}
	return errors.Join(errs...)
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// checkEndpoint: an absolute http(s) URL without userinfo, query or
// fragment. The error never repeats the URL (it may carry a key).
func checkEndpoint(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("is not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("must be an http:// or https:// URL (OTLP over HTTP)")
	case u.Host == "" || u.Hostname() == "":
		return errors.New("has no host")
	case u.User != nil:
		return errors.New("must not carry credentials (user@host): set telemetry.headers")
	case u.RawQuery != "" || u.Fragment != "":
		return errors.New("must not have a query or a fragment")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return errors.New("has a bad port")
		}
	}
	return nil
}

// checkHeader: an HTTP token for a name, no control characters in a
// value (which is not repeated).
func checkHeader(name, value string) error {
	if name == "" || strings.ContainsFunc(name, func(r rune) bool {
		return r <= ' ' || r >= 0x7f || strings.ContainsRune("()<>@,;:\\\"/[]?={}", r)
	}) {
		return fmt.Errorf("%q is not a header name", name)
	}
	if strings.ContainsFunc(value, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
		return errors.New("the value has control characters")
	}
	return nil
}

// telemetryEnv are the standard variables the section reads.
const (
	envTracesExporter  = "OTEL_TRACES_EXPORTER"
	envSDKDisabled     = "OTEL_SDK_DISABLED"
	envEndpoint        = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint  = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envHeaders         = "OTEL_EXPORTER_OTLP_HEADERS"
	envTracesHeaders   = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
	envServiceName     = "OTEL_SERVICE_NAME"
	envProtocol        = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol  = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	tracesPath         = "/v1/traces"
	telemetryEndpoint  = "telemetry.endpoint"
	telemetryEnabled   = "telemetry.enabled"
	telemetryExporter  = "telemetry.exporter"
	telemetryHeaderKey = "telemetry.headers"
)

// overrideTelemetry layers the OTEL_* variables under the file: each
// fills what the file leaves unset (the file is the more specific
// setting, as code is over the variables in the OpenTelemetry SDKs).
// Whether export is on is decided here (Enabled, then Exporter none).
func (c *Config) overrideTelemetry(lookup func(string) (string, bool)) []error {
	get := func(k string) string {
		if lookup == nil {
			return ""
		}
		v, _ := lookup(k)
		return strings.TrimSpace(v)
	}
	t := &c.Telemetry
	var errs []error
	if !c.doc.Has(telemetryEnabled) {
		switch v := strings.ToLower(get(envTracesExporter)); v {
		case "":
		case ExporterOTLP:
			t.Enabled = true
			c.overrides[telemetryEnabled] = envTracesExporter
		case ExporterNone:
		default:
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s=%s is ignored: this daemon exports otlp (over HTTP) or none", envTracesExporter, v))
		}
	}
	if strings.EqualFold(get(envSDKDisabled), "true") && t.Enabled {
		t.Enabled = false
		c.Warnings = append(c.Warnings, envSDKDisabled+"=true: telemetry export is off")
	}
	if !t.Enabled {
		return nil
	}
	if p := get(envTracesProtocol) + get(envProtocol); p != "" && !strings.HasPrefix(p, "http/protobuf") {
		c.Warnings = append(c.Warnings, fmt.Sprintf("%s/%s asks for %s: spans are exported over OTLP/HTTP (protobuf) only", envTracesProtocol, envProtocol, p))
	}
	if t.Endpoint == "" {
		if v := get(envTracesEndpoint); v != "" {
			t.Endpoint, t.tracesURL = v, v
			c.overrides[telemetryEndpoint] = envTracesEndpoint
		} else if v := get(envEndpoint); v != "" {
			t.Endpoint = v
			c.overrides[telemetryEndpoint] = envEndpoint
		}
		if t.Endpoint != "" {
			if err := checkEndpoint(t.Endpoint); err != nil {
				errs = append(errs, c.errorf(telemetryEndpoint, "%v", err))
			}
		}
	}
	if t.ServiceName == "" {
		t.ServiceName = get(envServiceName)
	}
	for _, name := range []string{envTracesHeaders, envHeaders} {
		v := get(name)
		if v == "" {
			continue
		}
		hs, err := parseOTLPHeaders(v)
		if err != nil {
			errs = append(errs, &FieldError{File: c.Source, Key: telemetryHeaderKey, Msg: err.Error(), Source: name})
			continue
		}
		for k, val := range hs {
			if _, ok := t.Headers[k]; ok {
				continue
			}
			if t.Headers == nil {
				t.Headers = map[string]secret.Secret{}
			}
			t.Headers[k] = val
		}
		if len(t.Headers) > MaxTelemetryHeaders {
			errs = append(errs, &FieldError{File: c.Source, Key: telemetryHeaderKey, Msg: fmt.Sprintf("%d headers with the file's: at most %d", len(t.Headers), MaxTelemetryHeaders), Source: name})
		}
	}
	return errs
}

// parseOTLPHeaders reads the variables' form: name=value pairs separated
// by commas, values URL-encoded. Errors name the pair's position, never a
// value.
func parseOTLPHeaders(s string) (map[string]secret.Secret, error) {
	out := map[string]secret.Secret{}
	for i, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("pair %d is not name=value", i+1)
		}
		dv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("pair %d (%q): the value is not URL-encoded", i+1, k)
		}
		if err := checkHeader(k, dv); err != nil {
			return nil, fmt.Errorf("pair %d: %v", i+1, err)
		}
		out[k] = secret.Secret(dv)
	}
	return out, nil
}

// Exports reports whether the section makes an exporter: enabled, and
// an exporter other than none.
func (t TelemetryConfig) Exports() bool { return t.Enabled && t.Exporter != ExporterNone }

// TracesURL is the URL spans are posted to: the endpoint + /v1/traces
// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is).
func (t TelemetryConfig) TracesURL() string {
	if t.tracesURL != "" {
		return t.tracesURL
	}
	base := t.Endpoint
	if base == "" {
		base = DefaultOTLPEndpoint
	}
	return strings.TrimRight(base, "/") + tracesPath
}

// CollectorHost is the host:port spans are sent to ("" when export is
// off): egress, as doctor and the startup log list it.
func (t TelemetryConfig) CollectorHost() string {
	if !t.Exports() {
		return ""
	}
	u, err := url.Parse(t.TracesURL())
	if err != nil {
		return ""
	}
	if u.Port() != "" {
		return u.Host
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

func (t TelemetryConfig) serviceName() string {
	if t.ServiceName != "" {
		return t.ServiceName
	}
	return DefaultServiceName
}

func (t TelemetryConfig) ratio() float64 {
	if t.SampleRatio == 0 {
		return 1
	}
	return t.SampleRatio
}

// TracerProvider builds the provider of the section: an OTLP/HTTP
// exporter behind a batch span processor (bounded queue, bounded export
// and retries), parent-based sampling at SampleRatio, service.name set.
// It returns nil when export is off: nothing is started, nothing dialed.
// The caller shuts it down (flushing what is queued), bounded in time.
func (t TelemetryConfig) TracerProvider() (*sdktrace.TracerProvider, error) {
	if !t.Exports() {
		return nil, nil
	}
	timeout := t.Timeout
	if timeout == 0 {
		timeout = DefaultTelemetryTimeout
	}
	headers := make(map[string]string, len(t.Headers))
	for k, v := range t.Headers {
		headers[k] = v.Reveal()
	}
	eo := otlpexport.Options{URL: t.TracesURL(), Headers: headers, Timeout: timeout, RetryElapsed: TelemetryRetryElapsed}
	if strings.HasPrefix(eo.URL, "https://") {
		tc, err := t.TLS.config()
		if err != nil {
			return nil, err
		}
		eo.TLS = tc
	}
	exp := otlpexport.New(eo)
	res := resource.NewSchemaless(semconv.ServiceName(t.serviceName()))
	// Every setting given, none left to the SDK's defaults: those read
	// OTEL_BSP_* and OTEL_SPAN_*_LIMIT variables, and the environment
	// steers nothing here but what docs/telemetry.md lists.
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithMaxQueueSize(TelemetryQueueSpans), sdktrace.WithMaxExportBatchSize(TelemetryBatchSpans),
			sdktrace.WithBatchTimeout(TelemetryBatchDelay),
			// An export's retries end within it; each request within timeout.
			sdktrace.WithExportTimeout(TelemetryRetryElapsed)),
		sdktrace.WithRawSpanLimits(sdktrace.SpanLimits{
			AttributeValueLengthLimit:   sdktrace.DefaultAttributeValueLengthLimit,
			AttributeValueDepthLimit:    sdktrace.DefaultAttributeValueDepthLimit,
			AttributeCountLimit:         sdktrace.DefaultAttributeCountLimit,
			EventCountLimit:             sdktrace.DefaultEventCountLimit,
			LinkCountLimit:              sdktrace.DefaultLinkCountLimit,
			AttributePerEventCountLimit: sdktrace.DefaultAttributePerEventCountLimit,
			AttributePerLinkCountLimit:  sdktrace.DefaultAttributePerLinkCountLimit,
		}),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(t.ratio()))),
		sdktrace.WithResource(res),
	), nil
}

func (t TelemetryTLS) config() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("telemetry.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("telemetry.tls.ca_file %s: no PEM certificate in it", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("telemetry.tls: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// logTelemetry says at startup where spans go (egress), or nothing.
func logTelemetry(log *slog.Logger, t TelemetryConfig) {
	if !t.Exports() {
		return
	}
	log.Info("telemetry: exporting spans over OTLP/HTTP", "egress", t.CollectorHost(), "service", t.serviceName(),
		"sample_ratio", t.ratio(), "capture_content", t.CaptureContent)
}

package config_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/axocoatl/axocoatl-go/config"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

const telemetryAgents = "agents:\n  - id: a\n    provider: echo\n"

// A bad telemetry: section is a validate error at the file's line and
// key, never repeating a header's value or the endpoint (it may carry a
// key).
func TestTelemetryValidateErrors(t *testing.T) {
	cases := []struct {
		section, key, msg string
		line              int
	}{
		{"telemetry:\n  enabled: true\n  exporter: zipkin\n", "telemetry.exporter", `"zipkin" is not one of otlp, none`, 6},
		{"telemetry:\n  exporter: grpc\n", "telemetry.exporter", "not offered", 5},
		{"telemetry:\n  endpoint: collector:4318\n", "telemetry.endpoint", "http:// or https://", 5},
		{"telemetry:\n  endpoint: \"http://\"\n", "telemetry.endpoint", "no host", 5},
		{"telemetry:\n  endpoint: http://u:pw-secret@collector:4318\n", "telemetry.endpoint", "credentials", 5},
		{"telemetry:\n  endpoint: http://collector:99999\n", "telemetry.endpoint", "bad port", 5},
		{"telemetry:\n  endpoint: http://collector:4318/?k=pw-secret\n", "telemetry.endpoint", "query", 5},
		{"telemetry:\n  headers:\n    \"bad name\": x\n", "telemetry.headers.bad name", "not a header name", 6},
		{"telemetry:\n  headers:\n    api-key: \"pw-secret\\r\\nX: y\"\n", "telemetry.headers.api-key", "control characters", 6},
		{"telemetry:\n  sample_ratio: 1.5\n", "telemetry.sample_ratio", "not in (0, 1]", 5},
		{"telemetry:\n  timeout: -1s\n", "telemetry.timeout", "negative", 5},
		{"telemetry:\n  tls:\n    cert_file: c.pem\n", "telemetry.tls", "go together", 5},
		{"telemetry:\n  endpont: http://x\n", "telemetry.endpont", "", 5},
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			_, err := config.ParseWith(context.Background(), "t.yaml", []byte(telemetryAgents+tc.section), env(nil))
			var fe *config.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v, want a FieldError", err)
			}
			if fe.Key != tc.key || fe.Line != tc.line || fe.File != "t.yaml" || !strings.Contains(fe.Msg, tc.msg) {
				t.Fatalf("error %q (key %s, line %d), want %s at line %d saying %q", err, fe.Key, fe.Line, tc.key, tc.line, tc.msg)
			}
			if strings.Contains(err.Error(), "pw-secret") {
				t.Fatalf("the error repeats a secret: %v", err)
			}
		})
	}
}

// The OTEL_* variables fill what the file leaves unset; export is on only
// by the file's enabled or OTEL_TRACES_EXPORTER=otlp, and a bad value of
// a variable is blamed on the variable.
func TestTelemetryEnv(t *testing.T) {
	parse := func(t *testing.T, section string, vars map[string]string) (*config.Config, error) {
		t.Helper()
		return config.ParseWith(context.Background(), "t.yaml", []byte(telemetryAgents+section), env(vars))
	}
	endpoint := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector.example:4318", "OTEL_SERVICE_NAME": "svc"}
	cfg, err := parse(t, "", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Telemetry.Exports() || cfg.Telemetry.CollectorHost() != "" {
		t.Fatal("an endpoint variable alone turned export on")
	}
	vars := map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=k%20v,x-tenant=t1"}
	for k, v := range endpoint {
		vars[k] = v
	}
	cfg, err = parse(t, "telemetry:\n  headers:\n    x-tenant: file\n", vars)
	if err != nil {
		t.Fatal(err)
	}
	tc := cfg.Telemetry
	if !tc.Exports() || tc.TracesURL() != "http://collector.example:4318/v1/traces" || tc.CollectorHost() != "collector.example:4318" || tc.ServiceName != "svc" {
		t.Fatalf("telemetry %+v, traces URL %s", tc, tc.TracesURL())
	}
	if tc.Headers["api-key"].Reveal() != "k v" || tc.Headers["x-tenant"].Reveal() != "file" {
		t.Fatalf("headers: the variable's fill in, the file's win: %v", tc.Headers)
	}
	cfg, err = parse(t, "telemetry:\n  enabled: true\n", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://c.example/custom/path"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Telemetry.TracesURL() != "https://c.example/custom/path" || cfg.Telemetry.CollectorHost() != "c.example:443" {
		t.Fatalf("the traces endpoint variable is used as it is: %s", cfg.Telemetry.TracesURL())
	}
	cfg, err = parse(t, "telemetry:\n  enabled: true\n  endpoint: http://file:4318\n", endpoint)
	if err != nil || cfg.Telemetry.TracesURL() != "http://file:4318/v1/traces" {
		t.Fatalf("the file's endpoint wins: %v %v", cfg, err)
	}
	for name, c := range map[string]struct {
		section string
		vars    map[string]string
	}{
		"enabled false wins":    {"telemetry:\n  enabled: false\n", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}},
		"sdk disabled":          {"telemetry:\n  enabled: true\n", map[string]string{"OTEL_SDK_DISABLED": "true"}},
		"exporter none":         {"telemetry:\n  enabled: true\n  exporter: none\n", nil},
		"traces exporter none":  {"", map[string]string{"OTEL_TRACES_EXPORTER": "none"}},
		"unknown exporter vari": {"", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}},
	} {
		cfg, err := parse(t, c.section, c.vars)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if cfg.Telemetry.Exports() {
			t.Errorf("%s: export is on", name)
		}
	}
	_, err = parse(t, "", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"})
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Key != "telemetry.endpoint" || fe.Source != "OTEL_EXPORTER_OTLP_ENDPOINT" {
		t.Fatalf("a bad endpoint variable: %v", err)
	}
	_, err = parse(t, "", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_HEADERS": "api-key"})
	if !errors.As(err, &fe) || fe.Key != "telemetry.headers" || fe.Source != "OTEL_EXPORTER_OTLP_HEADERS" {
		t.Fatalf("a bad headers variable: %v", err)
	}
	cfg, err = parse(t, "telemetry:\n  enabled: true\n  headers:\n    api-key: hdr-secret-value\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cfg.Secrets() {
		if s.Reveal() == "hdr-secret-value" {
			return
		}
	}
	t.Fatal("a telemetry header is not among the config's secrets")
}

// Off by default: with telemetry silent (the standard variables naming a
// collector notwithstanding) a daemon's runs start no exporter and dial
// nothing; the collector's listener sees no connection.
func TestTelemetryOffDialsNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- struct{}{}
			c.Close()
		}
	}()
	vars := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + ln.Addr().String(),
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://" + ln.Addr().String() + "/v1/traces", "OTEL_SERVICE_NAME": "svc"}
	cfg, err := config.ParseWith(context.Background(), "t.yaml", []byte(telemetryAgents), env(vars))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.DataDir = t.TempDir()
	ctx := context.Background()
	rt, err := cfg.Build(ctx, config.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Engine.Execute(ctx, "a", "hi"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The listener is closed only now: a connection made at any time
	// before was accepted; Accept then fails and the goroutine ends.
	ln.Close()
	select {
	case <-accepted:
		t.Fatal("telemetry off, and the collector was dialed")
	default:
	}
	if r := cfg.Doctor(ctx); strings.Contains(fmt.Sprint(r), ln.Addr().String()) {
		t.Fatal("doctor lists the collector as egress with telemetry off")
	}
}

// On: the daemon's Engine exports its spans to the collector with the
// headers and service name, and Close flushes what is queued.
func TestTelemetryExports(t *testing.T) {
	recv := testutil.NewOTLPReceiver(t)
	var mu sync.Mutex
	var gotKey string
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gotKey = r.Header.Get("Api-Key")
		mu.Unlock()
		// On to the receiver, as a collector's gateway would.
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
	section := fmt.Sprintf("telemetry:\n  enabled: true\n  endpoint: %s\n  service_name: axo-test\n  headers:\n    api-key: collector-key-1234\n", front.URL)
	cfg, err := config.ParseWith(context.Background(), "t.yaml", []byte(telemetryAgents+section), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.DataDir = t.TempDir()
	ctx := context.Background()
	var logs testutil.SyncBuffer
	rt, err := cfg.Build(ctx, config.BuildOptions{Logger: cfg.NewLogger(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Engine.Execute(ctx, "a", "hi"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Close flushed: the spans are there without waiting.
	spans := recv.Spans()
	names := testutil.SpanNames(spans)
	if len(spans) == 0 || spans[0].Service != "axo-test" || !strings.Contains(strings.Join(names, ","), "invoke_agent a") {
		t.Fatalf("spans %v", names)
	}
	mu.Lock()
	defer mu.Unlock()
	if gotKey != "collector-key-1234" {
		t.Fatalf("the collector got api-key %q", gotKey)
	}
	host := strings.TrimPrefix(front.URL, "http://")
	if !strings.Contains(logs.String(), "egress="+host) || strings.Contains(logs.String(), "collector-key-1234") {
		t.Fatalf("the startup log does not list the collector as egress, or shows the header:\n%s", logs.String())
	}
	var doc strings.Builder
	cfg.Doctor(ctx).Print(&doc)
	if !strings.Contains(doc.String(), host+"  (telemetry") || strings.Contains(doc.String(), "collector-key-1234") {
		t.Fatalf("doctor:\n%s", doc.String())
	}
}

// The SDK's own variables steer nothing: OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT=0
// would drop every attribute and OTEL_BSP_SCHEDULE_DELAY=1 export each span
// within a millisecond, OTEL_BSP_MAX_QUEUE_SIZE=1 drop all but one; the
// daemon's provider has the attributes, holds a span for its batch, and
// keeps them all (docs/telemetry.md: no other OTEL_* variable is read).
//
// Guards: bound "how long an ended span waits for its batch to fill" (5s,
// docs/bounds.md): a span ended is not exported within 300 ms.
func TestTelemetryIgnoresSDKVariables(t *testing.T) {
	for k, v := range map[string]string{"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "0", "OTEL_BSP_SCHEDULE_DELAY": "1",
		"OTEL_BSP_MAX_QUEUE_SIZE": "1", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "1", "OTEL_TRACES_SAMPLER": "always_off"} {
		t.Setenv(k, v)
	}
	recv := testutil.NewOTLPReceiver(t)
	tp, err := config.TelemetryConfig{Enabled: true, Endpoint: recv.URL}.TracerProvider()
	if err != nil || tp == nil {
		t.Fatal(tp, err)
	}
	defer tp.Shutdown(context.Background())
	for range 3 {
		_, span := tp.Tracer("t").Start(context.Background(), "s", trace.WithAttributes(attribute.String("k", "v")))
		span.End()
	}
	time.Sleep(300 * time.Millisecond)
	if n := recv.Requests(); n != 0 {
		t.Fatalf("%d exports before the batch delay: OTEL_BSP_SCHEDULE_DELAY was read", n)
	}
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := recv.Spans()
	if len(spans) != 3 {
		t.Fatalf("%d spans exported, want 3", len(spans))
	}
	if spans[0].Attrs["k"] != "v" {
		t.Fatalf("attributes %v: OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT was read", spans[0].Attrs)
	}
}

// Guards: telemetry.headers (at most 32, the variables' included): a 33rd
// is a validate error naming the count.
func TestTelemetryHeadersBound(t *testing.T) {
	var b strings.Builder
	b.WriteString("telemetry:\n  headers:\n")
	for i := range config.MaxTelemetryHeaders + 1 {
		fmt.Fprintf(&b, "    h%d: v\n", i)
	}
	_, err := config.ParseWith(context.Background(), "t.yaml", []byte(telemetryAgents+b.String()), env(nil))
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Key != "telemetry.headers" || !strings.Contains(fe.Msg, "33 headers: at most 32") {
		t.Fatalf("33 headers: %v", err)
	}
	_, err = config.ParseWith(context.Background(), "t.yaml", []byte(telemetryAgents+"telemetry:\n  enabled: true\n"),
		env(map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "h=v," + func() string {
			var s []string
			for i := range config.MaxTelemetryHeaders {
				s = append(s, fmt.Sprintf("x%d=v", i))
			}
			return strings.Join(s, ",")
		}()}))
	if !errors.As(err, &fe) || fe.Source != "OTEL_EXPORTER_OTLP_HEADERS" {
		t.Fatalf("33 headers from the variable: %v", err)
	}
}

// Guards: the flush of queued spans at shutdown (5 s): a collector that
// takes the connection and never answers does not hold Runtime.Close
// past the bound.
func TestTelemetryCloseBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	stop, accepting := make(chan struct{}), make(chan struct{})
	defer func() {
		ln.Close()
		<-accepting // no conns.Go after this: Wait may begin
		close(stop)
		conns.Wait()
	}()
	go func() {
		defer close(accepting)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() { <-stop; c.Close() }) // reads nothing, answers nothing
		}
	}()
	section := fmt.Sprintf("telemetry:\n  enabled: true\n  endpoint: http://%s\n  timeout: 1m\n", ln.Addr())
	cfg, err := config.ParseWith(context.Background(), "t.yaml", []byte(telemetryAgents+section), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.DataDir = t.TempDir()
	ctx := context.Background()
	rt, err := cfg.Build(ctx, config.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Engine.Execute(ctx, "a", "hi"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = rt.Close(ctx)
	if took := time.Since(start); took > config.TelemetryShutdownTimeout+5*time.Second {
		t.Fatalf("Close took %v with a collector that never answers", took)
	}
	if err == nil || !strings.Contains(err.Error(), "telemetry: flushing spans") {
		t.Fatalf("Close: %v, want the failed flush said", err)
	}
}

package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// With telemetry on, the daemon exports to the collector: the door's
// server span continues the caller's traceparent, the run is its child,
// and stopping the daemon flushes what was queued.
func TestDaemonExportsSpans(t *testing.T) {
	recv := testutil.NewOTLPReceiver(t)
	td := startDaemon(t, `
agents:
  - id: assistant
    provider: echo
telemetry:
  enabled: true
  endpoint: ${COLLECTOR}
  service_name: daemon-test
`, map[string]string{"COLLECTOR": recv.URL, "AXOCOATL_DATA_DIR": t.TempDir()})
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	r := td.do(t, "POST", "/api/agents/assistant/execute", `{"input":"hi"}`, "traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	if r.status != 200 {
		t.Fatalf("execute: %d %s", r.status, r.body)
	}
	if code := td.stop(); code != exitOK {
		t.Fatalf("daemon exited with %d:\n%s", code, td.stderr.String())
	}
	// Stopped: Close flushed, the spans are there without waiting.
	spans := recv.Spans()
	var door, run *testutil.OTLPSpan
	for i, s := range spans {
		switch {
		case s.Name == "POST /api/agents/{id}/execute":
			door = &spans[i]
		case s.Name == "invoke_agent assistant":
			run = &spans[i]
		}
	}
	if door == nil || run == nil {
		t.Fatalf("spans %v", testutil.SpanNames(spans))
	}
	if door.TraceID != traceID || door.ParentID != "00f067aa0ba902b7" || run.TraceID != traceID || run.ParentID != door.SpanID || door.Service != "daemon-test" {
		t.Fatalf("door %+v\nrun %+v", *door, *run)
	}
	if strings.Contains(door.Name, "assistant") {
		t.Fatalf("the door span's name carries the agent id: %q", door.Name)
	}
	if !strings.Contains(td.stderr.String(), "egress="+strings.TrimPrefix(recv.URL, "http://")) {
		t.Fatalf("the startup log does not list the collector as egress:\n%s", td.stderr.String())
	}
}

// OTLP export brings no gRPC into the daemon's build (the issue's
// condition for the exporter; otlptracehttp would bring 69 packages).
func TestDaemonBuildsNoGRPC(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "google.golang.org/grpc") || strings.Contains(pkg, "grpc-gateway") || pkg == "go.opentelemetry.io/proto/otlp/collector/trace/v1" {
			t.Errorf("the daemon builds %s", pkg)
		}
	}
}

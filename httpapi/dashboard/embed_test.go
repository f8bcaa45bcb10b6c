package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/config"
)

// TestDashboardEmbedded: a host program built only from config.Load, Build
// and Mount on its own mux serves what the daemon serves: health, metrics,
// execute, the event WebSocket and the dashboard, which headless Chromium
// loads and runs an agent from (its TaskCompleted arriving over the
// stream). Before the HTTP API was a module, all of these answered 404
// under Mount.
func TestDashboardEmbedded(t *testing.T) {
	needChromium(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "host.yaml")
	if err := os.WriteFile(path, []byte("agents:\n  - id: assistant\n    provider: echo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(ctx, config.LoadOptions{Path: path, Lookup: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	srv := httptest.NewUnstartedServer(mux)
	cfg.SetListenAddr(srv.Listener.Addr().String())
	rt, err := cfg.Build(ctx, config.BuildOptions{})
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = rt.Shutdown(stop)
		srv.Close()
		if err := rt.Close(stop); err != nil {
			t.Error(err)
		}
	})
	if err := rt.Mount(mux); err != nil {
		t.Fatal(err)
	}
	srv.Start()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	for _, p := range []string{"/health", "/health/live", "/health/ready"} {
		if code, body := do("GET", p, ""); code != http.StatusOK {
			t.Errorf("GET %s: %d %s", p, code, body)
		}
	}
	if code, body := do("POST", "/api/agents/assistant/execute", `{"input":"hi from the host"}`); code != http.StatusOK || !strings.Contains(body, `"output":"hi from the host"`) {
		t.Fatalf("execute: %d %s", code, body)
	}

	b := newBrowser(t)
	openDashboard(t, b, srv.URL, "")
	runAssistant(t, b)
	b.checkConsole(t)

	// The runs were counted: metrics follow the lattice, so wait for the
	// subscriber to have seen them.
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := do("GET", "/metrics", "")
		if code == http.StatusOK && strings.Contains(body, `axocoatl_executions_total{agent="assistant",source="api",status="completed"}`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /metrics: %d, no completed execution counted:\n%.2000s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

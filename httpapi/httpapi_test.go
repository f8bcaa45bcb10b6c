package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Before Engine.Use the module answers 503 not_started, and it lists the
// same routes before and after Start (hosts compose the list before).
func TestNotStartedAndRoutesStable(t *testing.T) {
	m, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	before := m.Routes()
	w := httptest.NewRecorder()
	m.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/health", nil))
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), `"not_started"`) {
		t.Fatalf("before Start: %d %s", w.Code, w.Body)
	}
	srv, started, _ := serveAPI(t, Config{})
	after := started.Routes()
	if len(before) != len(after) || len(after) < 15 {
		t.Fatalf("routes before Start %d, after %d", len(before), len(after))
	}
	for i := range after {
		if before[i] != after[i] {
			t.Errorf("route %d: %+v before Start, %+v after", i, before[i], after[i])
		}
	}
	// Without hooks: always ready, no MCP servers, the Engine's tools.
	for path, want := range map[string]string{
		"/health/ready": `"mcp_servers":[]`,
		"/api/tools":    `{"tools":[]}`,
	} {
		res, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %d %s, want %s", path, res.StatusCode, b, want)
		}
	}
	srv.Client().CloseIdleConnections()
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{RequestTimeout: -1}, {HistoryEvents: -1}} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) took it", c)
		}
	}
}

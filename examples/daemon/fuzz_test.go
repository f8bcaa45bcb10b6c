package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzAPIBodies: whatever a client posts to execute or publish, the answer
// is a success or a 4xx in the error shape, never a 5xx or a panic.
// Run: go test -fuzz FuzzAPIBodies ./examples/daemon/
func FuzzAPIBodies(f *testing.F) {
	for _, seed := range []string{
		`{"input":"hi"}`, `{"type":"Deployed","payload":{"a":[1,2]}}`, `{"type":"X","payload":null}`,
		`{"input":"\ud800"}`, `[]`, `null`, `{"type":"TaskCompleted"}`, `{"input":"a"}{`, "\x00",
	} {
		f.Add(seed)
	}
	m := defaultHandler(f)
	post := func(path, body string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Host = "127.0.0.1:8080" // the default config's own address (example.com is refused)
		m.ServeHTTP(w, req)
		return w
	}
	// The bodies reach the handlers: a good one succeeds.
	if w := post("/api/agents/assistant/execute", `{"input":"hi"}`); w.Code != http.StatusOK {
		f.Fatalf("a good execute answered %d %s", w.Code, w.Body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, path := range []string{"/api/agents/assistant/execute", "/api/events"} {
			w := post(path, body)
			if w.Code >= 500 || (w.Code >= 300 && !strings.Contains(w.Body.String(), `"error":{"code":`)) {
				t.Fatalf("POST %s %q: %d %s", path, body, w.Code, w.Body)
			}
		}
	})
}

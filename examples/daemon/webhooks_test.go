package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/egress"
)

// The daemon delivers a run's TaskCompleted to a configured webhook, signed
// (the receiver verifies with egress.Verify and the secret), lists it under
// /api/webhooks, counts it in /metrics and names only the host in doctor.
func TestDaemonDeliversWebhooks(t *testing.T) {
	const secret = "whsec-test-0123456789abcdef"
	var mu sync.Mutex
	var got []map[string]any
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := egress.Verify(secret, r.Header, body, time.Minute); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var m map[string]any
		json.Unmarshal(body, &m)
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
	}))
	defer recv.Close()
	cfg := fmt.Sprintf(`
server:
  data_dir: %s
agents:
  - id: assistant
webhooks:
  - name: done
    url: %s/hook?token=query-secret-42
    events: [TaskCompleted]
    secret: ${HOOK_SECRET}
`, t.TempDir(), recv.URL)
	env := map[string]string{"HOOK_SECRET": secret}
	td := startDaemon(t, cfg, env)
	if r := td.do(t, http.MethodPost, "/api/agents/assistant/execute", `{"input":"ship it"}`); r.status != http.StatusOK {
		t.Fatalf("execute: %d %s", r.status, r.body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries after 10s", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got[0]["event_type"] != "TaskCompleted" || !strings.Contains(fmt.Sprint(got[0]["payload"]), "ship it") {
		t.Fatalf("delivery: %v", got[0])
	}
	r := td.do(t, http.MethodGet, "/api/webhooks", "")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"delivered":1`) || strings.Contains(string(r.body), "query-secret") || strings.Contains(string(r.body), secret) {
		t.Fatalf("/api/webhooks: %d %s", r.status, r.body)
	}
	if m := td.do(t, http.MethodGet, "/metrics", ""); !strings.Contains(string(m.body), "axocoatl_webhook") {
		t.Errorf("no webhook metrics in /metrics")
	}
	code, stdout, _ := runCLI(t, env, "doctor", "--config", writeConfig(t, cfg))
	host := strings.TrimPrefix(recv.URL, "http://")
	if code != exitOK || !strings.Contains(stdout, host+"  (webhook done)") || strings.Contains(stdout, "query-secret") || strings.Contains(stdout, secret) {
		t.Fatalf("doctor: %d\n%s", code, stdout)
	}
}

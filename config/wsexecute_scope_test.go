package config_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The WebSocket's execute answers a caller who may not run an agent as
// POST /api/agents/{id}/execute does, before any run_started: a read
// token gets 403, a token whose globs leave the agent out gets the 404
// of an agent that does not exist (no task id, no sign the agent exists).
func TestWebSocketExecuteRefusedBeforeRunStarted(t *testing.T) {
	_, srv := buildScoped(t, scopedYAML)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	first := func(token, agentID string) map[string]any {
		t.Helper()
		conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/api/events",
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.CloseNow()
		conn.SetReadLimit(8 << 20)
		b, _ := json.Marshal(map[string]any{"cmd": "execute", "agent_id": agentID, "input": "hi", "ref": "r1"})
		if err := conn.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				t.Fatalf("%s execute %s: %v", token[:6], agentID, err)
			}
			var f map[string]any
			_ = json.Unmarshal(data, &f)
			switch f["kind"] {
			case "run_started", "run_error", "result":
				return f
			}
		}
	}
	status := func(f map[string]any) any { return f["status"] }
	if f := first(readerToken, "support-a"); f["kind"] != "run_error" || status(f) != float64(403) || f["task_id"] != nil {
		t.Errorf("reader's execute of support-a: %v, want run_error 403 before any run_started", f)
	}
	want := first(runnerToken, "nope")
	if f := first(runnerToken, "billing"); f["kind"] != "run_error" || status(f) != float64(404) || f["task_id"] != nil {
		t.Errorf("runner's execute of billing: %v, want run_error 404 as for %v", f, want)
	}
	if f := first(runnerToken, "support-a"); f["kind"] != "run_started" {
		t.Errorf("runner's execute of support-a: %v, want run_started", f)
	}
}

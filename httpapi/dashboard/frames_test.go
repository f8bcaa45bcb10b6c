package dashboard_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/axocoatl/axocoatl-go/httpapi/dashboard"
)

// TestPageHandlesEveryFrame drives the page in Chromium against a server
// that speaks the contract's wire shapes with hostile data, for what the real
// daemon cannot be made to send on demand: a lagged frame, pending approvals
// (the approval module comes later), a token prompt, a dropped stream, and a
// failed run. The real daemon is driven in TestDashboardAgainstDaemon.
func TestPageHandlesEveryFrame(t *testing.T) {
	const token = "s3cret-token-0123456789"
	const evil = `<img src=x onerror="window.pwned=1">`
	b := newBrowser(t)

	var (
		conns     atomic.Int32
		resolved  atomic.Bool
		dropFirst = make(chan struct{})
		decisions = make(chan string, 4)
		handlers  sync.WaitGroup
	)
	stop := make(chan struct{})
	authed := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+token {
				w.WriteHeader(http.StatusUnauthorized)
				io.WriteString(w, `{"error":{"code":"unauthorized","message":"missing or wrong API token"}}`)
				return
			}
			h(w, r)
		}
	}
	writeJSON := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	approval := map[string]any{
		"approval_id": "ap1", "agent_id": "evil", "tool": "mcp__fs__" + evil, "server": "fs",
		"arguments":  map[string]string{"path": evil},
		"expires_at": time.Now().Add(time.Minute).UTC().Format(time.RFC3339),
	}

	// The history of a ready frame: a run that failed after a tool call
	// that failed, and one that was canceled, with hostile errors.
	now := time.Now().Unix()
	histEv := func(id, typ string, ts int64, p map[string]any) map[string]any {
		return map[string]any{"id": id, "type": typ, "produced_by": "evil", "timestamp": ts, "payload": p}
	}
	history := []any{
		histEv("h1", "AgentActivated", now-20, map[string]any{"agent_id": "evil", "task_id": "t-fail", "source": "a2a"}),
		histEv("h2", "ToolCalled", now-20, map[string]any{"agent_id": "evil", "task_id": "t-fail", "tool": "mcp__fs__read"}),
		histEv("h3", "ToolResult", now-19, map[string]any{"agent_id": "evil", "task_id": "t-fail", "tool": "mcp__fs__read", "ok": false, "error": "denied: " + evil, "duration_ms": 3}),
		histEv("h4", "AgentFailed", now-19, map[string]any{"agent_id": "evil", "task_id": "t-fail", "error": "model: " + evil, "duration_ms": 1200, "source": "a2a"}),
		histEv("h5", "AgentActivated", now-10, map[string]any{"agent_id": "evil", "task_id": "t-cancel", "source": "mcp"}),
		histEv("h6", "AgentFailed", now-9, map[string]any{"agent_id": "evil", "task_id": "t-cancel", "error": "context canceled", "duration_ms": 900, "source": "mcp", "canceled": true}),
	}

	mux := http.NewServeMux()
	mux.Handle("GET /{$}", dashboard.Handler())
	mux.HandleFunc("GET /api/agents", authed(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, []map[string]string{{"id": "evil", "name": evil, "provider": "echo", "model": evil, "status": "idle"}})
	}))
	mux.HandleFunc("GET /api/webhooks", authed(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"webhooks": []any{}, "missed": 0})
	}))
	mux.HandleFunc("GET /api/tools", authed(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"tools": []any{map[string]any{"name": "mcp__fs__" + evil, "server": "fs", "agents": []string{"evil"}}}})
	}))
	mux.HandleFunc("GET /health/ready", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not_ready", "mcp_servers": []any{
			map[string]any{"name": "fs", "transport": "stdio", "connected": false, "tools": []string{}, "error": "exited: " + evil},
		}})
	})
	mux.HandleFunc("GET /api/approvals", authed(func(w http.ResponseWriter, r *http.Request) {
		if resolved.Load() {
			writeJSON(w, 200, []any{})
			return
		}
		writeJSON(w, 200, []any{approval})
	}))
	mux.HandleFunc("POST /api/approvals/{id}", authed(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		resolved.Store(true)
		decisions <- r.PathValue("id") + " " + string(body)
		writeJSON(w, 200, map[string]string{"approval_id": r.PathValue("id"), "status": "approved"})
	}))
	mux.HandleFunc("POST /api/agents/{id}/execute", authed(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusBadGateway, map[string]any{"error": map[string]string{"code": "provider_failed", "message": "echo: " + evil}})
	}))
	mux.HandleFunc("GET /api/events", func(w http.ResponseWriter, r *http.Request) {
		// The page offers the token as a subprotocol, never in the URL.
		if r.Header.Get("Sec-WebSocket-Protocol") != "axocoatl.bearer."+token || r.URL.RawQuery != "" {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]string{"code": "unauthorized", "message": "token"}})
			return
		}
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"axocoatl.bearer." + token}}) // checks Origin against Host
		if err != nil {
			return
		}
		handlers.Add(1)
		defer handlers.Done()
		defer c.CloseNow()
		ctx := c.CloseRead(context.Background())
		send := func(v any) {
			raw, _ := json.Marshal(v)
			c.Write(ctx, websocket.MessageText, raw)
		}
		if conns.Add(1) == 1 {
			send(map[string]any{"kind": "ready", "pending_approvals": []any{approval}, "history": history})
			send(map[string]any{"kind": "event", "event": map[string]any{
				"id": "e1", "type": "DeployFinished", "produced_by": evil, "timestamp": time.Now().Unix(),
				"payload": map[string]string{"note": evil},
			}})
			send(map[string]any{"kind": "lagged", "missed": 7})
			select {
			case <-dropFirst:
				c.Close(websocket.StatusGoingAway, "restarting")
			case <-ctx.Done():
			case <-stop:
			}
			return
		}
		// A reconnect gets the same history again: nothing shows twice.
		send(map[string]any{"kind": "ready", "pending_approvals": []any{}, "history": history})
		select {
		case <-ctx.Done():
		case <-stop:
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		close(stop)
		handlers.Wait()
		srv.Close()
	})

	b.do(t, "load the page", chromedp.Navigate(srv.URL))

	// No token yet: the page asks for one, once, and keeps it for the session.
	msg := b.waitFor(t, "the token prompt", `!document.getElementById('auth').hidden && document.getElementById('auth-msg').textContent`)
	if !strings.Contains(msg, "token") {
		t.Errorf("token prompt says %q", msg)
	}
	b.do(t, "enter the token",
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.CSS("#auth button")))

	row := b.waitFor(t, "the agent row", `document.querySelector('#agents tr[data-agent="evil"]')?.textContent`)
	if !strings.Contains(row, evil) {
		t.Errorf("agent row %q does not show the name as text", row)
	}
	lagged := b.waitFor(t, "the lagged notice", `!document.getElementById('lagged').hidden && document.getElementById('lagged-text').textContent`)
	if !strings.Contains(lagged, "7 events were missed") {
		t.Errorf("lagged notice: %q", lagged)
	}
	// The history's runs: newest first, the failed one with its failed
	// tool call and error, the canceled one as canceled; the agent's last
	// run is the canceled one.
	b.waitFor(t, "the runs from history", `document.querySelectorAll('#runs > li[data-task]').length === 2`)
	if got := b.eval(t, `[...document.querySelectorAll('#runs > li[data-task]')].map(li => li.dataset.task + ':' + li.dataset.status).join(' ')`); got != "t-cancel:canceled t-fail:failed" {
		t.Errorf("runs = %q", got)
	}
	failed := b.eval(t, runSel("t-fail")+`.innerText`)
	for _, want := range []string{"via a2a", "mcp__fs__read", "denied: " + evil, "model: " + evil, "1.2 s"} {
		if !strings.Contains(failed, want) {
			t.Errorf("failed run %q lacks %q", failed, want)
		}
	}
	last := b.waitFor(t, "the agent's last run", `document.querySelector('#agents tr[data-agent="evil"] .last-run')?.textContent`)
	if !strings.Contains(last, "canceled") || !strings.Contains(last, "context canceled") {
		t.Errorf("agent's last run shows %q", last)
	}
	b.do(t, "filter failed", chromedp.SetValue(chromedp.ID("filter-status"), "failed"))
	b.eval(t, `(document.getElementById('filter-status').dispatchEvent(new Event('change')), '')`)
	if got := b.eval(t, `[...document.querySelectorAll('#runs > li[data-task]')].map(li => li.dataset.task).join(' ')`); got != "t-fail" {
		t.Errorf("runs filtered by failed = %q", got)
	}

	srvRow := b.waitFor(t, "the MCP server", `document.querySelector('#servers li[data-server="fs"]')?.textContent`)
	if !strings.Contains(srvRow, "exited: "+evil) {
		t.Errorf("server row %q does not show its error as text", srvRow)
	}
	tools := b.waitFor(t, "the agent's tools", `document.querySelector('#agents tr[data-agent="evil"] .tools .tool')?.textContent`)
	if tools != "mcp__fs__"+evil {
		t.Errorf("agent tools show %q", tools)
	}
	ev := b.waitFor(t, "the custom event", `document.querySelector('#feed li[data-type="DeployFinished"]')?.textContent`)
	if !strings.Contains(ev, evil) {
		t.Errorf("event row %q does not show its payload as text", ev)
	}
	ap := b.waitFor(t, "the pending approval", `document.querySelector('#approvals li[data-approval="ap1"]')?.textContent`)
	if !strings.Contains(ap, "mcp__fs__"+evil) {
		t.Errorf("approval %q does not show the tool as text", ap)
	}
	if got := b.eval(t, `sessionStorage.getItem('axocoatl.token')`); got != token {
		t.Errorf("sessionStorage token = %q", got)
	}

	b.screenshot(t, "frames")

	// Always allow.
	b.do(t, "allow the approval",
		chromedp.Click(chromedp.CSS(`#approvals li[data-approval="ap1"] button.allow-always`)))
	select {
	case d := <-decisions:
		var got struct{ Decision, Remember string }
		id, body, _ := strings.Cut(d, " ")
		if err := json.Unmarshal([]byte(body), &got); err != nil || id != "ap1" || got.Decision != "allow" || got.Remember != "always" {
			t.Errorf("decision posted: %q (%v)", d, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no decision posted")
	}
	b.waitFor(t, "the approvals panel to empty", `!document.getElementById('approvals-empty').hidden && document.querySelectorAll('#approvals li').length === 0 && 'empty'`)

	// A failed run shows the error JSON's message, as text.
	b.do(t, "run the agent",
		chromedp.SendKeys(chromedp.ID("run-input"), "hi"),
		chromedp.Click(chromedp.ID("run-submit")))
	out := b.waitFor(t, "the run error", `document.getElementById('run-output').dataset.state === 'error' && document.getElementById('run-output').textContent`)
	if out != "echo: "+evil {
		t.Errorf("run error shows %q", out)
	}

	// A dropped stream comes back by itself, after a backoff.
	close(dropFirst)
	b.waitFor(t, "the page to notice the drop", `document.getElementById('conn').dataset.state === 'down'`)
	for deadline := time.Now().Add(10 * time.Second); conns.Load() < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the page did not reconnect within 10s")
		}
	}
	b.waitFor(t, "the stream to be live again", `document.getElementById('conn').dataset.state === 'live'`)
	time.Sleep(300 * time.Millisecond) // the runs re-render in batches of 100 ms
	if got := b.eval(t, `String(document.querySelectorAll('#runs > li[data-task]').length) + ' ' + String(document.querySelectorAll('#feed li[data-id="h1"]').length) + ' ' + `+runSel("t-fail")+`.querySelector('details.raw summary').textContent`); got != "1 1 Raw events (4)" {
		t.Errorf("after the reconnect's history: %q (filtered runs, feed rows of h1, the run's events), want 1 1 Raw events (4)", got)
	}

	// Nothing sent was ever parsed as HTML.
	if got := b.eval(t, `String(document.querySelectorAll('img').length) + ' ' + String(document.scripts.length) + ' ' + String(window.pwned)`); got != "0 1 undefined" {
		t.Errorf("images, scripts, pwned = %q, want 0 1 undefined", got)
	}
	b.checkConsole(t)
}

package dashboard_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/axocoatl/axocoatl-go/httpapi/dashboard"
)

// TestConversationHostileShapes drives the conversations view against a
// server that answers in the API's shapes with what the real daemon never
// sends (as TestPageHandlesEveryFrame does for the stream): markup in every
// string, wrong types, unknown roles, arguments that are not JSON, missing
// members. The page renders all of it as text and keeps working.
func TestConversationHostileShapes(t *testing.T) {
	const evil = `<img src=x onerror="window.__pwned=1">`
	b := newBrowser(t)
	writeJSON := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	info := map[string]any{"id": "c1", "agent_id": "a" + evil, "title": "t" + evil, "source": evil, "created": "not a time", "updated": 42, "messages": "many"}
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", dashboard.Handler())
	mux.HandleFunc("GET /api/agents", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"agents": []map[string]string{{"id": "a" + evil, "provider": "echo", "status": "idle"}}})
	})
	mux.HandleFunc("GET /api/conversations", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"conversations": []any{info, nil, 7, map[string]any{"id": 9}}, "next": 5})
	})
	mux.HandleFunc("GET /api/conversations/c1", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"conversation": info, "messages": []any{
			map[string]any{"role": "user", "content": "u" + evil, "at": "yesterday"},
			map[string]any{"role": "assistant", "content": 42, "tool_calls": []any{
				map[string]any{"id": "k1", "name": "n" + evil, "arguments": "not json " + evil},
				nil,
				map[string]any{"id": "k2", "name": 5, "arguments": map[string]string{"x": evil}},
			}},
			map[string]any{"role": "tool", "tool_call_id": "k1", "content": "r" + evil, "is_error": true},
			map[string]any{"role": evil, "content": "s" + evil},
			nil,
			"text",
		}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	b.do(t, "load the page", chromedp.Navigate(srv.URL+"/"))
	b.waitFor(t, "the list", `document.querySelector('#conv-list li[data-conversation="c1"] button')`)
	if got := b.eval(t, `String(document.querySelectorAll('#conv-list li').length)`); got != "1" {
		t.Errorf("%s list items, want only the one with a string id", got)
	}
	if got := b.eval(t, `String(document.getElementById('conv-more').hidden)`); got != "true" {
		t.Error("a next cursor that is not a string offers More")
	}
	b.do(t, "open it", chromedp.Click(chromedp.CSS(`#conv-list li[data-conversation="c1"] button`)))
	got := b.waitFor(t, "the messages", `document.querySelectorAll('#conv-messages > li').length === 6 && document.getElementById('conv-messages').textContent`)
	for _, want := range []string{"u" + evil, "tool call n" + evil, "not json " + evil, `"x": "` + strings.ReplaceAll(evil, `"`, `\"`) + `"`, "tool result of n" + evil, "r" + evil, "s" + evil, evil} {
		if !strings.Contains(got, want) {
			t.Errorf("messages lack %q:\n%s", want, got)
		}
	}
	if n := b.eval(t, `String(document.querySelectorAll('#conv-messages details.tool-call').length)`); n != "2" {
		t.Errorf("%s tool calls shown, want the 2 that are objects", n)
	}
	if got := b.eval(t, `document.querySelector('#conv-messages li[data-role="tool"]').dataset.error + ' ' + document.getElementById('conv-title').textContent`); got != "true t"+evil {
		t.Errorf("tool result error flag and title: %q", got)
	}
	if got := b.eval(t, `document.querySelectorAll('img').length + ' ' + String(window.__pwned)`); got != "0 undefined" {
		t.Errorf("img elements, window.__pwned: %s", got)
	}
	b.checkConsole(t)
}

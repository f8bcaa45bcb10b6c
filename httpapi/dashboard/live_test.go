package dashboard_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// watchLiveJS records, in the page, every length the live text of a run
// had while it ran, as the page showed it: in the run form's output, in
// the runs list (a running run's live text) and in the open conversation
// (the turn being written). A MutationObserver sees each change however
// loaded the machine, where polling from the test could miss them.
const watchLiveJS = `(() => {
  window.__live = { form: [], runs: [], conv: [] };
  const watch = (name, root, read) => new MutationObserver(() => {
    const n = read();
    const seen = window.__live[name];
    if (n && seen[seen.length - 1] !== n) seen.push(n);
  }).observe(root, { childList: true, characterData: true, subtree: true });
  watch('form', document.getElementById('run-output'), () => {
    const o = document.getElementById('run-output');
    return o.dataset.state === 'running' ? o.textContent.length : 0;
  });
  watch('runs', document.getElementById('runs'), () => {
    const p = document.querySelector('#runs li[data-status="running"] pre[data-live="true"]');
    return p ? p.textContent.length : 0;
  });
  watch('conv', document.getElementById('conv-messages'), () => {
    const p = document.querySelector('#conv-messages li[data-live="true"] pre');
    return p ? p.textContent.length : 0;
  });
  return 'ok';
})()`

// grewBeforeTheEnd checks what watchLiveJS recorded under name: at least
// two lengths, all short of the whole answer (so the page showed the text
// growing while the run ran).
func grewBeforeTheEnd(t *testing.T, b *browser, name string, full int) {
	t.Helper()
	raw := b.eval(t, `JSON.stringify(window.__live.`+name+`)`)
	var seen []int
	if err := json.Unmarshal([]byte(raw), &seen); err != nil {
		t.Fatalf("%s: %s: %v", name, raw, err)
	}
	partial := 0
	for _, n := range seen {
		if n < full {
			partial++
		}
	}
	if partial < 2 {
		t.Errorf("%s: the live text had the lengths %v while the run ran (the answer is %d): it did not grow as the model wrote it", name, seen, full)
	}
	t.Logf("%s: %d lengths seen while running, first %v", name, len(seen), seen[:min(len(seen), 5)])
}

// Acceptance (#26, WebSocket and dashboard): a streaming model (200
// deltas 5 ms apart, through the openai provider of the real daemon) and
// headless Chromium: the page shows the run's text growing before the run
// ends in the run form's output and in the runs list (a run it starts over
// its socket), in the open conversation (a turn sent from its box), and
// in the runs list for a run another door started (HTTP SSE), which the
// page follows by its task id; each ends as the model's whole answer.
func TestDashboardLiveText(t *testing.T) {
	needChromium(t)
	chat := testutil.NewStreamingChat(t, 200, 5*time.Millisecond)
	bin := buildDaemon(t)
	cfg := filepath.Join(t.TempDir(), "axocoatl.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
providers:
  openai: { base_url: %s, api_key: sk-test, max_retries: -1 }
agents:
  - { id: streamer, provider: openai }
`, chat.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, bin, "AXOCOATL_CONFIG="+cfg)
	full := len(chat.Text())

	b := newBrowser(t)
	b.do(t, "load the dashboard", chromedp.Navigate(d.URL+"/"))
	b.waitFor(t, "the live stream", `document.getElementById('conn').dataset.state === 'live'`)
	b.waitFor(t, "the agent", `[...document.getElementById('run-agent').options].some(o => o.value === 'streamer')`)
	b.eval(t, watchLiveJS)

	// The run form: the output grows, then is the whole answer.
	b.eval(t, `(document.getElementById('run-agent').value = 'streamer', document.getElementById('run-input').value = 'go', '')`)
	b.eval(t, `(document.getElementById('run-submit').click(), '')`)
	out := b.waitFor(t, "the run's output", `(o => (o.dataset.state === 'done' || o.dataset.state === 'error') && o.dataset.state + ':' + o.textContent)(document.getElementById('run-output'))`)
	if out != "done:"+chat.Text() {
		t.Fatalf("run output %.200q", out)
	}
	grewBeforeTheEnd(t, b, "form", full)
	grewBeforeTheEnd(t, b, "runs", full)
	b.waitFor(t, "the run completed in the list", `(l => l && l.dataset.status === 'completed' && l.querySelector('pre.run-output').textContent === `+jsString(chat.Text())+`)(document.querySelector('#runs li[data-agent="streamer"]'))`)
	// Its tokens, from TaskCompleted's usage.
	wantUsage := fmt.Sprintf("%d in, %d cached / %d out tokens", chat.Prompt, chat.Cached, chat.Completion)
	b.waitFor(t, "the run's tokens in the list", `(l => l && l.querySelector('.run-usage').textContent === `+jsString(wantUsage)+`)(document.querySelector('#runs li[data-agent="streamer"]'))`)

	// The conversation view: a turn sent from its box grows there.
	status, res := execute(t, d, "streamer", "start", "new")
	id, _ := res["conversation_id"].(string)
	if status != http.StatusOK || id == "" {
		t.Fatalf("new conversation: %d %v", status, res)
	}
	b.eval(t, `(document.getElementById('conv-agent').value = '', document.getElementById('conv-agent').dispatchEvent(new Event('change')), '')`)
	b.waitFor(t, "the conversation in the list", `document.querySelector(`+jsString(`#conv-list li[data-conversation="`+id+`"] button`)+`)`)
	b.eval(t, `(document.querySelector(`+jsString(`#conv-list li[data-conversation="`+id+`"] button`)+`).click(), '')`)
	b.waitFor(t, "the conversation open", `document.getElementById('conv-view').dataset.conversation === `+jsString(id)+` && document.querySelectorAll('#conv-messages > li').length === 2`)
	b.eval(t, `(document.getElementById('conv-input').value = 'more', document.getElementById('conv-send').click(), '')`)
	b.waitFor(t, "the turn recorded", `!document.getElementById('conv-send').disabled && document.querySelectorAll('#conv-messages > li[data-role]:not([data-live])').length === 4 && !document.querySelector('#conv-messages li[data-live]')`)
	if got := b.eval(t, `[...document.querySelectorAll('#conv-messages > li[data-role="assistant"] pre')].pop().textContent`); got != chat.Text() {
		t.Fatalf("the recorded answer %.200q", got)
	}
	grewBeforeTheEnd(t, b, "conv", full)

	// A run of another door (SSE execute: it streams): the page follows it
	// by the task id of its AgentActivated and shows it growing.
	b.eval(t, `(window.__live.runs = [], '')`)
	done := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, d.URL+"/api/agents/streamer/execute", strings.NewReader(`{"input":"elsewhere"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := client.Do(req)
		if err != nil {
			done <- err.Error()
			return
		}
		defer resp.Body.Close()
		last := ""
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "event: ") {
				last = sc.Text()
			}
		}
		done <- last
	}()
	select {
	case last := <-done:
		if last != "event: result" {
			t.Fatalf("the SSE execute ended with %q", last)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the SSE execute did not end")
	}
	b.waitFor(t, "the other door's run completed in the list", `[...document.querySelectorAll('#runs li[data-agent="streamer"]')].filter(l => l.dataset.status === 'completed').length === 3`)
	grewBeforeTheEnd(t, b, "runs", full)
	b.checkConsole(t)
}

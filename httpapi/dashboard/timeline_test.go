package dashboard_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// waterfallJS reads the open waterfall as the page draws it: each row's
// kind, status, text, and its bar's and attempts' boxes against its track.
const waterfallJS = `JSON.stringify([...document.querySelectorAll('#tl-rows > li')].map((li) => {
  const track = li.querySelector('.tl-track').getBoundingClientRect();
  const box = (n) => { const b = n.getBoundingClientRect(); return { left: b.left - track.left, width: b.width }; };
  return { kind: li.dataset.kind, status: li.dataset.status, text: li.innerText, track: track.width,
    bar: box(li.querySelector('.tl-bar')), attempts: [...li.querySelectorAll('.tl-attempt')].map(box) };
}))`

type drawnRow struct {
	Kind, Status, Text string
	Track              float64
	Bar                struct{ Left, Width float64 }
	Attempts           []struct{ Left, Width float64 }
}

// Acceptance (#28, the dashboard's run timeline): the built daemon, a
// model that calls an MCP tool behind an approval, a webhook that refuses
// TaskCompleted's first attempt. A click on the running run's Timeline
// shows its waterfall with the approval waiting; once the run is allowed
// from the approvals panel the same waterfall, without another click,
// shows the run, both model calls, the tool call with the approval wait
// inside it (approved, and by whom), and the webhook delivery with its two
// attempts: every bar inside its track, wide enough to see, placed in
// order.
func TestRunTimelineWaterfall(t *testing.T) {
	needChromium(t)
	bin := buildDaemon(t)
	modelURL, mcpURL, calls := testutil.DeployPeers(t)
	var hits atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if hits.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(hook.Close)

	cfg := filepath.Join(t.TempDir(), "axocoatl.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
providers:
  openai: { base_url: %s/v1, api_key: sk-test, max_retries: -1 }
agents:
  - { id: assistant, provider: openai, model: m }
mcp_servers:
  - { name: ops, url: %s/mcp }
webhooks:
  - { name: alerts, url: %s/hook, events: [TaskCompleted], backoff_base: 20ms, backoff_max: 50ms }
`, modelURL, mcpURL, hook.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, bin, "AXOCOATL_CONFIG="+cfg)
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if res, err := client.Get(d.URL + "/health/ready"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("daemon not ready (MCP server connected) within 20s")
		}
	}

	b := newBrowser(t)
	b.do(t, "load the dashboard", chromedp.Navigate(d.URL+"/"))
	b.waitFor(t, "the live stream", `document.getElementById('conn').dataset.state === 'live'`)
	ran := make(chan string, 1)
	go func() {
		res, err := client.Post(d.URL+"/api/agents/assistant/execute", "application/json", strings.NewReader(`{"input":"ship it"}`))
		if err != nil {
			ran <- err.Error()
			return
		}
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		ran <- fmt.Sprintf("%d %s", res.StatusCode, out)
	}()
	b.waitFor(t, "the pending approval", `document.querySelector('#approvals li[data-approval]')`)
	task := b.waitFor(t, "the running run", `(li => li && li.dataset.task)(document.querySelector('#runs > li[data-status="running"]'))`)

	// Open the running run's waterfall: the wait is its last row, live.
	b.do(t, "open the timeline", chromedp.Click(chromedp.CSS(`#runs > li[data-task="`+task+`"] button.run-timeline`)))
	b.waitFor(t, "the waterfall of the run", `document.getElementById('timeline').dataset.task === `+jsString(task)+` && !document.getElementById('timeline').hidden`)
	b.waitFor(t, "the approval waiting in the waterfall", `(li => li && li.dataset.status === 'waiting' && li.dataset.kind === 'approval')(document.querySelector('#tl-rows > li:last-child'))`)
	b.screenshot(t, "timeline-waiting")
	if n := calls.Load(); n != 0 {
		t.Fatalf("the tool ran %d times before anyone allowed it", n)
	}

	b.do(t, "allow once", chromedp.Click(chromedp.CSS(`#approvals li[data-approval] button.allow`)))
	select {
	case got := <-ran:
		if !strings.HasPrefix(got, "200 ") {
			t.Fatalf("run after allow: %s", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not finish within 30s of the click")
	}
	// The same waterfall follows the run to its end and its delivery.
	b.waitFor(t, "the delivered webhook in the waterfall", `(li => li && li.dataset.kind === 'webhook' && li.dataset.status === 'delivered' && li.querySelectorAll('.tl-attempt').length === 2)(document.querySelector('#tl-rows > li:last-child'))`)
	b.screenshot(t, "timeline-done")
	var rows []drawnRow
	if err := json.Unmarshal([]byte(b.eval(t, waterfallJS)), &rows); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range rows {
		kinds = append(kinds, r.Kind)
	}
	if got, want := strings.Join(kinds, " "), "run model tool approval model webhook"; got != want {
		t.Fatalf("waterfall rows %q, want %q", got, want)
	}
	for _, r := range rows {
		bars := append([]struct{ Left, Width float64 }{r.Bar}, r.Attempts...)
		for _, bar := range bars {
			if r.Track < 100 || bar.Width < 2.5 || bar.Left < -0.5 || bar.Left+bar.Width > r.Track+4 {
				t.Errorf("%s row: a bar at %.1f+%.1f px in a track of %.1f px", r.Kind, bar.Left, bar.Width, r.Track)
			}
		}
	}
	run, model1, tool, wait, model2, hookRow := rows[0], rows[1], rows[2], rows[3], rows[4], rows[5]
	if run.Status != "completed" || run.Bar.Left > 0.5 || run.Bar.Width < run.Track/4 {
		t.Errorf("run bar %+v of %.0f px (%s)", run.Bar, run.Track, run.Status)
	}
	// In order: each starts where (or after) the one before it did; the
	// wait inside the tool call; the delivery after the run.
	for i, r := range []drawnRow{model1, tool, model2} {
		if r.Bar.Left+1 < run.Bar.Left || r.Bar.Left+r.Bar.Width > run.Bar.Left+run.Bar.Width+4 {
			t.Errorf("row %d (%s) at %+v lies outside the run's bar %+v", i+1, r.Kind, r.Bar, run.Bar)
		}
	}
	if tool.Bar.Left+1 < model1.Bar.Left || model2.Bar.Left+1 < tool.Bar.Left+tool.Bar.Width-4 {
		t.Errorf("model %+v, tool %+v, model %+v out of order", model1.Bar, tool.Bar, model2.Bar)
	}
	if wait.Bar.Left+1 < tool.Bar.Left || wait.Bar.Left+wait.Bar.Width > tool.Bar.Left+tool.Bar.Width+4 || wait.Bar.Width < run.Bar.Width/4 {
		t.Errorf("the wait %+v is not the most of the tool call %+v (run %+v)", wait.Bar, tool.Bar, run.Bar)
	}
	if !strings.Contains(wait.Text, "approved by http") || !strings.Contains(tool.Text, "mcp__ops__deploy") || !strings.Contains(model1.Text, "chat m") {
		t.Errorf("labels: wait %q, tool %q, model %q", wait.Text, tool.Text, model1.Text)
	}
	if hookRow.Bar.Left+4 < run.Bar.Left+run.Bar.Width || !strings.Contains(hookRow.Text, "503 → 200") || !strings.Contains(hookRow.Text, "alerts") {
		t.Errorf("webhook row %q at %+v (run ends at %.1f px)", hookRow.Text, hookRow.Bar, run.Bar.Left+run.Bar.Width)
	}
	b.do(t, "close the timeline", chromedp.Click(chromedp.CSS(`#tl-close`)))
	b.waitFor(t, "the waterfall closed", `document.getElementById('timeline').hidden && !document.querySelector('#runs > li[aria-current]')`)
	b.checkConsole(t)
}

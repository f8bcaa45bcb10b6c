package dashboard_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/chromedp/chromedp"
)

// toolDaemon starts the built daemon with an OpenAI-wire model that calls
// the MCP tool ops/deploy once per run (allowed by policy), and extra YAML
// appended to its config. It returns the daemon once /health/ready is 200,
// or as soon as /health answers when wantReady is false.
func toolDaemon(t *testing.T, bin, extra string, wantReady bool) *daemon {
	t.Helper()
	modelURL, mcpURL, _ := testutil.DeployPeers(t)
	cfg := filepath.Join(t.TempDir(), "axocoatl.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
providers:
  openai: { base_url: %s/v1, api_key: sk-test, max_retries: -1 }
agents:
  - { id: assistant, provider: openai }
mcp_servers:
  - { name: ops, url: %s/mcp }
%s
approval:
  default: allow
`, modelURL, mcpURL, extra)), 0o600)
	d := startDaemon(t, bin, "AXOCOATL_CONFIG="+cfg)
	if wantReady {
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if res, err := d.Client.Get(d.URL + "/health/ready"); err == nil {
				res.Body.Close()
				if res.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatal("daemon not ready (MCP server connected) within 20s")
			}
		}
	}
	return d
}

// The acceptance test for history and runs: three runs of an agent
// that calls an MCP tool happen with no page open; a tab opened afterwards
// shows the three, newest first, each grouped by its task with its door,
// its tool call and result, its outcome and output, and its raw events one
// click away. The filters narrow the list.
func TestRunsFromHistory(t *testing.T) {
	needChromium(t)
	bin := buildDaemon(t)
	d := toolDaemon(t, bin, "", true)

	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var tasks []string
	for i := range 3 {
		res, err := client.Post(d.URL+"/api/agents/assistant/execute", "application/json", strings.NewReader(fmt.Sprintf(`{"input":"ship %d"}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			TaskID string `json:"task_id"`
			Output any    `json:"output"`
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if err := json.Unmarshal(body, &out); err != nil || res.StatusCode != 200 || out.TaskID == "" {
			t.Fatalf("run %d: %d %s", i, res.StatusCode, body)
		}
		tasks = append(tasks, out.TaskID)
	}

	b := newBrowser(t)
	b.do(t, "load the dashboard", chromedp.Navigate(d.URL+"/"))
	b.waitFor(t, "the three runs", `document.querySelectorAll('#runs > li[data-task]').length === 3`)
	b.waitFor(t, "every run completed", `[...document.querySelectorAll('#runs > li[data-task]')].every(li => li.dataset.status === 'completed')`)

	order := b.eval(t, `[...document.querySelectorAll('#runs > li[data-task]')].map(li => li.dataset.task).join(' ')`)
	// Newest first; runs within the same second keep no order, so check the
	// set, and the order only where the timestamps differ.
	for _, id := range tasks {
		if !strings.Contains(order, id) {
			t.Errorf("runs %q lack task %s", order, id)
		}
	}
	for _, id := range tasks {
		row := b.eval(t, runSel(id)+`.innerText`)
		for _, want := range []string{"assistant", "via api", "completed", "mcp__ops__deploy", "ok", "deployed to prod"} {
			if !strings.Contains(row, want) {
				t.Errorf("run %s shows %q, lacking %q", id, row, want)
			}
		}
		if n := b.eval(t, `String(`+runSel(id)+`.querySelectorAll('.run-tools li[data-tool="mcp__ops__deploy"][data-state="ok"]').length)`); n != "1" {
			t.Errorf("run %s: %s ok calls of the tool, want 1", id, n)
		}
		// Raw JSON one click away: the run's own events, ToolCalled among them.
		raw := b.eval(t, runSel(id)+`.querySelector('details.raw pre').textContent`)
		var evs []struct {
			Type    string         `json:"type"`
			Payload map[string]any `json:"payload"`
		}
		if err := json.Unmarshal([]byte(raw), &evs); err != nil {
			t.Fatalf("raw events of %s: %v", id, err)
		}
		types := map[string]bool{}
		for _, e := range evs {
			types[e.Type] = true
			if e.Payload["task_id"] != id {
				t.Errorf("run %s holds an event of task %v", id, e.Payload["task_id"])
			}
		}
		for _, want := range []string{"AgentActivated", "ToolCalled", "ToolResult", "TaskCompleted"} {
			if !types[want] {
				t.Errorf("raw events of %s lack %s: %v", id, want, types)
			}
		}
	}

	// The filters: a status no run has empties the list; back to all.
	b.do(t, "filter failed", chromedp.SetValue(chromedp.ID("filter-status"), "failed"))
	b.eval(t, `(document.getElementById('filter-status').dispatchEvent(new Event('change')), '')`)
	b.waitFor(t, "no failed run", `document.querySelectorAll('#runs > li').length === 0 && !document.getElementById('runs-empty').hidden`)
	b.do(t, "filter by type", chromedp.SetValue(chromedp.ID("filter-status"), ""), chromedp.SetValue(chromedp.ID("filter-type"), "ToolResult"))
	b.eval(t, `(document.getElementById('filter-type').dispatchEvent(new Event('change')), '')`)
	b.waitFor(t, "the runs with a ToolResult", `document.querySelectorAll('#runs > li[data-task]').length === 3`)

	// The agent shows its real tools, its last run and the provider's
	// default model (the config names none).
	row := b.waitFor(t, "the agent's tools", `(r => r && r.querySelector('.tools .tool') && r.innerText)(document.querySelector('#agents tr[data-agent="assistant"]'))`)
	for _, want := range []string{"mcp__ops__deploy", "gpt-4o-mini", "completed"} {
		if !strings.Contains(row, want) {
			t.Errorf("agent row %q lacks %q", row, want)
		}
	}
	b.screenshot(t, "runs")
	b.checkConsole(t)
}

// runSel is the JavaScript expression of the runs list's row for a task.
func runSel(task string) string {
	return `[...document.querySelectorAll('#runs > li[data-task]')].find(li => li.dataset.task === ` + jsString(task) + `)`
}

// The MCP servers panel shows a server that failed to start, with its
// reason, beside one that is up with its tool count.
func TestMCPServersPanel(t *testing.T) {
	needChromium(t)
	bin := buildDaemon(t)
	d := toolDaemon(t, bin, "  - { name: broken, command: /nonexistent/mcp-server }", true)

	b := newBrowser(t)
	b.do(t, "load the dashboard", chromedp.Navigate(d.URL+"/"))
	broken := b.waitFor(t, "the broken server", `document.querySelector('#servers li[data-server="broken"][data-state="disconnected"] .server-error')?.closest('li').innerText`)
	for _, want := range []string{"broken", "not connected", "stdio", "0 tools", "/nonexistent/mcp-server"} {
		if !strings.Contains(broken, want) {
			t.Errorf("broken server shows %q, lacking %q", broken, want)
		}
	}
	ops := b.waitFor(t, "the ops server", `document.querySelector('#servers li[data-server="ops"][data-state="connected"]')?.innerText`)
	if !strings.Contains(ops, "1 tool") || strings.Contains(ops, "not connected") {
		t.Errorf("ops server shows %q", ops)
	}
	b.screenshot(t, "servers")
	b.checkConsole(t)
}

// layoutJS measures the page as laid out now and returns the problems it
// finds, one a line: a table header on more than one line or wider than its
// cell (a mid-word break, "Provid/er"), a table that needs a horizontal
// scroll, a page wider than the window, a card narrower than minCard px.
const layoutJS = `((minCard) => {
  const bad = [];
  for (const th of document.querySelectorAll('th')) {
    if (!th.offsetParent) continue;
    const r = document.createRange();
    r.selectNodeContents(th);
    const lines = new Set([...r.getClientRects()].map((x) => Math.round(x.top))).size;
    if (lines !== 1 || th.scrollWidth > th.clientWidth + 1) bad.push('header "' + th.textContent + '": ' + lines + ' lines, ' + th.scrollWidth + '/' + th.clientWidth + ' px');
  }
  for (const s of document.querySelectorAll('.scroll')) {
    if (s.scrollWidth > s.clientWidth + 1) bad.push('table scrolls: ' + s.scrollWidth + '/' + s.clientWidth + ' px');
  }
  const root = document.documentElement;
  if (root.scrollWidth > root.clientWidth + 1) bad.push('page scrolls sideways: ' + root.scrollWidth + '/' + root.clientWidth + ' px');
  for (const c of document.querySelectorAll('main > .card')) {
    if (c.hidden) continue; // a panel of an API the daemon lacks
    const w = c.getBoundingClientRect().width;
    if (w < minCard) bad.push('card "' + c.querySelector('h2').textContent + '" is ' + Math.round(w) + ' px wide');
  }
  return bad.join('\n');
})`

// requestsJS lists every request of the page (its resource timing entries,
// the API calls included) that got a 4xx or 5xx, and how many it made.
const requestsJS = `(() => {
  const all = performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'));
  const bad = all.filter((e) => e.responseStatus >= 400).map((e) => e.responseStatus + ' ' + e.name);
  return all.length + (bad.length ? '\n' + bad.join('\n') : '');
})()`

// The layout acceptance: at 1400 px no table header breaks mid-word
// and the agents table fits without a sideways scroll in a card wider than a
// third of the page; at 800 px the agents card is full width, no card is narrower than 340 px and nothing scrolls
// sideways. No request of the page gets a 4xx or 5xx.
func TestLayoutAndRequests(t *testing.T) {
	needChromium(t)
	bin := buildDaemon(t)
	d := toolDaemon(t, bin, "", true)
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := client.Post(d.URL+"/api/agents/assistant/execute", "application/json", strings.NewReader(`{"input":"ship"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	noConversations := conversationsMissing(t, d)

	for _, size := range []struct {
		width, minCard int64
		agentsMin      float64
	}{{1400, 300, 800}, {800, 340, 700}} {
		t.Run(fmt.Sprint(size.width), func(t *testing.T) {
			b := newBrowser(t)
			b.do(t, "size the window", chromedp.EmulateViewport(size.width, 900))
			b.do(t, "load the dashboard", chromedp.Navigate(d.URL+"/"))
			b.waitFor(t, "the run", `document.querySelector('#runs > li[data-status="completed"]')`)
			b.waitFor(t, "the agent's tools", `document.querySelector('#agents tr[data-agent="assistant"] .tools .tool')`)
			b.waitFor(t, "the MCP server", `document.querySelector('#servers li[data-server="ops"]')`)
			b.waitFor(t, "the webhooks panel", `!document.getElementById('webhooks-empty').hidden`)
			b.screenshot(t, fmt.Sprint("layout-", size.width))
			if bad := b.eval(t, layoutJS+fmt.Sprintf("(%d)", size.minCard)); bad != "" {
				t.Errorf("at %d px:\n%s", size.width, bad)
			}
			w := b.eval(t, `String(document.querySelector('#agents').closest('.card').getBoundingClientRect().width)`)
			var agentsW float64
			fmt.Sscan(w, &agentsW)
			if agentsW < size.agentsMin {
				t.Errorf("at %d px the agents card is %s px wide, want ≥ %.0f", size.width, w, size.agentsMin)
			}
			reqs := b.eval(t, requestsJS)
			n, bad, _ := strings.Cut(reqs, "\n")
			if noConversations {
				// The page asks whether the daemon keeps conversations;
				// until the API is merged it answers 404, and only that.
				bad = regexp.MustCompile(`(?m)^404 \S+/api/conversations\?limit=20$\n?`).ReplaceAllString(bad, "")
			}
			if bad != "" || n == "0" || n == "1" {
				t.Errorf("requests (count, then failures): %s", reqs)
			}
			b.checkConsole(t)
		})
	}
}

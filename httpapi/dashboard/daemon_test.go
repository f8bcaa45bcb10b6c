package dashboard_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// TestDashboardAgainstDaemon is the acceptance test of the dashboard: the
// built daemon binary with its default config, the page loaded in headless
// Chromium, the assistant agent shown, run from the form, and its
// TaskCompleted event arriving live over the WebSocket.
func TestDashboardAgainstDaemon(t *testing.T) {
	needChromium(t)
	bin := buildDaemon(t)

	t.Run("open", func(t *testing.T) {
		d := startDaemon(t, bin)
		// The daemon serves the page as this package does: public, with its
		// security headers intact.
		res, err := d.Client.Get(d.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Security-Policy"), "default-src 'none'; script-src 'sha256-") {
			t.Errorf("GET /: %s, CSP %q", res.Status, res.Header.Get("Content-Security-Policy"))
		}
		b := newBrowser(t)
		openDashboard(t, b, d.URL, "")
		runAssistant(t, b)
		b.checkConsole(t)
	})

	// With api_token set the page asks for it, then works as before.
	t.Run("token", func(t *testing.T) {
		const token = "dashboard-test-token-3f9c"
		d := startDaemon(t, bin, "AXOCOATL_API_TOKEN="+token)
		b := newBrowser(t)
		openDashboard(t, b, d.URL, token)
		runAssistant(t, b)
		b.checkConsole(t)
	})

	// The page rides out a restart of the daemon: the stream comes back by
	// itself and events flow again, without a reload.
	t.Run("restart", func(t *testing.T) {
		addr := testutil.FreeAddr(t)
		d := startDaemonAt(t, bin, addr)
		b := newBrowser(t)
		openDashboard(t, b, d.URL, "")
		runAssistant(t, b)
		d.stop(t)
		b.waitFor(t, "the page to see the daemon go", `document.getElementById('conn').dataset.state === 'down'`)
		startDaemonAt(t, bin, addr)
		b.waitFor(t, "the stream to come back", `document.getElementById('conn').dataset.state === 'live'`)
		runAssistant(t, b)
		b.checkConsole(t)
	})
}

// openDashboard loads the page, gives it the token if there is one, and
// checks that it shows the assistant agent and a live stream.
func openDashboard(t *testing.T, b *browser, url, token string) {
	t.Helper()
	b.do(t, "load the dashboard", chromedp.Navigate(url+"/"))
	if token != "" {
		prompt := b.waitFor(t, "the token prompt", `!document.getElementById('auth').hidden && document.getElementById('auth').innerText`)
		// The operator is told where the token is set.
		for _, want := range []string{"needs its API token", "server.api_token", "AXOCOATL_API_TOKEN"} {
			if !strings.Contains(prompt, want) {
				t.Errorf("token prompt %q lacks %q", prompt, want)
			}
		}
		// Before the token, the panels that need it cannot know what is
		// configured, and say so rather than "None configured".
		for _, panel := range []string{"servers", "webhooks"} {
			got := b.waitFor(t, "the "+panel+" panel waiting for the token", `(p => !document.getElementById(p + '-unknown').hidden && document.getElementById(p + '-empty').hidden && document.getElementById(p + '-unknown').textContent)('`+panel+`')`)
			if !strings.Contains(got, "API token") {
				t.Errorf("%s panel before the token says %q", panel, got)
			}
		}
		b.do(t, "enter the token",
			chromedp.SendKeys(chromedp.ID("token"), token),
			chromedp.Click(chromedp.CSS("#auth button")))
	}

	row := b.waitFor(t, "the assistant agent", `document.querySelector('#agents tr[data-agent="assistant"]')?.innerText`)
	for _, want := range []string{"assistant", "echo", "idle"} {
		if !strings.Contains(row, want) {
			t.Errorf("assistant row %q lacks %q", row, want)
		}
	}
	// The event must come over the stream, so wait until it is up.
	b.waitFor(t, "the live stream", `document.getElementById('conn').dataset.state === 'live'`)
}

// runAssistant runs the assistant from the form and checks its output and
// its TaskCompleted event arriving in the live feed.
func runAssistant(t *testing.T, b *browser) {
	t.Helper()
	b.eval(t, `(document.getElementById('run-output').dataset.state = '', document.getElementById('run-input').value = '')`)

	input := fmt.Sprintf("hello from chromium %d", time.Now().UnixNano())
	b.do(t, "run the assistant from the form",
		chromedp.SetValue(chromedp.ID("run-agent"), "assistant"),
		chromedp.SendKeys(chromedp.ID("run-input"), input),
		chromedp.Click(chromedp.ID("run-submit")))

	out := b.waitFor(t, "the run's output", `(o => (o.dataset.state === 'done' || o.dataset.state === 'error') && o.dataset.state + ':' + o.textContent)(document.getElementById('run-output'))`)
	if out != "done:"+input {
		t.Fatalf("run shows %q, want the echo of %q", out, input)
	}
	meta := b.eval(t, `document.getElementById('run-meta').textContent`)
	taskID := regexp.MustCompile(`task (\S+)`).FindStringSubmatch(meta)
	if taskID == nil {
		t.Fatalf("run meta %q names no task", meta)
	}

	ev := b.waitFor(t, "TaskCompleted in the live feed", `[...document.querySelectorAll('#feed li[data-type="TaskCompleted"]')].map(li => li.innerText).find(s => s.includes(`+jsString(taskID[1])+`))`)
	if !strings.Contains(ev, input) || !strings.Contains(ev, "assistant") {
		t.Errorf("TaskCompleted row %q lacks the output or the agent", ev)
	}
	if !strings.Contains(b.eval(t, `document.getElementById('feed').innerText`), "AgentActivated") {
		t.Error("AgentActivated did not reach the feed")
	}
	// No approval module in the default config: the panel is simply empty.
	if got := b.eval(t, `String(!document.getElementById('approvals-empty').hidden) + ' ' + document.getElementById('approvals-error').textContent`); got != "true " {
		t.Errorf("approvals panel: empty shown, error = %q", got)
	}
	b.screenshot(t, strings.ReplaceAll(t.Name(), "/", "-"))
}

func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

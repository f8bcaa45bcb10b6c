package dashboard_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/chromedp/chromedp"
)

// The approval issue's acceptance test, end to end: the built daemon, a
// model (OpenAI wire) that calls an MCP tool (a go-sdk server that counts
// its calls), the default policy (prompt). The pending approval shows on
// the dashboard; the tool has not run; a click on "Allow once" lets it run
// once, the run completes, and the page drops the approval.
func TestApprovalFromDashboard(t *testing.T) {
	needChromium(t)
	bin := buildDaemon(t)

	modelURL, mcpURL, calls := testutil.DeployPeers(t)

	cfg := filepath.Join(t.TempDir(), "axocoatl.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
providers:
  openai: { base_url: %s/v1, api_key: sk-test, max_retries: -1 }
agents:
  - { id: assistant, provider: openai, model: m }
mcp_servers:
  - { name: ops, url: %s/mcp }
`, modelURL, mcpURL)), 0o600)
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

	row := b.waitFor(t, "the pending approval", `document.querySelector('#approvals li[data-approval]')?.innerText`)
	if !strings.Contains(row, "mcp__ops__deploy") || !strings.Contains(row, "prod") || !strings.Contains(row, "assistant") {
		t.Errorf("approval row %q lacks the tool, its arguments or the agent", row)
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the tool ran %d times before anyone allowed it", n)
	}
	b.do(t, "allow once", chromedp.Click(chromedp.CSS(`#approvals li[data-approval] button.allow`)))
	select {
	case got := <-ran:
		if !strings.HasPrefix(got, "200 ") || !strings.Contains(got, "deployed to prod") {
			t.Fatalf("run after allow: %s", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not finish within 30s of the click")
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}
	// The run shows the call with its arguments (from the approval's
	// events: ToolCalled carries none) and how the approval was resolved.
	call := b.waitFor(t, "the run's tool call", `(li => li && li.innerText)(document.querySelector('#runs > li[data-status="completed"] .run-tools li[data-tool="mcp__ops__deploy"][data-state="ok"]'))`)
	for _, want := range []string{`{"env":"prod"}`, "approved", "ok"} {
		if !strings.Contains(call, want) {
			t.Errorf("tool call in the run shows %q, lacking %q", call, want)
		}
	}
	b.waitFor(t, "the approvals panel to empty", `!document.getElementById('approvals-empty').hidden && document.querySelectorAll('#approvals li').length === 0 && 'empty'`)
	b.checkConsole(t)
}

package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The acceptance test of servers that ask our user (#27 part 4), end to
// end in both eras: the built daemon, a model that calls an MCP tool, and
// a go-sdk MCP server whose tool asks who travels (a form elicitation: an
// InputRequiredResult in 2026-07-28, elicitation/create in 2025-11-25).
// The question shows on the dashboard as a form built from the requested
// schema; headless Chromium fills it and submits; the server receives the
// answer (with the schema's defaults) and the run completes.
func TestQuestionFormFromDashboard(t *testing.T) {
	needChromium(t)
	bin := buildDaemon(t)
	for _, era := range []struct {
		name     string
		versions []string
	}{{"2026-07-28", nil}, {"2025-11-25", []string{"2025-11-25"}}} {
		t.Run(era.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []*mcp.ElicitResult
			srv := mcp.NewServer(&mcp.Implementation{Name: "travel", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: era.versions})
			mcp.AddTool(srv, &mcp.Tool{Name: "book", Description: "Books a trip."},
				func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
					resp, ok := req.Params.InputResponses["who"]
					if !ok {
						return &mcp.CallToolResult{
							InputRequests: mcp.InputRequestMap{"who": &mcp.ElicitParams{Message: "Who travels, and how?", RequestedSchema: json.RawMessage(`{"type":"object","properties":{
 "name":{"type":"string","title":"Traveller","minLength":2},
 "seats":{"type":"integer","title":"Seats","minimum":1,"maximum":9,"default":1},
 "class":{"type":"string","title":"Class","oneOf":[{"const":"eco","title":"Economy"},{"const":"biz","title":"Business"}],"default":"eco"},
 "insured":{"type":"boolean","title":"Insured","default":false}},"required":["name"]}`)}},
							RequestState: "trip",
						}, nil, nil
					}
					er, _ := resp.(*mcp.ElicitResult)
					mu.Lock()
					got = append(got, er)
					mu.Unlock()
					if er == nil || er.Action != "accept" {
						return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "not booked"}}}, nil, nil
					}
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("booked %v x%v %v insured=%v", er.Content["name"], er.Content["seats"], er.Content["class"], er.Content["insured"])}}}, nil, nil
				})
			mcpSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
			t.Cleanup(func() {
				for ss := range srv.Sessions() {
					ss.Close()
				}
				mcpSrv.Close()
			})
			modelURL := testutil.ToolCallModel(t, "mcp__travel__book", "{}")

			cfg := filepath.Join(t.TempDir(), "axocoatl.yaml")
			os.WriteFile(cfg, []byte(fmt.Sprintf(`
providers:
  openai: { base_url: %s/v1, api_key: sk-test, max_retries: -1 }
agents:
  - { id: assistant, provider: openai, model: m }
mcp_servers:
  - { name: travel, url: %s }
approval: { default: allow }
`, modelURL, mcpSrv.URL)), 0o600)
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
				res, err := client.Post(d.URL+"/api/agents/assistant/execute", "application/json", strings.NewReader(`{"input":"book it"}`))
				if err != nil {
					ran <- err.Error()
					return
				}
				defer res.Body.Close()
				out, _ := io.ReadAll(res.Body)
				ran <- fmt.Sprintf("%d %s", res.StatusCode, out)
			}()

			row := b.waitFor(t, "the pending question", `document.querySelector('#approvals li[data-question] form')?.closest('li').innerText`)
			for _, want := range []string{"Question", "travel", "mcp__travel__book", "Who travels, and how?", "Traveller *", "Seats", "Economy", "Insured"} {
				if !strings.Contains(row, want) {
					t.Errorf("question row %q lacks %q", row, want)
				}
			}
			if v := b.eval(t, `document.querySelector('#approvals li[data-question] input[name=seats]').value`); v != "1" {
				t.Errorf("seats shows %q, want the default 1", v)
			}
			// Too short a name: the server refuses it (the browser's own
			// check is bypassed), the form says why and stays.
			b.eval(t, `document.querySelector('#approvals li[data-question] form').noValidate = true, 'ok'`)
			b.do(t, "a name too short", chromedp.SendKeys(`#approvals li[data-question] input[name=name]`, "A"),
				chromedp.Click(`#approvals li[data-question] button.allow`))
			b.waitFor(t, "the refusal", `(document.querySelector('#approvals li[data-question] .error')?.textContent || '').includes('at least 2') && 'shown'`)
			b.do(t, "fill and submit",
				chromedp.SendKeys(`#approvals li[data-question] input[name=name]`, "da"),
				chromedp.SetValue(`#approvals li[data-question] input[name=seats]`, "3"),
				chromedp.SetValue(`#approvals li[data-question] select[name=class]`, "1"),
				chromedp.Click(`#approvals li[data-question] input[name=insured]`),
				chromedp.Click(`#approvals li[data-question] button.allow`))
			select {
			case res := <-ran:
				if !strings.HasPrefix(res, "200 ") || !strings.Contains(res, "booked Ada x3 biz insured=true") {
					t.Fatalf("run after the answer: %s", res)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the run did not finish within 30s of the submit")
			}
			mu.Lock()
			n := len(got)
			mu.Unlock()
			if n != 1 {
				t.Errorf("the server got %d answers, want 1", n)
			}
			call := b.waitFor(t, "the run's tool call", `(li => li && li.innerText)(document.querySelector('#runs > li[data-status="completed"] .run-tools li[data-tool="mcp__travel__book"][data-state="ok"]'))`)
			if !strings.Contains(call, "answered") {
				t.Errorf("the run's tool call shows %q, want the question answered", call)
			}
			b.waitFor(t, "the approvals panel to empty", `!document.getElementById('approvals-empty').hidden && document.querySelectorAll('#approvals li').length === 0 && 'empty'`)
			b.checkConsole(t)
		})
	}
}

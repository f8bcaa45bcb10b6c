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
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// evilOutput is what the model answers to "evil": markup that runs code if
// the page ever parses it as HTML.
const evilOutput = `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"><b>bold</b>`

// convModel is an httptest server speaking the OpenAI chat-completions wire
// that records every request's messages. It answers by the last message:
// a tool result gets "done: " and the result; a user line with "deploy"
// calls mcp__ops__deploy, "broken" the tool mcp__ops__nope, which does
// not exist; "fail" gets a 500; "evil" gets evilOutput; "slow" waits until
// release is closed (slowStarted is signalled when it arrives); anything
// else gets "answer to <line>: saw N earlier user turns", N counted in the
// request, so an answer shows whether the model was sent the history.
type convModel struct {
	URL         string
	slowStarted chan struct{}
	release     chan struct{}

	mu       sync.Mutex
	requests [][]wireMessage
}

type wireMessage struct {
	Role       string `json:"role"`
	Content    any    `json:"content"`
	ToolCallID string `json:"tool_call_id"`
	ToolCalls  []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tool_calls"`
}

func (m wireMessage) text() string {
	if s, ok := m.Content.(string); ok {
		return s
	}
	return fmt.Sprint(m.Content)
}

func newConvModel(t *testing.T) *convModel {
	t.Helper()
	m := &convModel{slowStarted: make(chan struct{}, 1), release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []wireMessage `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "want a chat completion request with messages", http.StatusBadRequest)
			return
		}
		m.mu.Lock()
		m.requests = append(m.requests, req.Messages)
		m.mu.Unlock()
		answer := func(content string) {
			w.Header().Set("Content-Type", "application/json")
			b, _ := json.Marshal(content)
			fmt.Fprintf(w, `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":%s}}]}`, b)
		}
		last := req.Messages[len(req.Messages)-1]
		users := 0
		for _, msg := range req.Messages {
			if msg.Role == "user" {
				users++
			}
		}
		switch line := last.text(); {
		case last.Role == "tool":
			answer("done: " + line)
		case strings.Contains(line, "broken"):
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call-2","type":"function","function":{"name":"mcp__ops__nope","arguments":"{}"}}]}}]}`)
		case strings.Contains(line, "deploy"):
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call-1","type":"function","function":{"name":"mcp__ops__deploy","arguments":"{\"env\":\"prod\"}"}}]}}]}`)
		case strings.Contains(line, "fail"):
			http.Error(w, "model down", http.StatusInternalServerError)
		case strings.Contains(line, "evil"):
			answer(evilOutput)
		case strings.Contains(line, "slow"):
			m.slowStarted <- struct{}{}
			select {
			case <-m.release:
				answer("slow answer")
			case <-r.Context().Done():
			}
		default:
			answer(fmt.Sprintf("answer to %s: saw %d earlier user turns", line, users-1))
		}
	}))
	t.Cleanup(srv.Close)
	// Registered after the server, so it runs first: a blocked handler
	// returns before Close waits for it.
	t.Cleanup(func() {
		select {
		case <-m.release:
		default:
			close(m.release)
		}
	})
	m.URL = srv.URL
	return m
}

func (m *convModel) requestsWithUser(line string) [][]wireMessage {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out [][]wireMessage
	for _, req := range m.requests {
		for _, msg := range req {
			if msg.Role == "user" && msg.text() == line {
				out = append(out, req)
				break
			}
		}
	}
	return out
}

// convDaemon starts the built daemon with the assistant agent on model m
// (and the MCP server ops, whose deploy tool the model calls) and an echo
// agent "other". The test is skipped when the daemon has no conversations
// API (GET /api/conversations answers 404): the API is built on another
// branch, and these tests run once both are merged.
func convDaemon(t *testing.T, m *convModel, env ...string) *daemon {
	t.Helper()
	needChromium(t)
	_, mcpURL, _ := testutil.DeployPeers(t)
	bin := buildDaemon(t)
	cfg := filepath.Join(t.TempDir(), "axocoatl.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
providers:
  openai: { base_url: %s/v1, api_key: sk-test, max_retries: -1 }
agents:
  - { id: assistant, provider: openai }
  - { id: other, provider: echo }
mcp_servers:
  - { name: ops, url: %s/mcp }
approval:
  default: allow
`, m.URL, mcpURL)), 0o600)
	d := startDaemon(t, bin, append(env, "AXOCOATL_CONFIG="+cfg)...)
	if conversationsMissing(t, d) {
		t.Skip("conversations API not on this branch: GET /api/conversations answers 404")
	}
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
	return d
}

// conversationsMissing reports whether the daemon's GET /api/conversations
// answers 404 (a daemon without the conversations API), with no token: a
// route that exists answers 401 or 200.
func conversationsMissing(t *testing.T, d *daemon) bool {
	t.Helper()
	res, err := d.Client.Get(d.URL + "/api/conversations")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode == http.StatusNotFound
}

// execute runs a turn over HTTP, outside the browser: another door.
func execute(t *testing.T, d *daemon, agent, input, conversation string) (int, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"input": input, "conversation_id": conversation})
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	req, err := http.NewRequest(http.MethodPost, d.URL+"/api/agents/"+agent+"/execute", strings.NewReader(string(body)))
	if err != nil {
		t.Error(err) // not Fatal: called from goroutines too
		return 0, nil
	}
	req.Header.Set("Content-Type", "application/json")
	if d.token != "" {
		req.Header.Set("Authorization", "Bearer "+d.token)
	}
	res, err := client.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	defer res.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Errorf("execute %s: %d %s", input, res.StatusCode, raw)
	}
	return res.StatusCode, out
}

// msgsJS is the open conversation's messages, one a line:
// role|error|text (the message's own text, then its tool calls' names).
const msgsJS = `[...document.querySelectorAll('#conv-messages > li')].map(li =>
  li.dataset.role + (li.dataset.pending ? '(pending)' : '') + '|' + (li.dataset.error ? 'error' : '') + '|' +
  (li.querySelector('.msg-content')?.textContent ?? '') +
  [...li.querySelectorAll('details.tool-call')].map(d => ' [call ' + d.dataset.tool + ']').join('')).join('\n')`

// The dashboard acceptance: a conversation started from the run
// form and continued there (the model sent the first turn with the
// second), read in the conversations view with both turns, continued from
// its box with a tool call (shown, arguments collapsed) and its result, a
// model output of markup rendered as text, a turn refused as busy while
// another door's turn runs (whose answer then appears by itself), the
// list's agent filter and paging, and delete.
func TestConversationsView(t *testing.T) {
	m := newConvModel(t)
	d := convDaemon(t, m)

	b := newBrowser(t)
	b.do(t, "load the dashboard", chromedp.Navigate(d.URL+"/"))
	b.waitFor(t, "the live stream", `document.getElementById('conn').dataset.state === 'live'`)
	b.waitFor(t, "the conversations panel", `!document.getElementById('conversations').hidden && !document.getElementById('run-conv').hidden`)
	if got := b.eval(t, `document.getElementById('run-conv').dataset.state`); got != "off" {
		t.Errorf("run form starts in state %q, want off (one-shot)", got)
	}

	// Two turns from the run form: "New conversation", then the next input
	// continues it.
	run := func(input string) string {
		t.Helper()
		b.eval(t, `(document.getElementById('run-output').dataset.state = '', document.getElementById('run-input').value = '', '')`)
		b.do(t, "run "+input,
			chromedp.SetValue(chromedp.ID("run-agent"), "assistant"),
			chromedp.SendKeys(chromedp.ID("run-input"), input),
			chromedp.Click(chromedp.ID("run-submit")))
		return b.waitFor(t, "the output of "+input, `(o => (o.dataset.state === 'done' || o.dataset.state === 'error') && o.dataset.state + ':' + o.textContent)(document.getElementById('run-output'))`)
	}
	convNew(t, b, "new conversation")
	if got := b.eval(t, `document.getElementById('run-conv').dataset.state`); got != "new" {
		t.Fatalf("after New conversation the run form is %q", got)
	}
	if out := run("first question"); out != "done:answer to first question: saw 0 earlier user turns" {
		t.Fatalf("first turn: %q", out)
	}
	id := b.waitFor(t, "the conversation id", `document.getElementById('run-conv').dataset.state === 'continuing' && document.getElementById('run-conv-id').textContent`)
	if meta := b.eval(t, `document.getElementById('run-meta').textContent`); !strings.Contains(meta, "conversation "+id) {
		t.Errorf("run meta %q does not name conversation %s", meta, id)
	}
	if out := run("second question"); out != "done:answer to second question: saw 1 earlier user turns" {
		t.Fatalf("second turn: %q", out)
	}
	// The model was sent the first turn with the second.
	second := m.requestsWithUser("second question")
	if len(second) != 1 {
		t.Fatalf("%d model requests hold the second question, want 1", len(second))
	}
	var sent []string
	for _, msg := range second[0] {
		if msg.Role != "system" {
			sent = append(sent, msg.Role+": "+msg.text())
		}
	}
	want := []string{"user: first question", "assistant: answer to first question: saw 0 earlier user turns", "user: second question"}
	if strings.Join(sent, "\n") != strings.Join(want, "\n") {
		t.Errorf("second turn's request:\n%s\nwant:\n%s", strings.Join(sent, "\n"), strings.Join(want, "\n"))
	}

	// The list shows it (refreshed by its TaskCompleted), and the view
	// both turns.
	item := `#conv-list li[data-conversation="` + id + `"]`
	title := b.waitFor(t, "the conversation in the list, with both turns", `(s => s && s.includes('4 messages') && s)(document.querySelector('`+item+`')?.innerText)`)
	for _, w := range []string{"first question", "assistant", "via api"} {
		if !strings.Contains(title, w) {
			t.Errorf("list item %q lacks %q", title, w)
		}
	}
	// The run form opens the conversation it continues.
	b.do(t, "open the conversation", chromedp.Click(chromedp.ID("run-conv-open")))
	wantMsgs := "user||first question\nassistant||answer to first question: saw 0 earlier user turns\n" +
		"user||second question\nassistant||answer to second question: saw 1 earlier user turns"
	b.waitFor(t, "both turns in the view", msgsJS+` === `+jsValue(wantMsgs))
	if got := b.eval(t, `document.getElementById('conv-title').textContent + ' | ' + document.getElementById('conv-meta').textContent`); !strings.Contains(got, "first question | assistant · 4 messages") || !strings.Contains(got, id) {
		t.Errorf("conversation header: %q", got)
	}

	// The next turn from the view's box: a tool call and its result.
	send := func(input string) {
		t.Helper()
		b.eval(t, `(document.getElementById('conv-input').value = '', '')`)
		b.do(t, "send "+input, chromedp.SendKeys(chromedp.ID("conv-input"), input), chromedp.Click(chromedp.ID("conv-send")))
	}
	send("please deploy")
	wantMsgs += "\nuser||please deploy\nassistant|| [call mcp__ops__deploy]\ntool||deployed to prod\nassistant||done: deployed to prod"
	b.waitFor(t, "the turn with its tool call", msgsJS+` === `+jsValue(wantMsgs))
	call := b.eval(t, `(d => String(d.open) + ' ' + d.querySelector('summary').textContent + ' ' + d.querySelector('pre').textContent.replace(/\s+/g, ''))(document.querySelector('#conv-messages details.tool-call'))`)
	if call != `false tool call mcp__ops__deploy {"env":"prod"}` {
		t.Errorf("tool call shown as %q, want collapsed with its arguments", call)
	}
	if got := b.eval(t, `document.querySelector('#conv-messages li[data-role="tool"] .msg-role').textContent`); got != "tool result of mcp__ops__deploy" {
		t.Errorf("tool result labelled %q", got)
	}
	if got := b.eval(t, `document.getElementById('conv-input').value`); got != "" {
		t.Errorf("input after a sent turn: %q", got)
	}

	// A model's markup is text: nothing runs, no element is made of it.
	counts := `[...document.querySelectorAll('script')].length + ' ' + document.querySelectorAll('img').length + ' ' + document.querySelectorAll('#conv-messages b').length + ' ' + String(window.__pwned)`
	before := b.eval(t, counts)
	send("evil")
	wantMsgs += "\nuser||evil\nassistant||" + evilOutput
	b.waitFor(t, "the markup as text", msgsJS+` === `+jsValue(wantMsgs))
	if after := b.eval(t, counts); after != before || after != "1 0 0 undefined" {
		t.Errorf("script, img and b elements, window.__pwned: %q before, %q after (want 1 0 0 undefined)", before, after)
	}

	// The open conversation fits the page: nothing scrolls sideways.
	for _, width := range []int64{1400, 800} {
		b.do(t, "size the window", chromedp.EmulateViewport(width, 900))
		if bad := b.eval(t, layoutJS+"(300)"); bad != "" {
			t.Errorf("at %d px with a conversation open:\n%s", width, bad)
		}
	}

	// A turn through another door holds the conversation: the page's turn
	// is refused as busy, clearly; the other turn's answer then appears by
	// itself (its TaskCompleted).
	slowDone := make(chan int, 1)
	go func() {
		status, _ := execute(t, d, "assistant", "slow one", id)
		slowDone <- status
	}()
	select {
	case <-m.slowStarted:
	case <-time.After(30 * time.Second):
		t.Fatal("the slow turn did not reach the model in 30s")
	}
	b.waitFor(t, "the other door's turn shown running", `document.getElementById('conv-status').dataset.state === 'running'`)
	send("meanwhile")
	busy := b.waitFor(t, "the busy refusal", `document.getElementById('conv-status').dataset.state === 'busy' && document.getElementById('conv-status').textContent`)
	if !strings.HasPrefix(busy, "Busy: another turn of this conversation is running") {
		t.Errorf("busy shown as %q", busy)
	}
	if got := b.eval(t, `document.getElementById('conv-input').value`); got != "meanwhile" {
		t.Errorf("the refused turn's text was not kept in the box: %q", got)
	}
	if got := b.eval(t, msgsJS); got != wantMsgs {
		t.Errorf("after the refused turn the view shows:\n%s", got)
	}
	close(m.release)
	if status := <-slowDone; status != http.StatusOK {
		t.Fatalf("the slow turn: HTTP %d", status)
	}
	wantMsgs += "\nuser||slow one\nassistant||slow answer"
	b.waitFor(t, "the other door's turn, live", msgsJS+` === `+jsValue(wantMsgs))
	b.waitFor(t, "the busy notice cleared", `document.getElementById('conv-status').dataset.state === 'done' && document.getElementById('conv-status').textContent.startsWith('The other turn has ended')`)
	// The view follows the end of the conversation.
	if got := b.eval(t, `(l => String(l.scrollHeight > l.clientHeight + 100 && l.scrollHeight - l.scrollTop - l.clientHeight < 2))(document.getElementById('conv-messages'))`); got != "true" {
		t.Error("the messages (longer than their box) are not scrolled to the newest")
	}
	b.screenshot(t, "conversation-open")
	if n := len(m.requestsWithUser("meanwhile")); n != 0 {
		t.Errorf("the refused turn reached the model %d times", n)
	}

	// The agent filter and paging: 21 conversations of the echo agent
	// "other" through the API; the list shows 20, More the rest.
	var others []string
	for i := range 21 {
		// The titles are what users wrote: markup too.
		status, out := execute(t, d, "other", fmt.Sprintf(`<img src=x onerror="window.__pwned=3">other %d`, i), "new")
		cid, _ := out["conversation_id"].(string)
		if status != http.StatusOK || cid == "" {
			t.Fatalf("conversation %d of other: %d %v", i, status, out)
		}
		others = append(others, cid)
	}
	listed := `[...document.querySelectorAll('#conv-list li[data-conversation]')].map(li => li.dataset.conversation + ':' + li.dataset.agent)`
	chooseOption(t, b, "conv-agent", "other")
	b.waitFor(t, "a page of other's conversations", listed+`.length === 20 && `+listed+`.every(s => s.endsWith(':other')) && !document.getElementById('conv-more').hidden`)
	// Newest first: the last one started is at the top.
	if top := b.eval(t, listed+`[0]`); top != others[20]+":other" {
		t.Errorf("list starts with %s, want the newest %s", top, others[20])
	}
	b.do(t, "more", chromedp.Click(chromedp.ID("conv-more")))
	b.waitFor(t, "every conversation of other", listed+`.length === 21 && document.getElementById('conv-more').hidden`)
	if got := b.eval(t, `document.querySelector('#conv-list li .conv-item-title').textContent + ' | ' + `+counts); got != `<img src=x onerror="window.__pwned=3">other 20 | 1 0 0 undefined` {
		t.Errorf("a title of markup: %q, want it as text and no element made", got)
	}
	if got := b.eval(t, listed+`.join(' ')`); strings.Contains(got, id) {
		t.Errorf("filtered on other, the list holds the assistant's %s", id)
	}
	chooseOption(t, b, "conv-agent", "")
	b.waitFor(t, "the first page of all", listed+`.length === 20 && !`+listed+`.some(s => s.startsWith(`+jsValue(id+":")+`))`)
	b.do(t, "more", chromedp.Click(chromedp.ID("conv-more")))
	b.waitFor(t, "all 22", listed+`.length === 22 && `+listed+`[21] === `+jsValue(id+":assistant"))

	// Delete, with a confirmation: gone from the view, the list and the
	// API, and the run form starts a new conversation next.
	b.do(t, "delete", chromedp.Click(chromedp.ID("conv-delete")))
	if got := b.eval(t, `String(document.getElementById('conv-confirm').hidden) + ' ' + String(document.getElementById('conv-view').hidden)`); got != "false false" {
		t.Fatalf("delete asked for no confirmation (confirm hidden, view hidden: %s)", got)
	}
	b.do(t, "confirm", chromedp.Click(chromedp.ID("conv-delete-yes")))
	b.waitFor(t, "the conversation gone", `document.getElementById('conv-view').hidden && !document.querySelector('`+item+`') && document.getElementById('conv-none').textContent.includes('deleted')`)
	res, err := d.Client.Get(d.URL + "/api/conversations/" + id)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("GET the deleted conversation: %d, want 404", res.StatusCode)
	}
	if got := b.eval(t, `document.getElementById('run-conv').dataset.state`); got != "new" {
		t.Errorf("after deleting its conversation the run form is %q, want new", got)
	}
	b.screenshot(t, "conversations")
	b.checkConsole(t)
}

// A turn shows as pending while it runs; one that fails is recorded and
// shown marked as an error; the run form's one-shot mode starts no
// conversation.
func TestConversationFailedTurn(t *testing.T) {
	m := newConvModel(t)
	d := convDaemon(t, m)
	status, out := execute(t, d, "assistant", "hello", "new")
	id, _ := out["conversation_id"].(string)
	if status != http.StatusOK || id == "" {
		t.Fatalf("first turn: %d %v", status, out)
	}

	b := newBrowser(t)
	b.do(t, "load the dashboard", chromedp.Navigate(d.URL+"/"))
	b.waitFor(t, "the live stream", `document.getElementById('conn').dataset.state === 'live'`)
	item := `#conv-list li[data-conversation="` + id + `"] button`
	b.waitFor(t, "the conversation in the list", `document.querySelector('`+item+`')`)
	b.do(t, "open it", chromedp.Click(chromedp.CSS(item)))
	wantMsgs := "user||hello\nassistant||answer to hello: saw 0 earlier user turns"
	b.waitFor(t, "its turn", msgsJS+` === `+jsValue(wantMsgs))

	b.do(t, "send a slow turn", chromedp.SendKeys(chromedp.ID("conv-input"), "slow turn"), chromedp.Click(chromedp.ID("conv-send")))
	select {
	case <-m.slowStarted:
	case <-time.After(30 * time.Second):
		t.Fatal("the turn did not reach the model in 30s")
	}
	if got := b.waitFor(t, "the pending turn", `document.getElementById('conv-send').disabled && `+msgsJS); got != wantMsgs+"\nuser(pending)||slow turn" {
		t.Errorf("while the turn runs the view shows:\n%s", got)
	}
	close(m.release)
	wantMsgs += "\nuser||slow turn\nassistant||slow answer"
	b.waitFor(t, "the answer", msgsJS+` === `+jsValue(wantMsgs))

	b.do(t, "send a failing turn", chromedp.SendKeys(chromedp.ID("conv-input"), "fail now"), chromedp.Click(chromedp.ID("conv-send")))
	failed := b.waitFor(t, "the failure", `document.getElementById('conv-status').dataset.state === 'error' && document.getElementById('conv-status').textContent`)
	if !strings.Contains(failed, "HTTP 502") {
		t.Errorf("failure shown as %q", failed)
	}
	got := b.waitFor(t, "the failed turn recorded", `document.querySelectorAll('#conv-messages > li').length === 6 && `+msgsJS)
	if !strings.HasPrefix(got, wantMsgs+"\nuser||fail now\nassistant|error|(this turn failed: ") {
		t.Errorf("after the failed turn the view shows:\n%s", got)
	}

	// A tool call that fails: its result is marked as an error.
	b.eval(t, `(document.getElementById('conv-input').value = '', '')`)
	b.do(t, "send a turn whose tool fails", chromedp.SendKeys(chromedp.ID("conv-input"), "broken tool"), chromedp.Click(chromedp.ID("conv-send")))
	wantTail := "\nuser||broken tool\nassistant|| [call mcp__ops__nope]\ntool|error|tool not found: mcp__ops__nope\nassistant||done: Error: tool not found: mcp__ops__nope"
	got = b.waitFor(t, "the failed tool call", `document.querySelectorAll("#conv-messages > li").length === 10 && `+msgsJS)
	if !strings.HasSuffix(got, wantTail) {
		t.Errorf("after the failed tool call the view shows:\n%s\nwant it to end with:%s", got, wantTail)
	}

	// One-shot from the run form: an answer, no conversation.
	b.do(t, "run one-shot",
		chromedp.SetValue(chromedp.ID("run-agent"), "assistant"),
		chromedp.SendKeys(chromedp.ID("run-input"), "one shot"),
		chromedp.Click(chromedp.ID("run-submit")))
	out2 := b.waitFor(t, "the one-shot output", `(o => o.dataset.state === 'done' && o.textContent)(document.getElementById('run-output'))`)
	if out2 != "answer to one shot: saw 0 earlier user turns" {
		t.Errorf("one-shot run: %q", out2)
	}
	if got := b.eval(t, `document.getElementById('run-conv').dataset.state + ' ' + document.getElementById('run-meta').textContent`); strings.Contains(got, "conversation") || !strings.HasPrefix(got, "off ") {
		t.Errorf("one-shot run: state and meta %q", got)
	}
	res, err := d.Client.Get(d.URL + "/api/conversations")
	if err != nil {
		t.Fatal(err)
	}
	var page struct {
		Conversations []struct {
			ID string `json:"id"`
		} `json:"conversations"`
	}
	json.NewDecoder(res.Body).Decode(&page)
	res.Body.Close()
	if len(page.Conversations) != 1 {
		t.Errorf("%d conversations after a one-shot run, want 1", len(page.Conversations))
	}

	// Start over: the next run begins another conversation.
	runInForm := func(input string) (output, conv string) {
		t.Helper()
		b.eval(t, `(document.getElementById('run-output').dataset.state = '', document.getElementById('run-input').value = '', '')`)
		b.do(t, "run "+input, chromedp.SendKeys(chromedp.ID("run-input"), input), chromedp.Click(chromedp.ID("run-submit")))
		output = b.waitFor(t, "the output of "+input, `(o => o.dataset.state === 'done' && o.textContent)(document.getElementById('run-output'))`)
		return output, b.waitFor(t, "the conversation of "+input, `document.getElementById('run-conv').dataset.state === 'continuing' && document.getElementById('run-conv-id').textContent`)
	}
	convNew(t, b, "new conversation")
	_, first := runInForm("fresh")
	if got := b.eval(t, `document.getElementById('run-conv-new').textContent`); got != "Start over" {
		t.Errorf("while continuing, the control says %q", got)
	}
	convNew(t, b, "start over")
	out3, second := runInForm("fresh again")
	if second == first || out3 != "answer to fresh again: saw 0 earlier user turns" {
		t.Errorf("after Start over: conversation %s (before %s), output %q", second, first, out3)
	}
	// A first turn that fails still starts the conversation (the turn is
	// recorded): the next input continues it.
	convNew(t, b, "start over")
	b.eval(t, `(document.getElementById('run-output').dataset.state = '', document.getElementById('run-input').value = '', '')`)
	b.do(t, "run a failing first turn", chromedp.SendKeys(chromedp.ID("run-input"), "fail first"), chromedp.Click(chromedp.ID("run-submit")))
	b.waitFor(t, "the failure", `document.getElementById('run-output').dataset.state === 'error'`)
	third := b.waitFor(t, "the failed turn's conversation", `document.getElementById('run-conv').dataset.state === 'continuing' && document.getElementById('run-conv-id').textContent`)
	if third == second {
		t.Errorf("the failing first turn continued %s", second)
	}
	if out, conv := runInForm("continue now"); conv != third || out != "answer to continue now: saw 1 earlier user turns" {
		t.Errorf("after a failed first turn: conversation %s (want %s), output %q", conv, third, out)
	}
	b.do(t, "one-shot", chromedp.Click(chromedp.ID("run-conv-off")))
	if got := b.eval(t, `document.getElementById('run-conv').dataset.state`); got != "off" {
		t.Errorf("after One-shot the run form is %q", got)
	}
	b.checkConsole(t)
}

// jsValue is s as a JavaScript string literal (JSON's is one).
func jsValue(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// chooseOption selects the option of a select as a person does, and fails
// unless that option is shown selected.
func chooseOption(t *testing.T, b *browser, id, value string) {
	t.Helper()
	got := b.eval(t, `(s => (s.value = `+jsValue(value)+`, s.dispatchEvent(new Event('change')), s.selectedIndex >= 0 ? s.value : '(none)'))(document.getElementById(`+jsValue(id)+`))`)
	if got != value {
		t.Fatalf("select %s shows %q, want %q", id, got, value)
	}
}

// The page's bounds on what the daemon sends: the list holds at most 200
// conversations; the open conversation shows its newest 100 messages,
// earlier pages on request, never more than 1,000.
func TestConversationBounds(t *testing.T) {
	m := newConvModel(t)
	d := convDaemon(t, m)
	// 200 conversations of the echo agent, then one of 501 turns (1,002
	// messages), the newest: 201 in all.
	var first string
	for i := range 200 {
		status, out := execute(t, d, "other", fmt.Sprintf("conversation %d", i), "new")
		if status != http.StatusOK {
			t.Fatalf("conversation %d: %d %v", i, status, out)
		}
		if i == 0 {
			first, _ = out["conversation_id"].(string)
		}
	}
	_, out := execute(t, d, "other", "turn 0", "new")
	id, _ := out["conversation_id"].(string)
	if id == "" || first == "" {
		t.Fatalf("no conversation id: %v", out)
	}
	for i := 1; i <= 500; i++ {
		if status, out := execute(t, d, "other", fmt.Sprintf("turn %d", i), id); status != http.StatusOK {
			t.Fatalf("turn %d: %d %v", i, status, out)
		}
	}

	b := newBrowser(t)
	b.do(t, "load the dashboard", chromedp.Navigate(d.URL+"/"))
	listed := `document.querySelectorAll('#conv-list li[data-conversation]').length`
	b.waitFor(t, "the first page", listed+` === 20`)
	for n := 40; n <= 200; n += 20 {
		b.do(t, "more", chromedp.Click(chromedp.ID("conv-more")))
		b.waitFor(t, fmt.Sprintf("%d conversations", n), fmt.Sprintf(`%s === %d`, listed, n))
	}
	if got := b.eval(t, `String(document.getElementById('conv-more').hidden)`); got != "true" {
		t.Errorf("with 200 listed, More is still offered")
	}
	if got := b.eval(t, `String(!!document.querySelector('#conv-list li[data-conversation="`+first+`"]'))`); got != "false" {
		t.Errorf("the oldest conversation is listed past the bound")
	}

	// The long conversation, the newest: its newest 100 messages.
	b.do(t, "open the long conversation", chromedp.Click(chromedp.CSS(`#conv-list li[data-conversation="`+id+`"] button`)))
	shown := `(l => l.length + ' ' + (l[0] ? l[0].dataset.index + '-' + l[l.length - 1].dataset.index : ''))(document.querySelectorAll('#conv-messages > li'))`
	b.waitFor(t, "the newest 100", shown+` === '100 902-1001'`)
	if got := b.eval(t, `document.querySelector('#conv-messages > li:last-child .msg-content').textContent`); got != "turn 500" {
		t.Errorf("the last message shown is %q", got)
	}
	for n := 200; n <= 1000; n += 100 {
		b.do(t, "earlier", chromedp.Click(chromedp.ID("conv-earlier")))
		b.waitFor(t, fmt.Sprintf("%d messages", n), fmt.Sprintf(`%s === '%d %d-1001'`, shown, n, 1002-n))
	}
	if got := b.eval(t, `(e => e.hidden + ' ' + e.disabled + ' ' + e.textContent)(document.getElementById('conv-earlier'))`); got != "false true 2 earlier messages (the view holds 1000)" {
		t.Errorf("at the bound the Earlier button is %q", got)
	}
	// A new turn: the oldest shown drops off.
	b.do(t, "send a turn", chromedp.SendKeys(chromedp.ID("conv-input"), "one more"), chromedp.Click(chromedp.ID("conv-send")))
	b.waitFor(t, "the new turn, the oldest dropped", shown+` === '1000 4-1003'`)
	b.checkConsole(t)
}

// With server.api_token set, the page asks for the token, and every call of
// the conversations view carries it: the list, a conversation, its next
// turn.
func TestConversationsWithToken(t *testing.T) {
	const token = "conv-test-token-77c1"
	m := newConvModel(t)
	d := convDaemon(t, m, "AXOCOATL_API_TOKEN="+token)
	d.token = token
	status, out := execute(t, d, "assistant", "hello", "new")
	id, _ := out["conversation_id"].(string)
	if status != http.StatusOK || id == "" {
		t.Fatalf("first turn: %d %v", status, out)
	}
	b := newBrowser(t)
	b.do(t, "load the dashboard", chromedp.Navigate(d.URL+"/"))
	b.waitFor(t, "the token prompt", `!document.getElementById('auth').hidden`)
	if got := b.eval(t, `String(document.getElementById('conversations').hidden)`); got != "true" {
		t.Errorf("before the token the conversations panel is shown")
	}
	b.do(t, "enter the token", chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.CSS("#auth button")))
	item := `#conv-list li[data-conversation="` + id + `"] button`
	b.waitFor(t, "the conversation in the list", `document.querySelector('`+item+`')`)
	b.do(t, "open it", chromedp.Click(chromedp.CSS(item)))
	b.do(t, "send a turn", chromedp.SendKeys(chromedp.ID("conv-input"), "again"), chromedp.Click(chromedp.ID("conv-send")))
	b.waitFor(t, "both turns", msgsJS+` === `+jsValue("user||hello\nassistant||answer to hello: saw 0 earlier user turns\nuser||again\nassistant||answer to again: saw 1 earlier user turns"))
	b.checkConsole(t)
}

// convNew presses the run form's New conversation (Start over) button and
// waits until the form will start one. The click is the element's own
// (not at coordinates: under load a panel re-rendered between finding the
// button and clicking it moved it, and the click landed elsewhere).
func convNew(t *testing.T, b *browser, what string) {
	t.Helper()
	b.eval(t, `(document.getElementById('run-conv-new').click(), '')`)
	b.waitFor(t, what+": the next run starts a conversation", `document.getElementById('run-conv').dataset.state === 'new'`)
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	v1client "github.com/a2aproject/a2a-go/v2/a2aclient"
	v1card "github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// #27 part 4, a question carried onward to our own caller, end to end: a
// go-sdk MCP server (streamable HTTP) asks during its tool call (a form of
// flat primitives); our MCP client takes the question to the approval
// module, which puts it to the door of the run whose model called that
// tool; the door's caller answers; the MCP server gets exactly those
// values. A bad answer is refused at the door with approval's schema
// check, and the question keeps waiting for a good one. Both server eras:
// the server speaks 2026-07-28 (an InputRequiredResult to our client) or
// 2025-11-25 only (the go-sdk server sends elicitation/create).

const onwardSchema = `{"type":"object","properties":{
 "name":{"type":"string","title":"Traveller","minLength":2,"maxLength":40},
 "seats":{"type":"integer","minimum":1,"maximum":9,"default":1}},"required":["name"]}`

// onwardServer is the eliciting MCP server; got holds the contents its
// tool received, in order.
type onwardServer struct {
	url string
	mu  sync.Mutex
	got []map[string]any
}

func newOnwardServer(t *testing.T, versions ...string) *onwardServer {
	o := &onwardServer{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "travel", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: versions})
	mcp.AddTool(srv, &mcp.Tool{Name: "book", Description: "Books a trip."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct {
			Q string `json:"q"`
		}) (*mcp.CallToolResult, any, error) {
			resp, ok := req.Params.InputResponses["who"]
			if !ok {
				return &mcp.CallToolResult{
					InputRequests: mcp.InputRequestMap{"who": &mcp.ElicitParams{Mode: "form", Message: "Who travels?", RequestedSchema: json.RawMessage(onwardSchema)}},
					RequestState:  "trip",
				}, nil, nil
			}
			er, _ := resp.(*mcp.ElicitResult)
			if er == nil || er.Action != "accept" {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "not booked"}}}, nil, nil
			}
			o.mu.Lock()
			o.got = append(o.got, er.Content)
			o.mu.Unlock()
			b, _ := json.Marshal(er.Content)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "booked " + string(b)}}}, nil, nil
		})
	// A 2026-07-28 server over stateless HTTP (as that era is served); a
	// 2025-11-25 one keeps its session, for elicitation/create.
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: len(versions) == 0}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() {
		for ss := range srv.Sessions() {
			ss.Close()
		}
	})
	o.url = hs.URL
	return o
}

// last is the content the tool received last, and how many it received.
func (o *onwardServer) last() (map[string]any, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.got) == 0 {
		return nil, 0
	}
	return o.got[len(o.got)-1], len(o.got)
}

// onwardDaemon: agent "a" (a ChatRecorder model) calls mcp__travel__book,
// allowed without an approval: only the server's question asks.
func onwardDaemon(t *testing.T, o *onwardServer) *testDaemon {
	rec := testutil.NewChatRecorder(t, "mcp__travel__book")
	return startDaemon(t, fmt.Sprintf(`
server:
  shutdown_grace: 5s
  data_dir: %s
providers:
  openai: { base_url: %s, api_key: sk-test, max_retries: -1 }
agents:
  - id: a
    provider: openai
    model: m
mcp_servers:
  - name: travel
    url: %s/mcp
    timeout: 20s
    approval: allow
`, t.TempDir(), rec.URL, o.url), nil)
}

// wantSchema fails unless schema (as decoded from a wire) is the server's.
func wantSchema(t *testing.T, where string, schema any) {
	t.Helper()
	b, _ := json.Marshal(schema)
	var got, want any
	_ = json.Unmarshal(b, &got)
	_ = json.Unmarshal([]byte(onwardSchema), &want)
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Fatalf("%s: schema %s, want the server's %s", where, gb, wb)
	}
}

// wantGot fails unless the server's tool received exactly want, as its
// n-th answer.
func wantGot(t *testing.T, o *onwardServer, n int, want string) {
	t.Helper()
	got, k := o.last()
	b, _ := json.Marshal(got)
	if k != n || string(b) != want {
		t.Fatalf("the server received %s (answer %d), want %s (answer %d)", b, k, want, n)
	}
}

func TestQuestionOnward(t *testing.T) {
	for _, serverEra := range []struct {
		name, want string
		versions   []string
	}{{"server " + era2026, era2026, nil}, {"server " + era2025, era2025, []string{era2025}}} {
		t.Run(serverEra.name, func(t *testing.T) {
			o := newOnwardServer(t, serverEra.versions...)
			td := onwardDaemon(t, o)
			waitFor(t, "our client speaks "+serverEra.want+" to the server", 20*time.Second, func() bool {
				return strings.Contains(td.stderr.String(), "server=travel transport=http protocol_version="+serverEra.want)
			})
			n := 0
			t.Run("a2a v2 caller", func(t *testing.T) {
				n++
				onwardA2A(t, td, o, n)
			})
			t.Run("mcp "+era2025+" client", func(t *testing.T) {
				n++
				onwardMCP2025(t, td, o, n)
			})
			t.Run("mcp "+era2026+" client", func(t *testing.T) {
				n++
				onwardMCP2026(t, td, o, n)
			})
		})
	}
}

// (a) An a2a-go v2 caller: the task goes input-required with the schema; a
// data part that does not match is refused (InvalidParams) and the task
// still waits; the right one reaches the server and the task completes.
func onwardA2A(t *testing.T, td *testDaemon, o *onwardServer, n int) {
	ctx := mcpCtx(t)
	card, err := v1card.NewResolver(td.client).Resolve(ctx, td.url+"/a2a/agents/a")
	if err != nil {
		t.Fatal(err)
	}
	c, err := v1client.NewFromCard(ctx, card, v1client.WithJSONRPCTransport(td.client))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	res, err := c.SendMessage(ctx, &a2a1.SendMessageRequest{Message: a2a1.NewMessage(a2a1.MessageRoleUser, a2a1.NewTextPart("trip by a2a"))})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a1.Task)
	if !ok || task.Status.State != a2a1.TaskStateInputRequired || task.Status.Message == nil || len(task.Status.Message.Parts) != 2 {
		t.Fatalf("first send: %#v", res)
	}
	data, _ := task.Status.Message.Parts[1].Data().(map[string]any)
	if data["kind"] != "question" || !strings.Contains(task.Status.Message.Parts[0].Text(), "Who travels?") {
		t.Fatalf("status message %q %v", task.Status.Message.Parts[0].Text(), data)
	}
	wantSchema(t, "a2a status", data["schema"])

	answer := func(values map[string]any) (a2a1.SendMessageResult, error) {
		m := a2a1.NewMessage(a2a1.MessageRoleUser, a2a1.NewDataPart(values))
		m.TaskID, m.ContextID = task.ID, task.ContextID
		return c.SendMessage(ctx, &a2a1.SendMessageRequest{Message: m})
	}
	for _, bad := range []map[string]any{
		{"name": "A"},                 // under minLength
		{"name": "Ada", "seats": 12},  // over maximum
		{"name": "Ada", "seats": 1.5}, // not an integer
		{"name": "Ada", "pets": 2},    // unknown property
		{"seats": 2},                  // required missing
		{"name": []any{"Ada", "Bob"}}, // not a string
	} {
		_, err := answer(bad)
		if !errors.Is(err, a2a1.ErrInvalidParams) || !strings.Contains(err.Error(), "match the question's schema") {
			t.Fatalf("bad answer %v: %v", bad, err)
		}
		got, err := c.GetTask(ctx, &a2a1.GetTaskRequest{ID: task.ID})
		if err != nil || got.Status.State != a2a1.TaskStateInputRequired {
			t.Fatalf("after bad answer %v: %v %+v", bad, err, got)
		}
	}
	if _, k := o.last(); k != n-1 {
		t.Fatalf("the server got %d answers, want %d: a bad one went through", k, n-1)
	}
	res, err = answer(map[string]any{"name": "Ada", "seats": 2})
	if err != nil {
		t.Fatal(err)
	}
	task, _ = res.(*a2a1.Task)
	if task == nil || task.Status.State != a2a1.TaskStateCompleted {
		waitFor(t, "the a2a task completes", 20*time.Second, func() bool {
			got, err := c.GetTask(ctx, &a2a1.GetTaskRequest{ID: a2a1.TaskID(taskIDOf(res))})
			task = got
			return err == nil && got.Status.State == a2a1.TaskStateCompleted
		})
	}
	wantGot(t, o, n, `{"name":"Ada","seats":2}`)
	if len(task.Artifacts) == 0 || !strings.Contains(task.Artifacts[0].Parts[0].Text(), `booked {"name":"Ada","seats":2}`) {
		t.Fatalf("artifacts %+v", task.Artifacts)
	}
}

func taskIDOf(res a2a1.SendMessageResult) string {
	switch r := res.(type) {
	case *a2a1.Task:
		return string(r.ID)
	case *a2a1.Message:
		return string(r.TaskID)
	}
	return ""
}

// (b) A 2025-11-25 go-sdk client of /mcp with an ElicitationHandler: it
// gets elicitation/create with the schema; its answer reaches the server,
// the schema's default filled in.
func onwardMCP2025(t *testing.T, td *testDaemon, o *onwardServer, n int) {
	ctx := mcpCtx(t)
	var mu sync.Mutex
	var asked []*mcp.ElicitParams
	c := mcp.NewClient(&mcp.Implementation{Name: "old-forms", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, req.Params)
			// (The go-sdk client checks its own answer against the
			// schema: a bad one never leaves it. mcpserver's tests send
			// bad ones raw.)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Bob"}}, nil
		},
	})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: td.url + "/mcp", MaxRetries: -1}, eraOpts(era2025))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != era2025 {
		t.Fatalf("negotiated %s", v)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_a", Arguments: map[string]any{"input": "trip by mcp 2025"}})
	if err != nil || res.IsError || !strings.Contains(mcpText(res), `booked {"name":"Bob","seats":1}`) {
		t.Fatalf("agent_a: %q %v", mcpText(res), err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 {
		t.Fatalf("asked %d times, want 1", len(asked))
	}
	wantSchema(t, "elicitation/create", asked[0].RequestedSchema)
	if !strings.Contains(asked[0].Message, "Who travels?") {
		t.Fatalf("message %q", asked[0].Message)
	}
	wantGot(t, o, n, `{"name":"Bob","seats":1}`) // the default filled in
}

// (c) A 2026-07-28 go-sdk v1.8 client of /mcp with form elicitation, its
// rounds made by hand: an InputRequiredResult whose input request carries
// the schema; a retry with a bad answer gets the question again saying
// why; the retry with the right values delivers them.
func onwardMCP2026(t *testing.T, td *testDaemon, o *onwardServer, n int) {
	ctx := mcpCtx(t)
	c := mcp.NewClient(&mcp.Implementation{Name: "new-forms", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return nil, errors.New("rounds are made by hand")
		},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: td.url + "/mcp", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != era2026 {
		t.Fatalf("negotiated %s", v)
	}
	args := map[string]any{"input": "trip by mcp 2026"}
	round, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_a", Arguments: args})
	if err != nil || !round.NeedsInput() || len(round.InputRequests) != 1 {
		t.Fatalf("first round: %+v %v", round, err)
	}
	ask := func(round *mcp.CallToolResult) (string, *mcp.ElicitParams) {
		for k, r := range round.InputRequests {
			p, ok := r.(*mcp.ElicitParams)
			if !ok {
				t.Fatalf("input request %s is %T", k, r)
			}
			wantSchema(t, "input request", p.RequestedSchema)
			if !strings.Contains(p.Message, "Who travels?") {
				t.Fatalf("message %q", p.Message)
			}
			return k, p
		}
		return "", nil
	}
	k, _ := ask(round)
	retry := func(content map[string]any) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_a", Arguments: args, RequestState: round.RequestState,
			InputResponses: mcp.InputResponseMap{k: &mcp.ElicitResult{Action: "accept", Content: content}}})
	}
	again, err := retry(map[string]any{"name": "Cy", "seats": 0})
	if err != nil || !again.NeedsInput() {
		t.Fatalf("a bad answer's retry: %+v %v", again, err)
	}
	if _, k2 := o.last(); k2 != n-1 {
		t.Fatalf("a bad answer reached the server")
	}
	round = again
	first := k
	var p *mcp.ElicitParams
	k, p = ask(round)
	if k != first { // the same question kept open by the door, not asked anew
		t.Fatalf("asked again as %s, want %s", k, first)
	}
	if !strings.Contains(p.Message, "refused") || !strings.Contains(p.Message, `"seats" must be at least 1`) {
		t.Fatalf("the question asked again does not say why: %q", p.Message)
	}
	done, err := retry(map[string]any{"name": "Cy", "seats": 3})
	if err != nil || done.NeedsInput() || !strings.Contains(mcpText(done), `booked {"name":"Cy","seats":3}`) {
		t.Fatalf("the good retry: %q %+v %v", mcpText(done), done, err)
	}
	wantGot(t, o, n, `{"name":"Cy","seats":3}`)
}

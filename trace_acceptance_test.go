package axocoatl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	v1client "github.com/a2aproject/a2a-go/v2/a2aclient"
	v1card "github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/a2a"
	"github.com/axocoatl/axocoatl-go/a2aremote"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/openai"
	"github.com/axocoatl/axocoatl-go/egress"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/mcpclient"
)

// peerLog is what the peers of the acceptance test were sent of the trace:
// name -> traceparent values.
type peerLog struct {
	mu   sync.Mutex
	seen map[string][]string
}

func (p *peerLog) add(who, tp string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen[who] = append(p.seen[who], tp)
}

func (p *peerLog) get(who string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen[who])
}

// twoToolModel is an OpenAI-wire model that calls both tools in its first
// answer, then answers "done".
func twoToolModel(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if req.Messages[len(req.Messages)-1].Role == "tool" {
			fmt.Fprint(w, `{"id":"c2","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"done"}}],"usage":{"prompt_tokens":7,"completion_tokens":1}}`)
			return
		}
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[`+
			`{"id":"t1","type":"function","function":{"name":"mcp__tools__lookup","arguments":"{}"}},`+
			`{"id":"t2","type":"function","function":{"name":"a2a__remote","arguments":"{\"input\":\"plan\"}"}}]}}],"usage":{"prompt_tokens":5,"completion_tokens":2}}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// remoteExecutor is the remote A2A agent: an artifact, then completed.
type remoteExecutor struct{}

func (remoteExecutor) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a1.Event, error] {
	return func(yield func(a2a1.Event, error) bool) {
		if ec.StoredTask == nil && !yield(a2a1.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if yield(a2a1.NewArtifactEvent(ec, a2a1.NewTextPart("planned")), nil) {
			yield(a2a1.NewStatusUpdateEvent(ec, a2a1.TaskStateCompleted, nil), nil)
		}
	}
}

func (remoteExecutor) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a1.Event, error] {
	return func(yield func(a2a1.Event, error) bool) {
		yield(a2a1.NewStatusUpdateEvent(ec, a2a1.TaskStateCanceled, nil), nil)
	}
}

// callerHeader adds the caller's traceparent to every request.
type callerHeader struct{ tp string }

func (h callerHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("traceparent", h.tp)
	return http.DefaultTransport.RoundTrip(r)
}

// expectedSpans are the spans of the acceptance trace, by name: the A2A
// door's request, the run (named for the agent's name), its model calls
// and tool calls (part 1 of issue #28) and the hops out of the process
// (part 2).
var expectedSpans = []string{
	"POST /a2a/agents/{id}",
	"invoke_agent Assistant",
	"chat m",
	"execute_tool mcp__tools__lookup",
	"execute_tool a2a__remote",
	"invoke_agent remote",
	"POST hook",
}

// spanAncestors are, for a span of the trace, a span it must descend
// from: each hop out of the process from the tool call that made it,
// each tool call and model call from the run, the run from the door.
var spanAncestors = map[string]string{
	"invoke_agent remote":             "execute_tool a2a__remote",
	"execute_tool mcp__tools__lookup": "invoke_agent Assistant",
	"execute_tool a2a__remote":        "invoke_agent Assistant",
	"chat m":                          "invoke_agent Assistant",
	"invoke_agent Assistant":          "POST /a2a/agents/{id}",
	"POST hook":                       "invoke_agent Assistant",
}

// The acceptance test of issue #28: one A2A-started run (an a2a-go/v2
// client sending a traceparent header) whose model calls an MCP tool (a
// go-sdk server over streamable HTTP recording the _meta traceparent and
// the header it receives) and a remote A2A agent (an a2a-go/v2 server
// recording its traceparent header), and an egress webhook whose receiver
// records traceparent: one trace id, the caller's, from the door to the
// webhook delivery, at every peer and in every span the in-process
// OTLP/HTTP receiver gets from the Engine's provider.
func TestOneTraceFromDoorToWebhook(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	peers := &peerLog{seen: map[string][]string{}}

	// The collector, and the Engine's provider exporting to it.
	otlp := testutil.NewOTLPReceiver(t)
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(otlp.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(50*time.Millisecond)))

	// The MCP server.
	tools := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "1"}, nil)
	tools.AddTool(&mcp.Tool{Name: "lookup", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		v, _ := req.Params.GetMeta()["traceparent"].(string)
		peers.add("mcp _meta", v)
		if req.Extra != nil && req.Extra.Header != nil {
			peers.add("mcp header", req.Extra.Header.Get("traceparent"))
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "found"}}}, nil
	})
	mcpSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return tools }, nil))
	t.Cleanup(mcpSrv.Close)

	// The remote A2A agent.
	mux := http.NewServeMux()
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Requests outside the call (the module's probe of the card's
		// methods) carry no trace.
		if tp := r.Header.Get("traceparent"); r.Method == http.MethodPost && tp != "" {
			peers.add("remote agent", tp)
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(remote.Close)
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(remoteExecutor{})))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(&a2a1.AgentCard{
		Name: "Planner", Version: "1", Description: "plans",
		SupportedInterfaces: []*a2a1.AgentInterface{a2a1.NewAgentInterface(remote.URL+"/a2a", a2a1.TransportProtocolJSONRPC)},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a1.AgentSkill{{ID: "plan", Name: "plan", Description: "plans", Tags: []string{"plan"}}},
	}))

	// The webhook receiver.
	delivered := make(chan struct{}, 4)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peers.add("webhook", r.Header.Get("traceparent"))
		w.WriteHeader(http.StatusNoContent)
		delivered <- struct{}{}
	}))
	t.Cleanup(hook.Close)

	// The Engine: the agent, the two tool sources, egress, the A2A door.
	e := axocoatl.New(axocoatl.Options{TracerProvider: tp})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Close(ctx)
		_ = tp.Shutdown(ctx)
	})
	model, err := openai.New(provider.Config{BaseURL: twoToolModel(t) + "/v1", APIKey: "sk-test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.AddAgent(agent.Spec{ID: "assistant", Name: "Assistant", Provider: provider.OpenAI, Model: "m"}, model); err != nil {
		t.Fatal(err)
	}
	mc, err := mcpclient.New(mcpclient.Config{Servers: []mcpclient.ServerConfig{{Name: "tools", URL: mcpSrv.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	ar, err := a2aremote.New(a2aremote.Config{Agents: []a2aremote.AgentConfig{{Name: "remote", URL: remote.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	eg, err := egress.New(egress.Config{Webhooks: []egress.Webhook{{Name: "hook", URL: hook.URL, Events: []string{axocoatl.EventTaskCompleted}}}})
	if err != nil {
		t.Fatal(err)
	}
	door, err := a2a.New(a2a.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []axocoatl.Module{mc, ar, eg, door} {
		if err := e.Use(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := mc.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ar.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	doorSrv := httptest.NewServer(door)
	t.Cleanup(doorSrv.Close)

	// The caller: an a2a-go/v2 client in a trace of its own.
	const traceID, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	hc := &http.Client{Transport: callerHeader{"00-" + traceID + "-" + callerSpan + "-01"}, Timeout: 20 * time.Second}
	card, err := v1card.NewResolver(hc).Resolve(ctx, doorSrv.URL+"/a2a/agents/assistant")
	if err != nil {
		t.Fatal(err)
	}
	client, err := v1client.NewFromCard(ctx, card, v1client.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Destroy()
	res, err := client.SendMessage(ctx, &a2a1.SendMessageRequest{Message: a2a1.NewMessage(a2a1.MessageRoleUser, a2a1.NewTextPart("go"))})
	if err != nil {
		t.Fatal(err)
	}
	if task, ok := res.(*a2a1.Task); !ok || task.Status.State != a2a1.TaskStateCompleted {
		t.Fatalf("the run: %#v", res)
	}
	select {
	case <-delivered:
	case <-ctx.Done():
		t.Fatal("no webhook delivery")
	}

	// Every peer was sent the caller's trace id.
	parents := map[string]string{} // peer -> the span id it was sent
	for _, who := range []string{"mcp _meta", "mcp header", "remote agent", "webhook"} {
		got := peers.get(who)
		if len(got) == 0 {
			t.Errorf("%s: no traceparent received", who)
			continue
		}
		for _, tp := range got {
			if len(tp) != 55 || tp[3:35] != traceID {
				t.Errorf("%s: traceparent %q, want trace %s", who, tp, traceID)
			}
		}
		parents[who] = got[len(got)-1][36:52]
	}

	// The spans the collector got: all of the caller's trace, the hops'
	// with the ids the peers were sent.
	var names []string
	spans := otlp.WaitFor(t, 10*time.Second, func(s []testutil.OTLPSpan) bool {
		have := map[string]bool{}
		for _, sp := range s {
			have[sp.Name] = true
		}
		for _, name := range expectedSpans {
			if !have[name] {
				return false
			}
		}
		return true
	})
	byName := map[string]testutil.OTLPSpan{}
	for _, sp := range spans {
		names = append(names, sp.Name)
		if sp.TraceID != traceID {
			t.Errorf("span %q is in trace %s, not the caller's %s", sp.Name, sp.TraceID, traceID)
		}
		byName[sp.Name] = sp
	}
	for _, name := range expectedSpans {
		if _, ok := byName[name]; !ok {
			t.Errorf("no span %q among %v", name, names)
		}
	}
	byID := map[string]testutil.OTLPSpan{}
	for _, sp := range spans {
		byID[sp.SpanID] = sp
	}
	for child, ancestor := range spanAncestors {
		found := false
		for sp, ok := byName[child]; ok && !found; sp, ok = byID[sp.ParentID] {
			found = byID[sp.ParentID].Name == ancestor
		}
		if !found {
			t.Errorf("span %q does not descend from %q", child, ancestor)
		}
	}
	if door := byName["POST /a2a/agents/{id}"]; door.ParentID != callerSpan {
		t.Errorf("the door's span has parent %s, want the caller's %s", door.ParentID, callerSpan)
	}
	// execute_tool traces the MCP call itself (the MCP conventions: no
	// separate tools/call span), with the MCP attributes.
	if sp := byName["execute_tool mcp__tools__lookup"]; sp.SpanID != parents["mcp _meta"] || sp.SpanID != parents["mcp header"] {
		t.Errorf("the MCP server was sent span %s/%s, the call's is %s", parents["mcp _meta"], parents["mcp header"], sp.SpanID)
	} else if sp.Attrs["mcp.method.name"] != "tools/call" || sp.Attrs["axocoatl.mcp.server"] != "tools" || sp.Attrs["network.transport"] != "tcp" {
		t.Errorf("execute_tool mcp__tools__lookup has attributes %v, want the MCP call's", sp.Attrs)
	}
	if _, ok := byName["tools/call lookup"]; ok {
		t.Error("a tools/call span beside execute_tool, which already traces the call")
	}
	if sp := byName["invoke_agent remote"]; sp.SpanID != parents["remote agent"] {
		t.Errorf("the remote agent was sent span %s, the call's is %s", parents["remote agent"], sp.SpanID)
	}
	if sp := byName["POST hook"]; sp.SpanID != parents["webhook"] {
		t.Errorf("the webhook was sent span %s, the delivery's is %s", parents["webhook"], sp.SpanID)
	}
	t.Logf("spans: %s", strings.Join(names, ", "))
}

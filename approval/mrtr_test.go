package approval_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/approval"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// callCounter counts the tools/call POSTs an MCP HTTP handler serves.
type callCounter struct {
	h     http.Handler
	calls atomic.Int64
}

func (c *callCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			c.calls.Add(1)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	c.h.ServeHTTP(w, r)
}

// connect2026 connects client to srv in the 2026-07-28 era over stdio or
// HTTP; over HTTP it returns the counter of tools/call POSTs.
func connect2026(t *testing.T, ctx context.Context, client *mcp.Client, srv *mcpserver.Server, overHTTP bool) (*mcp.ClientSession, *callCounter) {
	t.Helper()
	if !overHTTP {
		return connectEra(t, ctx, client, srv, false, nil), nil
	}
	cc := &callCounter{h: srv}
	hs := httptest.NewServer(cc)
	t.Cleanup(hs.Close)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != mcpserver.ProtocolVersion2026 {
		t.Fatalf("negotiated %s", v)
	}
	return cs, cc
}

// A go-sdk v1.8 client of the 2026-07-28 era with form elicitation calls
// agent_<id> over stdio (as under `axocoatl mcp serve`) and over HTTP (as
// on /mcp): the agent's gated MCP tool call comes back as an
// InputRequiredResult with a form naming the tool and its arguments; the
// client's retry with accept runs the tool once (decline never runs it),
// and the round trip costs one extra tools/call, no more.
func TestInputRequiredApprovesInnerCall(t *testing.T) {
	for _, overHTTP := range []bool{false, true} {
		name := map[bool]string{false: "stdio", true: "http"}[overHTTP]
		t.Run(name, func(t *testing.T) {
			v, fs, srv := elicitEnv(t, approval.Config{Timeout: time.Minute}, axocoatl.Options{})
			v.m.DeclareChannels() // the form is the only way: it must be enough
			var action atomic.Value
			var asked atomic.Value
			var forms atomic.Int64
			client := mcp.NewClient(&mcp.Implementation{Name: "mrtr-test", Version: "1"}, &mcp.ClientOptions{
				Capabilities: &mcp.ClientCapabilities{},
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					forms.Add(1)
					asked.Store(req.Params.Message)
					return &mcp.ElicitResult{Action: action.Load().(string)}, nil
				},
			})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cs, cc := connect2026(t, ctx, client, srv, overHTTP)
			input := ask("mcp__files__write", `{"path":"m.txt","text":"x"}`)
			for _, c := range []struct {
				action string
				runs   int64
				status string
			}{{"accept", 1, "approved"}, {"decline", 0, "denied"}} {
				before, formsBefore := fs.calls.Load(), forms.Load()
				var callsBefore int64
				if cc != nil {
					callsBefore = cc.calls.Load()
				}
				action.Store(c.action)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_writer", Arguments: map[string]any{"input": input}})
				if err != nil {
					t.Fatal(err)
				}
				if ran := fs.calls.Load() - before; ran != c.runs {
					t.Fatalf("%s: the tool ran %d times, want %d", c.action, ran, c.runs)
				}
				if n := forms.Load() - formsBefore; n != 1 {
					t.Fatalf("%s: the client's user saw %d forms, want 1", c.action, n)
				}
				text := res.Content[0].(*mcp.TextContent).Text
				if c.runs == 1 && !strings.Contains(text, "wrote m.txt") || c.runs == 0 && !strings.Contains(text, "A human denied") {
					t.Fatalf("%s: agent answered %q", c.action, text)
				}
				if msg, _ := asked.Load().(string); !strings.Contains(msg, "mcp__files__write") || !strings.Contains(msg, `"path":"m.txt"`) {
					t.Fatalf("the form said %q", msg)
				}
				if cc != nil {
					if n := cc.calls.Load() - callsBefore; n != 2 {
						t.Fatalf("%s: %d tools/call requests, want 2 (the call and one retry)", c.action, n)
					}
				}
				got := v.next(t, approval.EventResolved)
				if got["status"] != c.status || got["resolved_by"] != mcpserver.ElicitationBy {
					t.Fatalf("%s: ApprovalResolved %v", c.action, got)
				}
			}
			if n := srv.InputCalls(); n != 0 {
				t.Fatalf("%d runs still wait between rounds", n)
			}
		})
	}
}

// manualRoundsClient is a 2026-07-28 client that declares form
// elicitation but handles InputRequiredResults itself (the test plays
// its rounds), as a client whose user has not answered yet.
func manualRoundsClient(name string) *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ClientOptions{
		Capabilities:       &mcp.ClientCapabilities{},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) { return nil, nil },
		MultiRoundTrip:     &mcp.MultiRoundTripOptions{Disabled: true},
	})
}

// firstRound makes a call whose run waits for an approval and returns the
// InputRequiredResult (the client handles no round itself).
func firstRound(t *testing.T, ctx context.Context, cs *mcp.ClientSession, tool, input string) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"input": input}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.NeedsInput() || len(res.InputRequests) != 1 || res.RequestState == "" {
		t.Fatalf("want an InputRequiredResult with one input request and a requestState, got %+v", res)
	}
	return res
}

func accept(res *mcp.CallToolResult) mcp.InputResponseMap {
	out := mcp.InputResponseMap{}
	for k := range res.InputRequests {
		out[k] = &mcp.ElicitResult{Action: "accept"}
	}
	return out
}

// A retry's requestState is checked before anything is resumed: tampered
// (a byte changed, a suffix added, a forged mac), foreign (another tool,
// another client) and replayed states are refused with -32602 naming
// which, the run is not resumed by them, and the genuine state still works
// once.
//
// Guards: a retry's requestState (1 KiB: the oversized case)
func TestInputRequiredStateRefused(t *testing.T) {
	for _, overHTTP := range []bool{false, true} {
		name := map[bool]string{false: "stdio", true: "http"}[overHTTP]
		t.Run(name, func(t *testing.T) {
			v, fs, srv := elicitEnv(t, approval.Config{Timeout: time.Minute}, axocoatl.Options{})
			if err := v.e.AddAgent(agent.Spec{ID: "other", Provider: "openai"}, newOpenAIPeer(t).model(t)); err != nil {
				t.Fatal(err)
			}
			client := manualRoundsClient("manual-rounds")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cs, _ := connect2026(t, ctx, client, srv, overHTTP)
			input := ask("mcp__files__write", `{"path":"s.txt","text":"x"}`)
			res := firstRound(t, ctx, cs, "agent_writer", input)
			for k, ir := range res.InputRequests {
				el, ok := ir.(*mcp.ElicitParams)
				if !strings.HasPrefix(k, "approval_") || !ok || el.Mode != "form" || !strings.Contains(el.Message, "mcp__files__write") {
					t.Fatalf("input request %q: %+v", k, ir)
				}
			}
			state := res.RequestState
			flip := []byte(state)
			flip[len(flip)/2] ^= 1
			parts := strings.Split(state, ".")
			retry := func(tool, st string) (*mcp.CallToolResult, error) {
				return cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"input": input}, InputResponses: accept(res), RequestState: st})
			}
			for _, c := range []struct{ name, tool, state, want string }{
				{"suffix", "agent_writer", state + "-TAMPERED", "integrity"},
				{"flipped", "agent_writer", string(flip), "integrity"},
				{"forged mac", "agent_writer", parts[0] + "." + parts[1] + ".AAAA", "integrity"},
				{"garbage", "agent_writer", "not-a-state", "integrity"},
				{"oversized", "agent_writer", strings.Repeat("A", 4096), "integrity"},
				{"other tool", "agent_other", state, "another server, tool or client"},
			} {
				_, err := retry(c.tool, c.state)
				if err == nil || !strings.Contains(err.Error(), "invalid requestState") || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("%s: err %v, want a -32602 naming %q", c.name, err, c.want)
				}
			}
			if fs.calls.Load() != 0 {
				t.Fatal("a refused state ran the tool")
			}
			done, err := retry("agent_writer", state)
			if err != nil || done.NeedsInput() || !strings.Contains(done.Content[0].(*mcp.TextContent).Text, "wrote s.txt") || fs.calls.Load() != 1 {
				t.Fatalf("the genuine retry: %+v %v (tool ran %d times)", done, err, fs.calls.Load())
			}
			if _, err := retry("agent_writer", state); err == nil || !strings.Contains(err.Error(), "already used") {
				t.Fatalf("replayed: %v", err)
			}
			if fs.calls.Load() != 1 {
				t.Fatalf("the tool ran %d times, want once", fs.calls.Load())
			}
			if got := v.next(t, approval.EventResolved); got["status"] != "approved" {
				t.Fatalf("%v", got)
			}
		})
	}
}

// A requestState is bound to the client that got it: over HTTP, another
// caller's credentials; on stdio, another session.
func TestInputRequiredStateBoundToClient(t *testing.T) {
	_, fs, srv := elicitEnv(t, approval.Config{Timeout: time.Minute}, axocoatl.Options{})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	connectAs := func(auth string) *mcp.ClientSession {
		client := manualRoundsClient("c")
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: authHeader(auth)}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	alice, mallory := connectAs("Bearer alice"), connectAs("Bearer mallory")
	input := ask("mcp__files__write", `{"path":"b.txt","text":"x"}`)
	res := firstRound(t, ctx, alice, "agent_writer", input)
	_, err := mallory.CallTool(ctx, &mcp.CallToolParams{Name: "agent_writer", Arguments: map[string]any{"input": input}, InputResponses: accept(res), RequestState: res.RequestState})
	if err == nil || !strings.Contains(err.Error(), "another client") {
		t.Fatalf("another caller's retry: %v", err)
	}
	done, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "agent_writer", Arguments: map[string]any{"input": input}, InputResponses: accept(res), RequestState: res.RequestState})
	if err != nil || fs.calls.Load() != 1 || done.NeedsInput() {
		t.Fatalf("the caller's own retry: %+v %v, %d runs", done, err, fs.calls.Load())
	}

	// stdio: a second session cannot resume the first's run.
	one, two := connectEra(t, ctx, manualRoundsClient("s"), srv, false, nil), connectEra(t, ctx, manualRoundsClient("s"), srv, false, nil)
	res = firstRound(t, ctx, one, "agent_writer", input)
	if _, err := two.CallTool(ctx, &mcp.CallToolParams{Name: "agent_writer", Arguments: map[string]any{"input": input}, InputResponses: accept(res), RequestState: res.RequestState}); err == nil || !strings.Contains(err.Error(), "another client") {
		t.Fatalf("another session's retry: %v", err)
	}
}

type authHeader string

func (a authHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", string(a))
	return http.DefaultTransport.RoundTrip(r)
}

// A client that never comes back: its state expires after
// mcp_server.input_timeout, the run ends (the approval is withdrawn, the
// tool never runs), nothing is left waiting, and the late retry is refused
// as expired.
//
// Guards: mcp_server.input_timeout
func TestInputRequiredStateExpires(t *testing.T) {
	v, fs, srv := elicitEnvMCP(t, approval.Config{Timeout: time.Minute}, axocoatl.Options{}, mcpserver.Config{InputTimeout: 300 * time.Millisecond})
	client := manualRoundsClient("gone")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, _ := connect2026(t, ctx, client, srv, true)
	input := ask("mcp__files__write", `{"path":"e.txt","text":"x"}`)
	res := firstRound(t, ctx, cs, "agent_writer", input)
	if got := v.next(t, approval.EventResolved); got["status"] != "withdrawn" {
		t.Fatalf("ApprovalResolved %v, want withdrawn when the state expired", got)
	}
	eventually(t, "no run waits between rounds", func() bool { return srv.InputCalls() == 0 })
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_writer", Arguments: map[string]any{"input": input}, InputResponses: accept(res), RequestState: res.RequestState})
	if err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("late retry: %v", err)
	}
	if fs.calls.Load() != 0 {
		t.Fatal("the tool ran")
	}
}

// A stdio session that ends between rounds ends its run at once: its
// state is good on that session alone, so nobody could come back with the
// answer, and waiting input_timeout would hold the run and its approval.
func TestInputRequiredStdioSessionEndEndsTheRun(t *testing.T) {
	v, fs, srv := elicitEnvMCP(t, approval.Config{Timeout: time.Minute}, axocoatl.Options{}, mcpserver.Config{InputTimeout: time.Hour})
	client := manualRoundsClient("leaves")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, _ := connect2026(t, ctx, client, srv, false)
	firstRound(t, ctx, cs, "agent_writer", ask("mcp__files__write", `{"path":"s.txt","text":"x"}`))
	if n := srv.InputCalls(); n != 1 {
		t.Fatalf("%d runs wait between rounds, want 1", n)
	}
	start := time.Now()
	cs.Close()
	if got := v.next(t, approval.EventResolved); got["status"] != "withdrawn" {
		t.Fatalf("ApprovalResolved %v, want withdrawn when the session ended", got)
	}
	eventually(t, "no run waits between rounds", func() bool { return srv.InputCalls() == 0 })
	t.Logf("the run ended %s after the session", time.Since(start))
	if fs.calls.Load() != 0 {
		t.Fatal("the tool ran")
	}
}

// At most mcp_server.max_input_calls runs wait between rounds: the next
// run's question is not put to its client; with no other channel its
// approval is denied at once, saying why.
//
// Guards: mcp_server.max_input_calls
func TestInputRequiredMaxInputCalls(t *testing.T) {
	v, fs, srv := elicitEnvMCP(t, approval.Config{Timeout: time.Minute}, axocoatl.Options{}, mcpserver.Config{MaxInputCalls: 1})
	v.m.DeclareChannels()
	client := manualRoundsClient("many")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, _ := connect2026(t, ctx, client, srv, true)
	firstRound(t, ctx, cs, "agent_writer", ask("mcp__files__write", `{"path":"1.txt","text":"x"}`))
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_writer", Arguments: map[string]any{"input": ask("mcp__files__write", `{"path":"2.txt","text":"x"}`)}})
	if err != nil || res.NeedsInput() {
		t.Fatalf("second call: %+v %v", res, err)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "max_input_calls") || fs.calls.Load() != 0 {
		t.Fatalf("second call answered %q", text)
	}
	if n := srv.InputCalls(); n != 1 {
		t.Fatalf("%d runs wait, want 1", n)
	}
}

// A client that cannot show forms, in either era, with no other channel
// declared (as under `axocoatl mcp serve` without --http), is not held for
// the approval's five minutes: the gated call is denied at once
// (under a second), the model is told why and how approvals are answered,
// the ApprovalResolved event says "unanswerable" with the reason, and the
// log says so too.
func TestNoChannelDeniesAtOnce(t *testing.T) {
	for _, c := range []struct {
		name     string
		overHTTP bool
		so       *mcp.ClientSessionOptions
	}{{"2026/stdio", false, nil}, {"2026/http", true, nil}, {"2025/stdio", false, legacy}} {
		t.Run(c.name, func(t *testing.T) {
			var logs testutil.SyncBuffer
			v, fs, srv := elicitEnv(t, approval.Config{}, axocoatl.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			v.m.DeclareChannels()
			client := mcp.NewClient(&mcp.Implementation{Name: "no-forms", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cs := connectEra(t, ctx, client, srv, c.overHTTP, c.so)
			start := time.Now()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_writer", Arguments: map[string]any{"input": ask("mcp__files__write", `{"path":"n.txt","text":"x"}`)}})
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			text := res.Content[0].(*mcp.TextContent).Text
			if took > time.Second || fs.calls.Load() != 0 {
				t.Fatalf("took %s, the tool ran %d times", took, fs.calls.Load())
			}
			for _, want := range []string{"could not be put to anyone", "declared no form elicitation", "dashboard or the approvals API"} {
				if !strings.Contains(text, want) {
					t.Fatalf("the model was told %q, want %q in it", text, want)
				}
			}
			got := v.next(t, approval.EventResolved)
			if got["status"] != approval.StatusUnanswerable || got["resolved_by"] != "no_channel" || !strings.Contains(got["reason"].(string), "form elicitation") {
				t.Fatalf("ApprovalResolved %v", got)
			}
			if !strings.Contains(logs.String(), "status=unanswerable") {
				t.Fatalf("not logged:\n%s", logs.String())
			}
		})
	}
}

// A question (a UserPrompt with a Schema, as a tool asks through the run's
// prompter) goes to a 2026-07-28 client as a form elicitation with that
// schema; the form's content comes back to the asker.
func TestInputRequiredQuestion(t *testing.T) {
	v := newEnv(t, approval.Config{Default: approval.Allow}, axocoatl.Options{})
	schema := json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)
	var got atomic.Value
	if err := v.e.RegisterTool(axocoatl.Tool{Name: "t", Description: "Asks the user.", Call: func(ctx context.Context, _ axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		p := axocoatl.UserPrompterFrom(ctx)
		if p == nil {
			return axocoatl.ToolResult{Content: "no prompter", IsError: true}, nil
		}
		ans, err := p.PromptUser(ctx, axocoatl.UserPrompt{Message: "Which city?", Schema: schema})
		if err != nil {
			return axocoatl.ToolResult{Content: err.Error(), IsError: true}, nil
		}
		got.Store(ans)
		city, _ := ans.Content["city"].(string)
		return axocoatl.ToolResult{Content: "wrote " + city}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	if err := v.e.AddAgent(agent.Spec{ID: "a"}, &oneCall{tool: "t"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	srv, err := mcpserver.New(mcpserver.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.e.Use(context.Background(), srv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	var seen atomic.Value
	client := mcp.NewClient(&mcp.Implementation{Name: "q", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			raw, _ := json.Marshal(req.Params.RequestedSchema)
			seen.Store(req.Params.Message + " " + string(raw))
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"city": "Oaxaca"}}, nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, _ := connect2026(t, ctx, client, srv, true)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_a", Arguments: map[string]any{"input": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "wrote Oaxaca") {
		t.Fatalf("%q", text)
	}
	if s, _ := seen.Load().(string); !strings.Contains(s, "Which city?") || !strings.Contains(s, `"city":{"type":"string"}`) {
		t.Fatalf("the form: %q", s)
	}
	if ans := got.Load().(axocoatl.UserAnswer); !ans.Accepted || ans.By != mcpserver.ElicitationBy {
		t.Fatalf("%+v", ans)
	}
	// The key was made 0600 in the data dir on first use.
	fi, err := os.Stat(filepath.Join(dir, mcpserver.StateKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != 32 {
		t.Fatalf("key file: %v %v", fi, err)
	}
}

// BenchmarkMCPHumanInput times one gated tools/call from a go-sdk client
// over HTTP (loopback, in process): the agent's one native tool call is
// allowed by policy (no human: the baseline), put to the user of a
// 2026-07-28 client as an InputRequiredResult (the client's form accepts;
// its retry resumes the run), or put to a 2025-11-25 client as an
// elicitation mid-call. tools/call/op counts the POSTs of tools/call: the
// 2026-07-28 round trip costs one more than the others, no more.
func BenchmarkMCPHumanInput(b *testing.B) {
	for _, c := range []struct {
		name   string
		policy string
		so     *mcp.ClientSessionOptions
	}{
		{"allow", approval.Allow, nil},
		{"2026-07-28_InputRequiredResult", approval.Prompt, nil},
		{"2025-11-25_elicitation", approval.Prompt, legacy},
	} {
		b.Run(c.name, func(b *testing.B) {
			v := newEnv(b, approval.Config{Default: c.policy, Timeout: time.Minute}, axocoatl.Options{})
			var rec recorder
			if err := v.e.RegisterTool(rec.tool("t", "", "")); err != nil {
				b.Fatal(err)
			}
			if err := v.e.AddAgent(agent.Spec{ID: "a"}, &oneCall{tool: "t"}); err != nil {
				b.Fatal(err)
			}
			srv, err := mcpserver.New(mcpserver.Config{})
			if err != nil {
				b.Fatal(err)
			}
			if err := v.e.Use(context.Background(), srv); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { srv.Close() })
			cc := &callCounter{h: srv}
			hs := httptest.NewServer(cc)
			b.Cleanup(hs.Close)
			client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ClientOptions{
				Capabilities: &mcp.ClientCapabilities{},
				ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					return &mcp.ElicitResult{Action: "accept"}, nil
				},
			})
			ctx := context.Background()
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1}, c.so)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { cs.Close() })
			params := &mcp.CallToolParams{Name: "agent_a", Arguments: map[string]any{"input": "x"}}
			start := cc.calls.Load()
			for b.Loop() {
				res, err := cs.CallTool(ctx, params)
				if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "wrote") {
					b.Fatalf("%+v %v", res, err)
				}
			}
			b.ReportMetric(float64(cc.calls.Load()-start)/float64(b.N), "tools/call/op")
			if rec.n.Load() != int64(b.N) {
				b.Fatalf("the tool ran %d times for %d calls", rec.n.Load(), b.N)
			}
		})
	}
}

// The first verdict wins across the rounds too: the approval is allowed on
// the approvals API while the client's user has the form; the tool runs;
// the client's retry (here answering nothing) gets the run's result, not
// the stale question again.
func TestInputRequiredAnsweredElsewhere(t *testing.T) {
	v, fs, srv := elicitEnv(t, approval.Config{Timeout: time.Minute}, axocoatl.Options{})
	client := manualRoundsClient("slow-user")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, _ := connect2026(t, ctx, client, srv, true)
	input := ask("mcp__files__write", `{"path":"w.txt","text":"x"}`)
	res := firstRound(t, ctx, cs, "agent_writer", input)
	req := v.next(t, approval.EventRequested)
	if r := v.do(t, "POST", "/api/approvals/"+req["approval_id"].(string), `{"decision":"allow"}`); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	eventually(t, "the tool ran", func() bool { return fs.calls.Load() == 1 })
	done, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_writer", Arguments: map[string]any{"input": input}, RequestState: res.RequestState})
	if err != nil || done.NeedsInput() || !strings.Contains(done.Content[0].(*mcp.TextContent).Text, "wrote w.txt") {
		t.Fatalf("the retry: %+v %v", done, err)
	}
	if fs.calls.Load() != 1 {
		t.Fatalf("the tool ran %d times", fs.calls.Load())
	}
}

// On a shared lattice the other engines are a channel: an `mcp serve`-like
// engine that declares no channel of its own, called by a client that
// cannot show forms, does not deny at once; another engine's approvals
// API (a running daemon's dashboard) resolves the approval and the call
// completes.
func TestSharedLatticeAnswersForMCPServe(t *testing.T) {
	ns := embeddedNATS(t)
	a := newEnv(t, approval.Config{Timeout: time.Minute}, axocoatl.Options{Bus: natsBus(t, ns)})
	b := newEnv(t, approval.Config{Timeout: time.Minute}, axocoatl.Options{Bus: natsBus(t, ns)})
	a.m.DeclareChannels()
	if ch, declared := a.m.Channels(); !declared || len(ch) != 1 || !strings.Contains(ch[0], "shared lattice") {
		t.Fatalf("channels %q, declared %v", ch, declared)
	}
	var rec recorder
	if err := a.e.RegisterTool(rec.tool("t", "", "")); err != nil {
		t.Fatal(err)
	}
	if err := a.e.AddAgent(agent.Spec{ID: "a"}, &oneCall{tool: "t"}); err != nil {
		t.Fatal(err)
	}
	srv, err := mcpserver.New(mcpserver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.e.Use(context.Background(), srv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := connectEra(t, ctx, mcp.NewClient(&mcp.Implementation{Name: "plain", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}), srv, false, nil)
	done := make(chan string, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_a", Arguments: map[string]any{"input": "x"}})
		if err != nil {
			done <- err.Error()
			return
		}
		done <- res.Content[0].(*mcp.TextContent).Text
	}()
	var id string
	eventually(t, "the approval listed on the other engine", func() bool {
		p := b.m.Pending()
		if len(p) == 1 {
			id = p[0].ApprovalID
		}
		return len(p) == 1
	})
	if r := b.do(t, "POST", "/api/approvals/"+id, `{"decision":"allow"}`); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	if text := <-done; !strings.Contains(text, "wrote") || rec.n.Load() != 1 {
		t.Fatalf("%q, %d runs", text, rec.n.Load())
	}
}

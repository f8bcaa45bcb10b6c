package a2aremote_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/a2aremote"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// BenchmarkToolCallPaired makes the same request to the same remote agent
// two ways in one loop, alternating which goes first: through
// Engine.CallTool("a2a__remote") (allow-list, one pass-through
// interceptor, ToolCalled/ToolResult events, the module's input parsing,
// timeout, slot, streaming, result mapping and scrubbing), and directly
// with an a2aclient.Client built from the same card. Remotes: a2a-go/v2's
// reference server (A2A 1.0) and a2a-go v0.3's (A2A 0.3). Direct calls:
// "stream" consumes SendStreamingMessage to the task's end (the method the
// module uses, so that a cancelled run can cancel the remote task); "send"
// is a blocking SendMessage, what the simplest client does; "send-ours"
// is that call made with the module's own client (a2aclient with the
// module's SendMessage), so its ratio is the tool path's cost alone.
func BenchmarkToolCallPaired(b *testing.B) {
	for _, g := range benchRemotes {
		for _, direct := range []string{"stream", "send", "send-ours"} {
			b.Run(g.name+"/"+direct, func(b *testing.B) {
				peer := g.serve(b, answer)
				pairedCall(b, peer.URL, direct)
			})
		}
	}
}

// benchRemotes are the remotes of the benchmarks: the reference servers of
// both generations (a2a-go's; not @a2a-js/sdk's, whose 201 to a blocking
// 0.3 message:send the direct client, a2av0's, fails on), and a second
// axocoatl Engine (our a2a module, A2A 1.0).
var benchRemotes = append(generations[:3:3], struct {
	name  string
	gen   string
	serve func(testing.TB, behaviour) *remotePeer
}{"axocoatl-1.0", "1.0", func(t testing.TB, _ behaviour) *remotePeer {
	_, srv, _ := serveEngine(t, answerModel{}, "")
	return &remotePeer{URL: srv.URL}
}})

func pairedCall(b *testing.B, url, mode string) {
	ctx := context.Background()
	e := axocoatl.New(axocoatl.Options{})
	b.Cleanup(func() { e.Close(context.Background()) })
	if err := e.AddAgent(agent.Spec{ID: "bench", Tools: []string{"a2a__*"}}, provider.EchoModel{}); err != nil {
		b.Fatal(err)
	}
	e.Intercept(func(ctx context.Context, call axocoatl.ToolCall, next axocoatl.ToolFunc) (axocoatl.ToolResult, error) {
		return next(ctx, call)
	})
	m, err := a2aremote.New(a2aremote.Config{Agents: []a2aremote.AgentConfig{{Name: "remote", URL: url}}})
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Use(ctx, m); err != nil {
		b.Fatal(err)
	}
	if err := m.Ready(ctx); err != nil {
		b.Fatal(err)
	}

	// The direct client: the card resolved the same way any client does,
	// the same transports (1.0 and 0.3) over the same http.Transport.
	card, err := (&agentcard.Resolver{Client: http.DefaultClient, CardParser: a2av0.NewAgentCardParser()}).Resolve(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	hc := &http.Client{Transport: http.DefaultTransport}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc), a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{Client: hc}), a2av0.WithRESTTransport(a2av0.RESTTransportConfig{Client: hc}))
	if mode == "send-ours" {
		// The module's own client (its SendMessage over 1.0 JSON-RPC): what
		// the tool path adds to the very call it makes.
		c, err = a2aremote.NewClient(ctx, card, hc)
	}
	if err != nil {
		b.Fatal(err)
	}

	call := axocoatl.ToolCall{AgentID: "bench", Tool: "a2a__remote", Arguments: json.RawMessage(`{"input":"hi"}`)}
	const want = "remote answer to: hi"
	viaEngine := func() {
		if res, err := e.CallTool(ctx, call); err != nil || res.Content != want {
			b.Fatal(res, err)
		}
	}
	viaClient := func() {
		req := &a2a1.SendMessageRequest{Message: a2a1.NewMessage(a2a1.MessageRoleUser, a2a1.NewTextPart("hi"))}
		var got string
		if mode != "stream" {
			res, err := c.SendMessage(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			got = artifactText(res)
		} else {
			for ev, err := range c.SendStreamingMessage(ctx, req) {
				if err != nil {
					b.Fatal(err)
				}
				if s := artifactText(ev); s != "" {
					got = s
				}
			}
		}
		if got != want {
			b.Fatalf("direct call answered %q", got)
		}
	}
	testutil.Paired(b, viaEngine, viaClient)
}

// artifactText is the text of the artifacts an event carries.
func artifactText(ev a2a1.Event) string {
	var parts []string
	switch e := ev.(type) {
	case *a2a1.Task:
		for _, a := range e.Artifacts {
			for _, p := range a.Parts {
				parts = append(parts, p.Text())
			}
		}
	case *a2a1.TaskArtifactUpdateEvent:
		for _, p := range e.Artifact.Parts {
			parts = append(parts, p.Text())
		}
	case *a2a1.Message:
		for _, p := range e.Parts {
			parts = append(parts, p.Text())
		}
	}
	return strings.Join(parts, "")
}

// BenchmarkStreamVsSend pairs the two direct a2aclient calls with no
// Engine in the way: a streamed call read to its end against a blocking
// SendMessage, to the same reference server. Its ratio is what the A2A
// method alone costs, the part of the tool's ratio to "send" that is not
// the module's.
func BenchmarkStreamVsSend(b *testing.B) {
	for _, g := range benchRemotes {
		b.Run(g.name, func(b *testing.B) {
			peer := g.serve(b, answer)
			ctx := context.Background()
			card, err := (&agentcard.Resolver{Client: http.DefaultClient, CardParser: a2av0.NewAgentCardParser()}).Resolve(ctx, peer.URL)
			if err != nil {
				b.Fatal(err)
			}
			hc := &http.Client{Transport: http.DefaultTransport}
			c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc), a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{Client: hc}), a2av0.WithRESTTransport(a2av0.RESTTransportConfig{Client: hc}))
			if err != nil {
				b.Fatal(err)
			}
			var streamCalls, sendCalls []time.Duration
			stream := func() {
				start := time.Now()
				req := &a2a1.SendMessageRequest{Message: a2a1.NewMessage(a2a1.MessageRoleUser, a2a1.NewTextPart("hi"))}
				for _, err := range c.SendStreamingMessage(ctx, req) {
					if err != nil {
						b.Fatal(err)
					}
				}
				streamCalls = append(streamCalls, time.Since(start))
			}
			send := func() {
				start := time.Now()
				req := &a2a1.SendMessageRequest{Message: a2a1.NewMessage(a2a1.MessageRoleUser, a2a1.NewTextPart("hi"))}
				if _, err := c.SendMessage(ctx, req); err != nil {
					b.Fatal(err)
				}
				sendCalls = append(sendCalls, time.Since(start))
			}
			n := 0
			for b.Loop() {
				if n%2 == 0 {
					stream()
					send()
				} else {
					send()
					stream()
				}
				n++
			}
			b.ReportMetric(float64(testutil.Median(streamCalls))/float64(testutil.Median(sendCalls)), "median-stream/send")
		})
	}
}

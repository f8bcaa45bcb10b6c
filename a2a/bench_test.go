package a2a_test

import (
	"context"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	v1client "github.com/a2aproject/a2a-go/v2/a2aclient"
	v1card "github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	v1srv "github.com/a2aproject/a2a-go/v2/a2asrv"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/a2a"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
)

// referenceEcho is the a2a-go reference server's equivalent of our echo
// agent: the same answer as our message/send gives, a completed task whose
// one artifact is the input text, with the user message as history.
type referenceEcho struct{}

func (referenceEcho) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	var text string
	for _, p := range rc.Message.Parts {
		if tp, ok := p.(a2a03.TextPart); ok {
			text += tp.Text
		}
	}
	if rc.StoredTask == nil {
		if err := q.Write(ctx, a2a03.NewSubmittedTask(rc, rc.Message)); err != nil {
			return err
		}
	}
	art := a2a03.NewArtifactEvent(rc, a2a03.TextPart{Text: text})
	if err := q.Write(ctx, art); err != nil {
		return err
	}
	done := a2a03.NewStatusUpdateEvent(rc, a2a03.TaskStateCompleted, nil)
	done.Final = true
	return q.Write(ctx, done)
}

func (referenceEcho) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a03.NewStatusUpdateEvent(rc, a2a03.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// serveReference starts a2a-go's reference server: a2asrv.NewHandler with
// the echo executor behind a2asrv.NewJSONRPCHandler, and its static card.
func serveReference(b *testing.B) string {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	b.Cleanup(srv.Close)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(referenceEcho{}, a2asrv.WithLogger(quiet))))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(&a2a03.AgentCard{
		Name: "echo", Description: "echo", Version: "1", ProtocolVersion: "0.3.0",
		URL: srv.URL + "/a2a", PreferredTransport: a2a03.TransportProtocolJSONRPC,
		Capabilities:      a2a03.AgentCapabilities{Streaming: true},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a03.AgentSkill{{ID: "echo", Name: "echo", Description: "echo", Tags: []string{"echo"}}},
	}))
	return srv.URL
}

// serveAxocoatl starts our handler over an Engine with one echo agent.
func serveAxocoatl(b *testing.B) string {
	eng := axocoatl.New(axocoatl.Options{})
	if err := eng.AddAgent(agent.Spec{ID: "echo"}, provider.EchoModel{}); err != nil {
		b.Fatal(err)
	}
	h, err := a2a.New(a2a.Config{})
	if err != nil {
		b.Fatal(err)
	}
	if err := eng.Use(context.Background(), h); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	b.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.Close(ctx)
		_ = eng.Close(ctx)
	})
	return srv.URL
}

// BenchmarkMessageSend measures message/send round trips of the a2a-go
// client against our handler and against a2a-go's reference server, in the
// same run, with 16 concurrent callers (parallelism 8 × GOMAXPROCS 2).
func BenchmarkMessageSend(b *testing.B) {
	for _, sys := range []struct {
		name  string
		serve func(*testing.B) string
	}{
		{"axocoatl", serveAxocoatl},
		{"a2a-go-reference", serveReference},
	} {
		b.Run("system="+sys.name, func(b *testing.B) {
			base := sys.serve(b)
			tr := &http.Transport{MaxIdleConnsPerHost: 64}
			b.Cleanup(tr.CloseIdleConnections)
			ctx := context.Background()
			card, err := agentcard.DefaultResolver.Resolve(ctx, base)
			if err != nil {
				b.Fatal(err)
			}
			c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(&http.Client{Transport: tr}))
			if err != nil {
				b.Fatal(err)
			}
			b.SetParallelism(8)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				params := &a2a03.MessageSendParams{Message: a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: "ping"})}
				for pb.Next() {
					res, err := c.SendMessage(ctx, params)
					if err != nil {
						b.Error(err)
						return
					}
					if task, ok := res.(*a2a03.Task); !ok || task.Status.State != a2a03.TaskStateCompleted {
						b.Error(fmt.Errorf("unexpected result %#v", res))
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}

// referenceEchoV1 is referenceEcho for a2a-go/v2's reference server: the
// submitted task, one artifact with the input text, then completed.
type referenceEchoV1 struct{}

func (referenceEchoV1) Execute(ctx context.Context, ec *v1srv.ExecutorContext) iter.Seq2[a2a1.Event, error] {
	return func(yield func(a2a1.Event, error) bool) {
		var text string
		for _, p := range ec.Message.Parts {
			text += p.Text()
		}
		if ec.StoredTask == nil && !yield(a2a1.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a1.NewArtifactEvent(ec, a2a1.NewTextPart(text)), nil) {
			return
		}
		yield(a2a1.NewStatusUpdateEvent(ec, a2a1.TaskStateCompleted, nil), nil)
	}
}

func (referenceEchoV1) Cancel(ctx context.Context, ec *v1srv.ExecutorContext) iter.Seq2[a2a1.Event, error] {
	return func(yield func(a2a1.Event, error) bool) {
		yield(a2a1.NewStatusUpdateEvent(ec, a2a1.TaskStateCanceled, nil), nil)
	}
}

// serveReferenceV1 starts a2a-go/v2's reference server: a2asrv.NewHandler
// with the echo executor behind its JSON-RPC and REST handlers at /a2a, and
// its static card naming both.
func serveReferenceV1(b *testing.B) string {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	b.Cleanup(srv.Close)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	rh := v1srv.NewHandler(referenceEchoV1{}, v1srv.WithLogger(quiet))
	mux.Handle("POST /a2a", v1srv.NewJSONRPCHandler(rh))
	mux.Handle("/a2a/", http.StripPrefix("/a2a", v1srv.NewRESTHandler(rh)))
	mux.Handle(v1srv.WellKnownAgentCardPath, v1srv.NewStaticAgentCardHandler(&a2a1.AgentCard{
		Name: "echo", Description: "echo", Version: "1",
		SupportedInterfaces: []*a2a1.AgentInterface{
			a2a1.NewAgentInterface(srv.URL+"/a2a", a2a1.TransportProtocolJSONRPC),
			a2a1.NewAgentInterface(srv.URL+"/a2a", a2a1.TransportProtocolHTTPJSON),
		},
		Capabilities:      a2a1.AgentCapabilities{Streaming: true},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a1.AgentSkill{{ID: "echo", Name: "echo", Description: "echo", Tags: []string{"echo"}}},
	}))
	return srv.URL
}

// BenchmarkSendMessageV1 is BenchmarkMessageSend in A2A 1.0: SendMessage
// round trips of the a2a-go/v2 client against our handler and against
// a2a-go/v2's reference server, in the same run, 16 concurrent callers, over
// each binding.
func BenchmarkSendMessageV1(b *testing.B) {
	for _, binding := range []a2a1.TransportProtocol{a2a1.TransportProtocolJSONRPC, a2a1.TransportProtocolHTTPJSON} {
		for _, sys := range []struct {
			name  string
			serve func(*testing.B) string
		}{
			{"axocoatl", serveAxocoatl},
			{"a2a-go-v2-reference", serveReferenceV1},
		} {
			b.Run("binding="+strings.ReplaceAll(string(binding), "+", "")+"/system="+sys.name, func(b *testing.B) {
				base := sys.serve(b)
				tr := &http.Transport{MaxIdleConnsPerHost: 64}
				b.Cleanup(tr.CloseIdleConnections)
				hc := &http.Client{Transport: tr}
				ctx := context.Background()
				card, err := v1card.NewResolver(hc).Resolve(ctx, base)
				if err != nil {
					b.Fatal(err)
				}
				c, err := v1client.NewFromCard(ctx, card, v1client.WithJSONRPCTransport(hc), v1client.WithRESTTransport(hc),
					v1client.WithConfig(v1client.Config{PreferredTransports: []a2a1.TransportProtocol{binding}}))
				if err != nil {
					b.Fatal(err)
				}
				b.SetParallelism(8)
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						req := &a2a1.SendMessageRequest{Message: a2a1.NewMessage(a2a1.MessageRoleUser, a2a1.NewTextPart("ping"))}
						res, err := c.SendMessage(ctx, req)
						if err != nil {
							b.Error(err)
							return
						}
						if task, ok := res.(*a2a1.Task); !ok || task.Status.State != a2a1.TaskStateCompleted {
							b.Error(fmt.Errorf("unexpected result %#v", res))
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
			})
		}
	}
}

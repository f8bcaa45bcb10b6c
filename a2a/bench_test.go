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

	a2apb "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	v1 "github.com/a2aproject/a2a-go/v2/a2a"
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
		if tp, ok := p.(a2apb.TextPart); ok {
			text += tp.Text
		}
	}
	if rc.StoredTask == nil {
		if err := q.Write(ctx, a2apb.NewSubmittedTask(rc, rc.Message)); err != nil {
			return err
		}
	}
	art := a2apb.NewArtifactEvent(rc, a2apb.TextPart{Text: text})
	if err := q.Write(ctx, art); err != nil {
		return err
	}
	done := a2apb.NewStatusUpdateEvent(rc, a2apb.TaskStateCompleted, nil)
	done.Final = true
	return q.Write(ctx, done)
}

func (referenceEcho) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2apb.NewStatusUpdateEvent(rc, a2apb.TaskStateCanceled, nil)
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
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(&a2apb.AgentCard{
		Name: "echo", Description: "echo", Version: "1", ProtocolVersion: "0.3.0",
		URL: srv.URL + "/a2a", PreferredTransport: a2apb.TransportProtocolJSONRPC,
		Capabilities:      a2apb.AgentCapabilities{Streaming: true},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2apb.AgentSkill{{ID: "echo", Name: "echo", Description: "echo", Tags: []string{"echo"}}},
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
				params := &a2apb.MessageSendParams{Message: a2apb.NewMessage(a2apb.MessageRoleUser, a2apb.TextPart{Text: "ping"})}
				for pb.Next() {
					res, err := c.SendMessage(ctx, params)
					if err != nil {
						b.Error(err)
						return
					}
					if task, ok := res.(*a2apb.Task); !ok || task.Status.State != a2apb.TaskStateCompleted {
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

func (referenceEchoV1) Execute(ctx context.Context, ec *v1srv.ExecutorContext) iter.Seq2[v1.Event, error] {
	return func(yield func(v1.Event, error) bool) {
		var text string
		for _, p := range ec.Message.Parts {
			text += p.Text()
		}
		if ec.StoredTask == nil && !yield(v1.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(v1.NewArtifactEvent(ec, v1.NewTextPart(text)), nil) {
			return
		}
		yield(v1.NewStatusUpdateEvent(ec, v1.TaskStateCompleted, nil), nil)
	}
}

func (referenceEchoV1) Cancel(ctx context.Context, ec *v1srv.ExecutorContext) iter.Seq2[v1.Event, error] {
	return func(yield func(v1.Event, error) bool) {
		yield(v1.NewStatusUpdateEvent(ec, v1.TaskStateCanceled, nil), nil)
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
	mux.Handle(v1srv.WellKnownAgentCardPath, v1srv.NewStaticAgentCardHandler(&v1.AgentCard{
		Name: "echo", Description: "echo", Version: "1",
		SupportedInterfaces: []*v1.AgentInterface{
			v1.NewAgentInterface(srv.URL+"/a2a", v1.TransportProtocolJSONRPC),
			v1.NewAgentInterface(srv.URL+"/a2a", v1.TransportProtocolHTTPJSON),
		},
		Capabilities:      v1.AgentCapabilities{Streaming: true},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []v1.AgentSkill{{ID: "echo", Name: "echo", Description: "echo", Tags: []string{"echo"}}},
	}))
	return srv.URL
}

// BenchmarkSendMessageV1 is BenchmarkMessageSend in A2A 1.0: SendMessage
// round trips of the a2a-go/v2 client against our handler and against
// a2a-go/v2's reference server, in the same run, 16 concurrent callers, over
// each binding.
func BenchmarkSendMessageV1(b *testing.B) {
	for _, binding := range []v1.TransportProtocol{v1.TransportProtocolJSONRPC, v1.TransportProtocolHTTPJSON} {
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
					v1client.WithConfig(v1client.Config{PreferredTransports: []v1.TransportProtocol{binding}}))
				if err != nil {
					b.Fatal(err)
				}
				b.SetParallelism(8)
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						req := &v1.SendMessageRequest{Message: v1.NewMessage(v1.MessageRoleUser, v1.NewTextPart("ping"))}
						res, err := c.SendMessage(ctx, req)
						if err != nil {
							b.Error(err)
							return
						}
						if task, ok := res.(*v1.Task); !ok || task.Status.State != v1.TaskStateCompleted {
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

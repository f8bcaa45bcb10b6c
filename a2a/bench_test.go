package a2a_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	a2apb "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

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

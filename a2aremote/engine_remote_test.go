package a2aremote_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/a2a"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/lattice"
	"github.com/axocoatl/axocoatl-go/secret"
)

// answerModel answers "remote answer to: <input>", as the reference
// servers' agents do in the benchmarks.
type answerModel struct{}

func (answerModel) Generate(_ context.Context, req *agent.Request) (*agent.Response, error) {
	return &agent.Response{Content: "remote answer to: " + req.Messages[len(req.Messages)-1].Content}, nil
}

// blockingModel answers "remote engine: <input>", or, for the input
// "block", waits for its run to end, saying on started that it began.
type blockingModel struct{ started chan struct{} }

func (m blockingModel) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	last := req.Messages[len(req.Messages)-1].Content
	if last != "block" {
		return &agent.Response{Content: "remote engine: " + last}, nil
	}
	m.started <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

// serveEngine is a second axocoatl Engine serving agent "planner" over our
// own a2a module (its card offers A2A 1.0 and 0.3), guarded by token. It
// counts the streams asked of it.
func serveEngine(t testing.TB, model agent.Model, token string) (*axocoatl.Engine, *httptest.Server, *atomic.Int64) {
	t.Helper()
	eng := axocoatl.New(axocoatl.Options{HTTP: axocoatl.HTTPOptions{APIToken: secret.Secret(token)}})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		eng.Close(ctx)
	})
	if err := eng.AddAgent(agent.Spec{ID: "planner", Description: "Plans with an Engine", Provider: provider.Echo}, model); err != nil {
		t.Fatal(err)
	}
	h, err := a2a.New(a2a.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Use(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	var streams atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			streams.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return eng, srv, &streams
}

// The remote is another axocoatl Engine: the call speaks A2A 1.0 (the
// newest its card offers) with a blocking SendMessage (it lists tasks by
// context, so no stream is needed to cancel), the agent gets the remote
// agent's answer, and a cancelled call cancels the remote run (its
// AgentFailed says canceled), the task found by its context.
func TestRemoteIsAnotherEngine(t *testing.T) {
	model := blockingModel{started: make(chan struct{}, 1)}
	remote, srv, streams := serveEngine(t, model, token)
	s := newSetup(t, "a trip to Oaxaca", nil, remoteCfg(srv.URL))
	s.ready(t)
	if st := s.mod.Status(); len(st) != 1 || st[0].Generation != "1.0" {
		t.Fatalf("status = %+v, want generation 1.0 from our own card", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.eng.Execute(ctx, "caller", "go")
	if err != nil {
		t.Fatal(err)
	}
	if want := "tool said: remote engine: a trip to Oaxaca"; res.Output != want {
		t.Fatalf("output = %q, want %q", res.Output, want)
	}

	failed, err := remote.Bus().Subscribe(lattice.Filter{Types: []string{axocoatl.EventAgentFailed}}, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer failed.Close()
	callCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.eng.CallTool(callCtx, axocoatl.ToolCall{AgentID: "caller", Tool: "a2a__remote", Arguments: json.RawMessage(`{"input":"block"}`)})
		done <- err
	}()
	select {
	case <-model.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the remote run did not start")
	}
	stop()
	select {
	case ev := <-failed.Events():
		var p struct {
			AgentID  string `json:"agent_id"`
			Canceled bool   `json:"canceled"`
			Error    string `json:"error"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err != nil || p.AgentID != "planner" || !p.Canceled {
			t.Fatalf("remote AgentFailed = %s, want planner canceled", ev.Payload)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the remote run was not cancelled")
	}
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "cancel") {
			t.Fatalf("CallTool = %v, want a cancellation", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CallTool did not return after its context was cancelled")
	}
	if n := streams.Load(); n != 0 {
		t.Fatalf("the remote was asked for %d streams, want blocking calls only", n)
	}
}

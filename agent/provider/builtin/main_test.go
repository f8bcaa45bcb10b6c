package builtin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/builtin"
	"github.com/axocoatl/axocoatl-go/lattice"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// harness is an Engine with one agent "a" on a real provider, and a
// subscription to its AgentFailed events.
type harness struct {
	engine *axocoatl.Engine
	failed lattice.Subscription
}

func newHarness(t *testing.T, kind string, cfg provider.Config, spec agent.Spec) *harness {
	t.Helper()
	model, err := builtin.New(kind, cfg)
	if err != nil {
		t.Fatalf("builtin.New(%s): %v", kind, err)
	}
	e := axocoatl.New(axocoatl.Options{})
	spec.ID, spec.Provider = "a", kind
	if err := e.AddAgent(spec, model); err != nil {
		t.Fatal(err)
	}
	sub, err := e.Bus().Subscribe(lattice.Filter{Types: []string{axocoatl.EventAgentFailed}}, 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sub.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Errorf("engine close: %v", err)
		}
	})
	return &harness{engine: e, failed: sub}
}

// failure waits for the AgentFailed event of the run and returns its error.
func (h *harness) failure(t *testing.T) string {
	t.Helper()
	select {
	case ev := <-h.failed.Events():
		var p struct {
			AgentID string `json:"agent_id"`
			Error   string `json:"error"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatalf("AgentFailed payload: %v", err)
		}
		if p.AgentID != "a" {
			t.Fatalf("AgentFailed for %q", p.AgentID)
		}
		return p.Error
	case <-time.After(5 * time.Second):
		t.Fatal("no AgentFailed event")
		return ""
	}
}

// toolRecorder is a registered tool that records the arguments of its calls.
type toolRecorder struct {
	mu    sync.Mutex
	calls []json.RawMessage
}

func (r *toolRecorder) register(t *testing.T, e *axocoatl.Engine, name, reply string, fail bool) {
	t.Helper()
	err := e.RegisterTool(axocoatl.Tool{
		Name:        name,
		Description: "looks things up",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		Call: func(ctx context.Context, call axocoatl.ToolCall) (axocoatl.ToolResult, error) {
			r.mu.Lock()
			r.calls = append(r.calls, call.Arguments)
			r.mu.Unlock()
			if fail {
				return axocoatl.ToolResult{Content: reply, IsError: true}, nil
			}
			return axocoatl.ToolResult{Content: reply}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (r *toolRecorder) args() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.calls))
	for i, c := range r.calls {
		out[i] = string(c)
	}
	return out
}

// exchange is one request a fake provider received.
type exchange struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// recorder keeps what a test server received, for assertions after the run.
type recorder struct {
	mu   sync.Mutex
	seen []exchange
}

func (r *recorder) record(req *http.Request) (int, []byte) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, exchange{req.Method, req.URL.Path, req.Header.Clone(), body})
	return len(r.seen), body
}

func (r *recorder) all() []exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]exchange(nil), r.seen...)
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// toolRoundTrip runs agent "a" (newHarness) on "Weather in Paris?" against a
// model server that answers first (a turn asking for the tools lookup and
// broken) and then final. lookup answers "21°C, sunny" and broken fails
// with "backend down". It checks the agent's output and each tool's
// arguments, and returns the two requests the provider sent, for the caller
// to check its wire format. cfg gets the server's URL.
func toolRoundTrip(t *testing.T, kind string, cfg func(serverURL string) provider.Config, spec agent.Spec, first, final string) []exchange {
	t.Helper()
	var rec recorder
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := rec.record(r)
		if n == 1 {
			writeJSON(w, 200, first)
			return
		}
		writeJSON(w, 200, final)
	}))
	defer srv.Close()

	h := newHarness(t, kind, cfg(srv.URL), spec)
	var lookup, broken toolRecorder
	lookup.register(t, h.engine, "lookup", "21°C, sunny", false)
	broken.register(t, h.engine, "broken", "backend down", true)

	res, err := h.engine.Execute(context.Background(), "a", "Weather in Paris?")
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if res.Output != "Paris: 21°C and sunny." {
		t.Fatalf("output %q", res.Output)
	}
	if got := lookup.args(); len(got) != 1 || got[0] != `{"city":"Paris"}` {
		t.Fatalf("lookup called with %q", got)
	}
	if got := broken.args(); len(got) != 1 || got[0] != `{"city":"Lyon"}` {
		t.Fatalf("broken called with %q", got)
	}

	seen := rec.all()
	if len(seen) != 2 {
		t.Fatalf("%d requests, want 2", len(seen))
	}
	return seen
}

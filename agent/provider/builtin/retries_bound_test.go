package builtin_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
)

// Guards: bound providers.<kind>.max_retries (docs/bounds.md, providers).
// A server that fails every call with a transient 503 (asking for a 1 ms
// wait, so each retry fits in the timeout) gets the call once plus
// max_retries more times: 3 in all by default (2 retries), 2 with
// max_retries 1; then the last failure is returned. With the bound gone,
// the calls would go on until the timeout.
func TestProviderRetriesBounded(t *testing.T) {
	for _, wi := range wires {
		for _, tc := range []struct {
			retries, attempts int
		}{{0, 1 + provider.DefaultMaxRetries}, {1, 2}} {
			t.Run(fmt.Sprintf("%s/max_retries=%d", wi.kind, tc.retries), func(t *testing.T) {
				var hits atomic.Int32
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					hits.Add(1)
					w.Header().Set("Retry-After-Ms", "1")
					writeJSON(w, 503, wi.serverErr)
				}))
				defer srv.Close()
				h := newHarness(t, wi.kind, provider.Config{BaseURL: wi.base(srv.URL), MaxRetries: tc.retries, Timeout: time.Minute}, agent.Spec{})
				_, err := h.engine.Execute(context.Background(), "a", "hello")
				if err == nil || !strings.Contains(err.Error(), "HTTP 503: "+wi.errMsg) {
					t.Fatalf("error %v, want the last 503", err)
				}
				if n := hits.Load(); int(n) != tc.attempts {
					t.Fatalf("%d attempts, want %d (max_retries %d)", n, tc.attempts, tc.retries)
				}
			})
		}
	}
}

// Guards: bound "tool definitions in one model request" (128 for openai,
// none stated for ollama; docs/bounds.md, agent runs) on the real
// providers (agent's TestToolDefinitionLimit checks the run with a model
// of its own). An agent offered 129 tools fails on openai before any
// request reaches the server, asking to narrow tools:; with 128 it calls
// the server; on ollama 129 go to the server.
func TestOpenAIToolDefinitionLimit(t *testing.T) {
	for _, tc := range []struct {
		kind  string
		tools int
		fails bool
	}{{provider.OpenAI, 129, true}, {provider.OpenAI, 128, false}, {provider.Ollama, 129, false}} {
		t.Run(fmt.Sprintf("%s/%d", tc.kind, tc.tools), func(t *testing.T) {
			var hits atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				writeJSON(w, 200, chatFinal)
			}))
			defer srv.Close()
			h := newHarness(t, tc.kind, provider.Config{BaseURL: srv.URL + "/v1"}, agent.Spec{})
			for i := range tc.tools {
				if err := h.engine.RegisterTool(axocoatl.Tool{Name: fmt.Sprintf("t%d", i), Description: "a tool", Call: func(context.Context, axocoatl.ToolCall) (axocoatl.ToolResult, error) {
					return axocoatl.ToolResult{Content: "ok"}, nil
				}}); err != nil {
					t.Fatal(err)
				}
			}
			_, err := h.engine.Execute(context.Background(), "a", "hello")
			if tc.fails {
				if !errors.Is(err, agent.ErrTooManyTools) || !strings.Contains(err.Error(), "narrow `tools:`") || hits.Load() != 0 {
					t.Fatalf("%d tools on %s: %v after %d requests, want ErrTooManyTools before any", tc.tools, tc.kind, err, hits.Load())
				}
				return
			}
			if err != nil || hits.Load() != 1 {
				t.Fatalf("%d tools on %s: %v after %d requests, want one request answered", tc.tools, tc.kind, err, hits.Load())
			}
		})
	}
}

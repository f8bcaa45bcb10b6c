package builtin_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/secret"
)

// wire describes one provider's API for the table tests.
type wire struct {
	kind      string
	base      func(srvURL string) string
	serverErr string // the provider's own JSON for a 500
	errMsg    string // the message in serverErr
	ok        string // a successful final answer
}

var wires = []wire{
	{
		kind:      provider.OpenAI,
		base:      func(u string) string { return u + "/v1" },
		serverErr: `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`,
		errMsg:    "The server had an error while processing your request.",
		ok:        chatFinal,
	},
	{
		kind:      provider.Anthropic,
		base:      func(u string) string { return u },
		serverErr: `{"type":"error","error":{"type":"api_error","message":"Internal server error"},"request_id":"req_011"}`,
		errMsg:    "Internal server error",
		ok:        messagesFinal,
	},
}

// A failing provider ends the run with a clear error from Execute and an
// AgentFailed event carrying the same text.
//
// Guards: bound providers.<kind>.timeout (docs/bounds.md).
func TestProviderFailures(t *testing.T) {
	cases := []struct {
		name    string
		timeout time.Duration
		handler func(w wire, release <-chan struct{}) http.HandlerFunc
		want    func(w wire) []string
		is      error
	}{
		{
			name: "500",
			handler: func(wi wire, _ <-chan struct{}) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 500, wi.serverErr) }
			},
			want: func(wi wire) []string { return []string{wi.kind + ": HTTP 500: " + wi.errMsg} },
		},
		{
			name: "malformed JSON",
			handler: func(wi wire, _ <-chan struct{}) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					writeJSON(w, 200, `{"id": "x", "choices": [{"index": 0, "mess`)
				}
			},
			want: func(wi wire) []string { return []string{wi.kind + ": HTTP 200: malformed response: invalid JSON"} },
		},
		{
			name:    "hung",
			timeout: 300 * time.Millisecond,
			handler: func(wi wire, release <-chan struct{}) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					select {
					case <-r.Context().Done():
					case <-release:
					}
				}
			},
			want: func(wi wire) []string { return []string{wi.kind + ": no response within 300ms (timeout)"} },
			is:   context.DeadlineExceeded,
		},
	}
	for _, wi := range wires {
		for _, tc := range cases {
			t.Run(wi.kind+"/"+tc.name, func(t *testing.T) {
				release := make(chan struct{})
				var hits atomic.Int32
				handler := tc.handler(wi, release)
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					hits.Add(1)
					handler(w, r)
				}))
				defer srv.Close()
				defer close(release) // before Close: a hung handler must end

				cfg := provider.Config{BaseURL: wi.base(srv.URL), APIKey: secret.Secret("sk-k"), Timeout: tc.timeout, MaxRetries: -1}
				h := newHarness(t, wi.kind, cfg, agent.Spec{})
				start := time.Now()
				_, err := h.engine.Execute(context.Background(), "a", "hello")
				if err == nil {
					t.Fatal("Execute succeeded")
				}
				t.Logf("error: %v", err)
				if tc.timeout > 0 && time.Since(start) > tc.timeout+2*time.Second {
					t.Fatalf("took %s, timeout %s", time.Since(start), tc.timeout)
				}
				for _, w := range tc.want(wi) {
					if !strings.Contains(err.Error(), w) {
						t.Fatalf("error %q does not say %q", err, w)
					}
				}
				if !errors.Is(err, provider.ErrProvider) {
					t.Fatalf("error %q is not ErrProvider", err)
				}
				var perr *provider.Error
				if !errors.As(err, &perr) || perr.Provider != wi.kind {
					t.Fatalf("error %q is not a *provider.Error of %s", err, wi.kind)
				}
				if tc.is != nil && !errors.Is(err, tc.is) {
					t.Fatalf("error %q is not %v", err, tc.is)
				}
				if got := h.failure(t); got != err.Error() {
					t.Fatalf("AgentFailed error %q, Execute error %q", got, err)
				}
				if n := hits.Load(); n != 1 {
					t.Fatalf("%d requests with retries off", n)
				}
			})
		}
	}
}

// An answer cut by the token limit in the middle of a tool call must not run
// the tool on half-written arguments.
func TestToolCallCutByTokenLimit(t *testing.T) {
	answers := map[string]string{
		provider.OpenAI:    strings.Replace(chatToolCalls, `"finish_reason": "tool_calls"`, `"finish_reason": "length"`, 1),
		provider.Anthropic: strings.Replace(messagesToolUse, `"stop_reason": "tool_use"`, `"stop_reason": "max_tokens"`, 1),
	}
	for _, wi := range wires {
		t.Run(wi.kind, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, 200, answers[wi.kind])
			}))
			defer srv.Close()
			h := newHarness(t, wi.kind, provider.Config{BaseURL: wi.base(srv.URL)}, agent.Spec{})
			var lookup toolRecorder
			lookup.register(t, h.engine, "lookup", "ok", false)
			_, err := h.engine.Execute(context.Background(), "a", "x")
			if err == nil || !strings.Contains(err.Error(), "inside a tool call; raise providers."+wi.kind+".max_tokens") {
				t.Fatalf("error %v", err)
			}
			if n := len(lookup.args()); n != 0 {
				t.Fatalf("tool ran %d times on cut arguments", n)
			}
			h.failure(t)
		})
	}
}

// Transient failures are retried inside the timeout, honouring the server's
// Retry-After-Ms; a Retry-After that does not fit ends the call at once
// with the real status instead of sleeping into a timeout.
func TestProviderRetries(t *testing.T) {
	for _, wi := range wires {
		t.Run(wi.kind+"/recovers", func(t *testing.T) {
			var hits atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if hits.Add(1) < 3 {
					w.Header().Set("Retry-After-Ms", "20")
					writeJSON(w, 503, wi.serverErr)
					return
				}
				writeJSON(w, 200, wi.ok)
			}))
			defer srv.Close()
			h := newHarness(t, wi.kind, provider.Config{BaseURL: wi.base(srv.URL)}, agent.Spec{})
			res, err := h.engine.Execute(context.Background(), "a", "hello")
			if err != nil || res.Output == "" {
				t.Fatalf("Execute = %q, %v", res.Output, err)
			}
			if n := hits.Load(); n != 3 {
				t.Fatalf("%d attempts, want 3 (2 retries)", n)
			}
		})
		t.Run(wi.kind+"/retry-after beyond timeout", func(t *testing.T) {
			var hits atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				w.Header().Set("Retry-After", "30")
				writeJSON(w, 429, `{"error":{"type":"rate_limit_error","message":"Rate limited: slow down"}}`)
			}))
			defer srv.Close()
			h := newHarness(t, wi.kind, provider.Config{BaseURL: wi.base(srv.URL), Timeout: 5 * time.Second}, agent.Spec{})
			start := time.Now()
			_, err := h.engine.Execute(context.Background(), "a", "hello")
			if err == nil || !strings.Contains(err.Error(), "HTTP 429: Rate limited: slow down") {
				t.Fatalf("error %v", err)
			}
			if d := time.Since(start); d > time.Second {
				t.Fatalf("waited %s for a retry that could not fit", d)
			}
			if n := hits.Load(); n != 1 {
				t.Fatalf("%d attempts", n)
			}
		})
	}
}

// The API key never appears in an error, even when the server echoes the
// whole request (headers and body) back in its error message, in a non-JSON
// error body, or in a 2xx body that is not the API's JSON.
func TestAPIKeyNeverInErrors(t *testing.T) {
	const key = "sk-live-SECRET-4f9a2c"
	echoes := map[string]func(w http.ResponseWriter, dump string){
		"json error": func(w http.ResponseWriter, dump string) {
			writeJSON(w, 401, fmt.Sprintf(`{"error":{"message":%q,"type":"invalid_request_error"}}`, "bad credentials in request: "+dump))
		},
		"text error": func(w http.ResponseWriter, dump string) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(400)
			fmt.Fprint(w, "rejected "+dump)
		},
		"2xx not json": func(w http.ResponseWriter, dump string) {
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, dump)
		},
	}
	for _, wi := range wires {
		for name, echo := range echoes {
			t.Run(wi.kind+"/"+name, func(t *testing.T) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					dump, _ := httputil.DumpRequest(r, true)
					echo(w, string(dump))
				}))
				defer srv.Close()
				cfg := provider.Config{BaseURL: wi.base(srv.URL), APIKey: secret.Secret(key), MaxRetries: -1}
				h := newHarness(t, wi.kind, cfg, agent.Spec{})
				_, err := h.engine.Execute(context.Background(), "a", "hello")
				if err == nil {
					t.Fatal("Execute succeeded")
				}
				t.Logf("error: %v", err)
				event := h.failure(t)
				for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err), event} {
					if strings.Contains(text, key) || strings.Contains(text, "SECRET") {
						t.Fatalf("API key leaked: %s", text)
					}
				}
				if name != "2xx not json" && !strings.Contains(err.Error(), "[redacted]") {
					t.Fatalf("expected the echoed key to be redacted: %s", err)
				}
			})
		}
	}
}

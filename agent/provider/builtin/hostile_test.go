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

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/builtin"
	"github.com/axocoatl/axocoatl-go/secret"
)

// A 200 whose body is not an answer (an empty object, a gateway's error
// object, a field of the wrong type) is a failed call, never a successful
// empty answer; a gateway's own message is kept.
func TestMalformedSuccessBodies(t *testing.T) {
	cases := map[string][]struct{ name, body, want string }{
		provider.OpenAI: {
			{"empty object", `{}`, "malformed response"},
			{"error object", `{"error":{"message":"upstream overloaded","type":"server_error"}}`, "upstream overloaded"},
			{"choice without message", `{"id":"c","object":"chat.completion","choices":[{"index":0,"finish_reason":"stop"}]}`, "malformed response"},
			{"message of wrong type", `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":"hi","finish_reason":"stop"}]}`, "malformed response"},
		},
		provider.Anthropic: {
			{"empty object", `{}`, "malformed response"},
			{"error object", `{"type":"error","error":{"type":"overloaded_error","message":"upstream overloaded"}}`, "upstream overloaded"},
			{"content of wrong type", `{"id":"msg_1","type":"message","role":"assistant","content":"hello","stop_reason":"end_turn"}`, "malformed response"},
		},
	}
	for _, wi := range wires {
		for _, tc := range cases[wi.kind] {
			t.Run(wi.kind+"/"+tc.name, func(t *testing.T) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					writeJSON(w, 200, tc.body)
				}))
				defer srv.Close()
				m, err := builtin.New(wi.kind, provider.Config{BaseURL: wi.base(srv.URL), MaxRetries: -1})
				if err != nil {
					t.Fatal(err)
				}
				res, err := m.Generate(context.Background(), &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}})
				if err == nil {
					t.Fatalf("a 200 with %s succeeded: %+v", tc.body, *res)
				}
				if !errors.Is(err, provider.ErrProvider) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %q: want ErrProvider saying %q", err, tc.want)
				}
				t.Log(err)
			})
		}
	}
}

// A 200 whose body never ends (a broken or hostile server) is cut at the
// response size limit: the call fails at once with a clear error instead of
// buffering the stream until the timeout, however much that is.
//
// Guards: bound "one answer" (providers) (docs/bounds.md).
func TestHugeResponseBody(t *testing.T) {
	const limit = 16 << 20
	for _, wi := range wires {
		t.Run(wi.kind, func(t *testing.T) {
			written := make(chan int64, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				var n int64
				defer func() { written <- n }()
				chunk := []byte(`{"id":"` + strings.Repeat("a", 64<<10-7))
				for n < 4*limit {
					m, err := w.Write(chunk)
					n += int64(m)
					if err != nil {
						return
					}
					chunk = []byte(strings.Repeat("a", 64<<10))
				}
			}))
			defer srv.Close()
			m, err := builtin.New(wi.kind, provider.Config{BaseURL: wi.base(srv.URL), MaxRetries: -1, Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.Generate(context.Background(), &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}})
			if err == nil || !errors.Is(err, provider.ErrProvider) || !strings.Contains(err.Error(), "response body over 16 MiB") {
				t.Fatalf("error %v: want ErrProvider saying the body is over 16 MiB", err)
			}
			t.Log(err)
			if n := <-written; n >= 2*limit {
				t.Fatalf("the server wrote %d MiB before the client let go", n>>20)
			}
		})
	}
}

// A redirect to another host is not followed: Go's client forwards every
// header but Authorization and cookies to any host, so Anthropic's x-api-key
// (and a POST body) would reach whoever the redirect names.
func TestRedirectToOtherHostKeepsKey(t *testing.T) {
	const key = "sk-ant-redirect-7c1e"
	for _, wi := range wires {
		t.Run(wi.kind, func(t *testing.T) {
			var leaked atomic.Int32
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.Contains(fmt.Sprint(r.Header), key) {
					leaked.Add(1)
				}
				writeJSON(w, 200, wi.ok)
			}))
			defer other.Close()
			// Another port of the same loopback address is another origin:
			// name it by "localhost" so the host differs as well.
			otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
			var hits atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				http.Redirect(w, r, otherURL+r.URL.Path, http.StatusTemporaryRedirect)
			}))
			defer srv.Close()
			m, err := builtin.New(wi.kind, provider.Config{BaseURL: wi.base(srv.URL), APIKey: secret.Secret(key)})
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.Generate(context.Background(), &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}})
			if n := leaked.Load(); n > 0 {
				t.Fatalf("the API key reached the redirect's host %d times", n)
			}
			if err == nil || !errors.Is(err, provider.ErrProvider) || !strings.Contains(err.Error(), "redirect") {
				t.Fatalf("error %v: want ErrProvider naming the redirect", err)
			}
			if n := hits.Load(); n != 1 {
				t.Fatalf("a refused redirect was retried: %d requests", n)
			}
			t.Log(err)
		})
	}
}

// A base_url refused by validation is quoted without the credentials it
// may carry: a token as the userinfo or a key in the query.
func TestInvalidBaseURLErrorKeepsCredentials(t *testing.T) {
	for _, raw := range []string{
		"ftp://tok_user_secret1@llm.example.com/v1",
		"llm.example.com/v1?api_key=query_secret2",
		"ftp://user:pw_secret3@llm.example.com/v1?key=query_secret4",
	} {
		err := provider.Config{BaseURL: raw}.Validate()
		if err == nil {
			t.Fatalf("%s accepted", raw)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("credentials in %q", err)
		}
		if !strings.Contains(err.Error(), "base_url") {
			t.Errorf("error does not name the key: %q", err)
		}
		t.Log(err)
	}
}

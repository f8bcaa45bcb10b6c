package provider_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
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
				m, err := provider.New(wi.kind, provider.Config{BaseURL: wi.base(srv.URL), MaxRetries: -1})
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

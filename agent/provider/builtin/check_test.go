package builtin_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/builtin"
	"github.com/axocoatl/axocoatl-go/secret"
)

func TestCheck(t *testing.T) {
	var rec recorder
	const key = "sk-check-7"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.record(r)
		authorized := r.Header.Get("Authorization") == "Bearer "+key || r.Header.Get("X-Api-Key") == key
		switch {
		case strings.HasPrefix(r.URL.Path, "/hang/"):
			<-r.Context().Done()
		case !authorized && r.URL.Path == "/v1/models" && r.Header.Get("Anthropic-Version") != "":
			writeJSON(w, 401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
		case !authorized:
			writeJSON(w, 401, `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
		case r.Header.Get("Anthropic-Version") != "":
			writeJSON(w, 200, `{"data":[{"type":"model","id":"claude-sonnet-4-5","display_name":"Claude Sonnet 4.5","created_at":"2025-09-29T00:00:00Z"}],"has_more":true,"first_id":"claude-sonnet-4-5","last_id":"claude-sonnet-4-5"}`)
		default:
			writeJSON(w, 200, `{"object":"list","data":[{"id":"gpt-4o-mini","object":"model","created":1721172741,"owned_by":"system"}]}`)
		}
	}))
	defer srv.Close()

	// An address where nothing listens.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()

	ctx := context.Background()
	cases := []struct {
		name, kind string
		cfg        provider.Config
		want       string // "" = ok
	}{
		{"echo", provider.Echo, provider.Config{}, ""},
		{"openai ok", provider.OpenAI, provider.Config{BaseURL: srv.URL + "/v1", APIKey: secret.Secret(key)}, ""},
		{"ollama ok", provider.Ollama, provider.Config{BaseURL: srv.URL, APIKey: secret.Secret(key)}, ""},
		{"anthropic ok", provider.Anthropic, provider.Config{BaseURL: srv.URL, APIKey: secret.Secret(key)}, ""},
		{"openai bad key", provider.OpenAI, provider.Config{BaseURL: srv.URL + "/v1", APIKey: "sk-wrong"}, "openai: HTTP 401: Incorrect API key provided."},
		{"anthropic bad key", provider.Anthropic, provider.Config{BaseURL: srv.URL, APIKey: "sk-wrong"}, "anthropic: HTTP 401: invalid x-api-key"},
		{"unreachable", provider.OpenAI, provider.Config{BaseURL: deadURL + "/v1"}, "openai: request failed: dial tcp"},
		{"hung", provider.Ollama, provider.Config{BaseURL: srv.URL + "/hang", Timeout: 200 * time.Millisecond}, "ollama: no response within 200ms (timeout)"},
		{"bad url", provider.OpenAI, provider.Config{BaseURL: "ftp://user:pw@host/x"}, "providers.openai.base_url: want an absolute http(s) URL"},
		{"unknown kind", "gemini", provider.Config{}, `unknown provider "gemini"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := builtin.Check(ctx, tc.kind, tc.cfg)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check = %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "pw@") {
				t.Fatalf("password of the URL in %q", err)
			}
		})
	}

	for _, x := range rec.all() {
		if x.Method != "GET" {
			t.Fatalf("Check sent %s %s", x.Method, x.Path)
		}
	}
	if err := builtin.Check(ctx, provider.OpenAI, provider.Config{BaseURL: deadURL, MaxRetries: 5}); !errors.Is(err, provider.ErrProvider) {
		t.Fatalf("unreachable: %v is not ErrProvider", err)
	}
}

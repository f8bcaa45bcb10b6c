package wire

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestErrorMessageShapes(t *testing.T) {
	cases := []struct{ name, body, want string }{
		{"openai", `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, "Incorrect API key provided."},
		{"anthropic", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "Overloaded"},
		{"ollama native", `{"error":"model \"llama9\" not found, try pulling it first"}`, `model "llama9" not found, try pulling it first`},
		{"vllm", `{"object":"error","message":"The model does not exist.","type":"NotFoundError","code":404}`, "The model does not exist."},
		{"fastapi", `{"detail":"Not authenticated"}`, "Not authenticated"},
		{"type only", `{"error":{"type":"rate_limit_error"}}`, "rate_limit_error"},
		{"json without message", `{"ok":false}`, "Bad Gateway"},
		{"html", `<html><body>502 Bad Gateway</body></html>`, "Bad Gateway"},
		{"text", "upstream connect error", "upstream connect error"},
		{"empty", "", "Bad Gateway"},
	}
	for _, tc := range cases {
		if got := errorMessage(502, []byte(tc.body)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestScrubAndBound(t *testing.T) {
	c := &Client{key: "sk-abc"}
	if got := c.scrub("key sk-abc\n\tand sk-abc again"); got != "key [redacted] and [redacted] again" {
		t.Fatalf("scrub: %q", got)
	}
	long := strings.Repeat("é", maxMessage) // 2 bytes each: the cut falls inside a rune
	got := c.scrub(long)
	if len(got) > maxMessage+len("…") || !strings.HasSuffix(got, "…") || !json.Valid([]byte(`"`+got+`"`)) {
		t.Fatalf("bounded message: %d bytes, valid UTF-8 expected", len(got))
	}
}

func TestRetryDelay(t *testing.T) {
	h := func(k, v string) http.Header { return http.Header{k: []string{v}} }
	if d, ok := retryDelay(h("Retry-After-Ms", "250"), 0); !ok || d != 250*time.Millisecond {
		t.Errorf("Retry-After-Ms: %s %v", d, ok)
	}
	if d, ok := retryDelay(h("Retry-After", "2"), 0); !ok || d != 2*time.Second {
		t.Errorf("Retry-After: %s %v", d, ok)
	}
	if _, ok := retryDelay(h("Retry-After", "86400"), 0); ok {
		t.Error("a day-long Retry-After is retried")
	}
	if d, ok := retryDelay(h("Retry-After", time.Now().Add(3*time.Second).UTC().Format(http.TimeFormat)), 0); !ok || d <= time.Second || d > 3*time.Second {
		t.Errorf("Retry-After date: %s %v", d, ok)
	}
	for n, want := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 8 * time.Second} {
		if n == 3 {
			n = 20 // capped
		}
		d, ok := retryDelay(http.Header{}, n)
		if !ok || d > want || d < want*3/4 {
			t.Errorf("backoff %d: %s, want about %s", n, d, want)
		}
	}
}

func TestArguments(t *testing.T) {
	cases := map[string]string{
		"":                     `{}`,
		"  ":                   `{}`,
		`{ "city" : "Paris" }`: `{"city":"Paris"}`,
		`{"city": "Par`:        `"{\"city\": \"Par"`,
	}
	for in, want := range cases {
		if got := string(ArgumentsJSON(in)); got != want {
			t.Errorf("ArgumentsJSON(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestSchemaObject(t *testing.T) {
	s, err := SchemaObject(nil)
	if err != nil || s["type"] != "object" || s["properties"] == nil {
		t.Fatalf("zero schema: %v, %v", s, err)
	}
	if _, err := SchemaObject(json.RawMessage(`[1]`)); err == nil {
		t.Fatal("a non-object JSON schema was accepted")
	}
}

package redact

import "testing"

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:pw@host.example/mcp?key=abc#frag":    "https://[redacted]@host.example/mcp?[redacted]",
		"nats://TOKEN@127.0.0.1:4222":                      "nats://[redacted]@127.0.0.1:4222",
		"https://mcp.example/mcp/a1b2c3d4e5f6a7b8c9d0/sse": "https://mcp.example/mcp/[redacted]/sse",
		"https://mcp.example/streamable-http":              "https://mcp.example/streamable-http",
		"localhost:4222":                                   "localhost:4222",
		"user@host:4222":                                   "[unparsable URL]",
		"host/path?key=1":                                  "[redacted URL]",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
	if got := URLs("nats://a@h1:1, nats://h2:2"); got != "nats://[redacted]@h1:1,nats://h2:2" {
		t.Errorf("RedactURLs: %q", got)
	}
}

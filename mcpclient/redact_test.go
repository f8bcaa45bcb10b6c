package mcpclient

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/lattice"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Credentials written into a server's URL (a token as the userinfo, an API
// key in the query) never reach errors, Status, events or logs, including
// what the go-sdk logs itself (its keepalive failures quote Go's HTTP
// errors, which quote the whole URL).
func TestURLCredentialsRedacted(t *testing.T) {
	const user, query = "ghp_usertoken123", "querysecret456"
	ts := newTestServer()
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ts.srv }, nil))
	defer hs.Close()
	u := strings.Replace(hs.URL, "http://", "http://"+user+"@", 1) + "/mcp?key=" + query

	var logs testutil.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := Config{
		Servers:    []ServerConfig{{Name: "web", URL: u, Timeout: 2 * time.Second, KeepAlive: 200 * time.Millisecond}},
		MinBackoff: 100 * time.Millisecond,
	}
	e, m := startModule(t, cfg, log)
	sub, err := e.Bus().Subscribe(lattice.Filter{Types: []string{"McpServer*"}}, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := m.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The server goes away: pings, the session's end and the reconnects
	// all fail with errors that quote the URL.
	hs.CloseClientConnections()
	hs.Close()
	for ss := range ts.srv.Sessions() {
		ss.Close() // the server side of the session, never told it ended
	}
	waitFor(t, 10*time.Second, func() bool {
		return strings.Contains(logs.String(), "keepalive ping failed") && strings.Contains(logs.String(), "connect failed")
	})

	leaks := func(where, text string) {
		t.Helper()
		for _, s := range []string{user, query} {
			if strings.Contains(text, s) {
				t.Errorf("%s contains %q: %s", where, s, text)
			}
		}
	}
	for _, st := range m.Status() {
		leaks("Status", st.Error)
	}
	var events []string
	for {
		select {
		case ev := <-sub.Events():
			events = append(events, string(ev.Payload))
			continue
		default:
		}
		break
	}
	if len(events) < 2 {
		t.Fatalf("events: %q", events)
	}
	for _, ev := range events {
		leaks("event", ev)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		leaks("log", line)
	}

	_, err = Check(context.Background(), ServerConfig{Name: "web", URL: u, Timeout: 2 * time.Second}, nil, nil)
	if err == nil {
		t.Fatal("Check of a closed server succeeded")
	}
	leaks("Check error", err.Error())
}

// A child's stderr line is cut for length: no piece of an env secret
// survives the cut, neither the head of one cut at 512 bytes nor the tail
// of one that straddles a flush of an over-long line.
//
// Guards: bound "a child's stderr" (mcp client) (docs/bounds.md).
func TestStderrCutKeepsSecrets(t *testing.T) {
	log, logs := debugLogger()
	sc := helperServer("noisy", "long-stderr")
	sc.Env["SECRET_TOKEN"] = secretValue
	sc.Timeout = 5 * time.Second
	_, err := Check(context.Background(), sc, nil, log)
	if err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("Check: %v", err)
	}
	t.Log(err)
	head, tail := secretValue[:5], secretValue[len(secretValue)/2:]
	for _, text := range append(strings.Split(logs.String(), "\n"), err.Error()) {
		if strings.Contains(text, head) || strings.Contains(text, tail) {
			t.Errorf("part of the secret (%q or %q) leaked: %s", head, tail, text)
		}
	}
}

// The host's own credentials (Config.Scrub) are scrubbed from what any
// server says, as its own env and headers are: a stdio child inheriting
// the environment can read, and print, the host's API token.
func TestHostSecretsScrubbed(t *testing.T) {
	const hostToken = "sk-host-token-in-the-environment"
	t.Setenv("HOST_SETTING", hostToken)
	sc := helperServer("leaky", "print-inherited")
	sc.Timeout = 5 * time.Second

	// Without Scrub the child's words carry the token: the test can fail.
	_, err := Check(context.Background(), sc, nil, nil)
	if err == nil || !strings.Contains(err.Error(), hostToken) {
		t.Fatalf("control: the child did not print the inherited token: %v", err)
	}

	scrub := []secretT{"unrelated", hostToken}
	log, logs := debugLogger()
	_, err = Check(context.Background(), sc, scrub, log)
	if err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("Check: %v", err)
	}
	for _, text := range append(strings.Split(logs.String(), "\n"), err.Error()) {
		if strings.Contains(text, hostToken) {
			t.Errorf("host token leaked from Check: %s", text)
		}
	}

	log, logs = debugLogger()
	_, m := startModule(t, Config{Servers: []ServerConfig{sc}, Scrub: scrub}, log)
	err = m.Ready(context.Background()) // the first attempt failed: its error
	if err == nil || !strings.Contains(err.Error(), "[redacted]") {
		t.Fatalf("Ready: %v, want the child's stderr, redacted", err)
	}
	// Status's error is also what McpServerDisconnected carries.
	for _, text := range append(strings.Split(logs.String(), "\n"), err.Error(), m.Status()[0].Error) {
		if strings.Contains(text, hostToken) {
			t.Errorf("host token leaked from the module: %s", text)
		}
	}
}

// Hosted MCP servers put the account key in the URL's path
// (/mcp/<key>/sse): it is masked where the URL is shown, and scrubbed from
// the errors of Go's HTTP client, which quote the whole URL.
func TestURLPathKeysRedacted(t *testing.T) {
	const key = "sk-ak-9f8e7d6c5b4a3f2e1d0c"
	for raw, want := range map[string]string{
		"https://actions.example.com/mcp/" + key + "/sse":      "https://actions.example.com/mcp/[redacted]/sse",
		"https://u:p@mcp.example.com/v1/streamable-http?k=abc": "https://[redacted]@mcp.example.com/v1/streamable-http?[redacted]",
		"http://127.0.0.1:8080/mcp":                            "http://127.0.0.1:8080/mcp",
		"https://h/t/3f2a9c1e-77b4-4c1d-9a6e-0b8d2c4e6f10/mcp": "https://h/t/[redacted]/mcp",
	} {
		if got := (ServerConfig{URL: raw}).Target(); got != want {
			t.Errorf("Target(%q) = %q, want %q", raw, got, want)
		}
	}

	u := "http://" + testutil.FreeAddr(t) + "/mcp/" + key + "/sse" // nothing listens
	log, logs := debugLogger()
	_, err := Check(context.Background(), ServerConfig{Name: "hosted", URL: u, Timeout: 2 * time.Second}, nil, log)
	if err == nil {
		t.Fatal("Check of a closed port succeeded")
	}
	if !strings.Contains(err.Error(), "[redacted]") {
		t.Errorf("Check error does not show the URL, masked: %v", err)
	}
	for _, text := range append(strings.Split(logs.String(), "\n"), err.Error()) {
		if strings.Contains(text, key) {
			t.Errorf("path key leaked: %s", text)
		}
	}
}

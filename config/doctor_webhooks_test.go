package config

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/axocoatl/axocoatl-go/egress"
	"github.com/axocoatl/axocoatl-go/mcpclient"
	"github.com/axocoatl/axocoatl-go/secret"
)

// doctor and webhooks: a host that refuses connections and one that does
// not resolve are failures, an unsigned webhook a warning; --send-test
// sends a delivery the receiver verifies, and a receiver that refuses it
// fails.
func TestDoctorChecksWebhooks(t *testing.T) {
	const hookSecret = "doctor-hook-secret-0123456789"
	var (
		mu       sync.Mutex
		verified []string
	)
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := egress.Verify(hookSecret, r.Header, body, 0); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var m struct {
			EventType string `json:"event_type"`
		}
		_ = json.Unmarshal(body, &m)
		mu.Lock()
		verified = append(verified, m.EventType)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer good.Close()
	// A port that refuses: bound, then closed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()

	yaml := `agents: [{id: a}]
webhooks:
  - name: good
    url: ` + good.URL + `/hook?token=query-secret-77
    secret: ` + hookSecret + `
  - name: plain
    url: ` + good.URL + `/plain
  - name: refused
    url: http://` + refused + `/hook
    secret: ` + hookSecret + `
  - name: nohost
    url: https://no-such-host.invalid/hook
    secret: ` + hookSecret + `
`
	cfg, err := Parse("inline.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	doctor := func(opts DoctorOptions) (string, bool) {
		r := cfg.DoctorWith(context.Background(), opts)
		var out bytes.Buffer
		r.Print(&out)
		if strings.Contains(out.String(), "query-secret-77") || strings.Contains(out.String(), hookSecret) {
			t.Fatalf("doctor shows a secret:\n%s", out.String())
		}
		return out.String(), r.Failed()
	}
	out, failed := doctor(DoctorOptions{})
	for _, want := range []string{
		"ok   webhook good: ",
		"warn webhook plain: unsigned",
		"FAIL webhook refused: http://" + refused + "/hook: " + refused + " (127.0.0.1) accepts no connection: connect: connection refused",
		"FAIL webhook nohost: https://no-such-host.invalid/hook: host no-such-host.invalid does not resolve",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor lacks %q:\n%s", want, out)
		}
	}
	if !failed {
		t.Errorf("doctor did not fail:\n%s", out)
	}
	mu.Lock()
	if len(verified) != 0 {
		t.Errorf("doctor without --send-test sent %v", verified)
	}
	mu.Unlock()

	out, _ = doctor(DoctorOptions{SendTest: true})
	if !strings.Contains(out, "test delivery (WebhookTest) answered 204") {
		t.Errorf("good webhook with --send-test:\n%s", out)
	}
	// The unsigned one reaches the same receiver, which refuses it.
	if !strings.Contains(out, "FAIL webhook plain: ") || !strings.Contains(out, "test delivery answered 401, want 2xx") {
		t.Errorf("unsigned webhook with --send-test against a verifying receiver:\n%s", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(verified) != 1 || verified[0] != egress.TestEventType {
		t.Errorf("receiver verified %v, want one %s", verified, egress.TestEventType)
	}
}

// npx and uvx fetch their packages: doctor lists the registries as the
// server's egress (only the host of a registry URL that overrides them).
func TestDoctorListsLauncherRegistries(t *testing.T) {
	cfg := &Config{lookup: func(k string) (string, bool) {
		if k == "UV_DEFAULT_INDEX" {
			return "https://user:tok@pypi.internal.example/simple", true
		}
		return "", false
	}}
	r := &Report{}
	addLauncherEgress(cfg, mcpclient.ServerConfig{Name: "n", Command: "/usr/bin/npx"}, r)
	addLauncherEgress(cfg, mcpclient.ServerConfig{Name: "m", Command: "npx", Env: map[string]secret.Secret{"npm_config_registry": secret.Secret("https://npm.corp.example/")}}, r)
	addLauncherEgress(cfg, mcpclient.ServerConfig{Name: "u", Command: "uvx"}, r)
	addLauncherEgress(cfg, mcpclient.ServerConfig{Name: "g", Command: "go"}, r)
	var out bytes.Buffer
	r.Print(&out)
	for _, want := range []string{
		"registry.npmjs.org  (mcp server n (npx fetches its package))",
		"npm.corp.example  (mcp server m (npx fetches its package))",
		"pypi.internal.example  (mcp server u (uvx fetches its package))",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("egress lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "tok") || strings.Contains(out.String(), "mcp server g") {
		t.Errorf("egress:\n%s", out.String())
	}
}

// Behind a proxy (HTTPS_PROXY) the deliveries connect to the proxy, and
// the webhook's own host need not resolve here: doctor checks the proxy,
// shown by host and port only. Before, it failed every such webhook with
// "does not resolve".
func TestDoctorWebhookBehindProxy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // a proxy that takes connections; doctor only connects
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	proxy := ln.Addr().String()
	env := map[string]string{"HTTPS_PROXY": "http://user:proxy-pass-31@" + proxy}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	yaml := `agents: [{id: a}]
webhooks:
  - name: hook
    url: https://behind-the-proxy.invalid/hook
    secret: doctor-hook-secret-0123456789
`
	cfg, err := ParseWith(context.Background(), "inline.yaml", []byte(yaml), lookup)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cfg.Doctor(context.Background()).Print(&out)
	if want := "ok   webhook hook: https://behind-the-proxy.invalid/hook"; !strings.Contains(out.String(), want) ||
		!strings.Contains(out.String(), proxy+" via proxy accepts connections") {
		t.Errorf("doctor lacks %q via proxy %s:\n%s", want, proxy, out.String())
	}
	if strings.Contains(out.String(), "proxy-pass-31") {
		t.Errorf("doctor shows the proxy's password:\n%s", out.String())
	}
}

// --send-test is bounded by doctor's timeout like the other steps, not by
// a webhook's own (here 30 s) against a receiver that never answers.
// Before, doctor waited out the webhook's timeout.
func TestDoctorSendTestBounded(t *testing.T) {
	hung := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hung:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hung)
	yaml := `agents: [{id: a}]
webhooks:
  - name: slow
    url: ` + srv.URL + `/hook
    secret: doctor-hook-secret-0123456789
    timeout: 30s
`
	cfg, err := Parse("inline.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cfg.DoctorWith(context.Background(), DoctorOptions{SendTest: true}).Print(&out)
	if want := "test delivery: webhook slow: " + strings.TrimPrefix(srv.URL, "http://") + ": timeout after " + doctorTimeout.String(); !strings.Contains(out.String(), want) {
		t.Errorf("doctor lacks %q:\n%s", want, out.String())
	}
}

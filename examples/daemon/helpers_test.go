package main

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/axocoatl/axocoatl-go/config"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// bearer adds the API token to every request of an HTTP client, as a
// client configured with the daemon's token does.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// mapEnv is a fake environment for in-process runs.
func mapEnv(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "axocoatl.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runCLI runs a command in-process and returns its exit code and output.
func runCLI(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb testutil.SyncBuffer
	code = run(context.Background(), args, &cli{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, lookup: mapEnv(env)})
	return code, out.String(), errb.String()
}

// bootDefault boots the built-in default config, without a listener or a
// handler; the caller closes it.
func bootDefault(tb testing.TB) *daemon {
	tb.Helper()
	// The built-in config's ./data would be the package's directory.
	cfg, err := config.ParseWith(context.Background(), config.BuiltinSource, defaultConfigYAML, mapEnv(map[string]string{"AXOCOATL_DATA_DIR": tb.TempDir()}))
	if err != nil {
		tb.Fatal(err)
	}
	d, err := boot(context.Background(), cfg, cfg.NewLogger(io.Discard))
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// defaultHandler boots the built-in default config and returns the
// daemon's HTTP handler, without a listener; cleanup stops it.
func defaultHandler(tb testing.TB) http.Handler {
	tb.Helper()
	d := bootDefault(tb)
	h, err := d.rt.Handler()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.close(context.Background()) })
	return h
}

// testDaemon is a daemon served in-process on a free port.
type testDaemon struct {
	url    string
	d      *daemon
	stderr *testutil.SyncBuffer
	cancel context.CancelFunc
	done   chan int
	client *http.Client
}

// startDaemon serves configText (or the built-in default when "") on
// 127.0.0.1:0 and stops it when the test ends.
func startDaemon(t *testing.T, configText string, env map[string]string) *testDaemon {
	t.Helper()
	return startDaemonAt(t, "127.0.0.1:0", configText, env)
}

// startDaemonAt is startDaemon listening on addr.
func startDaemonAt(t *testing.T, addr, configText string, env map[string]string) *testDaemon {
	t.Helper()
	args := []string{"serve", "--addr", addr}
	if _, ok := env["AXOCOATL_DATA_DIR"]; !ok && configText == "" {
		// The built-in config's ./data would be the package's directory.
		env = maps.Clone(env)
		if env == nil {
			env = map[string]string{}
		}
		env["AXOCOATL_DATA_DIR"] = t.TempDir()
	}
	if configText != "" {
		args = append(args, "--config", writeConfig(t, configText))
	}
	ctx, cancel := context.WithCancel(context.Background())
	td := &testDaemon{stderr: &testutil.SyncBuffer{}, cancel: cancel, done: make(chan int, 1)}
	booted := make(chan struct{})
	c := &cli{
		stdin: strings.NewReader(""), stdout: io.Discard, stderr: td.stderr, lookup: mapEnv(env),
		hooks: serveHooks{
			booted: func(d *daemon) { td.d = d },
			listening: func(addr net.Addr) {
				td.url = "http://" + addr.String()
				close(booted)
			},
		},
	}
	go func() { td.done <- run(ctx, args, c) }()
	select {
	case <-booted:
	case code := <-td.done:
		cancel()
		t.Fatalf("daemon exited with %d before listening:\n%s", code, td.stderr.String())
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("daemon did not start")
	}
	tr := &http.Transport{}
	td.client = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		if code := td.stop(); code != exitOK {
			t.Errorf("daemon exited with %d:\n%s", code, td.stderr.String())
		}
	})
	return td
}

// stop shuts the daemon down and returns its exit code (once).
func (td *testDaemon) stop() int {
	td.cancel()
	select {
	case code, ok := <-td.done:
		if !ok {
			return exitOK
		}
		close(td.done)
		return code
	case <-time.After(40 * time.Second):
		return -1
	}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.body, err)
	}
	return m
}

// do sends a request; headers alternate name, value.
func (td *testDaemon) do(t *testing.T, method, path, body string, headers ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, td.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := td.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// dialEvents opens the event stream and reads the ready frame.
func dialEvents(t *testing.T, ctx context.Context, baseURL string, headers http.Header, query string) *websocket.Conn {
	t.Helper()
	u := "ws" + strings.TrimPrefix(baseURL, "http") + "/api/events" + query
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: headers, HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial %s: %v (HTTP %d)", u, err, status)
	}
	conn.SetReadLimit(1 << 20)
	t.Cleanup(func() { conn.CloseNow() })
	f := readFrame(t, ctx, conn)
	if f.Kind != "ready" || f.PendingApprovals == nil {
		t.Fatalf("first frame = %+v, want ready with pending_approvals", f)
	}
	return conn
}

// frame is any server frame.
type frame = testutil.Frame

func readFrame(t *testing.T, ctx context.Context, conn *websocket.Conn) frame {
	t.Helper()
	return testutil.ReadFrame(t, ctx, conn)
}

package dashboard_test

// Helpers that drive Debian's headless Chromium through chromedp and start
// the real daemon binary. Every process started here is stopped by the test
// that started it.

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.uber.org/goleak"

	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

const chromiumPath = "/usr/bin/chromium"

// needChromium skips without Chromium, with how to install it, except in CI
// where a missing browser is a failure.
func needChromium(t *testing.T) string {
	t.Helper()
	path := chromiumPath
	if p := os.Getenv("AXOCOATL_CHROMIUM"); p != "" {
		path = p
	}
	if _, err := os.Stat(path); err != nil {
		testutil.MissingPeer(t, fmt.Sprintf("headless Chromium not found at %s (%v); install it with: apt-get install -y chromium", path, err))
	}
	return path
}

// browser is one headless Chromium with one tab, and what its page said on
// the console.
type browser struct {
	ctx context.Context // the tab; its cancel closes the browser

	mu      sync.Mutex
	console []chromedp.ConsoleMessage
}

// newBrowser starts Chromium with the flags this machine needs (its closed
// network refuses the background connections Chromium otherwise makes) and a
// fresh profile. Cleanup closes it and kills any child process left over.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := needChromium(t)
	profile := t.TempDir()
	// Registered after TempDir, so it runs before the profile is removed.
	t.Cleanup(func() { killProcessesUsing(t, "--user-data-dir="+profile) })

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(profile),
	)
	tabCtx, cancelTab := chromedp.NewContext(allocCtx)
	b := &browser{ctx: tabCtx}

	start, cancelStart := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancelStart()
	stopOnTimeout := context.AfterFunc(start, cancelTab)
	err := chromedp.Do(tabCtx) // starts the browser, bound to tabCtx
	stopOnTimeout()

	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // waits for the browser process to exit
		wg.Wait()
	})
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	messages := chromedp.Console(tabCtx)
	wg.Go(func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.console = append(b.console, m)
			b.mu.Unlock()
		}
	})
	return b
}

// do runs steps with a deadline, failing the test on error.
func (b *browser) do(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, b.consoleText())
	}
}

// eval evaluates a JavaScript expression that gives a string.
func (b *browser) eval(t *testing.T, expr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		t.Fatalf("eval %s: %v", expr, err)
	}
	return s
}

// waitFor evaluates expr until it is truthy and returns it as a string.
// (chromedp.Poll compiles its predicate with new Function, which the page's
// CSP rightly forbids; a DevTools evaluation is not subject to it.)
func (b *browser) waitFor(t *testing.T, what, expr string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if s := b.eval(t, "(v => v ? String(v) : '')("+expr+")"); s != "" {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (%s)\npage:\n%s\n%s", what, expr,
				b.eval(t, "document.body.innerText"), b.consoleText())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (b *browser) consoleText() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var sb strings.Builder
	for _, m := range b.console {
		fmt.Fprintf(&sb, "console %s: %s\n", m.Type, m.Text)
	}
	return sb.String()
}

// checkConsole fails on uncaught exceptions and CSP violations: the page's
// own code must run cleanly under its own policy.
func (b *browser) checkConsole(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.console {
		if m.IsException() || strings.Contains(m.Text, "Content Security Policy") {
			t.Errorf("page console: %s: %s", m.Type, m.Text)
		}
	}
}

// killProcessesUsing kills what is left of a browser: Chromium's helper
// processes carry the profile flag on their command line.
func killProcessesUsing(t *testing.T, flag string) {
	for range 50 {
		found := 0
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil || !bytes.Contains(cmdline, []byte(flag)) {
				continue
			}
			found++
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if found == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("browser processes with %s survived", flag)
}

// buildDaemon builds ./examples/daemon, under the race detector when this
// test runs with it.
func buildDaemon(t *testing.T) string {
	t.Helper()
	return testutil.BuildDaemon(t, testutil.RaceEnabled)
}

// daemon is a running axocoatl binary.
type daemon struct {
	URL    string       // http://127.0.0.1:port
	Client *http.Client // for requests outside the browser
	out    *testutil.SyncBuffer
	token  string // the API token requests outside the browser send, if any

	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has been waited for
	waitErr error         // valid after exited
}

// startDaemon runs the binary with the built-in default config on a free
// loopback port, in an empty directory (so no ./axocoatl.yaml is found), with
// extra environment variables, and waits until /health answers. Cleanup
// stops it.
func startDaemon(t *testing.T, bin string, env ...string) *daemon {
	t.Helper()
	return startDaemonAt(t, bin, testutil.FreeAddr(t), env...)
}

// startDaemonAt is startDaemon on a given address.
func startDaemonAt(t *testing.T, bin, addr string, env ...string) *daemon {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--addr", addr)
	cmd.Dir = t.TempDir()
	// Should the test binary die (a -timeout panic), the daemon dies with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AXOCOATL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	d := &daemon{
		URL: "http://" + addr,
		// No keep-alive: no idle connection outlives the test (goleak).
		Client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
		out:    &testutil.SyncBuffer{},
		cmd:    cmd,
		exited: make(chan struct{}),
	}
	cmd.Stdout, cmd.Stderr = d.out, d.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start daemon: %v", err)
	}
	go func() { d.waitErr = cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		d.stop(t)
		if t.Failed() {
			t.Logf("daemon output:\n%s", d.out)
		}
	})

	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-d.exited:
			t.Fatalf("daemon exited before it was ready: %v\n%s", d.waitErr, d.out)
		default:
		}
		res, err := d.Client.Get(d.URL + "/health")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return d
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon at %s not healthy after 15s (last: %v)\n%s", addr, err, d.out)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// stop ends the daemon with SIGTERM, as an operator would, and kills it if
// it is still there after 10 s. It may be called more than once.
func (d *daemon) stop(t *testing.T) {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		t.Errorf("daemon ignored SIGTERM for 10s; killing it\n%s", d.out)
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// screenshot saves the page as a PNG when AXOCOATL_SCREENSHOT_DIR is set, to
// look at what a person sees.
func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	dir := os.Getenv("AXOCOATL_SCREENSHOT_DIR")
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot: %v", err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Error(err)
	}
}

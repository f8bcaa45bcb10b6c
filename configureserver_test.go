package axocoatl_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go"
)

// startConfigured serves h on a loopback listener through a server set up
// by ConfigureServer.
func startConfigured(t *testing.T, h http.Handler) (*http.Server, string, <-chan error) {
	t.Helper()
	eng := axocoatl.New(axocoatl.Options{})
	t.Cleanup(func() { eng.Close(context.Background()) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	eng.ConfigureServer(srv)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	return srv, ln.Addr().String(), served
}

// dialSilent opens a connection to addr that sends nothing.
func dialSilent(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// A connection that never sends a request does not hold the shutdown:
// net/http alone waits 5 s for it.
func TestShutdownClosesSilentConnections(t *testing.T) {
	srv, addr, served := startConfigured(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	silent := dialSilent(t, addr)
	// A used keep-alive connection, idle now, must not be counted as silent
	// forever either (net/http closes it at once).
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	time.Sleep(100 * time.Millisecond) // the silent connection is accepted

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	took := time.Since(start)
	t.Logf("shutdown took %s", took)
	if took > 4*time.Second {
		t.Errorf("shutdown took %s with a silent connection open: net/http's 5 s wait", took)
	}
	if err := <-served; err != http.ErrServerClosed {
		t.Errorf("Serve: %v", err)
	}
	silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Errorf("the silent connection is still open after the shutdown: read %v", err)
	}
}

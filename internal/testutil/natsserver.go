package testutil

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// NATSServer starts an embedded nats-server listening on addr (host:port,
// from FreeAddr) with JetStream on storeDir when storeDir is not empty, and
// shuts it down when the test ends. To restart one, Shutdown it and call
// NATSServer again with the same addr and storeDir: clients reconnect to
// the same URL and JetStream finds its streams.
func NATSServer(t testing.TB, addr, storeDir string) *server.Server {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("nats-server address %q: %v", addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("nats-server port %q: %v", port, err)
	}
	opts := &server.Options{Host: host, Port: p, NoLog: true, NoSigs: true}
	if storeDir != "" {
		opts.JetStream, opts.StoreDir = true, storeDir
	}
	var ns *server.Server
	// The port may still be held for a moment after the previous server on
	// it shut down.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ns, err = server.NewServer(opts); err != nil {
			t.Fatalf("nats-server: %v", err)
		}
		go ns.Start()
		if ns.ReadyForConnections(5 * time.Second) {
			break
		}
		ns.Shutdown()
		ns.WaitForShutdown()
		if time.Now().After(deadline) {
			t.Fatalf("nats-server on %s not ready", addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

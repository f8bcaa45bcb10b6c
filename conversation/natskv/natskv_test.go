package natskv_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/conversation/natskv"
	"github.com/axocoatl/axocoatl-go/conversation/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// jsServer starts an embedded nats-server with JetStream on a temp dir.
func jsServer(t testing.TB) *server.Server {
	t.Helper()
	ns, err := server.NewServer(&server.Options{DontListen: true, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

func connect(t testing.TB, ns *server.Server) *natsgo.Conn {
	t.Helper()
	nc, err := natsgo.Connect("", natsgo.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func open(t testing.TB, nc *natsgo.Conn, cfg natskv.Config) *natskv.Store {
	t.Helper()
	cfg.Conn = nc
	s, err := natskv.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestStore(t *testing.T) {
	ns := jsServer(t)
	n := 0
	storetest.Run(t, func(t *testing.T, l conversation.Limits) conversation.Store {
		n++ // a bucket per subtest: each starts empty
		return open(t, connect(t, ns), natskv.Config{Bucket: "t" + string(rune('a'+n)), Limits: l})
	})
}

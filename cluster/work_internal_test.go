package cluster

import (
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
)

// Tasks still queued for the workers when Stop ends them are refused
// (closed), as onExec refuses one that arrives while stopping, not left
// to their callers' accept timeout.
func TestStopRefusesQueuedTasks(t *testing.T) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	nc, err := natsgo.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	answers, err := nc.SubscribeSync("answers")
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	m.nc, m.node, m.log = nc, "node-a", slog.New(slog.DiscardHandler)
	const n = 20
	for i := range n {
		m.tasks <- &natsgo.Msg{Subject: "ct-cluster.exec.echo", Reply: "answers",
			Data: task{taskID: "q" + strconv.Itoa(i), from: "node-b", input: "x"}.encode()}
	}
	// Stop: no new task is taken, the workers' context ends.
	m.stopping = true
	m.cancel()
	m.workers, m.waiting = 1, 1
	m.work()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		msg, err := answers.NextMsg(time.Second)
		if err != nil {
			t.Fatalf("%d of %d queued tasks answered at Stop: %v", i, n, err)
		}
		if r, ok := decodeReply(msg.Data); !ok || r.Kind != kindClosed {
			t.Fatalf("answer %q", msg.Data)
		}
	}
	if len(m.tasks) != 0 {
		t.Fatalf("%d tasks left queued", len(m.tasks))
	}
}

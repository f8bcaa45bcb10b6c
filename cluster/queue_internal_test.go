package cluster

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
)

// Guards: bound "tasks waiting for a worker" (64, docs/bounds.md, lattice
// and cluster). With no worker taking tasks (every one stuck, as on a
// machine too loaded to schedule them), 200 tasks sent to an agent's exec
// subject fill the workers' queue to 64; NATS drops the other 136 as a
// slow consumer's, counted on the subscription, and nothing more is held.
// When Stop then drains the queue, each of the 64 is answered.
func TestTaskQueueBounded(t *testing.T) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	// The slow consumer is the point: no need to hear about it.
	nc, err := natsgo.Connect(ns.ClientURL(), natsgo.ErrorHandler(func(*natsgo.Conn, *natsgo.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	peer, err := natsgo.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	answers, err := peer.SubscribeSync("answers")
	if err != nil {
		t.Fatal(err)
	}
	e := axocoatl.New(axocoatl.Options{})
	defer e.Close(context.Background())
	if err := e.AddAgent(agent.Spec{ID: "echo"}, provider.EchoModel{}); err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	// The exec subscription as Start makes it, with no worker started.
	m.nc, m.node, m.log, m.eng, m.subj = nc, "node-a", slog.New(slog.DiscardHandler), e, "ct-cluster"
	m.mu.Lock()
	err = m.serveLocalLocked()
	m.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	sub := m.served["echo"]
	if err := nc.Flush(); err != nil { // subscribed on the server
		t.Fatal(err)
	}

	const sent, queue = 200, 64
	for i := range sent {
		if err := peer.PublishRequest("ct-cluster.exec.echo", "answers", task{taskID: "q" + strconv.Itoa(i), from: "node-b", input: "x"}.encode()); err != nil {
			t.Fatal(err)
		}
	}
	if err := peer.Flush(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		dropped, err := sub.Dropped()
		if err != nil {
			t.Fatal(err)
		}
		if len(m.tasks)+dropped == sent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d queued + %d dropped of %d sent, 30s after they were sent", len(m.tasks), dropped, sent)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(m.tasks); n != queue {
		t.Fatalf("%d tasks queued for the workers, want %d", n, queue)
	}

	m.stopping = true
	m.cancel()
	m.workers, m.waiting = 1, 1
	m.work() // refuses what is queued, at Stop
	if err := peer.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range queue {
		msg, err := answers.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("%d of %d queued tasks answered: %v", i, queue, err)
		}
		if r, ok := decodeReply(msg.Data); !ok || r.Kind != kindClosed {
			t.Fatalf("answer %q", msg.Data)
		}
	}
	_ = sub.Unsubscribe()
}

// Guards: bound "other cluster subscriptions" (NATS's pending limits,
// 500,000 messages and 64 MiB, docs/bounds.md, lattice and cluster). A
// started Module's announce, cancel and reply subscriptions keep the
// nats.go client's default limits, so a flood on them is dropped (and
// counted by NATS) instead of growing without end: lifting them
// (SetPendingLimits(-1, -1)) or a nats.go whose defaults differ from the
// table fails here.
func TestClusterSubscriptionsPendingLimits(t *testing.T) {
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
	e := axocoatl.New(axocoatl.Options{})
	defer e.Close(context.Background())
	m, err := New(Config{Conn: nc, Node: "node-a", Prefix: "ct"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Use(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	subs := append([]*natsgo.Subscription(nil), m.subs...)
	m.mu.Unlock()
	if len(subs) != 3 {
		t.Fatalf("%d cluster subscriptions besides the agents', want 3 (announce, cancel, replies)", len(subs))
	}
	for _, s := range subs {
		msgs, bytes, err := s.PendingLimits()
		if err != nil {
			t.Fatal(err)
		}
		if msgs != 500_000 || bytes != 64<<20 {
			t.Errorf("subscription %s: pending limits %d messages, %d bytes; docs/bounds.md says 500,000 and 64 MiB", s.Subject, msgs, bytes)
		}
	}
}

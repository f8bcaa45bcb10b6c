package egress

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Guards: bound "one delivery on NATS" (1 MiB, JetStream.MaxMsgSize,
// docs/bounds.md, webhooks). On a nats-server whose max_payload (4 MiB)
// lets a 2 MiB event onto the lattice, its delivery is over the queue's
// default 1 MiB: it is not queued but dropped and counted, while a small
// event published after it is delivered. With the bound gone, the big
// one would be queued and sent.
func TestJetStreamDeliveryOverMaxMsgSizeDropped(t *testing.T) {
	ns, err := server.NewServer(&server.Options{DontListen: true, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true, MaxPayload: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	rc := newReceiver(t, "js", nil)
	h := jsNode(t, ns, "a", fast(Webhook{Name: "w", URL: rc.url(), Secret: "js", Events: []string{"Big", "Small"}}))

	if err := h.eng.Publish(context.Background(), "Big", "test", map[string]string{"pad": strings.Repeat("p", 2<<20)}); err != nil {
		t.Fatal(err)
	}
	if err := h.eng.Publish(context.Background(), "Small", "test", map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the big delivery dropped and the small one delivered", func() bool {
		s := h.status(t, "w")
		return s.Dropped == 1 && s.Delivered == 1
	})
	reqs := rc.requests()
	if len(reqs) != 1 || reqs[0].msg.EventType != "Small" {
		t.Fatalf("the receiver got %d requests, want only the small event's", len(reqs))
	}
}

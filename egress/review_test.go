package egress

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// A graceful stop (a daemon's SIGTERM, Engine.Close) right after events
// were published: the events this process received but had not queued in
// JetStream yet are queued before it stops, so another process delivers
// every one of them (JetStream: nothing lost across restarts).
func TestJetStreamGracefulStopQueuesWhatItReceived(t *testing.T) {
	ns := jsServer(t)
	const n = 2000
	rc := newReceiver(t, "js", func(received, int) int { return http.StatusOK })
	w := fast(Webhook{Name: "w", URL: rc.url(), Secret: "js", Events: []string{"Deployed"}, QueueSize: 2 * n})
	a := jsNode(t, ns, "a", w)
	a.publish(t, "Deployed", 0, n)
	a.close(t) // at once: most events are still on their way to JetStream
	b := jsNode(t, ns, "b", w)
	waitFor(t, 30*time.Second, "every event delivered", func() bool { return len(rc.accepted()) == n })
	t.Logf("a delivered %d before it stopped", len(rc.accepted()))
	_ = b
}

// A MaxMsgSize beyond the stream's int32 limit is refused, not wrapped
// into a negative limit (none at all) on the server.
func TestJetStreamMaxMsgSizeBound(t *testing.T) {
	err := (JetStream{MaxMsgSize: 1 << 31}).Validate()
	if err == nil || !strings.Contains(err.Error(), "max_msg_size") {
		t.Fatalf("max_msg_size 2 GiB: %v", err)
	}
	if err := (JetStream{MaxMsgSize: 8 << 20}).Validate(); err != nil {
		t.Fatal(err)
	}
}

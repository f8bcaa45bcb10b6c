package egress

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	axocoatl "github.com/axocoatl/axocoatl-go"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
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

// Status, Deliveries and a metrics scrape may come while the module starts
// (a host registers the collector first): no data race on the JetStream
// backend being set up.
func TestJetStreamStatusWhileStarting(t *testing.T) {
	ns := jsServer(t)
	bus, err := latticenats.Connect("", latticenats.Options{Node: "s"}, natsgo.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	eng := axocoatl.New(axocoatl.Options{Bus: bus})
	rc := newReceiver(t, "js", func(received, int) int { return http.StatusOK })
	m, err := New(Config{Webhooks: []Webhook{fast(Webhook{Name: "w", URL: rc.url(), Secret: "js"})},
		JetStream: &JetStream{Conn: bus.Conn(), Prefix: bus.Prefix()}})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.Collector())
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = m.Status()
			_, _ = m.Deliveries("w", "", 10)
			_, _ = reg.Gather()
		}
	}()
	if err := eng.Use(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	close(stop)
	<-done
	if s := m.Status()[0]; s.Store != "jetstream" || s.ClusterError != "" {
		t.Fatalf("status %+v", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := eng.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

package egress

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/lattice"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
)

// A webhook never delivers an unverified event: on a cluster with a key,
// an observe-only event another daemon publishes unsigned (or a raw NATS
// client makes up, claiming a node) is taken by the lattice, marked, and
// skipped here; the daemon's own event of that type, and a signed event
// of another type, are delivered. The signed event sent after the others
// proves they had their chance to be delivered first.
func TestUnverifiedEventsAreNotDelivered(t *testing.T) {
	ns := jsServer(t)
	const key = "egress-test-cluster-key-0123456789"
	dial := func(node string) *latticenats.Bus {
		t.Helper()
		bus, err := latticenats.Connect("", latticenats.Options{Node: node, Key: key, ObserveOnly: []string{"Seen"}}, natsgo.InProcessServer(ns))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = bus.Close() })
		return bus
	}
	bus, other := dial("n1"), dial("n2")
	rc := newReceiver(t, "", func(received, int) int { return http.StatusOK })
	eng := axocoatl.New(axocoatl.Options{Logger: slog.New(slog.DiscardHandler), Bus: bus})
	startOn(t, eng, Config{Webhooks: []Webhook{fast(Webhook{Name: "hook", URL: rc.url(), Events: []string{"Seen", "Mark"}})}})

	raw, err := natsgo.Connect("", natsgo.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	forged := &natsgo.Msg{Subject: "axocoatl.Seen", Data: []byte(`{"id":"f","type":"Seen","produced_by":"x","timestamp":1,"payload":{"n":1}}`),
		Header: natsgo.Header{latticenats.NodeHeader: []string{"n3"}}}
	if err := raw.PublishMsg(forged); err != nil {
		t.Fatal(err)
	}
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}
	publishOn := func(b lattice.Bus, typ string, n int) {
		t.Helper()
		ev, err := lattice.New(typ, "test", map[string]int{"n": n})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	publishOn(other, "Seen", 2) // unsigned: unverified on n1
	publishOn(bus, "Seen", 3)   // n1's own
	if err := other.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	publishOn(other, "Mark", 4) // signed: verified
	waitFor(t, 10*time.Second, "the signed sentinel delivered", func() bool {
		for _, r := range rc.requests() {
			if r.msg.EventType == "Mark" {
				return true
			}
		}
		return false
	})
	got := map[int]string{}
	for _, r := range rc.requests() {
		var p struct{ N int }
		_ = json.Unmarshal(r.msg.Payload, &p)
		got[p.N] = r.msg.EventType
	}
	if len(got) != 2 || got[3] != "Seen" || got[4] != "Mark" {
		t.Fatalf("delivered %v, want n1's own Seen (3) and the signed Mark (4) only", got)
	}
}

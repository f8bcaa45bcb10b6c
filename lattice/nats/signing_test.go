package nats_test

import (
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/axocoatl/axocoatl-go/internal/clustersig"
	"github.com/axocoatl/axocoatl-go/lattice"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
	"github.com/axocoatl/axocoatl-go/secret"
)

const (
	keyA = secret.Secret("lattice-test-key-aaaaaaaaaaaaaaaa")
	keyB = secret.Secret("lattice-test-key-bbbbbbbbbbbbbbbb")
)

func next(t *testing.T, s lattice.Subscription) lattice.Event {
	t.Helper()
	select {
	case ev := <-s.Events():
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	return lattice.Event{}
}

// TestSignedEvents: with a key, a raw NATS client's event (claiming to be
// node a, for a's Local subscription) is dropped and counted, a replay of a
// genuine one too, a bus with another key is not heard, and genuine events
// pass, on a Local subscription and a whole-lattice one alike. The
// sentinel event published after each forgery proves the forgery had its
// chance to arrive first.
func TestSignedEvents(t *testing.T) {
	ns := embedded(t)
	a, err := latticenats.Connect("", latticenats.Options{Node: "a", Key: keyA}, natsgo.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := latticenats.Connect("", latticenats.Options{Node: "b", Key: keyA}, natsgo.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	wrong, err := latticenats.Connect("", latticenats.Options{Node: "w", Key: keyB}, natsgo.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	raw, err := natsgo.Connect("", natsgo.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()

	local, err := a.Subscribe(lattice.Filter{Local: true}, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	whole, err := b.Subscribe(lattice.Filter{}, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	// Captured off the wire: a's genuine event, for the replay.
	var captured []*natsgo.Msg
	tap, err := raw.SubscribeSync("axocoatl.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}

	publish(t, a, "Genuine", 1)
	if ev := next(t, local); ev.Type != "Genuine" {
		t.Fatal(ev)
	}
	if ev := next(t, whole); ev.Type != "Genuine" {
		t.Fatal(ev)
	}
	m, err := tap.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	captured = append(captured, m)
	if m.Header.Get(latticenats.SigHeader) == "" {
		t.Fatal("a signed bus published an unsigned event")
	}

	forge := func(m *natsgo.Msg) {
		t.Helper()
		if err := raw.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		if err := raw.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// Unsigned, claiming node a: a's webhooks would take it as a's own.
	forge(&natsgo.Msg{Subject: "axocoatl.Forged", Data: []byte(`{"id":"x","type":"Forged","produced_by":"x","timestamp":1,"payload":{}}`),
		Header: natsgo.Header{latticenats.NodeHeader: []string{"a"}, latticenats.SeqHeader: []string{"99"}}})
	// The genuine event again, as it was: a replay.
	forge(&natsgo.Msg{Subject: captured[0].Subject, Data: captured[0].Data, Header: captured[0].Header})
	// Altered: another payload under the genuine signature.
	forge(&natsgo.Msg{Subject: "axocoatl.Genuine", Data: []byte(`{"id":"y","type":"Genuine","produced_by":"x","timestamp":1,"payload":{"n":2}}`), Header: captured[0].Header})
	// Another key's bus.
	publish(t, wrong, "Wrong", 1)
	// Flushed: the server has handed it on before the sentinel is sent.
	if err := wrong.Conn().Flush(); err != nil {
		t.Fatal(err)
	}

	publish(t, a, "Sentinel", 1)
	if ev := next(t, local); ev.Type != "Sentinel" {
		t.Fatalf("a's Local subscription took %s", ev.Type)
	}
	if ev := next(t, whole); ev.Type != "Sentinel" {
		t.Fatalf("b took %s", ev.Type)
	}
	ka, kb := a.Keyring(), b.Keyring()
	if ka.Rejected(clustersig.Unsigned) != 1 || ka.Rejected(clustersig.Replayed) != 1 || ka.Rejected(clustersig.BadMAC) != 1 || ka.Rejected(clustersig.UnknownKey) != 0 {
		t.Errorf("a counted unsigned %d replayed %d bad %d unknown %d", ka.Rejected(clustersig.Unsigned), ka.Rejected(clustersig.Replayed), ka.Rejected(clustersig.BadMAC), ka.Rejected(clustersig.UnknownKey))
	}
	if kb.Rejected(clustersig.Unsigned) != 1 || kb.Rejected(clustersig.Replayed) != 1 || kb.Rejected(clustersig.BadMAC) != 1 || kb.Rejected(clustersig.UnknownKey) != 1 {
		t.Errorf("b counted unsigned %d replayed %d bad %d unknown %d", kb.Rejected(clustersig.Unsigned), kb.Rejected(clustersig.Replayed), kb.Rejected(clustersig.BadMAC), kb.Rejected(clustersig.UnknownKey))
	}
	if whole.Missed() != 0 {
		t.Errorf("forgeries counted as missed: %d", whole.Missed())
	}
}

// TestAcceptedKeys: a bus that signs with the new key is heard by one that
// still signs with the old but accepts the new, and the other way round.
func TestAcceptedKeys(t *testing.T) {
	ns := embedded(t)
	oldB, err := latticenats.Connect("", latticenats.Options{Node: "old", Key: keyA, AcceptedKeys: []secret.Secret{keyB}}, natsgo.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer oldB.Close()
	newB, err := latticenats.Connect("", latticenats.Options{Node: "new", Key: keyB, AcceptedKeys: []secret.Secret{keyA}}, natsgo.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer newB.Close()
	so, _ := oldB.Subscribe(lattice.Filter{Types: []string{"N"}}, 4)
	sn, _ := newB.Subscribe(lattice.Filter{Types: []string{"O"}}, 4)
	publish(t, newB, "N", 1)
	publish(t, oldB, "O", 1)
	next(t, so)
	next(t, sn)
	if _, err := latticenats.Connect("", latticenats.Options{Key: "short"}, natsgo.InProcessServer(ns)); err == nil {
		t.Error("a short key taken")
	}
}

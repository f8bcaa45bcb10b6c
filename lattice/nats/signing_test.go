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
// node a) is dropped and counted by b, a replay of a genuine one too, a bus
// with another key is not heard, and genuine events pass, on a Local
// subscription and a whole-lattice one alike. a itself takes nothing that
// claims to be its own from the server (its subscriptions get its events
// from its Publish), so it has nothing to check or count. The sentinel
// event published after each forgery proves the forgery had its chance to
// arrive first.
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

	// A telemetry event (its class in a header the tag covers) passes too.
	publishClass(t, a, "Telemetry", lattice.ClassTelemetry, 1)
	if ev := next(t, local); ev.Type != "Telemetry" || ev.Class != lattice.ClassTelemetry {
		t.Fatalf("a's Local subscription took %s (%v)", ev.Type, ev.Class)
	}
	if ev := next(t, whole); ev.Type != "Telemetry" || ev.Class != lattice.ClassTelemetry {
		t.Fatalf("b took %s (%v)", ev.Type, ev.Class)
	}

	publish(t, a, "Sentinel", 1)
	if ev := next(t, local); ev.Type != "Sentinel" {
		t.Fatalf("a's Local subscription took %s", ev.Type)
	}
	if ev := next(t, whole); ev.Type != "Sentinel" {
		t.Fatalf("b took %s", ev.Type)
	}
	ka, kb := a.Keyring(), b.Keyring()
	for _, r := range clustersig.Reasons() {
		if n := ka.Rejected(r); n != 0 {
			t.Errorf("a checked what claims to be its own: %d %s", n, r)
		}
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

// TestObserveOnlyEvents: with ObserveOnly, a bus publishes those types
// unsigned; another bus whose own list names them takes them, marked
// unverified with the node they claim, a raw client's forgery of one
// too; a forged unsigned event of any other type (a run's end) is still
// dropped and counted, also when it rides the subject of an observe-only
// type or claims a node that is a real one; a bus whose list does not name
// the type drops the unsigned ones and counts them; the publisher's own
// subscriptions take its events as verified and never a forgery claiming
// its node; and the two numberings leave no false gap.
func TestObserveOnlyEvents(t *testing.T) {
	ns := embedded(t)
	observe := []string{"Activated"}
	dial := func(node string, only []string) *latticenats.Bus {
		t.Helper()
		bus, err := latticenats.Connect("", latticenats.Options{Node: node, Key: keyA, ObserveOnly: only}, natsgo.InProcessServer(ns))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bus.Close() })
		return bus
	}
	a, b, strict := dial("a", observe), dial("b", observe), dial("s", nil)
	raw, err := natsgo.Connect("", natsgo.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	sub := func(bus *latticenats.Bus, f lattice.Filter) lattice.Subscription {
		t.Helper()
		s, err := bus.Subscribe(f, 16)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	aLocal, aWhole, bWhole, sWhole := sub(a, lattice.Filter{Local: true}), sub(a, lattice.Filter{}), sub(b, lattice.Filter{}), sub(strict, lattice.Filter{})
	tap, err := raw.SubscribeSync("axocoatl.Activated")
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}

	publishClass(t, a, "Activated", lattice.ClassTelemetry, 1)
	publish(t, a, "Done", 1)
	if m, err := tap.NextMsg(5 * time.Second); err != nil || m.Header.Get(latticenats.SigHeader) != "" {
		t.Fatalf("an observe-only event went out signed (%v)", err)
	}
	for who, s := range map[string]lattice.Subscription{"a's Local": aLocal, "a's whole": aWhole} {
		if ev := next(t, s); ev.Type != "Activated" || ev.Unverified || ev.Node != "a" || ev.Class != lattice.ClassTelemetry {
			t.Errorf("%s took %s unverified=%v node %q class %v", who, ev.Type, ev.Unverified, ev.Node, ev.Class)
		}
		if ev := next(t, s); ev.Type != "Done" || ev.Unverified {
			t.Errorf("%s took %s unverified=%v", who, ev.Type, ev.Unverified)
		}
	}
	if ev := next(t, bWhole); ev.Type != "Activated" || !ev.Unverified || ev.Node != "a" || ev.Class != lattice.ClassTelemetry {
		t.Errorf("b took %s unverified=%v node %q class %v", ev.Type, ev.Unverified, ev.Node, ev.Class)
	}
	if ev := next(t, bWhole); ev.Type != "Done" || ev.Unverified || ev.Node != "a" {
		t.Errorf("b took %s unverified=%v node %q", ev.Type, ev.Unverified, ev.Node)
	}
	if ev := next(t, sWhole); ev.Type != "Done" || ev.Unverified {
		t.Errorf("the strict bus took %s unverified=%v", ev.Type, ev.Unverified)
	}

	forge := func(subject, typ, node string) {
		t.Helper()
		m := &natsgo.Msg{Subject: subject, Data: []byte(`{"id":"f","type":"` + typ + `","produced_by":"x","timestamp":1,"payload":{"forged":true}}`),
			Header: natsgo.Header{latticenats.NodeHeader: []string{node}, latticenats.SeqHeader: []string{"7"}, latticenats.ClassHeader: []string{"telemetry"}}}
		if err := raw.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	forge("axocoatl.Activated", "Activated", "c") // telemetry: taken, marked
	forge("axocoatl.Done", "Done", "c")           // a run's end: dropped
	forge("axocoatl.Done", "Done", "b")           // the same, claiming a real node
	forge("axocoatl.Activated", "Done", "c")      // an end on a telemetry subject
	forge("axocoatl.Activated", "Activated", "a") // claiming a, to a: not its own
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}
	publish(t, a, "Sentinel", 1)
	if ev := next(t, aWhole); ev.Type != "Activated" || !ev.Unverified || ev.Node != "c" {
		t.Errorf("a's whole subscription took %s unverified=%v node %q, want the forged telemetry event marked", ev.Type, ev.Unverified, ev.Node)
	}
	for who, s := range map[string]lattice.Subscription{"a's Local": aLocal, "a's whole": aWhole} {
		if ev := next(t, s); ev.Type != "Sentinel" {
			t.Errorf("%s took %s (node %q, unverified %v) before the sentinel", who, ev.Type, ev.Node, ev.Unverified)
		}
	}
	if ev := next(t, bWhole); ev.Type != "Activated" || !ev.Unverified || ev.Node != "c" || string(ev.Payload) != `{"forged":true}` {
		t.Errorf("b took %s unverified=%v node %q, want the forged telemetry event marked", ev.Type, ev.Unverified, ev.Node)
	}
	if ev := next(t, bWhole); ev.Type != "Activated" || !ev.Unverified || ev.Node != "a" {
		t.Errorf("b took %s unverified=%v node %q, want the one claiming a, marked", ev.Type, ev.Unverified, ev.Node)
	}
	if ev := next(t, bWhole); ev.Type != "Sentinel" || ev.Unverified {
		t.Errorf("b took %s unverified=%v, want the sentinel", ev.Type, ev.Unverified)
	}
	if ev := next(t, sWhole); ev.Type != "Sentinel" {
		t.Errorf("the strict bus took %s unverified=%v, want the sentinel", ev.Type, ev.Unverified)
	}
	// b: two control-class forgeries (the one claiming b it takes for its
	// own echo, unchecked: its subscriptions got b's events from b); a:
	// the three; the strict bus: those, a's genuine Activated and the two
	// forged ones.
	if n := b.Keyring().Rejected(clustersig.Unsigned); n != 2 {
		t.Errorf("b counted %d unsigned, want 2", n)
	}
	if n := strict.Keyring().Rejected(clustersig.Unsigned); n != 6 {
		t.Errorf("the strict bus counted %d unsigned, want 6", n)
	}
	if n := a.Keyring().Rejected(clustersig.Unsigned); n != 3 {
		t.Errorf("a counted %d unsigned, want 3 (the forgeries of other nodes' ends)", n)
	}
	for who, s := range map[string]lattice.Subscription{"a": aWhole, "b": bWhole, "strict": sWhole} {
		if s.Missed() != 0 {
			t.Errorf("%s's subscription counted %d missed", who, s.Missed())
		}
	}
	// More of both kinds: the signed numbering has no gap for the
	// unsigned events between (and the forged number 7 claiming a, an
	// unverified one, counted none).
	publishClass(t, a, "Activated", lattice.ClassTelemetry, 2)
	publish(t, a, "Done", 2)
	next(t, bWhole)
	next(t, bWhole)
	if bWhole.Missed() != 0 {
		t.Errorf("b counted %d missed across the two numberings", bWhole.Missed())
	}
	if _, err := latticenats.Connect("", latticenats.Options{Key: keyA, ObserveOnly: []string{"Run*"}}, natsgo.InProcessServer(ns)); err == nil {
		t.Error("a glob taken as an observe-only type")
	}
}

package nats_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/axocoatl/axocoatl-go/lattice"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// embedded starts a real nats-server inside the test process.
func embedded(t *testing.T) *server.Server {
	t.Helper()
	ns, err := server.NewServer(&server.Options{DontListen: true, NoLog: true, NoSigs: true})
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

func connect(t *testing.T, ns *server.Server, prefix string) *latticenats.Bus {
	t.Helper()
	b, err := latticenats.Connect("", latticenats.Options{Prefix: prefix}, natsgo.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func publish(t *testing.T, b lattice.Bus, typ string, n int) {
	t.Helper()
	publishClass(t, b, typ, 0, n)
}

// publishClass publishes an event its publisher declares of class c.
func publishClass(t *testing.T, b lattice.Bus, typ string, c lattice.Class, n int) {
	t.Helper()
	ev, err := lattice.New(typ, "test", map[string]int{"n": n})
	if err != nil {
		t.Fatal(err)
	}
	ev.Class = c
	if err := b.Publish(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
}

func receive(t *testing.T, s lattice.Subscription) (string, int) {
	t.Helper()
	select {
	case ev, ok := <-s.Events():
		if !ok {
			t.Fatal("subscription closed")
		}
		var p struct{ N int }
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatal(err)
		}
		return ev.Type, p.N
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
	}
	return "", 0
}

func TestTwoProcessesShareTheLatticeInOrder(t *testing.T) {
	ns := embedded(t)
	a, b := connect(t, ns, "x"), connect(t, ns, "x")
	other := connect(t, ns, "y") // another lattice on the same server
	all, err := b.Subscribe(lattice.Filter{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	strangers, _ := other.Subscribe(lattice.Filter{}, 100)
	for i := range 50 {
		publish(t, a, "JobDone", i)
	}
	for i := range 50 {
		if typ, n := receive(t, all); typ != "JobDone" || n != i {
			t.Fatalf("event %d: got %s %d", i, typ, n)
		}
	}
	select {
	case ev := <-strangers.Events():
		t.Fatalf("prefix y received %v", ev)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestFiltersAndOddTypes(t *testing.T) {
	ns := embedded(t)
	bus := connect(t, ns, "")
	other := connect(t, ns, "") // another process: the class crosses NATS
	exact, _ := bus.Subscribe(lattice.Filter{Types: []string{"JobLost"}}, 10)
	glob, _ := bus.Subscribe(lattice.Filter{Types: []string{"Step*"}}, 10)
	coord, _ := bus.Subscribe(lattice.Filter{Class: lattice.ClassCoordination}, 10)
	odd, _ := bus.Subscribe(lattice.Filter{Types: []string{"deploy.done >"}}, 10)
	tel, _ := other.Subscribe(lattice.Filter{Class: lattice.ClassTelemetry}, 10)

	publishClass(t, bus, "StepBegun", lattice.ClassTelemetry, 1)  // telemetry: glob and tel only
	publishClass(t, bus, "JobLost", lattice.ClassCoordination, 2) // exact + coordination
	publish(t, bus, "deploy.done >", 3)                           // custom, subject-unsafe: odd + coordination
	publish(t, bus, "deploy.done", 4)                             // must not reach odd
	publishClass(t, bus, "Started", lattice.ClassTelemetry, 5)    // telemetry: tel only

	expect := func(name string, s lattice.Subscription, want ...int) {
		t.Helper()
		for _, w := range want {
			if _, n := receive(t, s); n != w {
				t.Fatalf("%s: got %d, want %d", name, n, w)
			}
		}
		select {
		case ev := <-s.Events():
			t.Fatalf("%s: unexpected %s", name, ev.Type)
		case <-time.After(50 * time.Millisecond):
		}
	}
	expect("exact", exact, 2)
	expect("glob", glob, 1)
	expect("coordination", coord, 2, 3, 4)
	expect("telemetry on another connection", tel, 1, 5)
	expect("odd", odd, 3)
}

func TestStalledSubscriberCountsMissed(t *testing.T) {
	ns := embedded(t)
	bus := connect(t, ns, "")
	stalled, _ := bus.Subscribe(lattice.Filter{}, 8)
	reader, _ := bus.Subscribe(lattice.Filter{}, 1000)
	const n = 500
	for i := range n {
		publish(t, bus, "Tick", i)
	}
	for i := range n {
		if _, got := receive(t, reader); got != i {
			t.Fatalf("reader: got %d, want %d", got, i)
		}
	}
	// The reader has everything, so the stalled subscriber has been offered
	// everything too (same connection, same order of dispatch).
	deadline := time.Now().Add(5 * time.Second)
	for stalled.Missed() != n-8 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := stalled.Missed(); got != n-8 {
		t.Fatalf("Missed() = %d, want %d", got, n-8)
	}
}

func TestClose(t *testing.T) {
	ns := embedded(t)
	nc, err := natsgo.Connect("", natsgo.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	bus, err := latticenats.New(nc, latticenats.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := bus.Subscribe(lattice.Filter{}, 1)
	s2, _ := bus.Subscribe(lattice.Filter{}, 1)
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := bus.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-s.Events(); ok {
		t.Fatal("subscription open after Close")
	}
	ev, _ := lattice.New("X", "t", nil)
	if err := bus.Publish(context.Background(), ev); !errors.Is(err, lattice.ErrClosed) {
		t.Fatalf("Publish after Close: %v", err)
	}
	if _, err := bus.Subscribe(lattice.Filter{}, 1); !errors.Is(err, lattice.ErrClosed) {
		t.Fatalf("Subscribe after Close: %v", err)
	}
	if nc.IsClosed() {
		t.Fatal("Close closed a connection it does not own")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// A Local subscriber sees only what its own Bus published; an unfiltered
// one sees every node's events. Both nodes publish interleaved.
func TestLocalSubscribersSeeTheirOwnNode(t *testing.T) {
	ns := embedded(t)
	a, b := connect(t, ns, "x"), connect(t, ns, "x")
	if a.Node() == "" || a.Node() == b.Node() {
		t.Fatalf("nodes %q and %q must be distinct and set", a.Node(), b.Node())
	}
	aLocal, err := a.Subscribe(lattice.Filter{Local: true}, 100)
	if err != nil {
		t.Fatal(err)
	}
	bLocal, _ := b.Subscribe(lattice.Filter{Local: true, Types: []string{"Job*"}}, 100)
	bAll, _ := b.Subscribe(lattice.Filter{}, 100)
	for i := range 10 {
		publish(t, a, "JobDone", i)
		publish(t, b, "JobDone", 100+i)
	}
	for i := range 10 {
		if _, n := receive(t, aLocal); n != i {
			t.Fatalf("a's local subscriber got %d, want %d", n, i)
		}
		if _, n := receive(t, bLocal); n != 100+i {
			t.Fatalf("b's local subscriber got %d, want %d", n, 100+i)
		}
	}
	for range 20 {
		receive(t, bAll)
	}
	for _, s := range []lattice.Subscription{aLocal, bLocal, bAll} {
		select {
		case ev := <-s.Events():
			t.Fatalf("extra event %v", ev)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Drain hands over every event the server sent before it, this Bus's own
// published just before included, then closes Events; Close would drop
// what was still on its way.
func TestDrainKeepsWhatWasSent(t *testing.T) {
	ns := embedded(t)
	b := connect(t, ns, "dr")
	s, err := b.Subscribe(lattice.Filter{Local: true}, 4096)
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	for i := range n {
		publish(t, b, "Deployed", i)
	}
	d, ok := s.(interface{ Drain(context.Context) error })
	if !ok {
		t.Fatal("a lattice/nats subscription has no Drain")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	got := 0
	for range s.Events() { // closed after the last
		got++
	}
	if got != n || s.Missed() != 0 {
		t.Fatalf("drained %d of %d events (missed %d)", got, n, s.Missed())
	}
	publish(t, b, "Deployed", n) // a publish after the drain is no one's
}

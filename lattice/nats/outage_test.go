package nats_test

import (
	"context"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/lattice"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
)

// NATS goes away while node a publishes and comes back: nothing exits,
// both nodes reconnect on their own, and every event a published is either
// received or counted as missed, by b (which saw the numbering gap) and by
// a's own subscriber (which counted the publishes that failed once the
// small reconnect buffer was full).
//
// Guards: bound lattice.reconnect_buffer_bytes (docs/bounds.md).
func TestOutageIsCountedAsMissed(t *testing.T) {
	addr := testutil.FreeAddr(t)
	ns := testutil.NATSServer(t, addr, "")
	opts := []natsgo.Option{natsgo.MaxReconnects(-1), natsgo.ReconnectWait(50 * time.Millisecond),
		natsgo.ReconnectBufSize(4 << 10), natsgo.ReconnectJitter(0, 0)}
	dial := func(node string) *latticenats.Bus {
		b, err := latticenats.Connect("nats://"+addr, latticenats.Options{Node: node}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	a, b := dial("a"), dial("b")
	subA, err := a.Subscribe(lattice.Filter{}, 10000)
	if err != nil {
		t.Fatal(err)
	}
	subB, err := b.Subscribe(lattice.Filter{}, 10000)
	if err != nil {
		t.Fatal(err)
	}
	sent, failed := 0, 0
	pub := func(n int) {
		for i := range n {
			ev, _ := lattice.New("Tick", "a", map[string]int{"n": sent})
			sent++
			if err := a.Publish(context.Background(), ev); err != nil {
				failed++
				if i == 0 && a.Conn().IsConnected() {
					t.Fatalf("publish while connected: %v", err)
				}
			}
		}
	}
	// accounted waits until every event sent is received or counted.
	got := map[string]int{}
	accounted := func(who string, s lattice.Subscription) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for uint64(got[who])+s.Missed() != uint64(sent) {
			select {
			case <-s.Events():
				got[who]++
			case <-time.After(10 * time.Millisecond):
			case <-deadline:
				t.Fatalf("%s: %d received + %d missed, want %d sent", who, got[who], s.Missed(), sent)
			}
		}
		select {
		case <-s.Events():
			t.Fatalf("%s: more events than sent", who)
		case <-time.After(50 * time.Millisecond):
		}
		t.Logf("%s: %d received, %d missed of %d", who, got[who], s.Missed(), sent)
	}
	pub(10)
	accounted("a", subA)
	accounted("b", subB)
	if subA.Missed()+subB.Missed() != 0 {
		t.Fatal("missed events while connected")
	}
	ns.Shutdown()
	ns.WaitForShutdown()
	waitUntil(t, "both disconnected", func() bool { return !a.Conn().IsConnected() && !b.Conn().IsConnected() })
	pub(300) // ~150 bytes each: the 4 KiB reconnect buffer takes a few dozen
	if failed == 0 || a.Failed() != uint64(failed) {
		t.Fatalf("%d publishes failed, Bus.Failed %d: the reconnect buffer should have overflowed", failed, a.Failed())
	}
	t0 := time.Now()
	testutil.NATSServer(t, addr, "")
	t.Logf("restarted in %s", time.Since(t0))
	waitUntil(t, "both reconnected", func() bool { return a.Conn().IsConnected() && b.Conn().IsConnected() })
	t.Logf("reconnected in %s", time.Since(t0))
	time.Sleep(100 * time.Millisecond)
	pub(10) // reveals a gap at the end of what b lost
	t.Logf("sent %d, failed %d", sent, failed)
	accounted("b", subB)
	accounted("a", subA)
	if subB.Missed() < uint64(failed) {
		t.Fatalf("b missed %d, fewer than the %d publishes that failed", subB.Missed(), failed)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

package config_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/config"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/lattice"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
)

// Guards: bound lattice.reconnect_buffer_bytes (docs/bounds.md), as the
// key reaches the NATS client (lattice/nats's TestOutageIsCountedAsMissed
// checks the client's side of it). With the key at 4 KiB and NATS gone,
// publishes fail once about 4 KiB are buffered, each counted by the Bus;
// with the key unset the client buffers the documented 8 MiB.
func TestReconnectBufferBytesReachesTheClient(t *testing.T) {
	addr := testutil.FreeAddr(t)
	ns := testutil.NATSServer(t, addr, "")
	open := func(bytes int) *latticenats.Bus {
		t.Helper()
		bus, err := config.LatticeConfig{Backend: "nats", NATSURL: "nats://" + addr, ReconnectBufferBytes: bytes}.Open()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bus.Close() })
		return bus.(*latticenats.Bus)
	}
	if got := open(0).Conn().Opts.ReconnectBufSize; got != config.DefaultReconnectBuffer {
		t.Errorf("reconnect buffer with the key unset: %d bytes, want %d", got, config.DefaultReconnectBuffer)
	}
	bus := open(4096)
	ns.Shutdown()
	ns.WaitForShutdown()
	deadline := time.Now().Add(30 * time.Second)
	for bus.Conn().IsConnected() {
		if time.Now().After(deadline) {
			t.Fatal("still connected 30s after the server went")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ev, err := lattice.New("Tick", "test", map[string]string{"pad": strings.Repeat("p", 200)})
	if err != nil {
		t.Fatal(err)
	}
	accepted, failed := 0, 0
	for range 100 { // about 30 KiB
		if err := bus.Publish(context.Background(), ev); err != nil {
			failed++
		} else if failed == 0 {
			accepted++
		}
	}
	if failed == 0 || accepted == 0 || accepted*300 > 8192 {
		t.Fatalf("NATS away, reconnect_buffer_bytes 4096: %d publishes buffered before the first failure, %d failed", accepted, failed)
	}
	// A subscriber of the whole lattice counts them from the gap in the
	// numbering once NATS is back (lattice/nats's test); the Bus counts
	// them at once.
	if n := bus.Failed(); n != uint64(failed) {
		t.Errorf("%d publishes failed, the Bus counted %d", failed, n)
	}
}

package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/axocoatl/axocoatl-go/lattice"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
)

// BenchmarkTwoDaemons measures events per second from one daemon's Bus to
// another's whole-lattice subscriber (what the event stream of each daemon
// is): "nats" is two lattice/nats Buses, each with its own TCP connection
// to one nats-server on loopback, the events numbered and checked for
// gaps; "memory" is the in-memory lattice of one process, publisher and
// subscriber on one Bus. ns/op is per event, until the subscriber has it;
// batches as in BenchmarkFanout, so nothing is dropped (a miss fails).
func BenchmarkTwoDaemons(b *testing.B) {
	b.Run("memory", func(b *testing.B) {
		bus := lattice.NewMemory()
		defer bus.Close()
		benchPair(b, bus, bus)
	})
	b.Run("nats", func(b *testing.B) {
		ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
		if err != nil {
			b.Fatal(err)
		}
		go ns.Start()
		defer ns.Shutdown()
		if !ns.ReadyForConnections(5 * time.Second) {
			b.Fatal("nats-server not ready")
		}
		pub, err := latticenats.Connect(ns.ClientURL(), latticenats.Options{Node: "a"})
		if err != nil {
			b.Fatal(err)
		}
		defer pub.Close()
		sub, err := latticenats.Connect(ns.ClientURL(), latticenats.Options{Node: "b"})
		if err != nil {
			b.Fatal(err)
		}
		defer sub.Close()
		benchPair(b, pub, sub)
	})
}

func benchPair(b *testing.B, pub, sub lattice.Bus) {
	s, err := sub.Subscribe(lattice.Filter{}, 4096)
	if err != nil {
		b.Fatal(err)
	}
	ev := benchEvent(b)
	done := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		n := 0
		for range s.Events() {
			n++
			if n%batch == 0 || n == b.N {
				done <- struct{}{}
			}
		}
	})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		if err := pub.Publish(ctx, ev); err != nil {
			b.Fatal(err)
		}
		if i%batch == 0 || i == b.N {
			<-done
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	if m := s.Missed(); m != 0 {
		b.Fatalf("the subscriber missed %d events", m)
	}
	s.Close()
	wg.Wait()
}

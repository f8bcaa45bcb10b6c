// Package bench holds cross-system comparisons; results are in README.md.
package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/axocoatl/axocoatl-go/lattice"
)

// BenchmarkFanout measures publish → delivery with one publisher and four
// subscribers on three systems: the lattice's in-memory bus, an embedded
// nats-server (in-process connection) and raw buffered Go channels. ns/op is
// per published event, counted until all four subscribers have received it.
//
// The publisher works in batches smaller than every buffer and waits for the
// batch to be delivered before the next, so no system drops or stalls: each
// is measured delivering every event (the lattice run fails if one is missed).
func BenchmarkFanout(b *testing.B) {
	b.Run("lattice", benchLattice)
	b.Run("nats", benchNATS)
	b.Run("chan", benchChan)
}

const (
	fanout = 4
	batch  = 1024 // below every buffer: 4096 for lattice and channels, 65536 for NATS
)

// batches is how subscribers tell the publisher that a batch arrived: each
// sends once per completed batch, so the publisher blocks (no spinning that
// would steal one of two cores from the system under test).
type batches struct {
	n    int
	done chan struct{}
}

func newBatches(n int) *batches { return &batches{n: n, done: make(chan struct{}, fanout)} }

// received is called by a subscriber with its running count.
func (bs *batches) received(count int) {
	if count%batch == 0 || count == bs.n {
		bs.done <- struct{}{}
	}
}

// publishBatched calls publish b.N times, waiting after every batch until
// all subscribers have received it.
func publishBatched(b *testing.B, bs *batches, publish func()) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		publish()
		if i%batch == 0 || i == b.N {
			for range fanout {
				<-bs.done
			}
		}
	}
	b.StopTimer()
}

func benchEvent(b *testing.B) lattice.Event {
	ev, err := lattice.New("TaskCompleted", "bench", map[string]string{"agent_id": "assistant", "output": "hello"})
	if err != nil {
		b.Fatal(err)
	}
	return ev
}

func benchLattice(b *testing.B) {
	bus := lattice.NewMemory()
	ev := benchEvent(b)
	bs := newBatches(b.N)
	var subs []lattice.Subscription
	var wg sync.WaitGroup
	for range fanout {
		s, err := bus.Subscribe(lattice.Filter{Types: []string{"TaskCompleted"}}, 4096)
		if err != nil {
			b.Fatal(err)
		}
		subs = append(subs, s)
		wg.Go(func() {
			n := 0
			for range s.Events() {
				n++
				bs.received(n)
			}
		})
	}
	ctx := context.Background()
	publishBatched(b, bs, func() {
		if err := bus.Publish(ctx, ev); err != nil {
			b.Fatal(err)
		}
	})
	for _, s := range subs {
		if m := s.Missed(); m != 0 {
			b.Fatalf("a subscriber missed %d events", m)
		}
	}
	bus.Close()
	wg.Wait()
}

func benchNATS(b *testing.B) {
	ns, err := server.NewServer(&server.Options{DontListen: true, NoLog: true, NoSigs: true})
	if err != nil {
		b.Fatal(err)
	}
	go ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(5 * time.Second) {
		b.Fatal("nats-server not ready")
	}
	nc, err := nats.Connect("", nats.InProcessServer(ns))
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	// The event as a NATS-backed lattice would carry it, encoded once up
	// front: NATS is spared the per-publish encoding the lattice never needs.
	ev := benchEvent(b)
	data := []byte(`{"id":"` + ev.ID + `","type":"TaskCompleted","produced_by":"bench","timestamp":1,"payload":` + string(ev.Payload) + `}`)

	bs := newBatches(b.N)
	for range fanout {
		sc, err := nats.Connect("", nats.InProcessServer(ns))
		if err != nil {
			b.Fatal(err)
		}
		defer sc.Close()
		n := 0 // a subscription's handler runs on one goroutine
		if _, err := sc.Subscribe("lattice.TaskCompleted", func(*nats.Msg) { n++; bs.received(n) }); err != nil {
			b.Fatal(err)
		}
		if err := sc.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	publishBatched(b, bs, func() {
		if err := nc.Publish("lattice.TaskCompleted", data); err != nil {
			b.Fatal(err)
		}
	})
}

func benchChan(b *testing.B) {
	ev := benchEvent(b)
	bs := newBatches(b.N)
	chans := make([]chan lattice.Event, fanout)
	var wg sync.WaitGroup
	for i := range chans {
		ch := make(chan lattice.Event, 4096)
		chans[i] = ch
		wg.Go(func() {
			n := 0
			for range ch {
				n++
				bs.received(n)
			}
		})
	}
	publishBatched(b, bs, func() {
		for _, ch := range chans {
			ch <- ev
		}
	})
	for _, ch := range chans {
		close(ch)
	}
	wg.Wait()
}

package egress

import (
	"context"
	"sync"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// stallBus is the Engine's memory bus, but a subscription's events reach
// its reader only once hold is closed: the reader stalls, as a module
// behind a burst does, while the bus's buffer does what it does.
type stallBus struct {
	lattice.Bus
	hold  chan struct{}
	mu    sync.Mutex
	asked []int // the buffer of each Subscribe
}

func (b *stallBus) Subscribe(f lattice.Filter, n int) (lattice.Subscription, error) {
	s, err := b.Bus.Subscribe(f, n)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.asked = append(b.asked, n)
	b.mu.Unlock()
	ss := &stallSub{Subscription: s, out: make(chan lattice.Event), done: make(chan struct{})}
	go func() {
		defer close(ss.out)
		select {
		case <-b.hold:
		case <-ss.done:
			return
		}
		for ev := range s.Events() {
			select {
			case ss.out <- ev:
			case <-ss.done:
				return
			}
		}
	}()
	return ss, nil
}

type stallSub struct {
	lattice.Subscription
	out  chan lattice.Event
	done chan struct{}
	once sync.Once
}

func (s *stallSub) Events() <-chan lattice.Event { return s.out }
func (s *stallSub) Close() error {
	s.once.Do(func() { close(s.done) })
	return s.Subscription.Close()
}

// Guards: bound "events buffered between the lattice and the queues"
// (65,536, docs/bounds.md, webhooks). With egress's reader stalled, its
// one lattice subscription holds 65,536 events; the 100 published beyond
// them are dropped by the bus, and once the reader goes on egress counts
// exactly those 100 as missed (TestLatticeLossesCounted checks the
// counting alone).
func TestLatticeBufferBound(t *testing.T) {
	bus := &stallBus{Bus: lattice.NewMemory(), hold: make(chan struct{})}
	defer bus.Bus.Close()
	released := false
	defer func() {
		if !released {
			close(bus.hold)
		}
	}()
	eng := axocoatl.New(axocoatl.Options{Bus: bus})
	rc := newReceiver(t, "", nil)
	m, err := New(Config{Webhooks: []Webhook{fast(Webhook{Name: "w", URL: rc.url(), Events: []string{"Other"}})}})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Use(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	defer eng.Close(context.Background())
	bus.mu.Lock()
	asked := append([]int(nil), bus.asked...)
	bus.mu.Unlock()
	if len(asked) != 1 {
		t.Fatalf("egress subscribed %d times, want once", len(asked))
	}
	const beyond = 100
	ev, err := lattice.New("Deployed", "test", map[string]int{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	for range 65536 + beyond {
		if err := bus.Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	close(bus.hold)
	released = true
	waitFor(t, 30*time.Second, "the events beyond the buffer counted as missed", func() bool { return m.Missed() >= beyond })
	if n := m.Missed(); n != beyond {
		t.Fatalf("%d events counted as missed, want %d: egress's lattice buffer is not 65,536 (asked for %d)", n, beyond, asked[0])
	}
}

package lattice

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
)

// ErrClosed is returned by [Bus.Publish] and [Bus.Subscribe] on a closed bus.
var ErrClosed = errors.New("lattice: bus closed")

// DefaultBuffer is the per-subscriber buffer when a caller of
// [Bus.Subscribe] passes 0.
const DefaultBuffer = 256

// Bus is an event bus. Implementations: [Memory] (this package) and the NATS
// bus of package lattice/nats.
type Bus interface {
	// Publish delivers ev to every matching subscriber without waiting for
	// any of them. It fails only if the bus is closed or ev is invalid.
	Publish(ctx context.Context, ev Event) error
	// Subscribe registers a subscriber with a buffer of the given size (0
	// means [DefaultBuffer]). Events that arrive while the buffer is full are
	// dropped for that subscriber and counted in [Subscription.Missed].
	Subscribe(filter Filter, buffer int) (Subscription, error)
	// Close ends every subscription (their channels close) and refuses
	// further publishes.
	Close() error
}

// Subscription is one subscriber's view of a [Bus], returned by
// [Bus.Subscribe].
type Subscription interface {
	// Events yields matching events in publish order. It is closed when the
	// subscription or the bus is closed.
	Events() <-chan Event
	// Missed is the total number of events this subscriber did not get
	// that the Bus knows of: dropped because the buffer was full, and on a
	// Bus over a network those lost on the way as it documents (the NATS
	// Bus: failed publishes and gaps in a node's numbering). It only grows;
	// compare two readings to learn what a gap cost.
	Missed() uint64
	// Close unsubscribes. It is safe to call more than once.
	Close() error
}

// Memory is the in-process [Bus]. The zero value is not usable; call [NewMemory].
type Memory struct {
	// mu guards subs and closed. Publish holds the read lock while it fans
	// out, so a subscription's channel is never closed under a sender.
	mu     sync.RWMutex
	subs   []*memSub
	closed bool
}

// NewMemory returns an empty in-memory bus.
func NewMemory() *Memory { return &Memory{} }

type memSub struct {
	bus    *Memory
	filter Filter
	ch     chan Event
	missed atomic.Uint64
	once   sync.Once
}

func (s *memSub) Events() <-chan Event { return s.ch }
func (s *memSub) Missed() uint64       { return s.missed.Load() }
func (s *memSub) Close() error {
	s.bus.remove(s)
	return nil
}

// Publish implements Bus.
func (b *Memory) Publish(_ context.Context, ev Event) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return ErrClosed
	}
	// Not the publisher's to say: everything here is this process's own.
	ev.Node, ev.Unverified = "", false
	for _, s := range b.subs {
		if !s.filter.Match(ev) {
			continue
		}
		select {
		case s.ch <- ev:
		default:
			s.missed.Add(1)
		}
	}
	return nil
}

// Subscribe implements Bus.
func (b *Memory) Subscribe(filter Filter, buffer int) (Subscription, error) {
	if err := filter.Validate(); err != nil {
		return nil, err
	}
	if buffer <= 0 {
		buffer = DefaultBuffer
	}
	s := &memSub{bus: b, filter: filter, ch: make(chan Event, buffer)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	b.subs = append(b.subs, s)
	return s, nil
}

func (b *Memory) remove(s *memSub) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i := slices.Index(b.subs, s); i >= 0 {
		b.subs = slices.Delete(b.subs, i, i+1)
	}
	s.once.Do(func() { close(s.ch) })
}

// Close implements Bus.
func (b *Memory) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	for _, s := range b.subs {
		s.once.Do(func() { close(s.ch) })
	}
	b.subs = nil
	return nil
}

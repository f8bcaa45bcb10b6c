package main

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/axocoatl/axocoatl-go/lattice"
)

// History bounds: what a new WebSocket client gets in its ready frame, so
// a fresh dashboard tab shows what happened before it opened.
const (
	historyEvents       = 500
	historyPayloadBytes = 16 << 10 // a bigger payload is kept as a stub saying its size
)

// history keeps the latest events of the lattice in a ring. Its subscriber
// goroutine ends when close is called (or the bus closes).
type history struct {
	sub  lattice.Subscription
	done chan struct{}

	mu   sync.Mutex
	ring []lattice.Event
	next int // where the next event goes once the ring is full
}

func newHistory(bus lattice.Bus) (*history, error) {
	sub, err := bus.Subscribe(lattice.Filter{}, historyEvents)
	if err != nil {
		return nil, err
	}
	h := &history{sub: sub, done: make(chan struct{}), ring: make([]lattice.Event, 0, historyEvents)}
	go h.run()
	return h, nil
}

func (h *history) run() {
	defer close(h.done)
	for ev := range h.sub.Events() {
		if len(ev.Payload) > historyPayloadBytes {
			ev.Payload = json.RawMessage(fmt.Sprintf(`{"truncated":true,"bytes":%d}`, len(ev.Payload)))
		}
		h.mu.Lock()
		if len(h.ring) < historyEvents {
			h.ring = append(h.ring, ev)
		} else {
			h.ring[h.next] = ev
			h.next = (h.next + 1) % historyEvents
		}
		h.mu.Unlock()
	}
}

// snapshot returns the kept events, oldest first.
func (h *history) snapshot() []lattice.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]lattice.Event, 0, len(h.ring))
	out = append(out, h.ring[h.next:]...)
	return append(out, h.ring[:h.next]...)
}

func (h *history) close() {
	h.sub.Close()
	<-h.done
}

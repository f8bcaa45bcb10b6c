package lattice

import (
	"encoding/json"
	"fmt"
	"sync"
)

// History keeps the latest events of a bus in a bounded ring, for a view
// that must show what happened before it opened (a dashboard's first
// frame). Its subscriber goroutine ends on Close or when the bus closes.
type History struct {
	sub        Subscription
	done       chan struct{}
	maxPayload int

	mu   sync.Mutex
	ring []Event
	next int // where the next event goes once the ring is full
}

// NewHistory keeps the last n events of bus; a payload over maxPayload
// bytes is kept as a stub {"truncated":true,"bytes":N}, so the ring's
// memory stays near n × maxPayload.
func NewHistory(bus Bus, n, maxPayload int) (*History, error) {
	// A buffer beyond the ring: a burst is taken in while the ring's
	// goroutine catches up (beyond it the bus drops, as for any subscriber).
	sub, err := bus.Subscribe(Filter{}, max(n, DefaultBuffer))
	if err != nil {
		return nil, err
	}
	h := &History{sub: sub, done: make(chan struct{}), maxPayload: maxPayload, ring: make([]Event, 0, n)}
	go h.run()
	return h, nil
}

func (h *History) run() {
	defer close(h.done)
	for ev := range h.sub.Events() {
		if len(ev.Payload) > h.maxPayload {
			ev.Payload = json.RawMessage(fmt.Sprintf(`{"truncated":true,"bytes":%d}`, len(ev.Payload)))
		}
		h.mu.Lock()
		if len(h.ring) < cap(h.ring) {
			h.ring = append(h.ring, ev)
		} else {
			h.ring[h.next] = ev
			h.next = (h.next + 1) % len(h.ring)
		}
		h.mu.Unlock()
	}
}

// Snapshot returns the kept events, oldest first.
func (h *History) Snapshot() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Event, 0, len(h.ring))
	out = append(out, h.ring[h.next:]...)
	return append(out, h.ring[:h.next]...)
}

// Close ends the subscription and waits for its goroutine.
func (h *History) Close() error {
	err := h.sub.Close()
	<-h.done
	return err
}

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
// bytes is kept as a stub of its short members (at most 256 bytes each)
// with "truncated": true and "bytes": N, so the ring's memory stays near
// n × maxPayload.
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
			ev.Payload = stub(ev.Payload)
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

// stub keeps what identifies a big payload (its short members: ids,
// durations, flags) and says how big it was, so a view can still place the
// event (the end of a run with a long output).
func stub(payload json.RawMessage) json.RawMessage {
	var members map[string]json.RawMessage
	_ = json.Unmarshal(payload, &members)
	kept := make(map[string]json.RawMessage, len(members)+2)
	for k, v := range members {
		if len(k) <= 64 && len(v) <= 256 {
			kept[k] = v
		}
	}
	kept["truncated"] = json.RawMessage("true")
	kept["bytes"] = json.RawMessage(fmt.Sprint(len(payload)))
	out, _ := json.Marshal(kept)
	return out
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

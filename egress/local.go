package egress

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/axocoatl/axocoatl-go/lattice"
)

// localBackend keeps each webhook's deliveries in this process: a bounded
// queue (hook.ch) that Concurrency senders take from, the dead letters in
// hook.dead, and a store that remembers both across restarts (memStore
// without a data dir: nothing outlives the process; boltStore with one).
type localBackend struct {
	store   store
	durable bool    // a data dir: the store is a bbolt file
	hooks   []*hook // those whose deliveries wait here
}

// openLocal opens the store (with a data dir) and requeues what the last
// run left in it.
func openLocal(m *Module, hooks []*hook) (*localBackend, error) {
	b := &localBackend{store: memStore{}, hooks: hooks}
	if m.cfg.DataDir != "" {
		bs, err := openBolt(m.cfg.DataDir, m.log)
		if err != nil {
			return nil, err
		}
		go bs.run() // the store's writer: close waits for it to end
		b.store, b.durable = bs, true
		for name, n := range bs.orphans(m.byName) {
			if n > 0 {
				m.log.Warn("webhook store holds deliveries of a webhook that is not configured: kept, not sent",
					"webhook", name, "deliveries", n)
			}
		}
	}
	for _, h := range hooks {
		if err := b.load(h); err != nil {
			_ = b.store.close()
			return nil, fmt.Errorf("egress: webhook %s: loading stored deliveries: %w", h.cfg.Name, err)
		}
	}
	return b, nil
}

// filter implements backend: every event of the lattice.
func (b *localBackend) filter() lattice.Filter { return lattice.Filter{} }

// configured implements backend.
func (b *localBackend) configured(h *hook) []any {
	return []any{"durable", b.durable, "requeued", len(h.ch), "dead_letters", len(h.dead)}
}

// start implements backend: Concurrency senders on h's queue.
func (b *localBackend) start(ctx context.Context, h *hook) {
	for range h.cfg.Concurrency {
		h.m.wg.Go(func() { b.work(ctx, h) })
	}
}

// attempted implements backend: the attempt count is saved with the
// pending delivery.
func (b *localBackend) attempted(h *hook, d *delivery, rec record) {
	b.store.change(putEdit(h.cfg.Name, pendingBucket, d.key, rec))
}

// shared implements backend: there is only this process.
func (b *localBackend) shared(*hook) (clusterState, bool) { return clusterState{}, false }

// stored implements backend: every delivery is in memory too.
func (b *localBackend) stored(*hook, int) ([]*delivery, error) { return nil, nil }

// drain implements backend: what the subscription still holds is not
// queued (without a data dir the queue is lost anyway; with one, the
// events were published before the stop and are lost as they would be in
// a crash).
func (b *localBackend) drain(context.Context, *Module) {}

// close implements backend: the store's last changes are written.
func (b *localBackend) close(m *Module) error {
	if !b.durable {
		for _, h := range b.hooks {
			if n := h.pending(); n > 0 {
				m.log.Warn("webhook deliveries not sent are lost (no data dir)", "webhook", h.cfg.Name, "deliveries", n)
			}
		}
	}
	return b.store.close()
}

// load requeues the deliveries a previous run left in the store.
func (b *localBackend) load(h *hook) error {
	pending, dead, maxKey, err := b.store.load(h.cfg.Name)
	if err != nil {
		return err
	}
	for h.m.seq.Load() < maxKey {
		h.m.seq.Store(maxKey)
	}
	if len(pending) > cap(h.ch) {
		h.ch = make(chan *delivery, len(pending))
	}
	for _, d := range pending {
		d.status = StatusQueued
		h.live[d.id] = d
		h.ch <- d
	}
	h.dead = dead
	return nil
}

// take implements backend: the deliveries are stored (added before they
// are queued) and queued in h's channel. What does not fit in the queue is
// dropped and counted (and not even serialized).
func (b *localBackend) take(_ context.Context, h *hook, evs []lattice.Event, now time.Time) {
	h.pushMu.Lock()
	defer h.pushMu.Unlock()
	room := max(h.cfg.QueueSize-len(h.ch), 0)
	if dropped := len(evs) - room; dropped > 0 {
		evs = evs[:room]
		h.dropped(dropped)
	}
	if len(evs) == 0 {
		return
	}
	ds := make([]*delivery, 0, len(evs))
	for _, ev := range evs {
		d, err := newDelivery(ev, now)
		if err != nil {
			h.m.log.Error("webhook: event cannot be serialized; skipped", "webhook", h.cfg.Name, "event_id", ev.ID, "error", err)
			continue
		}
		d.key = h.m.nextKey()
		ds = append(ds, d)
	}
	b.queueLocked(h, ds)
}

// dropped counts n deliveries that did not fit in h's queue.
func (h *hook) dropped(n int) {
	h.mu.Lock()
	h.counts.dropped += uint64(n)
	h.dropsUnlogged += uint64(n)
	h.mu.Unlock()
	h.series.dropped.Add(float64(n))
	h.logDrops(false)
}

// put queues ds, deliveries already made (push), as take queues events';
// it returns how many did not fit and were dropped (from the end).
func (b *localBackend) put(h *hook, ds []*delivery) int {
	h.pushMu.Lock()
	defer h.pushMu.Unlock()
	room := max(h.cfg.QueueSize-len(h.ch), 0)
	dropped := max(len(ds)-room, 0)
	if dropped > 0 {
		ds = ds[:room]
		h.dropped(dropped)
	}
	if len(ds) > 0 {
		b.queueLocked(h, ds)
	}
	return dropped
}

// queueLocked stores and queues ds, which fit; h.pushMu is held.
func (b *localBackend) queueLocked(h *hook, ds []*delivery) {
	h.mu.Lock()
	for _, d := range ds {
		h.live[d.id] = d
	}
	h.mu.Unlock()
	if err := b.store.add(h.cfg.Name, ds); err != nil {
		h.m.log.Error("webhook store: queued deliveries not saved; they are kept in memory", "webhook", h.cfg.Name,
			"deliveries", len(ds), "error", err)
	}
	for _, d := range ds {
		h.ch <- d // never blocks: room was counted under pushMu
	}
}

// work is one sender: it takes deliveries off the queue until ctx ends.
func (b *localBackend) work(ctx context.Context, h *hook) {
	for {
		select {
		case <-ctx.Done():
			return
		case d := <-h.ch:
			b.deliver(ctx, h, d)
		}
	}
}

// deliver sends d with its retries and records the outcome.
func (b *localBackend) deliver(ctx context.Context, h *hook, d *delivery) {
	h.mu.Lock()
	d.status = StatusInFlight
	h.inFlight++
	h.mu.Unlock()
	out := h.send(ctx, d)
	h.mu.Lock()
	h.inFlight--
	if ctx.Err() != nil {
		// Stopping: the delivery stays stored as pending and is sent
		// again after the next start.
		d.status = StatusQueued
		h.mu.Unlock()
		return
	}
	name := h.cfg.Name
	switch out {
	case outcomeDelivered:
		d.status, d.lastError = StatusDelivered, ""
		delete(h.live, d.id)
		h.counts.delivered++
		h.remember(d)
		h.mu.Unlock()
		h.series.delivered.Inc()
		b.store.change(delEdit(name, pendingBucket, d.key))
		return
	case outcomeFailed:
		d.status = StatusFailed
		h.counts.failed++
	default:
		d.status = StatusDeadLettered
		h.counts.deadLettered++
	}
	delete(h.live, d.id)
	h.dead = append(h.dead, d)
	edits := []edit{delEdit(name, pendingBucket, d.key), putEdit(name, deadBucket, d.key, d.record())}
	if len(h.dead) > h.cfg.MaxDeadLetters {
		old := h.dead[0]
		h.dead = slices.Delete(h.dead, 0, 1)
		h.counts.evicted++
		edits = append(edits, delEdit(name, deadBucket, old.key))
	}
	status, lastErr, attempts := d.status, d.lastError, len(d.attempts)-d.base
	// Under mu, so that a retry through the API cannot store its move
	// back to pending before this move to the dead letters.
	b.store.change(edits...)
	h.mu.Unlock()
	if status == StatusFailed {
		h.series.failed.Inc()
	} else {
		h.series.deadLettered.Inc()
	}
	h.m.log.Warn("webhook delivery failed", "webhook", name, "delivery_id", d.id, "event_type", d.eventType,
		"status", status, "attempts", attempts, "error", lastErr)
}

// retry implements backend: a dead letter of h goes back to its queue.
func (b *localBackend) retry(h *hook, id string) (Delivery, error) {
	h.pushMu.Lock()
	defer h.pushMu.Unlock()
	h.mu.Lock()
	i := slices.IndexFunc(h.dead, func(d *delivery) bool { return d.id == id })
	if i < 0 {
		defer h.mu.Unlock()
		return Delivery{}, h.notDeadLocked(id)
	}
	if len(h.ch) >= h.cfg.QueueSize {
		h.mu.Unlock()
		return Delivery{}, fmt.Errorf("%w: %d deliveries waiting", ErrQueueFull, len(h.ch))
	}
	d := h.dead[i]
	h.dead = slices.Delete(h.dead, i, i+1)
	oldKey := d.key
	d.key = h.m.nextKey()
	d.status = StatusQueued
	d.base = len(d.attempts)
	h.live[d.id] = d
	view := d.view(h.cfg.Name)
	b.store.change(delEdit(h.cfg.Name, deadBucket, oldKey), putEdit(h.cfg.Name, pendingBucket, d.key, d.record()))
	h.mu.Unlock()
	h.ch <- d
	return view, nil
}

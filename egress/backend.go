package egress

import (
	"context"
	"fmt"
	"time"

	"github.com/axocoatl/axocoatl-go/lattice"
)

// backend is where a webhook's deliveries wait and what sends them from
// there. localBackend keeps each webhook's bounded queue in this process,
// remembered in a store (nothing without a data dir, a bbolt file with
// [Config].DataDir); jsBackend keeps them in a JetStream work queue shared
// by every process on a NATS lattice ([Config].JetStream). The Module, its
// API and its metrics go through this interface only; a backend sends with
// the hook's send and keeps the hook's counters.
type backend interface {
	// filter is the Module's lattice subscription.
	filter() lattice.Filter
	// configured is what the "webhook configured" log line says of where
	// h's deliveries wait.
	configured(h *hook) []any
	// start starts h's senders, goroutines of the Module's wg that end
	// with ctx.
	start(ctx context.Context, h *hook)
	// take queues a delivery for each of evs, events h's filter passed;
	// what does not fit is dropped and counted.
	take(ctx context.Context, h *hook, evs []lattice.Event, now time.Time)
	// attempted records a failed attempt of d that will be retried (rec
	// is d's record), so that a restart continues its count.
	attempted(h *hook, d *delivery, rec record)
	// retry queues a failed or dead-lettered delivery of h again, with its
	// delivery_id and a fresh budget of attempts.
	retry(h *hook, id string) (Delivery, error)
	// shared reads h's queue as every process together sees it; ok is
	// false when the backend knows of no other process.
	shared(h *hook) (cs clusterState, ok bool)
	// stored lists h's deliveries that the backend holds beyond this
	// process's memory (those of the queue at most limit).
	stored(h *hook, limit int) ([]*delivery, error)
	// drain runs when Stop begins, before the senders are cancelled: the
	// ingest goroutine may still be queueing what the subscription holds.
	drain(ctx context.Context, m *Module)
	// close releases the backend once every goroutine has ended.
	close(m *Module) error
}

// clusterState is a webhook's queue as the server sees it, for every
// process together.
type clusterState struct {
	queued, inFlight, dead int
	err                    error
}

// openBackend opens the backend the config names and gives it what the
// last run left; m.log is set.
func (m *Module) openBackend() (backend, error) {
	if m.cfg.JetStream != nil {
		var b *jsBackend
		if len(m.hooks) > 0 {
			var err error
			if b, err = openJetStream(context.Background(), *m.cfg.JetStream, m.hooks); err != nil {
				return nil, err
			}
			b.warnStranded(m)
		}
		if m.push != nil {
			// Push deliveries carry their own URL and headers, which the
			// shared queue's messages do not: they wait in this process.
			pb, err := openLocal(m, []*hook{m.push})
			if err != nil {
				return nil, err
			}
			m.pushBackend = pb
		}
		if b == nil {
			return m.pushBackend, nil
		}
		return b, nil
	}
	b, err := openLocal(m, m.allHooks())
	if err != nil {
		return nil, err
	}
	if m.push != nil {
		m.pushBackend = b
	}
	return b, nil
}

// accept keeps the events of batch that the webhook's filter passes,
// never egress's own, nor an unverified one (a cluster's unsigned
// observe-only event of another node: anyone who may publish on the
// lattice could have made it, and a delivery is an act on it).
func (h *hook) accept(batch []lattice.Event) []lattice.Event {
	var evs []lattice.Event
	for _, ev := range batch {
		if ev.ProducedBy != ProducerName && !ev.Unverified && h.cfg.matches(ev) {
			evs = append(evs, ev)
		}
	}
	return evs
}

// remember adds a delivered delivery to the recent ring; h.mu is held.
func (h *hook) remember(d *delivery) {
	if len(h.recent) < recentDelivered {
		h.recent = append(h.recent, d)
	} else {
		h.recent[h.recentNext] = d
		h.recentNext = (h.recentNext + 1) % recentDelivered
	}
}

// notDeadLocked says why id, which is not among h's dead letters, cannot
// be retried: it is queued, in flight or delivered, or unknown. h.mu is
// held.
func (h *hook) notDeadLocked(id string) error {
	if d := h.live[id]; d != nil {
		return fmt.Errorf("%w: delivery %s is %s", ErrNotRetryable, id, d.status)
	}
	for _, d := range h.recent {
		if d.id == id {
			return fmt.Errorf("%w: delivery %s is %s", ErrNotRetryable, id, d.status)
		}
	}
	return fmt.Errorf("%w: %q", ErrDeliveryNotFound, id)
}
